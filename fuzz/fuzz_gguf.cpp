// libFuzzer target: the GGUF reader on arbitrary bytes, in memory (GgufFile::parse) and through the
// memory-mapped path (GgufFile::open on a memfd). For an accepted file every tensor's bytes are
// read, every metadata value is described, and the invariants the converter relies on are checked:
// byte ranges inside the file and disjoint, view shapes consistent with the byte size. Only
// b12x::Error may escape.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "b12x/core/error.h"
#include "b12x/io/gguf.h"
#include "memfile.h"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void exercise(const b12x::GgufFile& f, const uint8_t* base, size_t size) {
  using namespace b12x;
  for (const auto& [key, value] : f.metadata()) {
    check(f.find(key) == &value);
    (void)value.describe();
    for (uint64_t i = 0; i < std::min<uint64_t>(value.count, 4); ++i) {
      (void)value.array_real(i);
      (void)value.array_integer(i);
    }
    (void)f.get_int(key);
    (void)f.get_real(key);
    (void)f.get_string(key);
  }
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const GgufTensorInfo& t : f.tensors()) {
    check(&f.tensor_info(t.name) == &t);
    const uint8_t* p = f.tensor_bytes(t);
    check(p >= base && t.nbytes <= size && static_cast<size_t>(p - base) <= size - t.nbytes);
    check(static_cast<uint64_t>(p - base) % f.alignment() == 0);
    fuzz::touch(p, t.nbytes);
    if (t.nbytes) ranges.emplace_back(f.data_offset() + t.offset, f.data_offset() + t.offset + t.nbytes);
    try {
      const TensorView v = f.tensor(t.name);
      check(v.data == p && v.nbytes() == t.nbytes);
      int64_t elems = 1;
      for (int64_t e : t.view_shape()) elems *= e;
      check(static_cast<uint64_t>(elems) * dtype_size(v.dtype) == t.nbytes);
      const HostTensor copy = f.read(t.name);
      check(copy.nbytes() == t.nbytes && (t.nbytes == 0 || std::memcmp(copy.ptr<uint8_t>(), p, t.nbytes) == 0));
    } catch (const Unsupported&) {
      check(!t.type->dtype.has_value());
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) check(ranges[i].first >= ranges[i - 1].second);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace b12x;
  bool parsed = false;
  try {
    const GgufFile f = GgufFile::parse(data, size, "fuzz");
    parsed = true;
    exercise(f, data, size);
  } catch (const Error&) {
  }
  // The mapped path must agree with the in-memory one.
  const fuzz::MemFile input(data, size);
  try {
    const GgufFile g = GgufFile::open(input.path());
    check(parsed);
    const GgufFile f = GgufFile::parse(data, size, "fuzz");
    check(g.data_offset() == f.data_offset() && g.metadata().size() == f.metadata().size() &&
          g.tensors().size() == f.tensors().size());
    for (size_t i = 0; i < g.tensors().size(); ++i) {
      const GgufTensorInfo &a = g.tensors()[i], &b = f.tensors()[i];
      check(a.name == b.name && a.offset == b.offset && a.nbytes == b.nbytes && a.ne == b.ne);
      check(a.nbytes == 0 || std::memcmp(g.tensor_bytes(a), f.tensor_bytes(b), a.nbytes) == 0);
    }
  } catch (const Error&) {
    check(!parsed);
  }
  return 0;
}
