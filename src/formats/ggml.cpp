// GGML block codecs on the host: the executable spec the GPU decoders must match bit for bit.
// Every decode product is exact in FP32 (FORMATS.md section 2), so only -0 and NaN could tell
// evaluation orders apart; we keep ggml's: db = d * (0.5 + s) * 0.25, then db * magnitude, negated.
#include "b12x/formats/ggml.h"

#include <cmath>

#include "b12x/core/error.h"
#include "b12x/formats/scalar.h"

namespace b12x {

namespace {

uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

void store_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

// The 4-bit sub-block scale applied to the fp16 block scale, in ggml's float order.
float iq2_scale(float d, uint32_t s) { return d * (0.5f + static_cast<float>(s)) * 0.25f; }

// Eight weights: magnitudes from one grid entry, signs from a 7-bit index plus its parity bit.
void decode_group(float db, uint64_t grid_entry, uint32_t sign_index, float* out) {
  const uint8_t signs = iq2_ksigns(sign_index);
  for (int j = 0; j < 8; ++j) {
    const float v = db * static_cast<float>((grid_entry >> (8 * j)) & 0xFF);
    out[j] = ((signs >> j) & 1) ? -v : v;
  }
}

// ggml's quantize_row_q8_0_ref on one block of 32 values.
void q8_0_quantize_block(const float* x, uint8_t* block) {
  float amax = 0.0f;
  for (int j = 0; j < kQ8_0Group; ++j) {
    const float a = std::fabs(x[j]);
    if (a > amax || std::isnan(a)) amax = a;  // a NaN sticks, as in gguf's numpy max
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(block, f32_to_f16(d));
  for (int j = 0; j < kQ8_0Group; ++j) {
    const float q = std::round(x[j] * id);  // roundf: halves away from zero
    // q is non-finite only for NaN/Inf input or when 1/d overflows (amax below ~3.7e-37). The C
    // reference's int8 cast is then undefined; x86 builds of ggml and gguf's numpy both give 0.
    block[2 + j] = std::isfinite(q) ? static_cast<uint8_t>(static_cast<int8_t>(q)) : 0;
  }
}

const FormatInfo& ggml_info(Format fmt) {
  const FormatInfo& info = format_info(fmt);
  B12X_CHECK_ARG(is_ggml_format(fmt), "format", "must be a GGML block format (q8_0, iq2_xxs, iq2_xs), got ",
                 info.name);
  return info;
}

void check_cols(const FormatInfo& f, int64_t cols) {
  B12X_CHECK_ARG(cols % f.group == 0, "cols", "must be a multiple of the ", f.group, "-weight block of ", f.name,
                 ", got ", cols);
}

// blocks must be u8 [rows, cols/group, payload] or its flat form [rows, cols/group * payload].
void check_blocks(const TensorView& blocks, const FormatInfo& f, int64_t rows, int64_t cols) {
  expect(blocks, "blocks").host().dtype(DType::u8).contiguous();
  const int64_t per_row = cols / f.group;
  if (blocks.ndim == 3) {
    B12X_CHECK_ARG(blocks.size(2) == f.block_bytes, "blocks", "payload must be ", f.block_bytes, " bytes per ",
                   f.group, "-weight block for ", f.name, ", got ", blocks.size(2));
    expect(blocks, "blocks").shape({rows, per_row, int64_t{f.block_bytes}});
  } else if (blocks.ndim == 2) {
    B12X_CHECK_ARG(blocks.size(0) == rows && blocks.size(1) == per_row * f.block_bytes, "blocks", "shape must be [",
                   rows, ", ", per_row * f.block_bytes, "] (", per_row, " blocks of ", f.block_bytes,
                   " bytes per row for ", f.name, "), got ", shape_string(blocks.shape_vec()));
  } else {
    fail_arg("blocks", "must be [rows, cols/", f.group, ", ", f.block_bytes, "] or [rows, cols/", f.group, " * ",
             f.block_bytes, "] for ", f.name, ", got ", blocks.describe());
  }
}

using BlockDecoder = void (*)(const uint8_t*, float*);

BlockDecoder decoder_for(Format fmt) {
  switch (fmt) {
    case Format::q8_0: return q8_0_decode_block;
    case Format::iq2_xxs: return iq2_xxs_decode_block;
    default: return iq2_xs_decode_block;  // callers have checked is_ggml_format
  }
}

// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and its stream is fixed forever, which is
// what deterministic test data needs.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

// fp16 bit patterns 0x0400 (2^-14) .. 0x2400 (2^-6) with a random sign: normal, finite, and small
// enough that decoded weights stay in a realistic range.
uint16_t random_block_scale(SplitMix64& rng) {
  constexpr uint64_t kLow = 0x0400, kHigh = 0x2400;
  const uint64_t r = rng.next();
  const uint16_t magnitude = static_cast<uint16_t>(kLow + (r >> 1) % (kHigh - kLow + 1));
  return (r & 1) ? static_cast<uint16_t>(magnitude | 0x8000) : magnitude;
}

}  // namespace

void q8_0_decode_block(const uint8_t* block, float* out) {
  const float d = f16_to_f32(load_u16(block));
  for (int j = 0; j < kQ8_0Group; ++j) out[j] = static_cast<float>(static_cast<int8_t>(block[2 + j])) * d;
}

// 8 sub-blocks of 8 bytes: 4 grid indices, then u32 = 4 x 7-bit sign index | 4-bit scale << 28.
void iq2_xxs_decode_block(const uint8_t* block, float* out) {
  const float d = f16_to_f32(load_u16(block));
  for (int ib = 0; ib < 8; ++ib) {
    const uint8_t* sub = block + 2 + 8 * ib;
    const uint32_t signs_and_scale = load_u32(sub + 4);
    const float db = iq2_scale(d, signs_and_scale >> 28);
    for (int l = 0; l < 4; ++l)
      decode_group(db, kIq2xxsGrid[sub[l]], signs_and_scale >> (7 * l), out + 32 * ib + 8 * l);
  }
}

// 32 u16 descriptors (9-bit grid index | 7-bit sign index << 9), then 8 scale bytes whose low
// nibble scales groups 0-1 and high nibble groups 2-3 of a sub-block.
void iq2_xs_decode_block(const uint8_t* block, float* out) {
  const float d = f16_to_f32(load_u16(block));
  const uint8_t* scales = block + 2 + 64;
  for (int ib = 0; ib < 8; ++ib) {
    for (int l = 0; l < 4; ++l) {
      const uint16_t q = load_u16(block + 2 + 2 * (4 * ib + l));
      const uint32_t s = l < 2 ? (scales[ib] & 0xF) : (scales[ib] >> 4);
      decode_group(iq2_scale(d, s), kIq2xsGrid[q & 511], q >> 9, out + 32 * ib + 8 * l);
    }
  }
}

void ggml_dequantize(Format fmt, const TensorView& blocks, const TensorView& out) {
  const FormatInfo& f = ggml_info(fmt);
  expect(out, "out").host().dtype(DType::f32).ndim(2).contiguous();
  const int64_t rows = out.size(0), cols = out.size(1);
  check_cols(f, cols);
  check_blocks(blocks, f, rows, cols);
  const BlockDecoder decode = decoder_for(fmt);
  const int64_t n_blocks = rows * (cols / f.group);
  const uint8_t* src = blocks.ptr<const uint8_t>();
  float* dst = out.ptr<float>();
  for (int64_t b = 0; b < n_blocks; ++b) decode(src + b * f.block_bytes, dst + b * f.group);
}

void q8_0_quantize(const TensorView& x, const TensorView& blocks) {
  const FormatInfo& f = format_info(Format::q8_0);
  expect(x, "x").host().dtype_in({DType::f32, DType::bf16, DType::f16}).ndim(2).contiguous();
  const int64_t rows = x.size(0), cols = x.size(1);
  check_cols(f, cols);
  check_blocks(blocks, f, rows, cols);
  const int64_t n_blocks = rows * (cols / kQ8_0Group);
  uint8_t* dst = blocks.ptr<uint8_t>();
  float values[kQ8_0Group];
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (int j = 0; j < kQ8_0Group; ++j) values[j] = load_f32(x.data, x.dtype, b * kQ8_0Group + j);
    q8_0_quantize_block(values, dst + b * kQ8_0Bytes);
  }
}

void ggml_random_blocks(Format fmt, const TensorView& blocks, uint64_t seed) {
  const FormatInfo& f = ggml_info(fmt);
  expect(blocks, "blocks").host().dtype(DType::u8).contiguous();
  B12X_CHECK_ARG(blocks.ndim >= 1 && blocks.size(-1) % f.block_bytes == 0, "blocks",
                 "last dimension must hold whole ", f.block_bytes, "-byte ", f.name, " blocks, got ",
                 blocks.describe());
  SplitMix64 rng(seed);
  const int64_t n_blocks = blocks.numel() / f.block_bytes;
  uint8_t* block = blocks.ptr<uint8_t>();
  for (int64_t b = 0; b < n_blocks; ++b, block += f.block_bytes) {
    store_u16(block, random_block_scale(rng));
    // Every bit pattern of the rest is a valid block: fill it 8 bytes at a time.
    for (int i = 2; i < f.block_bytes; i += 8) {
      const uint64_t r = rng.next();
      for (int k = 0; k < 8 && i + k < f.block_bytes; ++k) block[i + k] = static_cast<uint8_t>(r >> (8 * k));
    }
  }
}

}  // namespace b12x
