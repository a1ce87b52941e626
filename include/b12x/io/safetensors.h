// Safetensors files on the host: a validating reader (memory-mapped) and an atomic writer.
//
// Layout: u64 little-endian header length H, H bytes of JSON, then the data buffer. The JSON maps
// tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data
// buffer) plus an optional "__metadata__" string -> string map. The reader rejects anything a
// malformed or hostile file could use to make a view point outside the buffer: every failure is an
// IoError naming the file and, where one is involved, the tensor.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "b12x/core/tensor.h"

namespace b12x {

// Where one tensor lives inside a file (offsets relative to the data buffer).
struct SafetensorsEntry {
  DType dtype = DType::u8;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

// Safetensors dtype names ("BF16", "F8_E8M0", ...) <-> DType. ue8m0 is F8_E8M0.
std::string_view safetensors_dtype_name(DType t);
// Returns false for a name b12x has no DType for (I16, U16, BOOL, F4, ...).
bool parse_safetensors_dtype(std::string_view name, DType* out);

class SafetensorsFile {
 public:
  // Maps and validates the whole header; tensor data is only touched when viewed.
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  const SafetensorsEntry& entry(const std::string& name) const;  // IoError when absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Host view into the mapping, valid while this object (or a copy of it) lives. The mapping is
  // private copy-on-write: writing through the view never changes the file. The pointer is only as
  // aligned as the writer made it; use read() when the consumer needs natural alignment.
  TensorView tensor(const std::string& name) const;
  // An owned, aligned copy of the tensor.
  HostTensor read(const std::string& name) const;

 private:
  std::string path_;
  std::shared_ptr<const void> mapping_;  // keeps the file mapped
  const uint8_t* data_ = nullptr;  // start of the data buffer inside the mapping
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Writes `tensors` (contiguous host views, unique names) and `metadata` to `path` atomically: the
// bytes go to a temporary file in the same folder, which is then renamed over `path`. Tensors are
// laid out largest element size first so every tensor is naturally aligned in the file.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, TensorView>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace b12x
