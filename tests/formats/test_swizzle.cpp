// The 128x4 swizzled scale layout against an independent reshape/permute definition, round trips
// on shapes that need padding, the padding bytes, and argument validation.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "b12x/b12x.h"
#include "support/errors.h"

using namespace b12x;
using b12x::test::expect_bad_argument;

namespace {

// The layout by definition: view the padded [Rp, Cp] matrix as [Rp/128, 4, 32, Cp/4, 4] (row tile,
// 32-row quarter, row in quarter, column tile, column) and store it permuted to
// (row tile, column tile, row in quarter, quarter, column).
template <class T>
std::vector<T> permute_reference(const std::vector<T>& padded, int64_t rp, int64_t cp) {
  const int64_t row_tiles = rp / 128, col_tiles = cp / 4;
  std::vector<T> out(padded.size());
  size_t next = 0;
  for (int64_t rt = 0; rt < row_tiles; ++rt)
    for (int64_t ct = 0; ct < col_tiles; ++ct)
      for (int64_t i = 0; i < 32; ++i)
        for (int64_t quarter = 0; quarter < 4; ++quarter)
          for (int64_t c = 0; c < 4; ++c) out[next++] = padded[(rt * 128 + quarter * 32 + i) * cp + ct * 4 + c];
  return out;
}

struct Shape {
  int64_t rows, cols;
};
constexpr Shape kShapes[] = {{1, 1}, {127, 3}, {128, 4}, {129, 5}, {300, 17}, {256, 8}, {33, 64}};

}  // namespace

TEST(Swizzle, PaddedShape) {
  const auto s = swizzled_scale_shape(129, 5);
  EXPECT_EQ(s.rows_padded, 256);
  EXPECT_EQ(s.cols_padded, 8);
  EXPECT_EQ(s.bytes(), 2048);
  EXPECT_EQ(swizzled_scale_shape(128, 4).bytes(), 512);
  EXPECT_EQ(swizzled_scale_shape(1, 1).bytes(), 512);
  EXPECT_EQ(swizzled_scale_shape(0, 0).bytes(), 0);
  expect_bad_argument([] { swizzled_scale_shape(-1, 4); }, "rows");
  expect_bad_argument([] { swizzled_scale_shape(4, -3); }, "cols");
}

// The offset formula agrees with the permute definition on every padded position, hence is a bijection.
TEST(Swizzle, OffsetMatchesPermuteDefinition) {
  for (const Shape& sh : kShapes) {
    SCOPED_TRACE(std::to_string(sh.rows) + "x" + std::to_string(sh.cols));
    const auto s = swizzled_scale_shape(sh.rows, sh.cols);
    // Permute the linear index of every padded position: labels[off] says which (r, c) lands at off.
    std::vector<int64_t> positions(s.bytes());
    for (int64_t i = 0; i < s.bytes(); ++i) positions[i] = i;
    const std::vector<int64_t> labels = permute_reference(positions, s.rows_padded, s.cols_padded);
    for (int64_t r = 0; r < s.rows_padded; ++r)
      for (int64_t c = 0; c < s.cols_padded; ++c) {
        const int64_t off = swizzled_scale_offset(r, c, s.cols_padded);
        ASSERT_GE(off, 0);
        ASSERT_LT(off, s.bytes());
        ASSERT_EQ(labels[off], r * s.cols_padded + c) << "r=" << r << " c=" << c;
      }
  }
}

TEST(Swizzle, RoundTripWithPadding) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (DType dt : {DType::ue8m0, DType::f8_e4m3, DType::u8}) {
    const uint8_t pad = dt == DType::ue8m0 ? 127 : 0;
    for (const Shape& sh : kShapes) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::to_string(sh.rows) + "x" + std::to_string(sh.cols));
      const auto s = swizzled_scale_shape(sh.rows, sh.cols);
      HostTensor linear(dt, {sh.rows, sh.cols}), swizzled(dt, {s.bytes()}), back(dt, {sh.rows, sh.cols});
      for (auto& b : linear.bytes()) b = rng() & 0xFF;
      std::fill(swizzled.bytes().begin(), swizzled.bytes().end(), 0xFF);  // padding must be overwritten
      swizzle_scales(linear.view(), swizzled.view());

      std::vector<uint8_t> padded(s.bytes(), pad);
      for (int64_t r = 0; r < sh.rows; ++r)
        for (int64_t c = 0; c < sh.cols; ++c) padded[r * s.cols_padded + c] = linear.bytes()[r * sh.cols + c];
      EXPECT_EQ(swizzled.bytes(), permute_reference(padded, s.rows_padded, s.cols_padded));

      std::fill(back.bytes().begin(), back.bytes().end(), 0xAA);
      unswizzle_scales(swizzled.view(), back.view());
      EXPECT_EQ(back.bytes(), linear.bytes());
    }
  }
}

// Padding positions hold 1.0 (ue8m0) or 0 (E4M3) - never the NaN codes 0xFF / 0x7F.
TEST(Swizzle, PaddingIsNeverNan) {
  EXPECT_EQ(ue8m0_to_f32(127), 1.0f);
  for (DType dt : {DType::ue8m0, DType::f8_e4m3}) {
    HostTensor linear(dt, {3, 2}), swizzled(dt, {512});
    swizzle_scales(linear.view(), swizzled.view());
    int padding = 0;
    for (int64_t r = 0; r < 128; ++r)
      for (int64_t c = 0; c < 4; ++c) {
        if (r < 3 && c < 2) continue;
        const uint8_t b = swizzled.bytes()[swizzled_scale_offset(r, c, 4)];
        EXPECT_EQ(b, dt == DType::ue8m0 ? 127 : 0);
        ++padding;
      }
    EXPECT_EQ(padding, 512 - 6);
  }
}

TEST(Swizzle, BadArguments) {
  HostTensor linear(DType::ue8m0, {129, 5}), swizzled(DType::ue8m0, {2048});
  TensorView on_gpu = linear.view();
  on_gpu.device = Device::cuda(0);
  const auto sw = [](const TensorView& l, const TensorView& s) { return [=] { swizzle_scales(l, s); }; };
  const auto un = [](const TensorView& s, const TensorView& l) { return [=] { unswizzle_scales(s, l); }; };
  expect_bad_argument(sw(HostTensor(DType::f32, {129, 5}).view(), swizzled.view()), "linear", {"f32"});
  expect_bad_argument(sw(HostTensor(DType::ue8m0, {645}).view(), swizzled.view()), "linear");
  expect_bad_argument(sw(on_gpu, swizzled.view()), "linear", {"host"});
  expect_bad_argument(sw(linear.view(), HostTensor(DType::ue8m0, {129 * 5}).view()), "swizzled", {"[2048]", "[645]"});
  expect_bad_argument(sw(linear.view(), HostTensor(DType::u8, {2048}).view()), "swizzled", {"ue8m0", "u8"});
  expect_bad_argument(sw(linear.view(), HostTensor(DType::ue8m0, {256, 8}).view()), "swizzled");
  expect_bad_argument(un(HostTensor(DType::ue8m0, {1024}).view(), linear.view()), "swizzled", {"[2048]"});
  expect_bad_argument(un(swizzled.view(), HostTensor(DType::i8, {129, 5}).view()), "linear");
}
