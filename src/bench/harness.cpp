#include "bench/harness.h"

#include <cublas_v2.h>

#include <algorithm>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "b12x/core/error.h"
#include "bench/baselines.h"  // B12X_CUBLAS_CHECK
#include "b12x/runtime/device.h"
#include "runtime/cuda_api.h"

namespace b12x::bench {

// ---------------------------------------------------------------------------------------------
// DeviceBuffer, Stream

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes_ == 0) return;
  const cudaError_t e = cudaMalloc(&p_, bytes_);
  if (e != cudaSuccess) {
    cudaGetLastError();  // allocation failures are not sticky; clear so later calls are not blamed
    throw CudaError(b12x::detail::concat("cudaMalloc of ", bytes_, " bytes failed: ", cudaGetErrorName(e), " (",
                                   cudaGetErrorString(e), ")"));
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (p_) cudaFree(p_);  // nothing useful to do with an error in a destructor
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  std::swap(p_, o.p_);
  std::swap(bytes_, o.bytes_);
  return *this;
}

void DeviceBuffer::upload(const void* src, size_t n, size_t offset) {
  if (offset + n > bytes_)
    throw Error(b12x::detail::concat("upload of ", n, " bytes at ", offset, " overruns a ", bytes_, "-byte buffer"));
  B12X_CUDA_CHECK(cudaMemcpy(static_cast<char*>(p_) + offset, src, n, cudaMemcpyHostToDevice));
  // A pageable upload may return before its DMA lands, and the bench stream is non-blocking (not
  // ordered after the legacy stream): wait, so the next launch on any stream sees the data.
  B12X_CUDA_CHECK(cudaDeviceSynchronize());
}

void DeviceBuffer::download(void* dst, size_t n, size_t offset) const {
  if (offset + n > bytes_)
    throw Error(b12x::detail::concat("download of ", n, " bytes at ", offset, " overruns a ", bytes_, "-byte buffer"));
  B12X_CUDA_CHECK(cudaMemcpy(dst, static_cast<const char*>(p_) + offset, n, cudaMemcpyDeviceToHost));
}

uint64_t random_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) | rd();
}

void DeviceBuffer::fill(int byte) {
  if (bytes_ == 0) return;
  B12X_CUDA_CHECK(cudaMemset(p_, byte, bytes_));
  B12X_CUDA_CHECK(cudaDeviceSynchronize());
}

void replicate_prefix(void* dst, size_t pattern, size_t total) {
  if (pattern == 0 || total % pattern != 0)
    throw Error(b12x::detail::concat("replicate_prefix: total ", total, " is not a multiple of the pattern ", pattern));
  char* base = static_cast<char*>(dst);
  for (size_t filled = pattern; filled < total;) {
    const size_t n = std::min(filled, total - filled);
    B12X_CUDA_CHECK(cudaMemcpy(base + filled, base, n, cudaMemcpyDeviceToDevice));
    filled += n;
  }
  B12X_CUDA_CHECK(cudaDeviceSynchronize());
}

std::vector<DeviceBuffer> repeated_copies(const void* pattern, size_t pattern_bytes, size_t bytes, int copies) {
  std::vector<DeviceBuffer> out;
  for (int c = 0; c < copies; ++c) {
    out.emplace_back(bytes);
    out.back().upload(pattern, pattern_bytes);
    replicate_prefix(out.back().get(), pattern_bytes, bytes);
  }
  return out;
}

Stream::Stream() { B12X_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
Stream::~Stream() {
  if (s_) cudaStreamDestroy(s_);
}

// ---------------------------------------------------------------------------------------------
// Timer

namespace {

class Events {
 public:
  explicit Events(size_t n) : e_(n, nullptr) {
    for (auto& e : e_) B12X_CUDA_CHECK(cudaEventCreate(&e));
  }
  ~Events() {
    for (auto e : e_)
      if (e) cudaEventDestroy(e);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  cudaEvent_t operator[](size_t i) const { return e_[i]; }

 private:
  std::vector<cudaEvent_t> e_;
};

// A call captured once into an instantiated graph.
class CapturedGraph {
 public:
  CapturedGraph(const Call& call, cudaStream_t stream) {
    B12X_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      call(stream);
    } catch (...) {
      cudaGraph_t broken = nullptr;
      cudaStreamEndCapture(stream, &broken);  // leave the stream usable; the original error matters
      if (broken) cudaGraphDestroy(broken);
      cudaGetLastError();
      throw;
    }
    B12X_CUDA_CHECK(cudaStreamEndCapture(stream, &graph_));
    B12X_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
    B12X_CUDA_CHECK(cudaGraphUpload(exec_, stream));
  }
  ~CapturedGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  void launch(cudaStream_t stream) const { B12X_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

size_t flush_size() {
  const size_t l2 = device_info().l2_bytes;
  return l2 > 0 ? 2 * l2 : size_t{256} << 20;  // 2x L2; 256 MiB if the runtime reports none
}

}  // namespace

const char* l2_flush_name(L2Flush f) {
  return f == L2Flush::clean ? "clean" : f == L2Flush::rotate ? "rotate" : "write";
}

Timer::Timer(cudaStream_t stream, TimerOptions options) : stream_(stream), o_(options), flush_(flush_size()) {
  if (o_.iters < 1) fail_arg("--iters", "must be at least 1, got ", o_.iters);
  if (o_.warmup < 0) fail_arg("--warmup", "must be 0 or more, got ", o_.warmup);
  if (flush_mode() == L2Flush::clean) {  // rotate falls back to it for cases with one operand copy
    flush_.fill(0);  // finite floats for Sasum
    flush_sum_ = DeviceBuffer(sizeof(float));
    cublasHandle_t h = nullptr;
    B12X_CUBLAS_CHECK(cublasCreate(&h));
    cublas_ = h;
    B12X_CUBLAS_CHECK(cublasSetStream(h, stream_));
    B12X_CUBLAS_CHECK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE));
  }
}

Timer::~Timer() {
  if (cublas_) cublasDestroy(static_cast<cublasHandle_t>(cublas_));
}

void Timer::flush_l2() {
  if (flush_mode() == L2Flush::clean) {
    // A read of 2x L2: the previous lines (dirty ones written back now, outside the events) make
    // way for clean ones.
    const int64_t n = static_cast<int64_t>(flush_.bytes() / sizeof(float));
    B12X_CUBLAS_CHECK(cublasSasum_64(static_cast<cublasHandle_t>(cublas_), n, static_cast<const float*>(flush_.get()), 1,
                                     static_cast<float*>(flush_sum_.get())));
  } else {
    // A write of 2x L2 (alternating bytes, so no write is ever a no-op).
    B12X_CUDA_CHECK(cudaMemsetAsync(flush_.get(), (flush_count_++ & 1) ? 0xA5 : 0x5A, flush_.bytes(), stream_));
  }
}

int Timer::rotation_copies(size_t bytes) const {
  return o_.flush == L2Flush::rotate ? bench::rotation_copies(bytes, flush_.bytes() / 2) : 1;
}

TimeStats Timer::time(const Call& call) { return time_flushed(call); }

TimeStats Timer::time(const std::vector<Call>& calls) {
  if (calls.empty()) throw Error("Timer::time: no call to time");
  if (o_.flush == L2Flush::rotate && calls.size() >= 2) return time_rotated(calls);
  return time_flushed(calls.front());
}

TimeStats Timer::time_flushed(const Call& call) {
  // Warm-up. In graph mode one direct call always comes first, so lazy module loading and library
  // initialisation never happen during capture.
  const int direct = o_.graph ? 1 : o_.warmup;
  for (int i = 0; i < direct; ++i) call(stream_);
  B12X_CUDA_CHECK(cudaGetLastError());
  B12X_CUDA_CHECK(cudaStreamSynchronize(stream_));

  std::unique_ptr<CapturedGraph> graph;
  if (o_.graph) {
    graph = std::make_unique<CapturedGraph>(call, stream_);
    for (int i = 0; i < o_.warmup; ++i) graph->launch(stream_);
    B12X_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  const size_t n = static_cast<size_t>(o_.iters);
  Events start(n), stop(n);
  for (size_t i = 0; i < n; ++i) {
    // Evict the previous call's data from L2, ordered before the start event.
    flush_l2();
    B12X_CUDA_CHECK(cudaEventRecord(start[i], stream_));
    if (graph) graph->launch(stream_);
    else call(stream_);
    B12X_CUDA_CHECK(cudaEventRecord(stop[i], stream_));
  }
  B12X_CUDA_CHECK(cudaGetLastError());
  B12X_CUDA_CHECK(cudaEventSynchronize(stop[n - 1]));  // one synchronize for all repetitions
  B12X_CUDA_CHECK(cudaStreamSynchronize(stream_));     // surfaces asynchronous kernel faults

  std::vector<double> samples(n);
  for (size_t i = 0; i < n; ++i) {
    float ms = 0;
    B12X_CUDA_CHECK(cudaEventElapsedTime(&ms, start[i], stop[i]));
    samples[i] = static_cast<double>(ms) * 1000.0;
  }
  TimeStats t = summarize(std::move(samples));
  t.timing = l2_flush_name(flush_mode());
  return t;
}

TimeStats Timer::time_rotated(const std::vector<Call>& calls) {
  const size_t copies = calls.size();
  // Warm-up: every copy at least once (the first direct, as above, before any capture).
  const size_t warm = std::max(copies, static_cast<size_t>(o_.warmup));
  for (size_t i = 0; i < (o_.graph ? copies : warm); ++i) calls[i % copies](stream_);
  B12X_CUDA_CHECK(cudaGetLastError());
  B12X_CUDA_CHECK(cudaStreamSynchronize(stream_));

  std::vector<std::unique_ptr<CapturedGraph>> graphs;
  if (o_.graph) {
    for (const Call& c : calls) graphs.push_back(std::make_unique<CapturedGraph>(c, stream_));
    for (size_t i = 0; i < warm; ++i) graphs[i % copies]->launch(stream_);
    B12X_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  // iters calls back to back, continuing the cycle where the warm-up left it (so the first timed
  // call's copy is the least recently used), an event before each call and after the last.
  const size_t n = static_cast<size_t>(o_.iters);
  Events marks(n + 1);
  B12X_CUDA_CHECK(cudaEventRecord(marks[0], stream_));
  for (size_t i = 0; i < n; ++i) {
    const size_t c = (warm + i) % copies;
    if (o_.graph) graphs[c]->launch(stream_);
    else calls[c](stream_);
    B12X_CUDA_CHECK(cudaEventRecord(marks[i + 1], stream_));
  }
  B12X_CUDA_CHECK(cudaGetLastError());
  B12X_CUDA_CHECK(cudaEventSynchronize(marks[n]));
  B12X_CUDA_CHECK(cudaStreamSynchronize(stream_));

  std::vector<double> samples(n);
  for (size_t i = 0; i < n; ++i) {
    float ms = 0;
    B12X_CUDA_CHECK(cudaEventElapsedTime(&ms, marks[i], marks[i + 1]));
    samples[i] = static_cast<double>(ms) * 1000.0;
  }
  TimeStats t = summarize(std::move(samples));
  t.timing = "rotate x" + std::to_string(copies);
  return t;
}

std::string Timer::method() const {
  const std::string flush = std::to_string(flush_.bytes() >> 20);
  return b12x::detail::concat(
      o_.graph ? "CUDA-graph replay (the call captured once, each repetition one graph launch; the copy "
                 "ceiling is still timed with direct launches)"
               : "direct launches",
      o_.flush == L2Flush::rotate
          ? b12x::detail::concat(
                "; rotated operands: ", o_.iters, " calls back to back after ", o_.warmup,
                " warm-up calls, each on the next of the case's operand copies (enough that the others stream ",
                flush, " MiB, 2x L2, between two uses of one), a CUDA event between consecutive calls, median (and "
                "min, p10, p90) of the per-call times; cases with one operand copy (timing column 'clean') are "
                "timed as with --l2-flush clean instead")
          : b12x::detail::concat(
                "; CUDA events around each single call, median (and min, p10, p90) of ", o_.iters,
                " repetitions after ", o_.warmup, " warm-up calls; L2 flushed before every timed call (",
                o_.flush == L2Flush::clean ? "clean: a read of " + flush + " MiB, 2x L2, by cuBLAS Sasum, leaving clean lines"
                                           : "write: a " + flush + " MiB memset, 2x L2, leaving dirty lines",
                ", outside the events)"),
      "; all events read after one final synchronize");
}

}  // namespace b12x::bench
