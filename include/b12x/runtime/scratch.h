// Scratch layouts for the plan -> bind -> run lifecycle. A plan lays out every buffer it needs in one
// caller-owned scratch allocation (named regions, each 1024-byte aligned); bind only carves views
// at the planned offsets (no allocation, no CUDA call, no compile).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "b12x/core/tensor.h"

namespace b12x {

class ScratchLayout {
 public:
  static constexpr size_t kAlignment = 1024;
  // Appends a region; returns its offset.
  size_t add(const std::string& name, size_t bytes, size_t alignment = kAlignment);
  size_t bytes() const { return total_; }
  size_t offset(const std::string& name) const;  // throws Error for an unknown region

 private:
  struct Region {
    std::string name;
    size_t offset, bytes;
  };
  std::vector<Region> regions_;
  size_t total_ = 0;
};

// The caller's scratch memory (device pointer + capacity).
struct Scratch {
  void* data = nullptr;
  size_t bytes = 0;
  Device device = Device::cuda(0);
};

// The Scratch for `layout_bytes` inside a caller buffer of `buffer_bytes` that has kAlignment bytes of
// slack (at least layout_bytes + ScratchLayout::kAlignment): its first kAlignment-aligned address.
// BadArgument naming 'scratch' when the buffer is too small.
Scratch aligned_scratch(void* buffer, size_t buffer_bytes, size_t layout_bytes, Device device);

// Checks that `scratch` is large enough and aligned for `layout` (BadArgument naming 'scratch').
void check_scratch(const Scratch& scratch, const ScratchLayout& layout);
// Pointer to a region of a checked scratch buffer.
void* scratch_region(const Scratch& scratch, const ScratchLayout& layout, const std::string& name);

}  // namespace b12x
