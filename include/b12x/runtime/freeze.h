// Freezing kernel resolution: warm up every shape you will serve, then freeze. Afterwards any kernel
// not already loaded in this process throws KernelResolutionFrozenError instead of compiling (or
// loading from disk) in the middle of a request or inside CUDA-graph capture.
#pragma once
#include <string>

namespace b12x {

void freeze_kernel_resolution(const std::string& reason = "frozen");
void unfreeze_kernel_resolution();
bool kernel_resolution_frozen();
std::string kernel_resolution_freeze_reason();

}  // namespace b12x
