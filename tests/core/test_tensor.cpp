// TensorView geometry, Expect rules, HostTensor ownership and the dtype registry.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "b12x/core/dtype.h"
#include "b12x/core/error.h"
#include "b12x/core/tensor.h"

namespace {

using namespace b12x;

// Runs f, which must throw BadArgument naming `arg` whose message contains every piece of `parts`.
template <class F>
void expect_bad(F&& f, const std::string& arg, std::initializer_list<std::string> parts) {
  try {
    f();
  } catch (const BadArgument& e) {
    EXPECT_EQ(e.argument(), arg) << e.what();
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("argument '" + arg + "': ", 0), 0u) << what;
    for (const auto& p : parts) EXPECT_NE(what.find(p), std::string::npos) << "'" << p << "' missing from: " << what;
    return;
  }
  ADD_FAILURE() << "expected BadArgument naming '" << arg << "'";
}

// ---------------------------------------------------------------------------------------------
// TensorView

TEST(TensorView, ContiguousConstruction) {
  float buf[24];
  const TensorView v(buf, DType::f32, {2, 3, 4});
  EXPECT_EQ(v.data, buf);
  EXPECT_EQ(v.dtype, DType::f32);
  EXPECT_EQ(v.ndim, 3);
  EXPECT_EQ(v.shape_vec(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(v.strides[0], 12);
  EXPECT_EQ(v.strides[1], 4);
  EXPECT_EQ(v.strides[2], 1);
  EXPECT_EQ(v.size(0), 2);
  EXPECT_EQ(v.size(-1), 4);
  EXPECT_EQ(v.size(-3), 2);
  EXPECT_TRUE(v.device.is_host());
  EXPECT_EQ(v.ptr<float>(), buf);
  EXPECT_FALSE(v.empty());

  // The vector overload builds the same view.
  const TensorView w(buf, DType::f32, std::vector<int64_t>{2, 3, 4});
  EXPECT_EQ(w.shape, v.shape);
  EXPECT_EQ(w.strides, v.strides);

  const TensorView c(nullptr, DType::bf16, {5}, Device::cuda(3));
  EXPECT_FALSE(c.device.is_host());
  EXPECT_EQ(c.device, Device::cuda(3));
  EXPECT_NE(c.device, Device::cuda(0));
  EXPECT_TRUE(c.empty());
}

TEST(TensorView, NumelAndNbytes) {
  EXPECT_EQ(TensorView(nullptr, DType::f32, {2, 3, 4}).numel(), 24);
  EXPECT_EQ(TensorView(nullptr, DType::f32, {2, 3, 4}).nbytes(), 96u);
  EXPECT_EQ(TensorView(nullptr, DType::bf16, {7, 5}).nbytes(), 70u);
  EXPECT_EQ(TensorView(nullptr, DType::i64, {3}).nbytes(), 24u);
  EXPECT_EQ(TensorView(nullptr, DType::u8, {4, 2, 74}).nbytes(), 592u);
  EXPECT_EQ(TensorView(nullptr, DType::f32, {4, 0, 3}).numel(), 0);
  EXPECT_EQ(TensorView(nullptr, DType::f32, {4, 0, 3}).nbytes(), 0u);
  const int64_t big = int64_t{1} << 20;
  EXPECT_EQ(TensorView(nullptr, DType::f64, {big, big}).numel(), big * big);  // no 32-bit overflow
  // A 0-d view is a scalar: the empty product.
  EXPECT_EQ(TensorView(nullptr, DType::f32, std::vector<int64_t>{}).numel(), 1);
  EXPECT_EQ(TensorView().ndim, 0);
}

TEST(TensorView, BadShapesThrow) {
  expect_bad([] { TensorView(nullptr, DType::f32, {1, 2, 3, 4, 5, 6, 7}); }, "shape", {"6", "7"});
  expect_bad([] { TensorView(nullptr, DType::f32, {2, -3}); }, "shape", {"-3"});
  EXPECT_NO_THROW(TensorView(nullptr, DType::f32, {1, 2, 3, 4, 5, 6}));
}

TEST(TensorView, Contiguity) {
  float buf[64];
  TensorView v(buf, DType::f32, {3, 4});
  EXPECT_TRUE(v.is_contiguous());

  TensorView t = v;  // transpose by hand: shape [4, 3], strides [1, 4]
  t.shape = {4, 3};
  t.strides = {1, 4};
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.numel(), 12);

  TensorView rows = v;  // every other row of a [6, 4] buffer
  rows.strides = {8, 1};
  EXPECT_FALSE(rows.is_contiguous());

  TensorView cols = v;  // column slice of width 2 from a [3, 4] buffer
  cols.shape = {3, 2};
  cols.strides = {4, 1};
  EXPECT_FALSE(cols.is_contiguous());

  TensorView padded(buf, DType::f32, {2, 3, 4});
  padded.strides = {12, 4, 2};  // inner stride 2
  EXPECT_FALSE(padded.is_contiguous());

  // Extent-1 dimensions never move the pointer, so their strides do not matter.
  TensorView unit(buf, DType::f32, {1, 4, 1});
  unit.strides = {999, 1, 77};
  EXPECT_TRUE(unit.is_contiguous());

  EXPECT_TRUE(TensorView(buf, DType::f32, {0, 5}).is_contiguous());
  EXPECT_TRUE(TensorView().is_contiguous());
}

TEST(TensorView, Describe) {
  EXPECT_EQ(TensorView(nullptr, DType::u8, {4, 2, 74}).describe(), "u8[4, 2, 74] host");
  EXPECT_EQ(TensorView(nullptr, DType::bf16, {8}, Device::cuda(1)).describe(), "bf16[8] cuda");
  EXPECT_EQ(shape_string({}), "[]");
  EXPECT_EQ(shape_string({3}), "[3]");
  EXPECT_EQ(shape_string({1, 20, 300}), "[1, 20, 300]");
}

// ---------------------------------------------------------------------------------------------
// Expect: each rule names the argument, the rule and the actual value.

TEST(Expect, PassingChainReturnsNormally) {
  alignas(64) uint8_t buf[4 * 2 * 74];
  const TensorView w(buf, DType::u8, {4, 2, 74});
  EXPECT_NO_THROW(expect(w, "weight").present().host().dtype(DType::u8).dtype_in({DType::i8, DType::u8}).ndim(3)
                      .shape({4, 2, 74}).shape({-1, 2, -1}).contiguous().aligned(64));
}

TEST(Expect, Present) {
  const TensorView missing(nullptr, DType::f32, {2, 3});
  expect_bad([&] { expect(missing, "bias").present(); }, "bias", {"required"});
  expect_bad([&] { expect(TensorView(), "bias").present(); }, "bias", {"required"});
  // A null pointer is fine when there is nothing to point at.
  EXPECT_NO_THROW(expect(TensorView(nullptr, DType::f32, {0, 3}), "bias").present());
}

TEST(Expect, Host) {
  int x = 0;
  const TensorView dev(&x, DType::i32, {1}, Device::cuda(0));
  expect_bad([&] { expect(dev, "ids").host(); }, "ids", {"host", "i32[1] cuda"});
  expect_bad([&] { expect(TensorView(nullptr, DType::i32, {4}), "ids").host(); }, "ids", {"required"});
}

TEST(Expect, Dtype) {
  uint16_t x[4];
  const TensorView v(x, DType::bf16, {4});
  expect_bad([&] { expect(v, "x").dtype(DType::f32); }, "x", {"dtype", "f32", "got bf16"});
  expect_bad([&] { expect(v, "x").dtype_in({DType::f16, DType::f32}); }, "x", {"f16, f32", "got bf16"});
  EXPECT_NO_THROW(expect(v, "x").dtype_in({DType::f16, DType::bf16}));
}

TEST(Expect, NdimAndShape) {
  float x[24];
  const TensorView v(x, DType::f32, {2, 3, 4});
  expect_bad([&] { expect(v, "act").ndim(2); }, "act", {"2 dimensions", "f32[2, 3, 4]"});
  expect_bad([&] { expect(v, "act").shape({2, 3, 5}); }, "act", {"[2, 3, 5]", "got [2, 3, 4]"});
  expect_bad([&] { expect(v, "act").shape({-1, 4, -1}); }, "act", {"[*, 4, *]", "got [2, 3, 4]"});
  expect_bad([&] { expect(v, "act").shape({2, 12}); }, "act", {"[2, 12]", "got [2, 3, 4]"});
  expect_bad([&] { expect(v, "act").shape(std::vector<int64_t>{2, 3, 4, 1}); }, "act", {"[2, 3, 4, 1]"});
  EXPECT_NO_THROW(expect(v, "act").shape({-1, -1, -1}));
  EXPECT_NO_THROW(expect(v, "act").shape(std::vector<int64_t>{2, 3, 4}));
}

TEST(Expect, Contiguous) {
  float x[24];
  TensorView v(x, DType::f32, {4, 3});
  v.strides = {1, 4};
  expect_bad([&] { expect(v, "out").contiguous(); }, "out", {"contiguous"});
}

TEST(Expect, Aligned) {
  alignas(16) uint8_t buf[64];
  const TensorView off(buf + 4, DType::u8, {16});
  expect_bad([&] { expect(off, "scales").aligned(16); }, "scales", {"aligned", "16"});
  EXPECT_NO_THROW(expect(off, "scales").aligned(4));
  EXPECT_NO_THROW(expect(TensorView(buf, DType::u8, {16}), "scales").aligned(16));
}

TEST(Expect, FirstFailingRuleIsReported) {
  uint16_t x[4];
  const TensorView v(x, DType::bf16, {4});
  // dtype fails before shape is looked at.
  expect_bad([&] { expect(v, "y").host().dtype(DType::f32).shape({5}); }, "y", {"dtype"});
}

// ---------------------------------------------------------------------------------------------
// HostTensor

TEST(HostTensor, ZeroInitialisedAndSelfConsistent) {
  HostTensor t(DType::f32, {3, 5});
  EXPECT_EQ(t.dtype(), DType::f32);
  EXPECT_EQ(t.numel(), 15);
  EXPECT_EQ(t.nbytes(), 60u);
  ASSERT_EQ(t.bytes().size(), 60u);
  EXPECT_EQ(t.view().data, t.bytes().data());
  EXPECT_EQ(t.ptr<float>(), reinterpret_cast<float*>(t.bytes().data()));
  EXPECT_TRUE(t.view().is_contiguous());
  EXPECT_EQ(t.view().shape_vec(), (std::vector<int64_t>{3, 5}));
  for (uint8_t b : t.bytes()) ASSERT_EQ(b, 0);
  EXPECT_EQ(HostTensor(DType::bf16, {0, 8}).nbytes(), 0u);
}

TEST(HostTensor, CopyIsIndependent) {
  HostTensor a(DType::i32, {4});
  for (int i = 0; i < 4; ++i) a.ptr<int32_t>()[i] = 10 + i;

  HostTensor b(a);
  EXPECT_NE(b.view().data, a.view().data);
  EXPECT_EQ(b.view().data, b.bytes().data());
  EXPECT_EQ(b.view().shape, a.view().shape);
  b.ptr<int32_t>()[0] = -1;
  EXPECT_EQ(a.ptr<int32_t>()[0], 10);
  EXPECT_EQ(b.ptr<int32_t>()[3], 13);

  HostTensor c(DType::f32, {100});
  c = a;
  EXPECT_EQ(c.dtype(), DType::i32);
  EXPECT_EQ(c.numel(), 4);
  EXPECT_EQ(c.view().data, c.bytes().data());
  EXPECT_NE(c.view().data, a.view().data);
  c.ptr<int32_t>()[1] = -2;
  EXPECT_EQ(a.ptr<int32_t>()[1], 11);

  HostTensor& same = c;
  c = same;  // self-assignment keeps the buffer and the contents
  EXPECT_EQ(c.view().data, c.bytes().data());
  EXPECT_EQ(c.ptr<int32_t>()[1], -2);
}

TEST(HostTensor, MoveKeepsTheBuffer) {
  HostTensor a(DType::f32, {8});
  a.ptr<float>()[7] = 2.5f;
  void* buf = a.view().data;

  HostTensor b(std::move(a));
  EXPECT_EQ(b.view().data, buf);
  EXPECT_EQ(b.view().data, b.bytes().data());
  EXPECT_EQ(b.ptr<float>()[7], 2.5f);

  HostTensor c;
  c = std::move(b);
  EXPECT_EQ(c.view().data, buf);
  EXPECT_EQ(c.view().data, c.bytes().data());
  EXPECT_EQ(c.numel(), 8);
  EXPECT_EQ(c.ptr<float>()[7], 2.5f);

  // Copies of a moved-to tensor still own their own storage.
  std::vector<HostTensor> many;
  for (int i = 0; i < 50; ++i) many.push_back(c);  // reallocation moves the elements
  for (const auto& t : many) {
    ASSERT_EQ(t.view().data, t.bytes().data());
    ASSERT_EQ(t.ptr<float>()[7], 2.5f);
  }
}

// ---------------------------------------------------------------------------------------------
// dtype registry

TEST(DTypeRegistry, NamesSizesAndRoundTrip) {
  const struct {
    DType t;
    const char* name;
    size_t size;
  } all[] = {{DType::bf16, "bf16", 2},   {DType::f16, "f16", 2},       {DType::f32, "f32", 4},
             {DType::f64, "f64", 8},     {DType::f8_e4m3, "f8_e4m3", 1}, {DType::f8_e5m2, "f8_e5m2", 1},
             {DType::ue8m0, "ue8m0", 1}, {DType::u8, "u8", 1},         {DType::i8, "i8", 1},
             {DType::i32, "i32", 4},     {DType::i64, "i64", 8}};
  for (const auto& d : all) {
    EXPECT_EQ(dtype_name(d.t), d.name);
    EXPECT_EQ(dtype_size(d.t), d.size) << d.name;
    EXPECT_EQ(parse_dtype(d.name), d.t) << d.name;
    EXPECT_EQ(parse_dtype(dtype_name(d.t)), d.t) << d.name;
    EXPECT_EQ(is_float_activation(d.t), d.t == DType::bf16 || d.t == DType::f16 || d.t == DType::f32) << d.name;
  }
}

TEST(DTypeRegistry, UnknownNameListsTheValidOnes) {
  const std::initializer_list<std::string> names = {"bf16", "f16", "f32", "f64", "f8_e4m3", "f8_e5m2",
                                                    "ue8m0", "u8", "i8", "i32", "i64"};
  expect_bad([] { parse_dtype("float32"); }, "dtype", names);
  expect_bad([] { parse_dtype("float32"); }, "dtype", {"'float32'"});
  expect_bad([] { parse_dtype("BF16", "--act-dtype"); }, "--act-dtype", {"'BF16'", "bf16"});
  expect_bad([] { parse_dtype(""); }, "dtype", {"bf16"});
}

}  // namespace
