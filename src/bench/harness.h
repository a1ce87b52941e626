// Measuring one callable on a CUDA stream: warm-up, then R repetitions each timed by its own pair of
// CUDA events around ONE call, with the L2 flushed before each timed call (outside the events), all
// events read after a single synchronize at the end; or (L2Flush::rotate) back-to-back calls over
// copies of the operands, one event between consecutive calls. Optionally each call is captured once
// into a CUDA graph and the graph launches are timed instead. Plus the small RAII helpers the bench
// cases share.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/stats.h"

namespace b12x::bench {

// cudaMalloc'd device memory, freed on destruction. Every CUDA call is checked (CudaError).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;

  void* get() const { return p_; }
  size_t bytes() const { return bytes_; }
  // Both synchronous. download does not wait for the bench stream (it is non-blocking): synchronize
  // that stream first.
  void upload(const void* src, size_t n, size_t offset = 0);
  void download(void* dst, size_t n, size_t offset = 0) const;
  void fill(int byte);                                                // synchronous memset of all bytes

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// A fresh 64-bit seed from std::random_device (cases print it with their check).
uint64_t random_seed();

// Fills [0, total) of a device buffer by repeating its first `pattern` bytes (already written), with
// doubling device-to-device copies. total must be a multiple of pattern. Synchronous.
void replicate_prefix(void* dst, size_t pattern, size_t total);

// `copies` buffers of `bytes`, each the host `pattern` (pattern_bytes, dividing bytes) repeated: the
// weights of a case, one per operand copy it is timed over (Timer::rotation_copies). Synchronous.
std::vector<DeviceBuffer> repeated_copies(const void* pattern, size_t pattern_bytes, size_t bytes, int copies);

// A non-blocking stream (graph capture needs one that is not the legacy default stream).
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

// How each timed call finds a cold L2:
//  write:  a memset of 2x L2 before the call (outside the events). Cheap, but it leaves the L2 full of
//          dirty lines, and their write-back to DRAM lands in the timed call (up to L2-size bytes of
//          extra DRAM writes).
//  clean:  a read of 2x L2 (cuBLAS Sasum) before the call, which evicts the previous lines outside
//          the events and leaves clean ones: the timed call pays only for its own traffic, as in a
//          model where the L2 mostly holds the (clean) weights of earlier layers.
//  rotate: the default. No flush: the case binds rotation_copies() copies of its operands and the
//          calls run back to back, each on the next copy, one event between consecutive calls:
//          between two uses of a copy the other copies stream at least 2x L2 through the cache. A
//          sample is one call including its launch gap, overlapped with the previous call as in a
//          model's layer sequence (issue 4's "back-to-back calls, weights rotated"). Cases that bind
//          one copy (time(const Call&)) fall back to the clean flush; TimeStats::timing says which.
enum class L2Flush { write, clean, rotate };

// (rotation_copies(bytes, l2_bytes), the copy count, is in stats.h: host arithmetic.)

struct TimerOptions {
  int warmup = 10;     // untimed calls first (module loads, library heuristics, clocks ramping up)
  int iters = 50;      // timed repetitions
  bool graph = false;  // time CUDA-graph launches of the captured call instead of direct calls
  L2Flush flush = L2Flush::rotate;
};

const char* l2_flush_name(L2Flush f);

using Call = std::function<void(cudaStream_t)>;

class Timer {
 public:
  // Allocates the L2 flush buffer: 2x the device's L2 (and, for a clean flush, a cuBLAS handle).
  Timer(cudaStream_t stream, TimerOptions options);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Times `call`; it must only enqueue work on the stream it is given (no synchronize), so it can
  // be captured. Throws CudaError on any failed CUDA call, including an error the call left behind.
  TimeStats time(const Call& call);
  // The same call on each copy of its operands (rotation_copies() of them, built by the case). With
  // L2Flush::rotate and two or more calls: back to back, cycling; otherwise calls[0] as above.
  TimeStats time(const std::vector<Call>& calls);
  // How many operand copies a case of `bytes` per call should bind: 1 unless rotating.
  int rotation_copies(size_t bytes) const;

  const TimerOptions& options() const { return o_; }
  cudaStream_t stream() const { return stream_; }
  size_t flush_bytes() const { return flush_.bytes(); }
  std::string mode() const { return o_.graph ? "graph" : "events"; }
  std::string method() const;  // one sentence for the report header

 private:
  void flush_l2();  // enqueues the flush on stream_
  L2Flush flush_mode() const { return o_.flush == L2Flush::rotate ? L2Flush::clean : o_.flush; }
  TimeStats time_flushed(const Call& call);
  TimeStats time_rotated(const std::vector<Call>& calls);

  cudaStream_t stream_;
  TimerOptions o_;
  DeviceBuffer flush_;
  DeviceBuffer flush_sum_;  // clean flush: Sasum's result (device pointer mode, so no synchronize)
  void* cublas_ = nullptr;  // clean flush: a cublasHandle_t bound to stream_
  unsigned flush_count_ = 0;
};

}  // namespace b12x::bench
