#include "b12x/runtime/scratch.h"

#include <cstdint>

#include "b12x/core/error.h"

namespace b12x {

size_t ScratchLayout::add(const std::string& name, size_t bytes, size_t alignment) {
  for (const auto& r : regions_)
    if (r.name == name) throw Error("scratch region '" + name + "' added twice");
  const size_t offset = (total_ + alignment - 1) / alignment * alignment;
  regions_.push_back({name, offset, bytes});
  total_ = offset + bytes;
  return offset;
}

size_t ScratchLayout::offset(const std::string& name) const {
  for (const auto& r : regions_)
    if (r.name == name) return r.offset;
  throw Error("scratch layout has no region '" + name + "'");
}

Scratch aligned_scratch(void* buffer, size_t buffer_bytes, size_t layout_bytes, Device device) {
  const uintptr_t base = reinterpret_cast<uintptr_t>(buffer);
  const uintptr_t aligned = (base + ScratchLayout::kAlignment - 1) / ScratchLayout::kAlignment * ScratchLayout::kAlignment;
  B12X_CHECK_ARG(aligned - base + layout_bytes <= buffer_bytes, "scratch", "buffer of ", buffer_bytes,
                 " bytes cannot hold ", layout_bytes, " bytes at a ", ScratchLayout::kAlignment, "-byte aligned address");
  return Scratch{reinterpret_cast<void*>(aligned), layout_bytes, device};
}

void check_scratch(const Scratch& scratch, const ScratchLayout& layout) {
  if (layout.bytes() == 0) return;
  B12X_CHECK_ARG(scratch.data != nullptr, "scratch", "is null but the plan needs ", layout.bytes(), " bytes");
  B12X_CHECK_ARG(scratch.bytes >= layout.bytes(), "scratch", "holds ", scratch.bytes, " bytes, the plan needs ",
                 layout.bytes());
  B12X_CHECK_ARG(reinterpret_cast<uintptr_t>(scratch.data) % ScratchLayout::kAlignment == 0, "scratch",
                 "must be aligned to ", ScratchLayout::kAlignment, " bytes");
}

void* scratch_region(const Scratch& scratch, const ScratchLayout& layout, const std::string& name) {
  return static_cast<char*>(scratch.data) + layout.offset(name);
}

}  // namespace b12x
