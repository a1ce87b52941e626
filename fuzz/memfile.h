// Shared helper for the fuzz targets: the input as a file path, without touching the disk. The
// bytes go to an anonymous memory file (memfd) that the readers open through /proc/self/fd/N, so the
// real open/fstat/mmap path is exercised.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace b12x::fuzz {

class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) {
    fd_ = ::memfd_create("b12x-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) std::abort();
    size_t done = 0;
    while (done < size) {
      const ssize_t w = ::write(fd_, data + done, size - done);
      if (w <= 0) std::abort();
      done += static_cast<size_t>(w);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// Reads every byte of [p, p + n) so AddressSanitizer sees any out-of-bounds view.
inline uint64_t touch(const void* p, size_t n) {
  const auto* b = static_cast<const volatile uint8_t*>(p);
  uint64_t sum = 0;
  for (size_t i = 0; i < n; ++i) sum += b[i];
  return sum;
}

}  // namespace b12x::fuzz
