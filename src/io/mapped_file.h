// A whole file mapped into memory, shared by the GGUF and safetensors readers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace b12x::io_detail {

// A private mapping of a regular file, unmapped when the last reference goes. Read-only, or
// copy-on-write (views may be written to without touching the file).
struct MappedFile {
  const uint8_t* data = nullptr;
  size_t size = 0;
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();
};

enum class MapMode { read_only, copy_on_write };

// Opens and maps `path`; failures throw IoError("<kind> file '<path>': cannot open / cannot stat /
// not a regular file / cannot mmap: <reason>"). An empty file maps to data == nullptr, size 0.
std::shared_ptr<const MappedFile> map_file(const std::string& path, const char* kind, MapMode mode);

}  // namespace b12x::io_detail
