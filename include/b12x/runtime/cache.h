// The compile cache: in-process (loaded kernels) and on disk (cubins).
// Disk location: $B12X_CACHE_DIR, else $XDG_CACHE_HOME/b12x, else ~/.cache/b12x.
// B12X_DISABLE_DISK_CACHE=1 turns the disk level off.
#pragma once
#include <cstdint>
#include <string>

namespace b12x {

struct CompileCacheInfo {
  uint64_t memory_hits = 0;   // resolve_kernel answered from memory
  uint64_t disk_hits = 0;     // loaded from a valid disk entry
  uint64_t misses = 0;        // compiled with NVRTC
  uint64_t corrupt_entries = 0;  // disk entries rejected (truncated, bad checksum) and rebuilt
  double compile_seconds = 0; // total NVRTC time in this process
  uint64_t entries_in_memory = 0;
  std::string disk_dir;       // empty when the disk cache is disabled
};

CompileCacheInfo compile_cache_info();
// Forgets loaded kernels and resets the counters; with disk = true also deletes this cache's files.
void clear_compile_cache(bool disk = false);
std::string disk_cache_dir();  // resolved directory, "" when disabled

}  // namespace b12x
