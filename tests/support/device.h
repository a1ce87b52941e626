// Device memory for the GPU tests (tests/<family>/*_gpu.cpp): one RAII buffer with checked copies,
// and host tensors, packed weights and plan scratch copied to / carved on the current device.
// Header-only (inline). Every CUDA call is checked (B12X_CUDA_CHECK throws CudaError).
#pragma once
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/runtime/device.h"
#include "b12x/runtime/scratch.h"
#include "runtime/cuda_api.h"

namespace b12x::test {

// cudaMalloc'd bytes, freed on destruction; move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes_) B12X_CUDA_CHECK(cudaMalloc(&p_, bytes_));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }

  void* get() const { return p_; }
  char* bytes_at(size_t offset) const { return static_cast<char*>(p_) + offset; }
  size_t bytes() const { return bytes_; }

  // n bytes from the host to [offset, offset + n). Waits for the device afterwards: a pageable upload
  // may return before its DMA lands, and non-blocking streams are not ordered after the legacy
  // stream, so a launch on any stream sees the data.
  void upload(const void* src, size_t n, size_t offset = 0) {
    ASSERT_LE(offset + n, bytes_);
    B12X_CUDA_CHECK(cudaMemcpy(bytes_at(offset), src, n, cudaMemcpyHostToDevice));
    B12X_CUDA_CHECK(cudaDeviceSynchronize());
  }
  // cudaMemset of every byte (legacy stream, asynchronous to the host).
  void fill(int byte) { B12X_CUDA_CHECK(cudaMemset(p_, byte, bytes_)); }
  // [offset, offset + n) to the host (synchronous with the legacy stream; synchronize other streams first).
  std::vector<uint8_t> download(size_t n, size_t offset = 0) const {
    std::vector<uint8_t> host(n);
    B12X_CUDA_CHECK(cudaMemcpy(host.data(), static_cast<const char*>(p_) + offset, n, cudaMemcpyDeviceToHost));
    return host;
  }
  // The whole buffer to the host.
  std::vector<uint8_t> download() const { return download(bytes_); }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

inline Device this_device() { return Device::cuda(current_device()); }

// A host tensor copied to the device, and its device view (same dtype and shape).
struct DeviceTensor {
  DeviceBuffer buf;
  TensorView view;
  DeviceTensor() = default;
  explicit DeviceTensor(const TensorView& host) : buf(host.nbytes()) {
    buf.upload(host.data, host.nbytes());
    view = host;
    view.data = buf.get();
    view.device = this_device();
  }
};

// A packed host weight copied to the device, and its device view (scale2 as on the host);
// data_offset shifts the payload inside its buffer (to test the alignment a kernel accepts).
struct DeviceWeight {
  DeviceBuffer data, scale;
  WeightView view;
  explicit DeviceWeight(const PackedWeight& p, size_t data_offset = 0) {
    view = p.view();
    data = DeviceBuffer(p.data.nbytes() + data_offset);
    data.upload(p.data.view().data, p.data.nbytes(), data_offset);
    view.data.data = data.bytes_at(data_offset);
    view.data.device = this_device();
    if (!p.scale.view().empty()) {
      scale = DeviceBuffer(p.scale.nbytes());
      scale.upload(p.scale.view().data, p.scale.nbytes());
      view.scale.data = scale.get();
      view.scale.device = this_device();
    }
  }
};

// A plan's scratch on the device, ScratchLayout::kAlignment-aligned as check_scratch requires.
struct DeviceScratch {
  DeviceBuffer buf;
  Scratch scratch;
  explicit DeviceScratch(size_t bytes)
      : buf(bytes + ScratchLayout::kAlignment),
        scratch(aligned_scratch(buf.get(), buf.bytes(), bytes, this_device())) {}
};

}  // namespace b12x::test
