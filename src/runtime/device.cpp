#include "b12x/runtime/device.h"

#include <map>
#include <memory>
#include <mutex>

#include "b12x/core/error.h"
#include "runtime/cuda_api.h"

namespace b12x {

bool cuda_available() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver / no device" error
    return false;
  }
  return n > 0;
}

int current_device() {
  int d = 0;
  B12X_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

std::string arch_for_compute_capability(int major, int minor) {
  std::string arch = "sm_" + std::to_string(major) + std::to_string(minor);
  // Architecture-specific targets: wgmma/setmaxnreg need sm_90a; SM120 block-scaled MMA needs sm_120a.
  if ((major == 9 && minor == 0) || (major == 12 && minor == 0)) arch += "a";
  return arch;
}

const DeviceInfo& device_info(int ordinal) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<DeviceInfo>> cache;
  if (ordinal < 0) ordinal = current_device();
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[ordinal];
  if (!slot) {
    cudaDeviceProp p{};
    B12X_CUDA_CHECK(cudaGetDeviceProperties(&p, ordinal));
    auto info = std::make_unique<DeviceInfo>();
    info->ordinal = ordinal;
    info->name = p.name;
    info->cc_major = p.major;
    info->cc_minor = p.minor;
    info->sm_count = p.multiProcessorCount;
    info->smem_per_block_optin = p.sharedMemPerBlockOptin;
    info->l2_bytes = static_cast<size_t>(p.l2CacheSize);
    info->global_mem_bytes = p.totalGlobalMem;
    info->arch = arch_for_compute_capability(p.major, p.minor);
    slot = std::move(info);
  }
  return *slot;
}

}  // namespace b12x
