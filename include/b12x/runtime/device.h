// CUDA device plumbing: is there a device, what is it, which architecture do kernels target.
#pragma once
#include <cstddef>
#include <string>

namespace b12x {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  size_t smem_per_block_optin = 0;  // largest dynamic shared memory a block may opt into
  size_t l2_bytes = 0;
  size_t global_mem_bytes = 0;
  std::string arch;  // NVRTC target: "sm_90a" on Hopper, "sm_120a" on SM120, else "sm_XY"
};

// True when the CUDA runtime finds at least one device (false on machines without a driver/GPU).
bool cuda_available();
// The current device (ordinal < 0) or a given one. Throws CudaError without a device.
const DeviceInfo& device_info(int ordinal = -1);
int current_device();

// NVRTC architecture string for a compute capability ("sm_90a" for 9.0, "sm_120a" for 12.0).
std::string arch_for_compute_capability(int major, int minor);

}  // namespace b12x
