// reference_embedding_q8_0 against rows built by hand: expectations come from the Q8_0 layout
// (fp16 d, int8 qs) and an FP16 / BF16 arithmetic written here, not from the library's codecs.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "b12x/core/error.h"
#include "b12x/core/tensor.h"
#include "b12x/embedding/reference.h"

namespace {

using b12x::BadArgument;
using b12x::Device;
using b12x::DType;
using b12x::TensorView;

constexpr int kGroup = 32, kBlockBytes = 34;

// FP16 bits -> value, from the IEEE field definitions.
double f16_value(uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -mag : mag;
}

// FP32 -> BF16 RNE by comparing the distances to the two BF16 neighbours (finite inputs only).
uint16_t bf16_rne(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t lo = u & 0xFFFF0000u;
  const uint32_t hi = lo + 0x10000u;  // next BF16 away from zero
  const double dlo = std::fabs(static_cast<double>(x) - std::bit_cast<float>(lo));
  const double dhi = std::fabs(static_cast<double>(std::bit_cast<float>(hi)) - x);
  if (dlo < dhi) return static_cast<uint16_t>(lo >> 16);
  if (dhi < dlo) return static_cast<uint16_t>(hi >> 16);
  return static_cast<uint16_t>(((lo >> 16) & 1) ? hi >> 16 : lo >> 16);
}

// A Q8_0 table [V, K/32, 34] filled block by block.
struct Table {
  int64_t V, K;
  std::vector<uint8_t> bytes;
  Table(int64_t v, int64_t k) : V(v), K(k), bytes(static_cast<size_t>(v * (k / kGroup) * kBlockBytes), 0) {}
  uint8_t* block(int64_t row, int64_t b) { return bytes.data() + (row * (K / kGroup) + b) * kBlockBytes; }
  void set(int64_t row, int64_t b, uint16_t d, const std::array<int8_t, kGroup>& qs) {
    uint8_t* p = block(row, b);
    p[0] = static_cast<uint8_t>(d & 0xFF);  // little-endian fp16
    p[1] = static_cast<uint8_t>(d >> 8);
    std::memcpy(p + 2, qs.data(), kGroup);
  }
  TensorView view() { return TensorView(bytes.data(), DType::u8, {V, K / kGroup, kBlockBytes}); }
  // Exact value of element k of a row (qs * d fits FP32: 11-bit d times a 7-bit integer).
  float value(int64_t row, int64_t k) {
    const uint8_t* p = block(row, k / kGroup);
    const uint16_t d = static_cast<uint16_t>(p[0] | (p[1] << 8));
    const int8_t q = static_cast<int8_t>(p[2 + k % kGroup]);
    return static_cast<float>(q * f16_value(d));
  }
};

std::array<int8_t, kGroup> ramp(int start, int step) {
  std::array<int8_t, kGroup> qs{};
  for (int j = 0; j < kGroup; ++j) {
    int v = start + j * step;
    v = ((v + 128) % 256 + 256) % 256 - 128;  // wrap into int8
    qs[j] = static_cast<int8_t>(v);
  }
  return qs;
}

// Three rows of two blocks with assorted scales: 1, -0.5, subnormal, non-power-of-two, 65504.
Table make_table() {
  Table t(3, 64);
  t.set(0, 0, 0x3C00, ramp(-16, 1));   // d = 1
  t.set(0, 1, 0xB800, ramp(127, -8));  // d = -0.5
  t.set(1, 0, 0x0001, ramp(-128, 8));  // d = 2^-24 (fp16 subnormal)
  t.set(1, 1, 0x3555, ramp(3, 7));     // d ~ 1/3: products need rounding to BF16
  t.set(2, 0, 0x7BFF, ramp(-127, 9));  // d = 65504
  t.set(2, 1, 0x3C04, ramp(0, 1));     // d = 1 + 2^-8: BF16 ties
  return t;
}

std::string run_error(const TensorView& table, const TensorView& ids, const TensorView& out, const std::string& arg) {
  try {
    b12x::reference_embedding_q8_0(table, ids, out);
  } catch (const BadArgument& e) {
    EXPECT_EQ(e.argument(), arg) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected BadArgument naming '" << arg << "'";
  return {};
}

TEST(EmbeddingReference, HandBuiltRowsF32AreExact) {
  Table t = make_table();
  std::vector<int32_t> ids = {2, 0, 1};
  std::vector<float> out(3 * 64, -1.0f);
  b12x::reference_embedding_q8_0(t.view(), TensorView(ids.data(), DType::i32, {3}),
                                 TensorView(out.data(), DType::f32, {3, 64}));
  for (int r = 0; r < 3; ++r)
    for (int k = 0; k < 64; ++k)
      EXPECT_EQ(std::bit_cast<uint32_t>(out[r * 64 + k]), std::bit_cast<uint32_t>(t.value(ids[r], k)))
          << "token " << r << " k " << k;
  // Spot values written out by hand.
  EXPECT_EQ(out[1 * 64 + 0], -16.0f);     // row 0, block 0: d = 1, qs = -16
  EXPECT_EQ(out[1 * 64 + 32], -63.5f);    // row 0, block 1: d = -0.5, qs = 127
  EXPECT_EQ(out[2 * 64 + 0], -0x1p-17f);  // row 1: d = 2^-24, qs = -128
  EXPECT_EQ(out[0 * 64 + 0], -127.0f * 65504.0f);
}

TEST(EmbeddingReference, Bf16RoundsToNearestEven) {
  Table t = make_table();
  std::vector<int64_t> ids = {0, 1, 2};
  std::vector<uint16_t> out(3 * 64, 0xFFFF);
  b12x::reference_embedding_q8_0(t.view(), TensorView(ids.data(), DType::i64, {3}),
                                 TensorView(out.data(), DType::bf16, {3, 64}));
  for (int r = 0; r < 3; ++r)
    for (int k = 0; k < 64; ++k)
      EXPECT_EQ(out[r * 64 + k], bf16_rne(t.value(ids[r], k))) << "token " << r << " k " << k;
  // Row 2, block 1: d = 1 + 2^-8, qs = j, value j + j/256. Hand-rounded BF16 codes:
  const uint16_t* b = &out[2 * 64 + 32];
  EXPECT_EQ(b[1], 0x3F80);  // 1 + 2^-8: tie between 1 and 1 + 2^-7 -> even (1.0)
  EXPECT_EQ(b[2], 0x4000);  // 2 + 2^-7: tie between 2 and 2 + 2^-6 -> even (2.0)
  EXPECT_EQ(b[3], 0x4041);  // 3 + 3/256: 0.75 ulp above 3 -> 3 + 2^-6
  EXPECT_EQ(b[5], 0x40A1);  // 5 + 5/256: 0.625 ulp -> 5 + 2^-5
  EXPECT_EQ(b[6], 0x40C1);  // 6 + 6/256: 0.75 ulp -> 6 + 2^-5
  EXPECT_EQ(b[0], 0x0000);  // 0 * d = +0
}

TEST(EmbeddingReference, Bf16TieRoundsUpToEvenMantissa) {
  // d = 1 + 3 * 2^-8 (fp16 0x3C0C): 1 * d lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  Table t(1, 32);
  std::array<int8_t, kGroup> qs{};
  qs[0] = 1;
  qs[1] = -1;
  t.set(0, 0, 0x3C0C, qs);
  int32_t id = 0;
  std::vector<uint16_t> out(32, 0xFFFF);
  b12x::reference_embedding_q8_0(t.view(), TensorView(&id, DType::i32, {1}),
                                 TensorView(out.data(), DType::bf16, {1, 32}));
  EXPECT_EQ(out[0], 0x3F82);
  EXPECT_EQ(out[1], 0xBF82);
}

TEST(EmbeddingReference, EveryInt8CodeAtSeveralScales) {
  // Row r holds all 256 int8 codes (8 blocks) with one scale per row.
  const std::vector<uint16_t> scales = {0x3C00, 0x3C01, 0x2E66, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0xC7FF, 0x8000};
  const int64_t V = static_cast<int64_t>(scales.size()), K = 256;
  Table t(V, K);
  for (int64_t r = 0; r < V; ++r)
    for (int b = 0; b < 8; ++b) t.set(r, b, scales[r], ramp(-128 + 32 * b, 1));
  std::vector<int32_t> ids(V);
  for (int64_t r = 0; r < V; ++r) ids[r] = static_cast<int32_t>(V - 1 - r);
  std::vector<uint16_t> bf(V * K, 0xFFFF);
  std::vector<float> f(V * K, -1.0f);
  b12x::reference_embedding_q8_0(t.view(), TensorView(ids.data(), DType::i32, {V}),
                                 TensorView(bf.data(), DType::bf16, {V, K}));
  b12x::reference_embedding_q8_0(t.view(), TensorView(ids.data(), DType::i32, {V}),
                                 TensorView(f.data(), DType::f32, {V, K}));
  for (int64_t r = 0; r < V; ++r)
    for (int64_t k = 0; k < K; ++k) {
      const double want = (k - 128) * f16_value(scales[ids[r]]);
      ASSERT_EQ(static_cast<double>(f[r * K + k]), want)
          << "scale 0x" << std::hex << scales[ids[r]] << std::dec << " k " << k;
      ASSERT_EQ(bf[r * K + k], bf16_rne(static_cast<float>(want)))
          << "scale 0x" << std::hex << scales[ids[r]] << std::dec << " k " << k;
    }
}

TEST(EmbeddingReference, RepeatedIdsI64) {
  Table t = make_table();
  std::vector<int64_t> ids = {1, 1, 0, 1, 2, 2};
  std::vector<float> out(6 * 64, -1.0f);
  b12x::reference_embedding_q8_0(t.view(), TensorView(ids.data(), DType::i64, {6}),
                                 TensorView(out.data(), DType::f32, {6, 64}));
  for (size_t r = 0; r < ids.size(); ++r)
    for (int k = 0; k < 64; ++k) ASSERT_EQ(out[r * 64 + k], t.value(ids[r], k)) << "token " << r << " k " << k;
}

TEST(EmbeddingReference, I32AndI64IdsAgree) {
  Table t = make_table();
  std::vector<int32_t> i32 = {2, 1, 0, 2};
  std::vector<int64_t> i64(i32.begin(), i32.end());
  std::vector<uint16_t> a(4 * 64, 0), b(4 * 64, 1);
  b12x::reference_embedding_q8_0(t.view(), TensorView(i32.data(), DType::i32, {4}),
                                 TensorView(a.data(), DType::bf16, {4, 64}));
  b12x::reference_embedding_q8_0(t.view(), TensorView(i64.data(), DType::i64, {4}),
                                 TensorView(b.data(), DType::bf16, {4, 64}));
  EXPECT_EQ(a, b);
}

TEST(EmbeddingReference, ZeroTokens) {
  Table t = make_table();
  // No ids and no output rows: nothing to do, null pointers allowed.
  EXPECT_NO_THROW(b12x::reference_embedding_q8_0(t.view(), TensorView(nullptr, DType::i32, {0}),
                                                 TensorView(nullptr, DType::bf16, {0, 64})));
  int64_t dummy_id = 7;
  uint16_t dummy_out = 0xABCD;
  EXPECT_NO_THROW(b12x::reference_embedding_q8_0(t.view(), TensorView(&dummy_id, DType::i64, {0}),
                                                 TensorView(&dummy_out, DType::bf16, {0, 64})));
  EXPECT_EQ(dummy_out, 0xABCD);
}

// Each bad id: BadArgument naming 'ids' with position, value and range, and out untouched.
template <class Id>
void expect_bad_id(const std::vector<Id>& ids, DType dt, size_t pos, const std::string& value) {
  Table t = make_table();  // V = 3
  const int64_t T = static_cast<int64_t>(ids.size());
  std::vector<uint16_t> out(T * 64, 0x5A5A);
  const std::string msg = run_error(t.view(), TensorView(const_cast<Id*>(ids.data()), dt, {T}),
                                    TensorView(out.data(), DType::bf16, {T, 64}), "ids");
  const std::string want = "ids[" + std::to_string(pos) + "] = " + value + " is out of range [0, 3)";
  EXPECT_NE(msg.find(want), std::string::npos) << msg;
  for (uint16_t v : out) ASSERT_EQ(v, 0x5A5A) << "out was written before the ids were validated";
}

TEST(EmbeddingReference, OutOfRangeIdsThrowBeforeWriting) {
  expect_bad_id<int32_t>({0, 1, -1}, DType::i32, 2, "-1");
  expect_bad_id<int32_t>({2, 3}, DType::i32, 1, "3");  // == V
  expect_bad_id<int32_t>({std::numeric_limits<int32_t>::min()}, DType::i32, 0, "-2147483648");
  expect_bad_id<int64_t>({0, 0, 0, int64_t{1} << 40}, DType::i64, 3, "1099511627776");
  // A huge i64 whose low 32 bits are a valid id: must not be truncated.
  expect_bad_id<int64_t>({(int64_t{1} << 32) + 1}, DType::i64, 0, "4294967297");
  expect_bad_id<int64_t>({1, std::numeric_limits<int64_t>::min()}, DType::i64, 1, "-9223372036854775808");
  expect_bad_id<int64_t>({1, std::numeric_limits<int64_t>::max()}, DType::i64, 1, "9223372036854775807");
  // The first bad position is the one reported.
  expect_bad_id<int64_t>({2, 5, -4}, DType::i64, 1, "5");
}

TEST(EmbeddingReference, MessageFormatForLargeVocabulary) {
  // The documented example: "ids[3] = 70000 is out of range [0, 32000)".
  const int64_t V = 32000;
  std::vector<uint8_t> table(V * kBlockBytes, 0);
  std::vector<int32_t> ids = {0, 1, 31999, 70000};
  std::vector<float> out(4 * 32, 1.5f);
  const std::string msg =
      run_error(TensorView(table.data(), DType::u8, {V, 1, kBlockBytes}), TensorView(ids.data(), DType::i32, {4}),
                TensorView(out.data(), DType::f32, {4, 32}), "ids");
  EXPECT_NE(msg.find("ids[3] = 70000 is out of range [0, 32000)"), std::string::npos) << msg;
  for (float v : out) ASSERT_EQ(v, 1.5f);
}

TEST(EmbeddingReference, BadShapesAndDtypesNameTheArgument) {
  Table t = make_table();  // u8 [3, 2, 34], K = 64
  std::vector<int32_t> ids = {0, 1};
  std::vector<int64_t> ids64 = {0, 1};
  std::vector<float> out(2 * 64 + 64, 7.0f);  // spare room for the larger wrong shapes
  const TensorView good_ids(ids.data(), DType::i32, {2});
  const TensorView good_out(out.data(), DType::f32, {2, 64});

  // table
  std::string m = run_error(TensorView(t.bytes.data(), DType::u8, {3, 2 * kBlockBytes}), good_ids, good_out, "table");
  EXPECT_NE(m.find("[*, 2, 34]"), std::string::npos) << m;  // expected shape shown
  EXPECT_NE(m.find("[3, 68]"), std::string::npos) << m;     // actual shape shown
  m = run_error(TensorView(t.bytes.data(), DType::u8, {3, 1, kBlockBytes}), good_ids, good_out, "table");  // K mismatch
  EXPECT_NE(m.find("[*, 2, 34]"), std::string::npos) << m;
  run_error(TensorView(t.bytes.data(), DType::u8, {1, 3, 2, 34}), good_ids, good_out, "table");
  run_error(TensorView(t.bytes.data(), DType::u8, {2, 3, 34}), good_ids, good_out, "table");
  m = run_error(TensorView(t.bytes.data(), DType::i8, {3, 2, 34}), good_ids, good_out, "table");
  EXPECT_NE(m.find("i8"), std::string::npos) << m;
  run_error(TensorView(t.bytes.data(), DType::u8, {3, 2, 34}, Device::cuda(0)), good_ids, good_out, "table");
  run_error(TensorView(nullptr, DType::u8, {3, 2, 34}), good_ids, good_out, "table");
  TensorView strided(t.bytes.data(), DType::u8, {2, 2, 34});
  strided.strides = {2 * 2 * 34, 34, 1};  // rows 0 and 2: not contiguous
  run_error(strided, good_ids, good_out, "table");

  // out
  m = run_error(t.view(), good_ids, TensorView(out.data(), DType::f16, {2, 64}), "out");
  EXPECT_NE(m.find("f16"), std::string::npos) << m;
  run_error(t.view(), good_ids, TensorView(out.data(), DType::f32, {128}), "out");
  run_error(t.view(), good_ids, TensorView(out.data(), DType::f32, {2, 1, 64}), "out");
  m = run_error(t.view(), good_ids, TensorView(out.data(), DType::f32, {2, 48}), "out");  // K % 32 != 0
  EXPECT_NE(m.find("48"), std::string::npos) << m;
  run_error(t.view(), good_ids, TensorView(out.data(), DType::f32, {2, 64}, Device::cuda(0)), "out");
  run_error(t.view(), good_ids, TensorView(nullptr, DType::f32, {2, 64}), "out");
  TensorView out_t(out.data(), DType::f32, {2, 64});
  out_t.strides = {1, 2};  // transposed layout
  run_error(t.view(), good_ids, out_t, "out");

  // ids
  m = run_error(t.view(), TensorView(ids.data(), DType::u8, {2}), good_out, "ids");
  EXPECT_NE(m.find("u8"), std::string::npos) << m;
  run_error(t.view(), TensorView(ids.data(), DType::f32, {2}), good_out, "ids");
  m = run_error(t.view(), TensorView(ids.data(), DType::i32, {3}), good_out, "ids");  // T mismatch
  EXPECT_NE(m.find("[2]"), std::string::npos) << m;
  EXPECT_NE(m.find("[3]"), std::string::npos) << m;
  run_error(t.view(), TensorView(ids.data(), DType::i32, {1, 2}), good_out, "ids");
  run_error(t.view(), TensorView(ids64.data(), DType::i64, {2}, Device::cuda(0)), good_out, "ids");
  run_error(t.view(), TensorView(nullptr, DType::i64, {2}), good_out, "ids");
  TensorView ids_s(ids.data(), DType::i32, {2});
  ids_s.strides = {2};
  run_error(t.view(), ids_s, good_out, "ids");

  for (float v : out) ASSERT_EQ(v, 7.0f) << "a rejected call wrote to out";
}

}  // namespace
