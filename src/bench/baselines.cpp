#include "bench/baselines.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>

#include "b12x/core/error.h"
#include "b12x/formats/scalar.h"
#include "bench/suite.h"
#include "runtime/cuda_api.h"

namespace b12x::bench {

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw CudaError(b12x::detail::concat(call, " failed: ", cublasGetStatusName(status), " (",
                                       cublasGetStatusString(status), ") at ", file, ":", line));
}

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // what cuBLAS recommends for Hopper
constexpr double kLinearTolerance = 1e-2;             // relative L2 error of sampled outputs
constexpr int kSamples = 256;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int as_int(int64_t v, const char* what) {
  B12X_CHECK_ARG(v > 0 && v <= INT32_MAX, what, "must be in [1, 2^31), got ", v);
  return static_cast<int>(v);
}

void check_stream(cudaStream_t bound, cudaStream_t stream) {
  // cublasSetStream would reset the workspace to cuBLAS's own pool (allocations, not capturable),
  // so the handles stay on the stream they were made for.
  B12X_CHECK_ARG(stream == bound, "stream", "cuBLAS handles are bound to the bench context's stream");
}

// One descriptive attribute of the chosen algorithm for the path column, "?" when cuBLASLt does not
// report it: the description is informational and must not cost the measurement.
template <class T>
std::string algo_attr(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  size_t written = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof v, &written);
  return st == CUBLAS_STATUS_SUCCESS ? std::to_string(v) : std::string("?");
}

bool bf16_finite(uint16_t b) { return (b & 0x7F80u) != 0x7F80u; }

// Checks y ([M, N] BF16 on the device, filled with NaN before the one call) against float64 dot
// products of sampled (row, column) pairs; every element must be written and finite.
template <class T, class Decode>
void check_linear(const std::vector<T>& x, const std::vector<T>& w, const DeviceBuffer& y, const Shape& s,
                  Decode decode, uint64_t seed, Result& r) {
  std::vector<uint16_t> yh(static_cast<size_t>(s.m * s.n));
  y.download(yh.data(), yh.size() * sizeof(uint16_t));
  size_t bad = 0;
  for (uint16_t b : yh) bad += !bf16_finite(b);
  std::vector<double> got, ref;
  uint64_t state = seed ^ 0x5EEDull;
  for (int t = 0; t < kSamples; ++t) {
    // Corners first (index arithmetic errors show there), then random positions.
    const int64_t i = t == 0 ? 0 : t == 1 ? s.m - 1 : static_cast<int64_t>(splitmix64(state) % s.m);
    const int64_t j = t == 0 ? 0 : t == 1 ? s.n - 1 : static_cast<int64_t>(splitmix64(state) % s.n);
    double dot = 0;
    for (int64_t k = 0; k < s.k; ++k)
      dot += static_cast<double>(decode(x[i * s.k + k])) * static_cast<double>(decode(w[j * s.k + k]));
    ref.push_back(dot);
    got.push_back(bf16_to_f32(yh[i * s.n + j]));
  }
  const double err = relative_l2_error(got, ref);
  r.check = bad == 0 && err <= kLinearTolerance ? Check::pass : Check::fail;
  r.check_detail = b12x::detail::concat(kSamples, " sampled outputs vs float64 host dot products: relative L2 error ",
                                        fmt(err, 6), " (limit ", kLinearTolerance, "); ", bad, " of ", yh.size(),
                                        " outputs unwritten or non-finite; seed ", seed);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Handles

Blas::Blas(cudaStream_t stream)
    : stream_(stream), cublas_workspace_(kWorkspaceBytes), lt_workspace_(kWorkspaceBytes), one_(sizeof(float)) {
  const float one = 1.0f;
  one_.upload(&one, sizeof one);
  try {
    B12X_CUBLAS_CHECK(cublasCreate(&cublas_));
    B12X_CUBLAS_CHECK(cublasSetStream(cublas_, stream));
    B12X_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_.get(), cublas_workspace_.bytes()));
    B12X_CUBLAS_CHECK(cublasLtCreate(&lt_));
  } catch (...) {
    if (cublas_) cublasDestroy(cublas_);
    throw;
  }
}

Blas::~Blas() {
  if (lt_) cublasLtDestroy(lt_);
  if (cublas_) cublasDestroy(cublas_);
}

// ---------------------------------------------------------------------------------------------
// GEMMs

void cublas_linear_bf16(const Blas& blas, const void* x, const void* w, void* y, const Shape& s, cudaStream_t stream) {
  check_stream(blas.stream(), stream);
  const int m = as_int(s.m, "M"), n = as_int(s.n, "N"), k = as_int(s.k, "K");
  const float alpha = 1.0f, beta = 0.0f;
  B12X_CUBLAS_CHECK(cublasGemmEx(blas.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, CUDA_R_16BF, k, x,
                                 CUDA_R_16BF, k, &beta, y, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

std::string cublas_linear_bf16_path() {
  return "cublasGemmEx BF16 TN (y^T = W . x^T), FP32 accumulate, BF16 out, CUBLAS_GEMM_DEFAULT";
}

LtFp8Linear::LtFp8Linear(const Blas& blas, const Shape& s) : blas_(blas) {
  const int m = as_int(s.m, "M"), n = as_int(s.n, "N"), k = as_int(s.k, "K");
  cublasLtMatmulPreference_t pref = nullptr;
  try {
    B12X_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    B12X_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    B12X_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    const void* one = blas.device_one();  // FP32 scales (the compute type), device pointers
    B12X_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &one, sizeof one));
    B12X_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &one, sizeof one));
    const int8_t fast_accum = 0;  // keep FP32 promotion of the partial sums
    B12X_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum, sizeof fast_accum));
    // Column-major views of the row-major tensors: W [N, K] is A = K x N (ld K, transposed), x [M, K]
    // is B = K x M (ld K), y [M, N] is D = N x M (ld N).
    B12X_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_, CUDA_R_8F_E4M3, k, n, k));
    B12X_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b_, CUDA_R_8F_E4M3, k, m, k));
    B12X_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c_, CUDA_R_16BF, n, m, n));
    B12X_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = blas.lt_workspace_bytes();
    B12X_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    int found = 0;
    B12X_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(blas.lt(), desc_, a_, b_, c_, c_, pref, 1, &algo_, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    pref = nullptr;
    if (found == 0 || algo_.state != CUBLAS_STATUS_SUCCESS)
      fail_unsupported("cuBLASLt has no FP8 E4M3 TN algorithm for ", s.str(),
                       " (FP8 needs K a multiple of 16 and 16-byte aligned rows)");
    path_ = b12x::detail::concat(
        "cublasLtMatmul E4M3 TN, unit A/B scales, FP32 accumulate (fast-accum off), BF16 out; algo ",
        algo_attr<int32_t>(algo_.algo, CUBLASLT_ALGO_CONFIG_ID), " tile ",
        algo_attr<uint32_t>(algo_.algo, CUBLASLT_ALGO_CONFIG_TILE_ID), " stages ",
        algo_attr<uint32_t>(algo_.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID), " split-k ",
        algo_attr<int32_t>(algo_.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM));
  } catch (...) {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    release();
    throw;
  }
}

LtFp8Linear::~LtFp8Linear() { release(); }

void LtFp8Linear::release() {  // cleanup: there is nothing useful to do with a failed destroy
  if (c_) cublasLtMatrixLayoutDestroy(c_);
  if (b_) cublasLtMatrixLayoutDestroy(b_);
  if (a_) cublasLtMatrixLayoutDestroy(a_);
  if (desc_) cublasLtMatmulDescDestroy(desc_);
}

void LtFp8Linear::run(const void* x, const void* w, void* y, cudaStream_t stream) const {
  const float alpha = 1.0f, beta = 0.0f;
  B12X_CUBLAS_CHECK(cublasLtMatmul(blas_.lt(), desc_, &alpha, w, a_, x, b_, &beta, y, c_, y, c_, &algo_.algo,
                                   blas_.lt_workspace(), blas_.lt_workspace_bytes(), stream));
}

// ---------------------------------------------------------------------------------------------
// Test data

std::vector<uint16_t> random_bf16(size_t n, uint64_t seed) {
  std::vector<uint16_t> v(n);
  uint64_t state = seed;
  for (size_t i = 0; i < n; i += 4) {
    uint64_t bits = splitmix64(state);
    for (size_t j = i; j < std::min(n, i + 4); ++j, bits >>= 16) {
      const uint16_t r = static_cast<uint16_t>(bits);
      const uint16_t exponent = 120 + ((r >> 7) & 0xFF) % 7;  // 2^-7 .. 2^-1
      v[j] = static_cast<uint16_t>((r & 0x8000u) | (exponent << 7) | (r & 0x7Fu));
    }
  }
  return v;
}

std::vector<uint8_t> random_e4m3(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  uint64_t state = seed;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t bits = splitmix64(state);
    for (size_t j = i; j < std::min(n, i + 8); ++j, bits >>= 8) {
      const uint8_t r = static_cast<uint8_t>(bits);
      const uint8_t exponent = 4 + ((r >> 3) & 0xF) % 5;  // 2^-3 .. 2^1: never the NaN code 0x7F
      v[j] = static_cast<uint8_t>((r & 0x80u) | (exponent << 3) | (r & 0x7u));
    }
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// Measured runs

void bench_copy(Context& ctx, size_t bytes, Result& r) {
  r.path = "cudaMemcpyAsync device-to-device";
  r.bytes = 2.0 * static_cast<double>(bytes);  // read + written
  const size_t chunk = std::min<size_t>(bytes, size_t{64} << 20);
  B12X_CHECK_ARG(bytes % chunk == 0, "bytes", "copy size must be a multiple of 64 MiB, got ", bytes);
  const uint64_t seed = random_seed();
  DeviceBuffer src(bytes), dst(bytes);
  {
    std::vector<uint8_t> pattern(chunk);
    uint64_t state = seed;
    for (size_t i = 0; i < chunk; i += 8) {
      const uint64_t v = splitmix64(state);
      std::memcpy(pattern.data() + i, &v, std::min<size_t>(8, chunk - i));
    }
    src.upload(pattern.data(), chunk);
  }
  replicate_prefix(src.get(), chunk, bytes);
  // Mark each replica with its index, so a copy from the wrong offset cannot pass.
  for (uint64_t c = 0; c < bytes / chunk; ++c) src.upload(&c, sizeof c, c * chunk);
  dst.fill(0xFF);

  B12X_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, ctx.stream()));
  B12X_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  size_t compared = 0, wrong = 0;
  const size_t window = 4096;
  std::vector<uint8_t> a(chunk), b(chunk);
  for (size_t off = 0; off < bytes; off += chunk) {  // the head of every replica
    src.download(a.data(), window, off);
    dst.download(b.data(), window, off);
    wrong += std::memcmp(a.data(), b.data(), window) != 0;
    compared += window;
  }
  src.download(a.data(), chunk, bytes - chunk);  // the whole last chunk (catches a short copy)
  dst.download(b.data(), chunk, bytes - chunk);
  wrong += std::memcmp(a.data(), b.data(), chunk) != 0;
  compared += chunk;
  r.check = wrong == 0 ? Check::pass : Check::fail;
  r.check_detail = b12x::detail::concat(compared, " bytes compared (every 64 MiB replica's head and the last 64 MiB), ",
                                        wrong, " windows differ; seed ", seed);
  if (r.check != Check::pass) return;

  r.time = ctx.direct_timer().time([&](cudaStream_t s) {
    B12X_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, s));
  });
}

void bench_cublas_bf16(Context& ctx, const Shape& s, Result& r) {
  r.path = cublas_linear_bf16_path();
  r.flops = 2.0 * s.m * s.n * s.k;
  r.bytes = 2.0 * (s.m * s.k + s.n * s.k + s.m * s.n);
  const uint64_t seed = random_seed();
  const auto xh = random_bf16(s.m * s.k, seed), wh = random_bf16(s.n * s.k, seed + 1);
  DeviceBuffer x(xh.size() * 2), w(wh.size() * 2), y(s.m * s.n * 2);
  x.upload(xh.data(), x.bytes());
  w.upload(wh.data(), w.bytes());
  y.fill(0xFF);  // NaN poison
  Blas& blas = ctx.blas();
  cublas_linear_bf16(blas, x.get(), w.get(), y.get(), s, ctx.stream());
  B12X_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  check_linear(xh, wh, y, s, bf16_to_f32, seed, r);
  if (r.check != Check::pass) return;
  r.time = ctx.timer().time([&](cudaStream_t st) { cublas_linear_bf16(blas, x.get(), w.get(), y.get(), s, st); });
}

void bench_cublaslt_fp8(Context& ctx, const Shape& s, Result& r) {
  r.flops = 2.0 * s.m * s.n * s.k;
  r.bytes = 1.0 * (s.m * s.k + s.n * s.k) + 2.0 * s.m * s.n;
  const LtFp8Linear gemm(ctx.blas(), s);
  r.path = gemm.path();
  const uint64_t seed = random_seed();
  const auto xh = random_e4m3(s.m * s.k, seed), wh = random_e4m3(s.n * s.k, seed + 1);
  DeviceBuffer x(xh.size()), w(wh.size()), y(s.m * s.n * 2);
  x.upload(xh.data(), x.bytes());
  w.upload(wh.data(), w.bytes());
  y.fill(0xFF);
  gemm.run(x.get(), w.get(), y.get(), ctx.stream());
  B12X_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  check_linear(xh, wh, y, s, e4m3_to_f32, seed, r);
  if (r.check != Check::pass) return;
  r.time = ctx.timer().time([&](cudaStream_t st) { gemm.run(x.get(), w.get(), y.get(), st); });
}

// ---------------------------------------------------------------------------------------------
// The "baseline" suite: the three ceilings, then cuBLAS / cuBLASLt at linear shapes.

namespace {

const Shape kPeakShape{8192, 8192, 8192};
const std::vector<Shape> kDefaultLinearShapes = {{16, 28672, 8192}};  // decode: 16 tokens, Llama-70B up-proj

std::vector<Case> baseline_cases(const std::vector<Shape>& shapes) {
  std::vector<Case> cases;
  cases.push_back({"baseline", "copy", "2GiB", Ceiling::copy_bandwidth,
                   [](Context& ctx, Result& r) { bench_copy(ctx, size_t{2} << 30, r); }});
  auto add_gemms = [&](const Shape& s, bool ceiling) {
    cases.push_back({"baseline", "cublas_bf16", s.str(), ceiling ? Ceiling::bf16_peak : Ceiling::none,
                     [s](Context& ctx, Result& r) { bench_cublas_bf16(ctx, s, r); }});
    cases.push_back({"baseline", "cublaslt_fp8", s.str(), ceiling ? Ceiling::fp8_peak : Ceiling::none,
                     [s](Context& ctx, Result& r) { bench_cublaslt_fp8(ctx, s, r); }});
  };
  add_gemms(kPeakShape, true);
  for (const Shape& s : shapes.empty() ? kDefaultLinearShapes : shapes)
    if (!(s == kPeakShape)) add_gemms(s, false);
  return cases;
}

const SuiteRegistrar kBaseline({.name = "baseline",
                                .description = "ceilings measured in this run: 2 GiB device copy, cuBLAS BF16 and "
                                               "cuBLASLt FP8 GEMM at 8192^3; plus both GEMMs at linear shapes",
                                .order = 0,
                                .quick = true,
                                .takes_shapes = true,
                                .shape_use = "M, N, K of y = x . W^T (the 8192^3 ceilings always run)",
                                .cases = baseline_cases});

}  // namespace

}  // namespace b12x::bench
