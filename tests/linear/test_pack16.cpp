// device/pack16.cuh on the CPU: every E2M1, E4M3 and int8 code converts to the exact BF16 / F16 value of
// decode.cuh's FP32 decoder, whatever the neighbouring bytes hold, and NVFP4's element x block scale
// is exact in both 16-bit types. (The device runs the same bit placement; its packed multiply and
// cvt are checked bit-exactly by tests/linear/linear_gpu.cpp's one-hot test.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "device/pack16.cuh"

namespace b12x::device {
namespace {

template <int kT>
void expect_half(unsigned half, float want, const char* what, unsigned code) {
  const float got = half16_to_f32<kT>(half);
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << " code " << code;
  } else {
    EXPECT_EQ(f32_bits(got), f32_bits(want)) << what << " code 0x" << std::hex << code << ": got " << got << " want "
                                             << want;
  }
}

template <int kT>
void check_e2m1_every_code() {
  std::mt19937 rng(1);
  for (unsigned byte = 0; byte < 256; ++byte)
    for (int j = 0; j < 4; ++j)
      for (int rep = 0; rep < 4; ++rep) {
        // The other bytes hold random codes: the conversion must ignore them.
        const unsigned junk = static_cast<unsigned>(rng()) & ~(0xFFu << (8 * j));
        const unsigned w = junk | (byte << (8 * j));
        const unsigned p = e2m1x2_pack<kT>(w, j);
        expect_half<kT>(p & 0xFFFFu, e2m1_to_f32(byte & 0xFu), "e2m1 lo", byte);
        expect_half<kT>(p >> 16, e2m1_to_f32(byte >> 4), "e2m1 hi", byte);
      }
}

TEST(Pack16, E2M1EveryCodeBf16) { check_e2m1_every_code<kPackBf16>(); }
TEST(Pack16, E2M1EveryCodeF16) { check_e2m1_every_code<kPackF16>(); }

// The FP4 kernels' pairing: elements i and i + 4 of a word (nibbles i and i + 4), the other nibbles
// random codes; the placed bits times 2^e2m1_placed_exp are the element.
template <int kT>
void check_e2m1_spread_every_code() {
  std::mt19937 rng(5);
  for (unsigned code = 0; code < 256; ++code)  // element i: code & 15, element i + 4: code >> 4
    for (int i = 0; i < 4; ++i)
      for (int rep = 0; rep < 4; ++rep) {
        const unsigned mine = (0xFu << (4 * i)) | (0xFu << (4 * i + 16));
        const unsigned w = (static_cast<unsigned>(rng()) & ~mine) | ((code & 0xFu) << (4 * i)) | ((code >> 4) << (4 * i + 16));
        const unsigned p = mul2<kT>(e2m1x2_bits_spread<kT>(w, i), pow2_pair<kT>(e2m1_placed_exp<kT>()));
        expect_half<kT>(p & 0xFFFFu, e2m1_to_f32(code & 0xFu), "e2m1 spread lo", code);
        expect_half<kT>(p >> 16, e2m1_to_f32(code >> 4), "e2m1 spread hi", code);
        const unsigned placed = kT == kPackBf16 ? 0x81C081C0u : 0x8E008E00u;  // signs and magnitudes only
        EXPECT_EQ(e2m1x2_bits_spread<kT>(w, i) & ~placed, 0u) << code;
      }
}

TEST(Pack16, E2M1SpreadEveryCodeBf16) { check_e2m1_spread_every_code<kPackBf16>(); }
TEST(Pack16, E2M1SpreadEveryCodeF16) { check_e2m1_spread_every_code<kPackF16>(); }

template <int kT>
void check_e4m3_every_pair() {
  std::mt19937 rng(2);
  for (unsigned pair = 0; pair < 65536; ++pair)
    for (int h = 0; h < 2; ++h) {
      const unsigned junk = static_cast<unsigned>(rng()) & (h == 0 ? 0xFFFF0000u : 0x0000FFFFu);
      const unsigned w = junk | (pair << (16 * h));
      const unsigned p = e4m3x2_pack<kT>(w, h);
      const unsigned lo = pair & 0xFFu, hi = pair >> 8;
      const bool lo_nan = (lo & 0x7Fu) == 0x7Fu, hi_nan = (hi & 0x7Fu) == 0x7Fu;
      // BF16 turns NaN codes into finite values (the kernel flags them with e4m3_nan_bits).
      if (kT == kPackF16 || !lo_nan) expect_half<kT>(p & 0xFFFFu, e4m3_to_f32(lo), "e4m3 lo", lo);
      if (kT == kPackF16 || !hi_nan) expect_half<kT>(p >> 16, e4m3_to_f32(hi), "e4m3 hi", hi);
      const unsigned flags = e4m3_nan_bits(pair << (16 * h)) & 0x80808080u;
      EXPECT_EQ((flags >> (16 * h + 7)) & 1u, lo_nan ? 1u : 0u) << pair;
      EXPECT_EQ((flags >> (16 * h + 15)) & 1u, hi_nan ? 1u : 0u) << pair;
      EXPECT_EQ(flags & ~(0x8080u << (16 * h)), 0u) << pair;  // zero bytes are never NaN
    }
}

TEST(Pack16, E4M3EveryPairBf16) { check_e4m3_every_pair<kPackBf16>(); }
TEST(Pack16, E4M3EveryPairF16) { check_e4m3_every_pair<kPackF16>(); }

// The tile16 byte order: the pair is bytes h and h + 2, the other two bytes are random codes.
template <int kT>
void check_e4m3_split_every_pair() {
  std::mt19937 rng(4);
  for (unsigned pair = 0; pair < 65536; ++pair)
    for (int h = 0; h < 2; ++h) {
      const unsigned lo = pair & 0xFFu, hi = pair >> 8;
      const unsigned junk = static_cast<unsigned>(rng()) & ~((0xFFu << (8 * h)) | (0xFFu << (8 * h + 16)));
      const unsigned p = e4m3x2_pack_split<kT>(junk | (lo << (8 * h)) | (hi << (8 * h + 16)), h);
      const bool lo_nan = (lo & 0x7Fu) == 0x7Fu, hi_nan = (hi & 0x7Fu) == 0x7Fu;
      if (kT == kPackF16 || !lo_nan) expect_half<kT>(p & 0xFFFFu, e4m3_to_f32(lo), "e4m3 split lo", lo);
      if (kT == kPackF16 || !hi_nan) expect_half<kT>(p >> 16, e4m3_to_f32(hi), "e4m3 split hi", hi);
      if (kT == kPackBf16 && lo == 0x80u) {
        EXPECT_EQ(p & 0xFFFFu, 0x8000u) << "-0 keeps its sign";
      }
    }
}

TEST(Pack16, E4M3SplitEveryPairBf16) { check_e4m3_split_every_pair<kPackBf16>(); }
TEST(Pack16, E4M3SplitEveryPairF16) { check_e4m3_split_every_pair<kPackF16>(); }

template <int kT>
void check_nvfp4_products() {
  for (unsigned sb = 0; sb < 256; ++sb) {
    if ((sb & 0x7Fu) == 0x7Fu) continue;  // NaN scale: NaN product (checked on the device)
    const float s = e4m3_to_f32(sb);
    const unsigned spair = splat2<kT>(s);
    EXPECT_EQ(f32_bits(half16_to_f32<kT>(spair & 0xFFFFu)), f32_bits(s)) << "scale " << sb;
    for (unsigned byte = 0; byte < 256; ++byte) {
      const unsigned p = mul2<kT>(e2m1x2_pack<kT>(byte, 0), spair);
      const float want_lo = e2m1_to_f32(byte & 0xFu) * s, want_hi = e2m1_to_f32(byte >> 4) * s;
      expect_half<kT>(p & 0xFFFFu, want_lo, "nvfp4 lo", byte | (sb << 8));
      expect_half<kT>(p >> 16, want_hi, "nvfp4 hi", byte | (sb << 8));
    }
  }
}

TEST(Pack16, Nvfp4ElementTimesBlockScaleIsExactBf16) { check_nvfp4_products<kPackBf16>(); }

// What the MMA kernels feed the tensor cores for NVFP4: nvfp4_pair with nvfp4_scale_pair is element *
// scale * 2^-nvfp4_sum_shift exactly (BF16: one packed multiply on the placed bits, the scale carrying
// 2^(126 - 8)), for every element pair, every scale code and both pairings; the four scale codes
// of a word convert two at a time.
template <int kT>
void check_nvfp4_pairs() {
  const float unshift = std::ldexp(1.0f, nvfp4_sum_shift<kT>());
  std::mt19937 rng(6);
  for (unsigned sb = 0; sb < 256; ++sb) {
    const int h = static_cast<int>(sb & 1u);  // the code in byte 2h or 2h + 1 of the scale word
    const unsigned sword = (static_cast<unsigned>(rng()) & ~(0xFFu << (16 * h + 8 * (sb >> 1 & 1u)))) |
                           (sb << (16 * h + 8 * (sb >> 1 & 1u)));
    const unsigned pair = nvfp4_scale_pair<kT>(sword, h);
    const unsigned half = (pair >> (16 * (sb >> 1 & 1u))) & 0xFFFFu;
    const unsigned spair = half | (half << 16);
    const bool nan = (sb & 0x7Fu) == 0x7Fu;
    if (nan && kT == kPackBf16) continue;  // finite on the BF16 path: the kernels track the code (e4m3_nan_bits)
    const float s = e4m3_to_f32(sb);
    for (unsigned code = 0; code < 256; ++code)
      for (int spread = 0; spread < 2; ++spread) {
        const unsigned w = spread ? ((code & 0xFu) << 8) | ((code >> 4) << 24) : code << 16;  // i = 2 / byte j = 2
        const unsigned p = spread ? nvfp4_pair<kT, true>(w, 2, spair) : nvfp4_pair<kT>(w, 2, spair);
        for (int k = 0; k < 2; ++k) {
          const float got = half16_to_f32<kT>((p >> (16 * k)) & 0xFFFFu) * unshift;
          const float want = e2m1_to_f32(k == 0 ? code & 0xFu : code >> 4) * s;
          if (nan) {
            EXPECT_TRUE(std::isnan(got)) << sb;
          } else {
            EXPECT_EQ(f32_bits(got), f32_bits(want)) << "scale " << sb << " code " << code << " spread " << spread;
          }
        }
      }
  }
}

TEST(Pack16, Nvfp4PairsAreExactBf16) { check_nvfp4_pairs<kPackBf16>(); }
TEST(Pack16, Nvfp4PairsAreExactF16) { check_nvfp4_pairs<kPackF16>(); }

// MXFP4 in BF16: every E2M1 pair times every UE8M0 scale, against the FP32 product (reference_linear's
// decoded weight), Inf and NaN included.
TEST(Pack16, Mxfp4ElementTimesUe8m0ScaleIsExactInBf16) {
  for (unsigned e = 0; e < 256; ++e) {
    const unsigned spair = ue8m0_bf16_pair(e);
    const float s = ue8m0_to_f32(e);
    ASSERT_EQ(spair >> 16, spair & 0xFFFFu);
    if (e == 255) {
      EXPECT_TRUE(std::isnan(half16_to_f32<kPackBf16>(spair & 0xFFFFu)));
    } else {
      EXPECT_EQ(f32_bits(half16_to_f32<kPackBf16>(spair & 0xFFFFu)), f32_bits(s)) << "scale " << e;
    }
    for (unsigned byte = 0; byte < 256; ++byte) {
      const unsigned p = mul2<kPackBf16>(e2m1x2_pack<kPackBf16>(byte, 0), spair);
      const float want_lo = e2m1_to_f32(byte & 0xFu) * s, want_hi = e2m1_to_f32(byte >> 4) * s;
      if (e == 255) {
        EXPECT_TRUE(std::isnan(half16_to_f32<kPackBf16>(p & 0xFFFFu)) && std::isnan(half16_to_f32<kPackBf16>(p >> 16)));
        continue;
      }
      expect_half<kPackBf16>(p & 0xFFFFu, want_lo, "mxfp4 lo", byte | (e << 8));
      expect_half<kPackBf16>(p >> 16, want_hi, "mxfp4 hi", byte | (e << 8));
    }
  }
}
TEST(Pack16, Nvfp4ElementTimesBlockScaleIsExactF16) { check_nvfp4_products<kPackF16>(); }

template <int kT>
void check_i8_every_pair() {
  std::mt19937 rng(3);
  for (unsigned pair = 0; pair < 65536; ++pair)
    for (int h = 0; h < 2; ++h) {
      const unsigned junk = static_cast<unsigned>(rng()) & (h == 0 ? 0xFFFF0000u : 0x0000FFFFu);
      const unsigned p = i8x2_pack<kT>(junk | (pair << (16 * h)), h);
      const float lo = static_cast<float>(static_cast<int8_t>(pair & 0xFFu));
      const float hi = static_cast<float>(static_cast<int8_t>(pair >> 8));
      expect_half<kT>(p & 0xFFFFu, lo, "int8 lo", pair & 0xFFu);
      expect_half<kT>(p >> 16, hi, "int8 hi", pair >> 8);
      if ((pair & 0xFFu) == 0) {
        EXPECT_EQ(p & 0xFFFFu, 0u) << "int8 0 must be +0";
      }
    }
}

TEST(Pack16, Int8EveryPairBf16) { check_i8_every_pair<kPackBf16>(); }
TEST(Pack16, Int8EveryPairF16) { check_i8_every_pair<kPackF16>(); }

TEST(Pack16, BytePermMatchesPtxSemantics) {
  EXPECT_EQ(byte_perm(0x33221100u, 0x77665544u, 0x3210u), 0x33221100u);
  EXPECT_EQ(byte_perm(0x33221100u, 0x77665544u, 0x7654u), 0x77665544u);
  EXPECT_EQ(byte_perm(0x33221100u, 0x77665544u, 0x4140u), 0x44114400u);
  EXPECT_EQ(pow2_pair<kPackBf16>(120), 0x7B807B80u);
  EXPECT_EQ(pow2_pair<kPackBf16>(126), 0x7E807E80u);
  EXPECT_EQ(pow2_pair<kPackF16>(14), 0x74007400u);
}

// Caps::round_weights' Q8_0 decode: every int8 code q (in each byte position, other bytes random)
// and every finite FP16 d give RNE(FP32 q * d) in both 16-bit types, the value round_decoded_weight
// gives; a NaN d gives NaN.
template <int kT>
void check_q8_0_round_every_code_and_scale() {
  std::mt19937 rng(3);
  int64_t checked = 0;
  for (unsigned dbits = 0; dbits < 0x10000u; ++dbits) {
    if ((dbits & 0x7C00u) == 0x7C00u && (dbits & 0x3FFu) == 0) continue;  // +-Inf: NaN for every q (documented)
    const float d = f16_to_f32_bits(dbits);
    const float dl = d * kQ8RoundScale, cl = d * kQ8RoundOffset;
    for (unsigned q = 0; q < 256; q += (dbits % 7 == 0 ? 1 : 37)) {  // every code for a seventh of the scales
      for (int pos = 0; pos < 4; ++pos) {
        const unsigned junk = static_cast<unsigned>(rng()) & ~(0xFFu << (8 * pos));
        const unsigned w = junk | q << (8 * pos);
        const unsigned p = q8_0_round_pair<kT>(w ^ 0x80808080u, pos >> 1, dl, cl);
        const float want_f = static_cast<float>(static_cast<int8_t>(q)) * d;  // dequantize_weight's FP32 product
        const float want = half16_to_f32<kT>(kT == kPackBf16 ? f32_to_bf16_rne(want_f) : f32_to_f16_rne(want_f));
        const float got = half16_to_f32<kT>(pos & 1 ? p >> 16 : p & 0xFFFFu);
        if (std::isnan(d)) {
          EXPECT_TRUE(std::isnan(got)) << "q " << q << " d 0x" << std::hex << dbits;
        } else if (got != want) {  // (+0 / -0 alike: q = 0 gives +0, the sum starts at +0 anyway)
          ADD_FAILURE() << "q " << static_cast<int>(static_cast<int8_t>(q)) << " d 0x" << std::hex << dbits << ": got "
                        << got << " want " << want;
          return;
        }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 4'000'000);
}

TEST(Pack16, Q8_0RoundedPairIsTheRoundedProductBf16) { check_q8_0_round_every_code_and_scale<kPackBf16>(); }
TEST(Pack16, Q8_0RoundedPairIsTheRoundedProductF16) { check_q8_0_round_every_code_and_scale<kPackF16>(); }

}  // namespace
}  // namespace b12x::device
