// formats.dequantize on a real GPU (label `gpu`, run on the H200): every format x output dtype on
// fresh random data and on hand-made weights covering every code, bit-exact with dequantize_weight()
// + store_f32() on the host; outputs poisoned with 0xFF (NaN) first, so an unwritten element fails.
// Also: host tensors are rejected by bind, a run captured in a CUDA graph replays without compiling,
// and the device conversions equal their portable twins on all 2^32 FP32 inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "b12x/b12x.h"
#include "support/device.h"
#include "support/errors.h"
#include "support/weights.h"
#include "b12x/formats/dequantize.h"
#include "b12x/runtime/cache.h"
#include "b12x/runtime/device.h"
#include "b12x/runtime/jit.h"
#include "b12x/runtime/registry.h"
#include "runtime/cuda_api.h"

namespace b12x {
namespace {

using namespace b12x::test;

constexpr DType kOutDtypes[] = {DType::bf16, DType::f16, DType::f32};

// plan -> bind -> run into an output filled with poison bytes (0xFF: NaN); returns the output bytes.
std::vector<uint8_t> dequantize_on_device(const PackedWeight& p, DType out_dtype, size_t data_offset = 0,
                                          int poison = 0xFF) {
  DeviceWeight w(p, data_offset);
  const size_t out_bytes = static_cast<size_t>(p.n * p.k) * dtype_size(out_dtype);
  DeviceBuffer out(out_bytes);
  out.fill(poison);
  const dequant::Plan plan = dequant::plan({p.format, p.n, p.k, out_dtype});
  const dequant::Binding b =
      dequant::bind(plan, Scratch{}, w.view, TensorView(out.get(), out_dtype, {p.n, p.k}, this_device()));
  dequant::run(b, nullptr);
  B12X_CUDA_CHECK(cudaGetLastError());
  B12X_CUDA_CHECK(cudaDeviceSynchronize());
  return out.download(out_bytes);
}

// ---------------------------------------------------------------------------------------------
// The host oracle



// The device output must equal dequantize_weight (tensor scale applied) rounded by store_f32, bit for
// bit. allow_nan = false: the host result must not contain NaN (random data never does), so the NaN
// poison can never pass. allow_nan = true (hand-made codes): where the host value is NaN the device
// value must be NaN (NaN payloads of arithmetic are not part of the contract; the GPU's negated
// canonical NaN is even the 0xFF poison in FP32), so the caller checks with a second run under another
// poison that every element was written.
void expect_matches_host(const PackedWeight& p, DType out_dtype, const std::vector<uint8_t>& got, bool allow_nan,
                         const std::string& what) {
  const WeightView w = p.view();
  HostTensor ref(DType::f32, {w.n, w.k});
  dequantize_weight(w, ref.view(), true);
  ASSERT_EQ(got.size(), static_cast<size_t>(w.n * w.k) * dtype_size(out_dtype));
  uint8_t want[4];
  int64_t bad = 0;
  for (int64_t i = 0; i < w.n * w.k; ++i) {
    const float r = ref.ptr<float>()[i];
    const uint32_t b = element_bits(got.data(), out_dtype, i);
    bool ok;
    uint32_t a = 0;
    if (std::isnan(r)) {
      ok = allow_nan && is_nan_bits(b, out_dtype);
    } else {
      store_f32(want, out_dtype, 0, r);
      a = element_bits(want, out_dtype, 0);
      ok = a == b;
    }
    if (!ok && bad++ < 8)
      ADD_FAILURE() << what << " out=" << dtype_name(out_dtype) << ": element (" << i / w.k << ", " << i % w.k
                    << ") want " << std::hex << a << " got " << b << std::dec << " (host f32 " << r << ")";
  }
  EXPECT_EQ(bad, 0) << what << " out=" << dtype_name(out_dtype) << ": " << bad << " of " << w.n * w.k
                    << " elements differ";
}

// ---------------------------------------------------------------------------------------------
// Test data





std::string shape_label(const PackedWeight& p) {
  return std::string(format_info(p.format).name) + " " + std::to_string(p.n) + "x" + std::to_string(p.k);
}

class DequantGpu : public testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cuda_available()) << "this test needs a CUDA device"; }
};

// ---------------------------------------------------------------------------------------------
// Tests

TEST_F(DequantGpu, DeviceConversionsEqualPortableTwinsOnAllFloats) {
  KernelSpec spec;
  spec.kernel = "device.convert_selftest";
  spec.source = "device/selftest_convert.cuh";
  spec.name_expression = "b12x::device_convert_selftest_kernel<256>";
  spec.archs = {"sm_90a", "sm_120a"};
  spec.options = {"--ftz=false", "--fmad=false"};
  const Kernel& k = resolve_kernel(spec);
  DeviceBuffer counters(4 * sizeof(unsigned long long)), first(4 * sizeof(unsigned));
  B12X_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
  B12X_CUDA_CHECK(cudaMemset(first.get(), 0xFF, first.bytes()));
  unsigned long long begin = 0, end = 1ull << 32;
  void* counters_p = counters.get();
  void* first_p = first.get();
  void* args[] = {&begin, &end, &counters_p, &first_p};
  k.launch(dim3(static_cast<unsigned>(device_info().sm_count) * 16), dim3(256), 0, nullptr, args);
  B12X_CUDA_CHECK(cudaGetLastError());
  B12X_CUDA_CHECK(cudaDeviceSynchronize());
  unsigned long long c[4];
  unsigned f[4];
  B12X_CUDA_CHECK(cudaMemcpy(c, counters.get(), sizeof(c), cudaMemcpyDeviceToHost));
  B12X_CUDA_CHECK(cudaMemcpy(f, first.get(), sizeof(f), cudaMemcpyDeviceToHost));
  EXPECT_EQ(c[0], 0u) << "pack_bf16x2 differs from f32_to_bf16_rne, first at bits 0x" << std::hex << f[0];
  EXPECT_EQ(c[1], 0u) << "pack_f16x2 differs from f32_to_f16_rne, first at bits 0x" << std::hex << f[1];
  EXPECT_EQ(c[2], 0u) << "f16_to_f32 differs from f16_to_f32_bits, first at 0x" << std::hex << f[2];
  EXPECT_EQ(c[3], 0u) << "pack_e4m3x2 differs from f32_to_e4m3_sat, first at bits 0x" << std::hex << f[3];
}

TEST_F(DequantGpu, RandomWeightsMatchHostBitExact) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const auto& info : all_formats()) {
    const bool iq2 = info.format == Format::iq2_xxs || info.format == Format::iq2_xs;
    // N not a multiple of 128; K not a multiple of 128 where the format allows it.
    const std::vector<std::pair<int64_t, int64_t>> shapes =
        iq2 ? std::vector<std::pair<int64_t, int64_t>>{{1, 256}, {300, 768}, {77, 2816}}
            : std::vector<std::pair<int64_t, int64_t>>{{1, 32}, {300, 160}, {129, 416}, {77, 2848}};
    for (const auto& [n, k] : shapes) {
      const PackedWeight p = random_weight(info.format, n, k, rng);
      for (DType out : kOutDtypes) expect_matches_host(p, out, dequantize_on_device(p, out), false, shape_label(p));
    }
  }
}

TEST_F(DequantGpu, LargeWeightsMatchHostBitExact) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  size_t i = 0;
  for (const auto& info : all_formats()) {
    const PackedWeight p = random_weight(info.format, 8192, 4096, rng);
    const DType out = kOutDtypes[i++ % 3];  // every dtype is covered on the small shapes; rotate here
    expect_matches_host(p, out, dequantize_on_device(p, out), false, shape_label(p));
  }
}

TEST_F(DequantGpu, EveryCodeMatchesHost) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const auto& info : all_formats())
    for (const PackedWeight& p : crafted_weights(info.format, rng))
      for (DType out : kOutDtypes) {
        const std::vector<uint8_t> got = dequantize_on_device(p, out);
        // Written everywhere: the same bytes under another poison (an unwritten element would differ).
        EXPECT_TRUE(got == dequantize_on_device(p, out, 0, 0x7F)) << shape_label(p) << " " << dtype_name(out);
        expect_matches_host(p, out, got, true, shape_label(p) + " (every code)");
      }
}

TEST_F(DequantGpu, GgmlBlocksAtTwoByteOffsets) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (Format f : {Format::q8_0, Format::iq2_xxs, Format::iq2_xs}) {
    const PackedWeight p = random_weight(f, 33, 512, rng);
    for (size_t offset : {2, 6, 34})
      expect_matches_host(p, DType::bf16, dequantize_on_device(p, DType::bf16, offset), false,
                          shape_label(p) + " at offset " + std::to_string(offset));
  }
}

TEST_F(DequantGpu, BindRejectsHostTensors) {
  std::mt19937_64 rng(fresh_seed());
  const PackedWeight p = random_weight(Format::nvfp4, 64, 128, rng);
  DeviceWeight w(p);
  DeviceBuffer out(64 * 128 * 2);
  const TensorView out_view(out.get(), DType::bf16, {64, 128}, this_device());
  const dequant::Plan plan = dequant::plan({Format::nvfp4, 64, 128, DType::bf16});
  // Host copies of everything: the weight is reported first.
  expect_bad_argument([&] { dequant::bind(plan, Scratch{}, p.view(), out_view); }, "weight");
  {  // device weight, host block scales
    WeightView v = w.view;
    v.scale = p.scale.view();
    expect_bad_argument([&] { dequant::bind(plan, Scratch{}, v, out_view); }, "weight_scale");
  }
  {  // device weight, host output
    HostTensor host_out(DType::bf16, {64, 128});
    expect_bad_argument([&] { dequant::bind(plan, Scratch{}, w.view, host_out.view()); }, "out");
  }
  EXPECT_NO_THROW(dequant::bind(plan, Scratch{}, w.view, out_view));
}

TEST_F(DequantGpu, GraphCaptureAfterPrewarmReplaysChangedInputsWithoutCompiling) {
  std::mt19937_64 rng(fresh_seed());
  cudaStream_t stream;
  B12X_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (Format f : {Format::nvfp4, Format::iq2_xs}) {
    const PackedWeight p = random_weight(f, 1000, 2048, rng);
    PackedWeight p2 = random_weight(f, 1000, 2048, rng);
    p2.scale2 = p.scale2;  // tensor scales are launch arguments: captured by value in the graph
    DeviceWeight w(p);
    const size_t out_bytes = 1000 * 2048 * 2;
    DeviceBuffer out(out_bytes);
    // Warm up through prewarm (what a server does), then plan and bind outside capture.
    prewarm({{"dequantize", std::string(format_info(f).name), 1000, 2048, {1, 8}, "bf16"}});
    const uint64_t misses = compile_cache_info().misses;
    const dequant::Plan plan = dequant::plan({f, 1000, 2048, DType::bf16}, stream);
    const dequant::Binding b =
        dequant::bind(plan, Scratch{}, w.view, TensorView(out.get(), DType::bf16, {1000, 2048}, this_device()));
    EXPECT_EQ(compile_cache_info().misses, misses) << "plan after prewarm must not compile";

    cudaGraph_t graph;
    B12X_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    dequant::run(b, stream);
    B12X_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec;
    B12X_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 2; ++replay) {
      const PackedWeight& current = replay == 0 ? p : p2;
      if (replay == 1) {  // new weight bytes in the same buffers: the replay must follow them
        w.data.upload(p2.data.view().data, p2.data.nbytes());
        if (!p2.scale.view().empty()) w.scale.upload(p2.scale.view().data, p2.scale.nbytes());
      }
      B12X_CUDA_CHECK(cudaMemsetAsync(out.get(), 0xFF, out_bytes, stream));
      B12X_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      B12X_CUDA_CHECK(cudaStreamSynchronize(stream));
      expect_matches_host(current, DType::bf16, out.download(out_bytes), false,
                          shape_label(current) + " graph replay " + std::to_string(replay));
    }
    EXPECT_EQ(compile_cache_info().misses, misses);
    B12X_CUDA_CHECK(cudaGraphExecDestroy(exec));
    B12X_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  B12X_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace b12x
