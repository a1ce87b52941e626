// Runtime on a real GPU: load and launch, timing logs, CUDA-graph capture after warm-up compiles
// nothing, and resolution misses during capture or after freeze throw. Label `gpu`.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/runtime/cache.h"
#include "b12x/runtime/device.h"
#include "b12x/runtime/freeze.h"
#include "b12x/runtime/jit.h"
#include "runtime/cuda_api.h"
#include "runtime/selftest.h"
#include "support/device.h"

namespace b12x {
namespace {

// Every launch in this binary is timed: results must not change and the log must appear.
const int kTimingOn = (::setenv("B12X_TIMING", "1", 1), ::setenv("B12X_DISABLE_DISK_CACHE", "1", 1), 0);

using test::DeviceBuffer;

// n floats of device memory.
DeviceBuffer device_floats(long long n) { return DeviceBuffer(static_cast<size_t>(n) * sizeof(float)); }
float* floats(const DeviceBuffer& b) { return static_cast<float*>(b.get()); }

std::vector<float> run_selftest(const Kernel& k, cudaStream_t stream, long long n, float a, float b, float* out) {
  void* args[] = {&out, &n, &a, &b};
  k.launch(dim3(static_cast<unsigned>((n + 255) / 256)), dim3(256), 0, stream, args);
  B12X_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> host(n);
  B12X_CUDA_CHECK(cudaMemcpy(host.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

void expect_affine(const std::vector<float>& v, float a, float b) {
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], a * static_cast<float>(i) + b) << "at " << i;
}

TEST(RuntimeGpu, DeviceInfoIsHopper) {
  ASSERT_TRUE(cuda_available());
  const DeviceInfo& d = device_info();
  EXPECT_EQ(d.arch, "sm_90a") << d.name;
  EXPECT_GT(d.sm_count, 100);
  EXPECT_GT(d.smem_per_block_optin, 200u * 1024);
}

TEST(RuntimeGpu, LoadLaunchAndTimingLog) {
  ASSERT_EQ(kTimingOn, 0);
  const Kernel& k = resolve_kernel(detail::selftest_spec(256));
  const long long n = 100003;
  DeviceBuffer out = device_floats(n);
  B12X_CUDA_CHECK(cudaMemset(floats(out), 0xFF, n * sizeof(float)));  // NaN poison
  testing::internal::CaptureStderr();
  const auto v = run_selftest(k, nullptr, n, 0.5f, -3.0f, floats(out));
  const std::string log = testing::internal::GetCapturedStderr();
  expect_affine(v, 0.5f, -3.0f);
  EXPECT_NE(log.find("[b12x] timing runtime.selftest"), std::string::npos) << log;
  EXPECT_EQ(&k, &resolve_kernel(detail::selftest_spec(256)));  // memory hit returns the same kernel
}

TEST(RuntimeGpu, CaptureAfterWarmupCompilesNothingAndReplays) {
  cudaStream_t stream;
  B12X_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const Kernel& k = resolve_kernel(detail::selftest_spec(256), stream);  // "plan": outside capture
  const auto before = compile_cache_info();
  const long long n = 4096;
  DeviceBuffer out = device_floats(n);
  float* out_p = floats(out);
  float a = 2.0f, b = 1.0f;
  void* args[] = {&out_p, const_cast<long long*>(&n), &a, &b};

  cudaGraph_t graph;
  B12X_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  resolve_kernel(detail::selftest_spec(256), stream);  // a hit during capture is fine
  k.launch(dim3(n / 256), dim3(256), 0, stream, args);
  B12X_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  B12X_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  B12X_CUDA_CHECK(cudaMemsetAsync(floats(out), 0xFF, n * sizeof(float), stream));
  B12X_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  B12X_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> v(n);
  B12X_CUDA_CHECK(cudaMemcpy(v.data(), floats(out), n * sizeof(float), cudaMemcpyDeviceToHost));
  expect_affine(v, 2.0f, 1.0f);
  const auto after = compile_cache_info();
  EXPECT_EQ(after.misses, before.misses);
  EXPECT_EQ(after.disk_hits, before.disk_hits);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(RuntimeGpu, MissDuringCaptureOrAfterFreezeThrows) {
  cudaStream_t stream;
  B12X_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto before = compile_cache_info().misses;

  cudaGraph_t graph;
  B12X_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  EXPECT_THROW(resolve_kernel(detail::selftest_spec(64), stream), KernelResolutionFrozenError);
  B12X_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphDestroy(graph);

  freeze_kernel_resolution("serving");
  B12X_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    resolve_kernel(detail::selftest_spec(32), stream);
    ADD_FAILURE() << "frozen miss during capture must throw";
  } catch (const KernelResolutionFrozenError& e) {
    EXPECT_NE(std::string(e.what()).find("serving"), std::string::npos) << e.what();
  }
  B12X_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphDestroy(graph);
  EXPECT_THROW(resolve_kernel(detail::selftest_spec(32)), KernelResolutionFrozenError);  // no capture
  EXPECT_NO_THROW(resolve_kernel(detail::selftest_spec(256)));                           // warm: fine
  unfreeze_kernel_resolution();
  EXPECT_EQ(compile_cache_info().misses, before);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace b12x
