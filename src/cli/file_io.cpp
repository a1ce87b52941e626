#include "cli/file_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "b12x/core/error.h"

namespace b12x::cli {

void read_into(const std::string& path, const TensorView& dst, const std::string& arg) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) fail_arg(arg, "cannot read '", path, "': ", ec.message());
  if (size != dst.nbytes())
    fail_arg(arg, "file '", path, "' has ", size, " bytes, expected ", dst.nbytes(), " bytes for ", dst.describe());
  std::ifstream in(path, std::ios::binary);
  if (!in.read(static_cast<char*>(dst.data), static_cast<std::streamsize>(dst.nbytes())))
    fail_arg(arg, "short read from '", path, "'");
}

void write_from(const std::string& path, const TensorView& src, const std::string& arg) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail_arg(arg, "cannot create '", tmp, "': ", std::strerror(errno));
    out.write(static_cast<const char*>(src.data), static_cast<std::streamsize>(src.nbytes()));
    if (!out.flush()) fail_arg(arg, "cannot write '", tmp, "': ", std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    fail_arg(arg, "cannot move the output into place at '", path, "'");
  }
}

}  // namespace b12x::cli
