// Library baselines measured in the same process: device-to-device copy bandwidth, cuBLAS BF16 and
// cuBLASLt FP8 GEMMs. The 8192^3 GEMMs and the 2 GiB copy are the run's ceilings (the "% of copy
// bandwidth" and "% of BF16 peak" columns); the linear-shaped calls are the ratio column of the
// linear benchmarks. Every library call is checked (CudaError naming the call and status).
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench/harness.h"
#include "bench/report.h"
#include "bench/shape.h"

namespace b12x::bench {

class Context;

[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);

#define B12X_CUBLAS_CHECK(call)                                                                      \
  do {                                                                                               \
    const cublasStatus_t b12x_status_ = (call);                                                      \
    if (b12x_status_ != CUBLAS_STATUS_SUCCESS)                                                       \
      ::b12x::bench::throw_cublas_error(b12x_status_, #call, __FILE__, __LINE__);                    \
  } while (0)

// cuBLAS and cuBLASLt handles bound to one stream, each with its own preallocated workspace, so
// their calls allocate nothing and can be captured in CUDA graphs.
class Blas {
 public:
  explicit Blas(cudaStream_t stream);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  cublasLtHandle_t lt() const { return lt_; }
  void* lt_workspace() const { return lt_workspace_.get(); }
  size_t lt_workspace_bytes() const { return lt_workspace_.bytes(); }
  const float* device_one() const { return static_cast<const float*>(one_.get()); }  // FP8 unit scales

 private:
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  DeviceBuffer cublas_workspace_, lt_workspace_, one_;
};

// y[M, N] = x[M, K] . W[N, K]^T with row-major BF16 tensors, FP32 accumulation, BF16 output.
// cuBLAS is column-major, where a row-major [R, C] tensor reads as its transpose, so this is
// y^T[N, M] = W . x^T: cublasGemmEx(op(A) = T on W (ld K), op(B) = N on x (ld K), C = y (ld N)).
void cublas_linear_bf16(const Blas& blas, const void* x, const void* w, void* y, const Shape& s, cudaStream_t stream);
std::string cublas_linear_bf16_path();

// The same product with FP8 E4M3 x and W through cuBLASLt, in the TN layout FP8 requires (W is the
// transposed A, x the non-transposed B, exactly as above), A/B scale pointers = 1.0, FP32
// accumulation with fast accumulation off, BF16 output. Made once (heuristic query), run many times.
class LtFp8Linear {
 public:
  LtFp8Linear(const Blas& blas, const Shape& s);  // Unsupported when cuBLASLt has no algorithm
  ~LtFp8Linear();
  LtFp8Linear(const LtFp8Linear&) = delete;
  LtFp8Linear& operator=(const LtFp8Linear&) = delete;
  void run(const void* x, const void* w, void* y, cudaStream_t stream) const;
  const std::string& path() const { return path_; }

 private:
  void release();

  const Blas& blas_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulHeuristicResult_t algo_{};
  std::string path_;
};

// Random finite, non-zero test data (never zeros: they hide unwritten outputs and run faster),
// deterministic for a seed. BF16 magnitudes in [2^-7, 1), E4M3 magnitudes in [2^-3, 3.75].
std::vector<uint16_t> random_bf16(size_t n, uint64_t seed);
std::vector<uint8_t> random_e4m3(size_t n, uint64_t seed);

// Measured runs, checked first: each fills check/detail/path/time/bytes/flops of a Result.
// copy: cudaMemcpyAsync of `bytes` device to device (bytes moved = 2 x bytes).
void bench_copy(Context& ctx, size_t bytes, Result& r);
// cuBLAS BF16 / cuBLASLt FP8 y = x . W^T on random data; the check compares sampled outputs with a
// float64 host dot product (relative L2 error <= 1e-2) after every output element was written.
void bench_cublas_bf16(Context& ctx, const Shape& s, Result& r);
void bench_cublaslt_fp8(Context& ctx, const Shape& s, Result& r);

}  // namespace b12x::bench
