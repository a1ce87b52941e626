#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "b12x/core/error.h"

namespace b12x::io_detail {

MappedFile::~MappedFile() {
  if (data != nullptr) ::munmap(const_cast<uint8_t*>(data), size);
}

std::shared_ptr<const MappedFile> map_file(const std::string& path, const char* kind, MapMode mode) {
  auto fail = [&](const char* what, int err) {
    throw IoError(detail::concat(kind, " file '", path, "': ", what, err != 0 ? ": " : "", err != 0 ? std::strerror(err) : ""));
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail("cannot stat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("not a regular file", 0);
  }
  auto file = std::make_shared<MappedFile>();
  const auto size = static_cast<size_t>(st.st_size);
  if (size == 0) {  // mmap refuses a length of 0; the readers report the file as truncated
    ::close(fd);
    return file;
  }
  // Read-only where nothing writes: a private writable mapping of a file larger than RAM + swap can
  // be refused by the kernel's overcommit heuristic.
  const int prot = mode == MapMode::read_only ? PROT_READ : PROT_READ | PROT_WRITE;
  void* addr = ::mmap(nullptr, size, prot, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);
  if (addr == MAP_FAILED) fail("cannot mmap", map_err);
  file->data = static_cast<const uint8_t*>(addr);
  file->size = size;
  return file;
}

}  // namespace b12x::io_detail
