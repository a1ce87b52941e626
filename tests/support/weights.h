// Shared test data for the op tests: fresh seeds, random weights of every format, hand-made weights
// that hit every code, and raw-bit helpers for bit-exact comparisons. Header-only (inline), included
// by tests of several families.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "b12x/b12x.h"

namespace b12x::test {

// Raw bits of element i of a bf16/f16/f32 buffer.
inline uint32_t element_bits(const uint8_t* p, DType d, int64_t i) {
  if (d == DType::f32) {
    uint32_t u;
    std::memcpy(&u, p + 4 * i, 4);
    return u;
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return h;
}

inline bool is_nan_bits(uint32_t u, DType d) {
  if (d == DType::f32) return (u & 0x7FFFFFFFu) > 0x7F800000u;
  if (d == DType::bf16) return (u & 0x7FFFu) > 0x7F80u;
  return (u & 0x7FFFu) > 0x7C00u;
}

inline uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) | rd();
}

// How random weights are drawn: per-row magnitude 2^[min_exp, max_exp] (zeros and -0 sprinkled in),
// and a factor on the quantizer's FP32 tensor scale (fp8_tensor, nvfp4), so kernels cannot rely on
// the quantizer's own value.
struct WeightDraw {
  int min_exp = -26, max_exp = 10;
  float scale2_factor = 1.0f;
};
// The linear tests' draw: outputs stay well inside FP16 range; a tensor scale not the quantizer's.
inline constexpr WeightDraw kLinearDraw{-4, 2, 1.37f};

inline HostTensor random_floats(std::mt19937_64& rng, int64_t n, int64_t k, const WeightDraw& draw = {}) {
  HostTensor w(DType::f32, {n, k});
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(draw.min_exp, draw.max_exp), pick(0, 63);
  for (int64_t r = 0; r < n; ++r) {
    const float row_scale = std::ldexp(1.0f, exponent(rng));
    for (int64_t c = 0; c < k; ++c) {
      const int p = pick(rng);
      w.ptr<float>()[r * k + c] = p == 0 ? 0.0f : p == 1 ? -0.0f : normal(rng) * row_scale;
    }
  }
  return w;
}

// A packed weight of any format with random contents (quantized floats; random blocks for GGML).
inline PackedWeight random_weight(Format f, int64_t n, int64_t k, std::mt19937_64& rng, const WeightDraw& draw = {}) {
  if (is_ggml_format(f)) {
    PackedWeight p = allocate_weight(f, n, k);
    ggml_random_blocks(f, p.data.view(), rng());
    return p;
  }
  PackedWeight p = quantize_weight(f, random_floats(rng, n, k, draw).view());
  if (f == Format::fp8_tensor || f == Format::nvfp4) p.scale2 *= draw.scale2_factor;
  return p;
}

// Hand-made weights hitting every code: all element codes against all scale codes, subnormal and
// overflowing products, every FP16 block scale. May contain NaN codes.
inline std::vector<PackedWeight> crafted_weights(Format f, std::mt19937_64& rng) {
  std::vector<PackedWeight> out;
  auto u8 = [](const PackedWeight& p) { return p.data.ptr<uint8_t>(); };
  switch (f) {
    case Format::bf16:
    case Format::f16: {  // every 16-bit pattern
      PackedWeight p = allocate_weight(f, 256, 256);
      for (int i = 0; i < 65536; ++i) p.data.ptr<uint16_t>()[i] = static_cast<uint16_t>(i);
      out.push_back(std::move(p));
      break;
    }
    case Format::fp8_tensor: {  // every code, with a plain, a tiny (subnormal products) and a huge scale
      for (float s2 : {0.3701f, 1.0f, 3.0e-39f, 1.5e36f}) {
        PackedWeight p = allocate_weight(f, 8, 256);
        for (int i = 0; i < 8 * 256; ++i) u8(p)[i] = static_cast<uint8_t>(i);
        p.scale2 = s2;
        out.push_back(std::move(p));
      }
      break;
    }
    case Format::fp8_channel:
    case Format::fp8_block: {  // every code; scales spanning subnormal to huge; partial edge blocks
      const int64_t n = f == Format::fp8_block ? 300 : 64, k = f == Format::fp8_block ? 416 : 256;
      PackedWeight p = allocate_weight(f, n, k);
      for (int64_t i = 0; i < n * k; ++i) u8(p)[i] = static_cast<uint8_t>(rng());
      std::uniform_int_distribution<int> e(-149, 120);
      std::uniform_real_distribution<float> m(1.0f, 2.0f);
      for (int64_t i = 0; i < p.scale.numel(); ++i) p.scale.ptr<float>()[i] = std::ldexp(m(rng), e(rng));
      out.push_back(std::move(p));
      break;
    }
    case Format::mxfp8: {  // row r: scale byte r for every group; each row holds all 256 codes
      PackedWeight p = allocate_weight(f, 256, 256);
      for (int64_t i = 0; i < 256 * 256; ++i) u8(p)[i] = static_cast<uint8_t>(i % 256);
      for (int64_t i = 0; i < p.scale.numel(); ++i) p.scale.ptr<uint8_t>()[i] = static_cast<uint8_t>(i / 8);
      out.push_back(std::move(p));
      break;
    }
    case Format::mxfp4: {  // row r: scale byte r; each row holds all 16 codes twice
      PackedWeight p = allocate_weight(f, 256, 32);
      for (int64_t i = 0; i < 256 * 16; ++i) u8(p)[i] = static_cast<uint8_t>(((2 * i) & 15) | (((2 * i + 1) & 15) << 4));
      for (int64_t i = 0; i < 256; ++i) p.scale.ptr<uint8_t>()[i] = static_cast<uint8_t>(i);
      out.push_back(std::move(p));
      break;
    }
    case Format::nvfp4: {  // every E4M3 block scale (incl. negative and NaN) x every code, several s2
      for (float s2 : {1.0f, 0.3701f, 3.0e-39f, 2.5e35f}) {
        PackedWeight p = allocate_weight(f, 128, 64);  // 4 groups per row, 512 groups
        for (int64_t i = 0; i < 128 * 32; ++i)
          u8(p)[i] = static_cast<uint8_t>(((2 * i) & 15) | (((2 * i + 1) & 15) << 4));
        for (int64_t i = 0; i < p.scale.numel(); ++i) p.scale.ptr<uint8_t>()[i] = static_cast<uint8_t>(i % 256);
        p.scale2 = s2;
        out.push_back(std::move(p));
      }
      break;
    }
    case Format::q8_0: {  // every FP16 block scale (subnormal, Inf, NaN too) with random int8 values
      PackedWeight p = allocate_weight(f, 256, 32 * 256);
      for (int64_t b = 0; b < 65536; ++b) {
        uint8_t* block = u8(p) + b * 34;
        block[0] = static_cast<uint8_t>(b);
        block[1] = static_cast<uint8_t>(b >> 8);
        for (int j = 2; j < 34; ++j) block[j] = static_cast<uint8_t>(rng());
      }
      out.push_back(std::move(p));
      break;
    }
    case Format::iq2_xxs:
    case Format::iq2_xs: {  // random blocks whose FP16 scale is any pattern (subnormal, Inf, NaN)
      const int bytes = format_info(f).block_bytes;
      PackedWeight p = allocate_weight(f, 64, 256 * 64);
      ggml_random_blocks(f, p.data.view(), rng());
      for (int64_t b = 0; b < 64 * 64; ++b) {
        const uint16_t d = b < 2048 ? static_cast<uint16_t>(b) : static_cast<uint16_t>(rng());  // all subnormals too
        u8(p)[b * bytes] = static_cast<uint8_t>(d);
        u8(p)[b * bytes + 1] = static_cast<uint8_t>(d >> 8);
      }
      out.push_back(std::move(p));
      break;
    }
  }
  return out;
}

}  // namespace b12x::test
