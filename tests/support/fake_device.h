// Device-looking arguments for the bind tests that run without a GPU (tests/<family>/test_*.cpp):
// bind only checks tensors, so they carry made-up device addresses that are never dereferenced, on
// Device::cuda(0), and plans point at a stand-in kernel that is never launched. Header-only.
#pragma once
#include <cstdint>
#include <initializer_list>

#include "b12x/b12x.h"
#include "b12x/runtime/jit.h"

namespace b12x::test {

// The kernel a fake plan points at (bind checks that there is one).
inline const Kernel& fake_kernel() {
  static const Kernel k{nullptr, "fake", "fake"};
  return k;
}

// A made-up device address per slot, 1 MiB apart from 0x7f0000000000 (so 1 MiB-aligned).
inline void* fake_device_ptr(int slot) {
  return reinterpret_cast<void*>(uintptr_t{0x7f0000000000} + static_cast<uintptr_t>(slot) * 0x100000);
}

// A contiguous view at fake_device_ptr(slot).
inline TensorView fake_device_tensor(int slot, DType dtype, std::initializer_list<int64_t> shape,
                                     Device device = Device::cuda(0)) {
  return TensorView(fake_device_ptr(slot), dtype, shape, device);
}

// A weight of format f and shape [n, k] on Device::cuda(0): payload at slot 0, scales (when the
// format has them) at slot 1, tensor scale 0.5.
inline WeightView fake_device_weight(Format f, int64_t n, int64_t k) {
  const PackedWeight host = allocate_weight(f, n, k);  // the dtypes and shapes; its memory is not kept
  WeightView w = host.view();
  w.scale2 = 0.5f;
  w.data.data = fake_device_ptr(0);
  w.data.device = Device::cuda(0);
  if (!w.scale.empty()) {
    w.scale.data = fake_device_ptr(1);
    w.scale.device = Device::cuda(0);
  }
  return w;
}

}  // namespace b12x::test
