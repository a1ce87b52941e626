// Internal: the on-disk level of the compile cache. One file per key, <dir>/<key[0:2]>/<key>.cubin:
//   "B12XCUBN" | u32 layout version | u32 name length | u64 cubin length | 32-byte SHA-256 of name+cubin
//   | lowered name | cubin
// Written to a unique temp file in the same directory and renamed into place, so concurrent
// processes never see a partial entry; a truncated or altered entry fails the checks and is rebuilt.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace b12x::detail {

struct DiskEntry {
  std::string lowered_name;
  std::vector<char> cubin;
};

enum class DiskLookup { hit, missing, corrupt };

DiskLookup disk_cache_load(const std::string& dir, const std::string& key, DiskEntry* out);
// Best effort: a failure to write is logged, never thrown (the kernel still runs).
void disk_cache_store(const std::string& dir, const std::string& key, const DiskEntry& entry);
std::string disk_cache_path(const std::string& dir, const std::string& key);

}  // namespace b12x::detail
