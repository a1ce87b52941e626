// libFuzzer target: the safetensors reader (SafetensorsFile::open on arbitrary bytes) and, for every
// file it accepts, a write_safetensors round trip that must reproduce names, dtypes, shapes, bytes
// and metadata. Only b12x::Error may escape the reader; anything else (a crash, a sanitizer report,
// a foreign exception such as nlohmann::json's, a failed invariant) is a finding.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "b12x/core/error.h"
#include "b12x/io/safetensors.h"
#include "memfile.h"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

std::string scratch_path() {
  // tmpfs: the writer's fsync costs nothing there.
  const char* dir = std::getenv("B12X_FUZZ_TMP");
  return std::string(dir ? dir : "/dev/shm") + "/b12x-fuzz-" + std::to_string(::getpid()) + ".safetensors";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace b12x;
  const fuzz::MemFile input(data, size);
  std::vector<std::pair<std::string, TensorView>> tensors;
  try {
    const SafetensorsFile f = SafetensorsFile::open(input.path());
    for (const std::string& name : f.names()) {
      const SafetensorsEntry& e = f.entry(name);
      const TensorView v = f.tensor(name);
      check(v.nbytes() == e.end - e.begin);
      fuzz::touch(v.data, v.nbytes());
      const HostTensor copy = f.read(name);
      check(copy.nbytes() == v.nbytes() && (v.nbytes() == 0 || std::memcmp(copy.ptr<uint8_t>(), v.data, v.nbytes()) == 0));
      tensors.emplace_back(name, v);
    }

    // Round trip through the writer (a name the writer refuses, such as "", throws BadArgument).
    const std::string out = scratch_path();
    try {
      write_safetensors(out, tensors, f.metadata());
    } catch (const BadArgument&) {
      return 0;
    }
    const SafetensorsFile g = SafetensorsFile::open(out);
    ::unlink(out.c_str());
    check(g.names() == f.names());
    check(g.metadata() == f.metadata());
    for (const auto& [name, v] : tensors) {
      const TensorView w = g.tensor(name);
      check(w.dtype == v.dtype && w.shape_vec() == v.shape_vec());
      check(v.nbytes() == 0 || std::memcmp(w.data, v.data, v.nbytes()) == 0);
    }
  } catch (const Error&) {
    // Rejected with a b12x error: the expected outcome for malformed input.
  }
  return 0;
}
