// GGML block codecs: table facts, hand-built blocks checked against independent arithmetic, the
// Q8_0 reference quantizer's rounding rules, random-block generation and argument errors.
// Bit-exactness against gguf on large random sets lives in test_ggml_oracle.py.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "b12x/core/error.h"
#include "b12x/formats/ggml.h"
#include "b12x/formats/scalar.h"

namespace b12x {
namespace {

constexpr uint16_t kF16One = 0x3C00, kF16Half = 0x3800, kF16Two = 0x4000;

uint8_t byte_of(uint64_t v, int j) { return static_cast<uint8_t>(v >> (8 * j)); }
uint16_t f16_field(const uint8_t* block) { return static_cast<uint16_t>(block[0] | (block[1] << 8)); }
void set_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void set_u32(uint8_t* p, uint32_t v) {
  for (int k = 0; k < 4; ++k) p[k] = static_cast<uint8_t>(v >> (8 * k));
}
bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

// The IQ2 weight formula evaluated in double (exact here), with the sign taken from the 7 stored
// bits plus an even-parity 8th bit computed directly rather than through iq2_ksigns.
float iq2_weight(uint16_t d_bits, uint32_t scale, uint8_t magnitude, uint32_t sign_index, int j) {
  const uint32_t bits7 = sign_index & 127;
  const bool negative = j < 7 ? ((bits7 >> j) & 1) : (std::popcount(bits7) % 2 == 1);
  const double v = static_cast<double>(f16_to_f32(d_bits)) * (2.0 * scale + 1.0) / 8.0 * magnitude;
  return static_cast<float>(negative ? -v : v);
}

// ---- tables ----------------------------------------------------------------------------------

TEST(GgmlTables, EveryGridByteIsOneOfTheThreeMagnitudes) {
  auto check = [](const uint64_t* grid, int n) {
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < 8; ++j) {
        const uint8_t m = byte_of(grid[i], j);
        ASSERT_TRUE(m == 8 || m == 25 || m == 43) << "entry " << i << " byte " << j << " = " << int(m);
      }
  };
  check(kIq2xxsGrid, 256);
  check(kIq2xsGrid, 512);
}

TEST(GgmlTables, GridsAreDistinctTablesWithUniqueEntries) {
  const std::set<uint64_t> xxs(kIq2xxsGrid, kIq2xxsGrid + 256), xs(kIq2xsGrid, kIq2xsGrid + 512);
  EXPECT_EQ(xxs.size(), 256u);
  EXPECT_EQ(xs.size(), 512u);
  int xxs_only = 0;
  for (uint64_t v : xxs) xxs_only += !xs.count(v);
  EXPECT_GT(xxs_only, 0) << "the XXS grid must not be a subset of the XS grid";
  EXPECT_NE(std::memcmp(kIq2xxsGrid, kIq2xsGrid, sizeof(kIq2xxsGrid)), 0);
}

// Entries spelled out in ggml-common.h; catches a generator that reorders bytes or entries.
TEST(GgmlTables, SpotValuesMatchGgmlCommon) {
  EXPECT_EQ(kIq2xxsGrid[0], 0x0808080808080808ull);
  EXPECT_EQ(kIq2xxsGrid[1], 0x080808080808082bull);
  EXPECT_EQ(kIq2xxsGrid[3], 0x0808080808082b08ull);
  EXPECT_EQ(kIq2xxsGrid[255], 0x2b2b2b1908081908ull);
  EXPECT_EQ(kIq2xsGrid[0], 0x0808080808080808ull);
  EXPECT_EQ(kIq2xsGrid[7], 0x080808080819192bull);
  EXPECT_EQ(kIq2xsGrid[256], 0x190808080808192bull);
  EXPECT_EQ(kIq2xsGrid[511], 0x2b2b2b2b2b2b2b2bull);
}

TEST(GgmlTables, KsignsKeepsSevenBitsAndAddsEvenParity) {
  for (uint32_t i = 0; i < 128; ++i) {
    const uint8_t s = iq2_ksigns(i);
    EXPECT_EQ(s & 127u, i);
    EXPECT_EQ(std::popcount(static_cast<unsigned>(s)) % 2, 0) << "index " << i;
  }
  EXPECT_EQ(iq2_ksigns(1), 0x81);
  EXPECT_EQ(iq2_ksigns(3), 0x03);
  EXPECT_EQ(iq2_ksigns(127), 0xFF);
  EXPECT_EQ(iq2_ksigns(128 + 1), 0x81) << "only the low 7 bits select";
}

// ---- Q8_0 ------------------------------------------------------------------------------------

TEST(Q8_0, DecodesHandBuiltBlock) {
  uint8_t block[kQ8_0Bytes];
  set_u16(block, kF16Half);
  for (int j = 0; j < 32; ++j) block[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(-128 + 8 * j + (j % 3)));
  float out[32];
  q8_0_decode_block(block, out);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], (-128 + 8 * j + (j % 3)) * 0.5f) << j;
  EXPECT_EQ(out[0], -64.0f);
}

TEST(Q8_0, NegativeScaleGivesNegativeZero) {
  uint8_t block[kQ8_0Bytes] = {};
  set_u16(block, 0xB800);  // -0.5
  block[3] = 2;
  float out[32];
  q8_0_decode_block(block, out);
  EXPECT_TRUE(same_bits(out[0], -0.0f));
  EXPECT_EQ(out[1], -1.0f);
}

std::vector<uint8_t> quantize_row(const std::vector<float>& x) {
  std::vector<uint8_t> blocks(x.size() / 32 * kQ8_0Bytes);
  q8_0_quantize(TensorView(const_cast<float*>(x.data()), DType::f32, {1, static_cast<int64_t>(x.size())}),
                TensorView(blocks.data(), DType::u8, {1, static_cast<int64_t>(x.size() / 32), kQ8_0Bytes}));
  return blocks;
}

TEST(Q8_0, QuantizeRoundsHalvesAwayFromZero) {
  // amax = 127 makes d = 1 and id = 1 exactly, so x * id is x itself.
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.5f;
  x[4] = -0.5f;
  x[5] = 1.4999999f;
  x[6] = 3.5f;
  x[7] = -126.5f;
  const auto b = quantize_row(x);
  EXPECT_EQ(f16_field(b.data()), kF16One);
  const int expected[8] = {127, 3, -3, 1, -1, 1, 4, -127};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(static_cast<int8_t>(b[2 + j]), expected[j]) << j;

  // amax = 63.5: d = 0.5, id = 2, so 1.25 lands on 2.5 -> 3.
  std::vector<float> y(32, 0.0f);
  y[0] = -63.5f;
  y[1] = 1.25f;
  const auto c = quantize_row(y);
  EXPECT_EQ(f16_field(c.data()), kF16Half);
  EXPECT_EQ(static_cast<int8_t>(c[2]), -127);
  EXPECT_EQ(static_cast<int8_t>(c[3]), 3);
}

// Cases found by search (and confirmed with gguf) where shortcuts change the code: x / d instead of
// x * (1/d), or the reciprocal of the fp16-rounded scale instead of the fp32 one.
TEST(Q8_0, QuantizeMultipliesByReciprocalOfUnroundedScale) {
  struct Case {
    uint32_t amax_bits, x_bits;
    int8_t want, wrong;
  };
  const Case cases[] = {
      {0x3fc37aa4, 0x3fb03d2e, 115, 114},  // x / d would give 114
      {0x40a55858, 0x402a8d82, 65, 66},    // x * (1 / fp16(d)) would give 66
  };
  for (const Case& c : cases) {
    std::vector<float> x(32, 0.0f);
    x[0] = std::bit_cast<float>(c.amax_bits);
    x[1] = std::bit_cast<float>(c.x_bits);
    const auto b = quantize_row(x);
    EXPECT_EQ(static_cast<int8_t>(b[2]), 127);
    EXPECT_EQ(static_cast<int8_t>(b[3]), c.want) << "not " << int(c.wrong);
  }
  const float d = std::bit_cast<float>(0x3fc37aa4u) / 127.0f;
  EXPECT_EQ(std::round(std::bit_cast<float>(0x3fb03d2eu) / d), 114.0f) << "the case must separate the two rules";
}

TEST(Q8_0, QuantizeEdgeMagnitudes) {
  const auto zeros = quantize_row(std::vector<float>(32, 0.0f));
  for (uint8_t v : zeros) EXPECT_EQ(v, 0);

  // d = 1e-30/127 underflows fp16 to 0 while the codes still use the full range (as in ggml).
  std::vector<float> tiny(32, 0.0f);
  tiny[5] = -1e-30f;
  const auto t = quantize_row(tiny);
  EXPECT_EQ(f16_field(t.data()), 0);
  EXPECT_EQ(static_cast<int8_t>(t[2 + 5]), -127);

  // 1/d overflows to Inf: ggml's int8 cast is undefined there; b12x (like gguf and x86 ggml) writes 0.
  std::vector<float> denormal(32, 1e-38f);
  const auto u = quantize_row(denormal);
  for (uint8_t v : u) EXPECT_EQ(v, 0);

  // d = 3e38/127 overflows fp16 to +Inf.
  std::vector<float> huge(32, 1.0e38f);
  huge[0] = -3.0e38f;
  const auto h = quantize_row(huge);
  EXPECT_EQ(f16_field(h.data()), 0x7C00);
  EXPECT_EQ(static_cast<int8_t>(h[2]), -127);
}

TEST(Q8_0, QuantizeNonFiniteInputIsDefined) {
  std::vector<float> inf(32, 1.0f);
  inf[9] = -std::numeric_limits<float>::infinity();
  const auto a = quantize_row(inf);
  EXPECT_EQ(f16_field(a.data()), 0x7C00);  // d = Inf, id = 0, Inf * 0 = NaN -> 0
  for (int j = 0; j < 32; ++j) EXPECT_EQ(a[2 + j], 0);

  std::vector<float> nan(32, 1.0f);
  nan[0] = std::numeric_limits<float>::quiet_NaN();
  const auto n = quantize_row(nan);
  EXPECT_EQ(f16_field(n.data()) & 0x7E00, 0x7E00);  // NaN scale: the block decodes to NaN
  for (int j = 0; j < 32; ++j) EXPECT_EQ(n[2 + j], 0);
}

TEST(Q8_0, QuantizeReadsBf16AndF16Inputs) {
  std::vector<float> x(64);
  for (int j = 0; j < 64; ++j) x[j] = static_cast<float>((j * 37) % 61 - 30) * 0.125f;  // exact in bf16/f16
  std::vector<uint16_t> as_bf16(64), as_f16(64);
  for (int j = 0; j < 64; ++j) {
    as_bf16[j] = f32_to_bf16(x[j]);
    as_f16[j] = f32_to_f16(x[j]);
  }
  const auto want = quantize_row(x);
  for (auto [data, dtype] : {std::pair{as_bf16.data(), DType::bf16}, std::pair{as_f16.data(), DType::f16}}) {
    std::vector<uint8_t> got(want.size());
    q8_0_quantize(TensorView(data, dtype, {2, 32}), TensorView(got.data(), DType::u8, {2, kQ8_0Bytes}));
    EXPECT_EQ(got, want) << dtype_name(dtype);
  }
}

// Error bound: half a step from rounding plus 127 * (fp16 rounding of d, at most 2^-11 d).
TEST(Q8_0, DequantizeRoundTripIsWithinHalfAStep) {
  std::vector<float> x(256);
  for (int j = 0; j < 256; ++j) x[j] = std::sin(0.37f * j) * (1.0f + j % 7);
  const auto blocks = quantize_row(x);
  std::vector<float> y(256);
  ggml_dequantize(Format::q8_0, TensorView(const_cast<uint8_t*>(blocks.data()), DType::u8, {1, 8 * kQ8_0Bytes}),
                  TensorView(y.data(), DType::f32, {1, 256}));
  for (int b = 0; b < 8; ++b) {
    const float d = f16_to_f32(f16_field(&blocks[b * kQ8_0Bytes]));
    for (int j = 0; j < 32; ++j) EXPECT_LE(std::fabs(y[32 * b + j] - x[32 * b + j]), 0.57f * d);
  }
}

// ---- IQ2_XXS ---------------------------------------------------------------------------------

TEST(Iq2Xxs, DecodesHandBuiltGroup) {
  // Sub-block 3, group 0: grid 1 (weight 0 is 43, the rest 8), sign index 1 (ksigns 0x81: weights
  // 0 and 7 negative), scale 5: db = 1 * 11 / 8 = 1.375.
  uint8_t block[kIq2xxsBytes] = {};
  set_u16(block, kF16One);
  uint8_t* sub = block + 2 + 8 * 3;
  sub[0] = 1;
  set_u32(sub + 4, (5u << 28) | 1u);
  float out[256];
  iq2_xxs_decode_block(block, out);
  const float expected[8] = {-59.125f, 11, 11, 11, 11, 11, 11, -11};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(out[96 + j], expected[j]) << j;
  // Groups 1-3 of that sub-block: grid 0 (all 8), sign index 0, same scale.
  for (int j = 8; j < 32; ++j) EXPECT_EQ(out[96 + j], 11.0f) << j;
  // Other sub-blocks: scale 0 -> db = 1/8, magnitude 8 -> +1.
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[255], 1.0f);
}

TEST(Iq2Xxs, EveryFieldMatchesIndependentFormula) {
  std::vector<uint8_t> blocks(16 * kIq2xxsBytes);
  ggml_random_blocks(Format::iq2_xxs, TensorView(blocks.data(), DType::u8, {16, kIq2xxsBytes}), 7);
  for (int b = 0; b < 16; ++b) {
    const uint8_t* block = &blocks[b * kIq2xxsBytes];
    float out[256];
    iq2_xxs_decode_block(block, out);
    for (int ib = 0; ib < 8; ++ib) {
      const uint8_t* sub = block + 2 + 8 * ib;
      const uint32_t w = sub[4] | (sub[5] << 8) | (sub[6] << 16) | (static_cast<uint32_t>(sub[7]) << 24);
      for (int l = 0; l < 4; ++l)
        for (int j = 0; j < 8; ++j) {
          const float want = iq2_weight(f16_field(block), w >> 28, byte_of(kIq2xxsGrid[sub[l]], j), w >> (7 * l), j);
          ASSERT_TRUE(same_bits(out[32 * ib + 8 * l + j], want)) << "block " << b << " ib " << ib << " l " << l;
        }
    }
  }
}

TEST(Iq2Xxs, NegativeZeroScaleKeepsIeeeSigns) {
  uint8_t block[kIq2xxsBytes] = {};
  set_u16(block, 0x8000);   // d = -0
  set_u32(block + 6, 1u);   // group 0 sign index 1: weights 0 and 7 negated
  float out[256];
  iq2_xxs_decode_block(block, out);
  EXPECT_TRUE(same_bits(out[0], 0.0f));   // -(-0 * 43)
  EXPECT_TRUE(same_bits(out[1], -0.0f));  // -0 * 8
  EXPECT_TRUE(same_bits(out[7], 0.0f));
}

// ---- IQ2_XS ----------------------------------------------------------------------------------

TEST(Iq2Xs, DecodesHandBuiltGroupsAndScaleNibbles) {
  // Sub-block 2: every descriptor = grid 511 (all 43) | sign index 3 << 9 (weights 0, 1 negative);
  // scale byte 0xF0: groups 0-1 use nibble 0 (db = 2 * 0.5 / 4 = 0.25), groups 2-3 nibble 15
  // (db = 2 * 15.5 / 4 = 7.75).
  uint8_t block[kIq2xsBytes] = {};
  set_u16(block, kF16Two);
  for (int l = 0; l < 4; ++l) set_u16(block + 2 + 2 * (4 * 2 + l), static_cast<uint16_t>(511 | (3 << 9)));
  block[66 + 2] = 0xF0;
  float out[256];
  iq2_xs_decode_block(block, out);
  for (int l = 0; l < 4; ++l) {
    const float v = (l < 2 ? 0.25f : 7.75f) * 43.0f;
    for (int j = 0; j < 8; ++j) EXPECT_EQ(out[64 + 8 * l + j], j < 2 ? -v : v) << "l " << l << " j " << j;
  }
  EXPECT_EQ(out[0], 0.25f * 8.0f);  // descriptor 0, scale 0
}

TEST(Iq2Xs, EveryFieldMatchesIndependentFormula) {
  std::vector<uint8_t> blocks(16 * kIq2xsBytes);
  ggml_random_blocks(Format::iq2_xs, TensorView(blocks.data(), DType::u8, {16, kIq2xsBytes}), 11);
  for (int b = 0; b < 16; ++b) {
    const uint8_t* block = &blocks[b * kIq2xsBytes];
    float out[256];
    iq2_xs_decode_block(block, out);
    for (int ib = 0; ib < 8; ++ib)
      for (int l = 0; l < 4; ++l) {
        const uint16_t q = f16_field(block + 2 + 2 * (4 * ib + l));
        const uint32_t s = (block[66 + ib] >> (l < 2 ? 0 : 4)) & 0xF;
        for (int j = 0; j < 8; ++j) {
          const float want = iq2_weight(f16_field(block), s, byte_of(kIq2xsGrid[q & 511], j), q >> 9, j);
          ASSERT_TRUE(same_bits(out[32 * ib + 8 * l + j], want)) << "block " << b << " ib " << ib << " l " << l;
        }
      }
  }
}

TEST(Iq2Xs, DequantizeLaysBlocksAlongRows) {
  // Two rows of two blocks; the flat [R, C/256*74] and the [R, C/256, 74] views agree and each
  // block lands at its own 256 columns.
  std::vector<uint8_t> blocks(4 * kIq2xsBytes);
  ggml_random_blocks(Format::iq2_xs, TensorView(blocks.data(), DType::u8, {2, 2, kIq2xsBytes}), 3);
  std::vector<float> a(2 * 512), b(2 * 512);
  ggml_dequantize(Format::iq2_xs, TensorView(blocks.data(), DType::u8, {2, 2, kIq2xsBytes}),
                  TensorView(a.data(), DType::f32, {2, 512}));
  ggml_dequantize(Format::iq2_xs, TensorView(blocks.data(), DType::u8, {2, 2 * kIq2xsBytes}),
                  TensorView(b.data(), DType::f32, {2, 512}));
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  float one[256];
  iq2_xs_decode_block(&blocks[3 * kIq2xsBytes], one);
  EXPECT_EQ(std::memcmp(&a[512 + 256], one, sizeof(one)), 0);
}

// ---- random blocks ---------------------------------------------------------------------------

std::vector<uint8_t> random_blocks(Format f, int64_t n_blocks, uint64_t seed) {
  const int payload = format_info(f).block_bytes;
  std::vector<uint8_t> bytes(n_blocks * payload);
  ggml_random_blocks(f, TensorView(bytes.data(), DType::u8, {n_blocks, int64_t{payload}}), seed);
  return bytes;
}

TEST(GgmlRandom, DeterministicPerSeedAndScalesInRange) {
  for (Format f : {Format::q8_0, Format::iq2_xxs, Format::iq2_xs}) {
    const int payload = format_info(f).block_bytes;
    const auto a = random_blocks(f, 512, 42), b = random_blocks(f, 512, 42), c = random_blocks(f, 512, 43);
    EXPECT_EQ(a, b) << format_info(f).name;
    EXPECT_NE(a, c) << format_info(f).name;
    bool saw_negative = false, saw_positive = false;
    for (int i = 0; i < 512; ++i) {
      const uint16_t d = f16_field(&a[i * payload]);
      const float v = std::fabs(f16_to_f32(d));
      ASSERT_TRUE(v >= std::ldexp(1.0f, -14) && v <= std::ldexp(1.0f, -6)) << "d bits " << d;
      (d & 0x8000 ? saw_negative : saw_positive) = true;
    }
    EXPECT_TRUE(saw_negative && saw_positive);
  }
}

TEST(GgmlRandom, PayloadBitsLookUniform) {
  // 4096 IQ2_XS blocks hold 131072 descriptors: every grid index, sign index and scale nibble
  // should appear.
  const auto bytes = random_blocks(Format::iq2_xs, 4096, 5);
  std::set<int> grid, signs, scales;
  for (int b = 0; b < 4096; ++b) {
    const uint8_t* block = &bytes[b * kIq2xsBytes];
    for (int k = 0; k < 32; ++k) {
      const uint16_t q = f16_field(block + 2 + 2 * k);
      grid.insert(q & 511);
      signs.insert(q >> 9);
    }
    for (int ib = 0; ib < 8; ++ib) {
      scales.insert(block[66 + ib] & 0xF);
      scales.insert(block[66 + ib] >> 4);
    }
  }
  EXPECT_EQ(grid.size(), 512u);
  EXPECT_EQ(signs.size(), 128u);
  EXPECT_EQ(scales.size(), 16u);
}

TEST(GgmlRandom, DecodesToFiniteValues) {
  const auto bytes = random_blocks(Format::q8_0, 64, 9);
  std::vector<float> out(64 * 32);
  ggml_dequantize(Format::q8_0, TensorView(const_cast<uint8_t*>(bytes.data()), DType::u8, {64, 1, kQ8_0Bytes}),
                  TensorView(out.data(), DType::f32, {64, 32}));
  for (float v : out) ASSERT_TRUE(std::isfinite(v));
}

// ---- errors ----------------------------------------------------------------------------------

// Runs fn, expecting a BadArgument that names `arg` and whose message contains `fragment`.
void expect_bad_argument(const std::function<void()>& fn, const std::string& arg, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "expected BadArgument naming '" << arg << "'";
  } catch (const BadArgument& e) {
    EXPECT_EQ(e.argument(), arg) << e.what();
    EXPECT_NE(std::string(e.what()).find("argument '" + arg + "'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(GgmlErrors, WrongPayloadLengthNamesBlocks) {
  std::vector<uint8_t> blocks(2 * kIq2xxsBytes);
  std::vector<float> out(2 * 256);
  expect_bad_argument(
      [&] {
        ggml_dequantize(Format::iq2_xs, TensorView(blocks.data(), DType::u8, {2, 1, kIq2xxsBytes}),
                        TensorView(out.data(), DType::f32, {2, 256}));
      },
      "blocks", "payload must be 74 bytes per 256-weight block for iq2_xs, got 66");
  expect_bad_argument(
      [&] {
        ggml_dequantize(Format::iq2_xs, TensorView(blocks.data(), DType::u8, {2, kIq2xxsBytes}),
                        TensorView(out.data(), DType::f32, {2, 256}));
      },
      "blocks", "shape must be [2, 74]");
}

TEST(GgmlErrors, BlockCountMustMatchOut) {
  std::vector<uint8_t> blocks(3 * kQ8_0Bytes);
  std::vector<float> out(64);
  expect_bad_argument(
      [&] {
        ggml_dequantize(Format::q8_0, TensorView(blocks.data(), DType::u8, {1, 3, kQ8_0Bytes}),
                        TensorView(out.data(), DType::f32, {1, 64}));
      },
      "blocks", "shape must be [1, 2, 34], got [1, 3, 34]");
}

TEST(GgmlErrors, ColsMustBeAMultipleOfTheGroup) {
  std::vector<uint8_t> blocks(kIq2xxsBytes);
  std::vector<float> out(300), x(48);
  expect_bad_argument(
      [&] {
        ggml_dequantize(Format::iq2_xxs, TensorView(blocks.data(), DType::u8, {1, 1, kIq2xxsBytes}),
                        TensorView(out.data(), DType::f32, {1, 300}));
      },
      "cols", "multiple of the 256-weight block of iq2_xxs, got 300");
  expect_bad_argument(
      [&] {
        q8_0_quantize(TensorView(x.data(), DType::f32, {1, 48}), TensorView(blocks.data(), DType::u8, {1, 1, 34}));
      },
      "cols", "multiple of the 32-weight block of q8_0, got 48");
}

TEST(GgmlErrors, WrongDtypesNameTheTensor) {
  std::vector<uint8_t> blocks(kQ8_0Bytes);
  std::vector<float> out(32);
  std::vector<int32_t> ints(32);
  expect_bad_argument(
      [&] {
        ggml_dequantize(Format::q8_0, TensorView(blocks.data(), DType::i8, {1, 1, kQ8_0Bytes}),
                        TensorView(out.data(), DType::f32, {1, 32}));
      },
      "blocks", "dtype must be u8, got i8");
  expect_bad_argument(
      [&] {
        ggml_dequantize(Format::q8_0, TensorView(blocks.data(), DType::u8, {1, 1, kQ8_0Bytes}),
                        TensorView(out.data(), DType::bf16, {1, 32}));
      },
      "out", "dtype must be f32, got bf16");
  expect_bad_argument(
      [&] {
        q8_0_quantize(TensorView(ints.data(), DType::i32, {1, 32}),
                      TensorView(blocks.data(), DType::u8, {1, 1, kQ8_0Bytes}));
      },
      "x", "dtype must be one of {f32, bf16, f16}, got i32");
}

TEST(GgmlErrors, NonGgmlFormatNamesFormat) {
  std::vector<uint8_t> blocks(kQ8_0Bytes);
  std::vector<float> out(32);
  expect_bad_argument(
      [&] {
        ggml_dequantize(Format::nvfp4, TensorView(blocks.data(), DType::u8, {1, 1, kQ8_0Bytes}),
                        TensorView(out.data(), DType::f32, {1, 32}));
      },
      "format", "must be a GGML block format (q8_0, iq2_xxs, iq2_xs), got nvfp4");
  expect_bad_argument(
      [&] { ggml_random_blocks(Format::bf16, TensorView(blocks.data(), DType::u8, {1, kQ8_0Bytes}), 1); }, "format",
      "got bf16");
}

TEST(GgmlErrors, RandomBlocksNeedWholeBlocksOnHost) {
  std::vector<uint8_t> blocks(100);
  expect_bad_argument(
      [&] { ggml_random_blocks(Format::iq2_xxs, TensorView(blocks.data(), DType::u8, {100}), 1); }, "blocks",
      "whole 66-byte iq2_xxs blocks");
  expect_bad_argument(
      [&] {
        ggml_random_blocks(Format::q8_0, TensorView(blocks.data(), DType::u8, {1, kQ8_0Bytes}, Device::cuda()), 1);
      },
      "blocks", "must be a host tensor");
}

}  // namespace
}  // namespace b12x
