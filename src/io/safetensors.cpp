// Safetensors reader and writer. The reader follows the format's own rules (as the reference Rust
// implementation enforces them): the header is bounded, every tensor's byte range lies inside the
// data buffer and matches its dtype and shape, and the ranges tile the buffer exactly (no overlap,
// no hole, no trailing bytes), so no two names alias the same bytes.
#include "b12x/io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "b12x/core/error.h"
#include "io/mapped_file.h"

namespace b12x {

namespace {

using nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the limit the reference implementation uses
constexpr const char* kMetadataKey = "__metadata__";

struct DTypeName {
  DType dtype;
  std::string_view name;
};
constexpr DTypeName kDTypeNames[] = {
    {DType::bf16, "BF16"},       {DType::f16, "F16"},         {DType::f32, "F32"},
    {DType::f64, "F64"},         {DType::f8_e4m3, "F8_E4M3"}, {DType::f8_e5m2, "F8_E5M2"},
    {DType::ue8m0, "F8_E8M0"},   {DType::u8, "U8"},           {DType::i8, "I8"},
    {DType::i32, "I32"},         {DType::i64, "I64"},
};

std::string supported_dtype_list() {
  std::string all;
  for (const auto& d : kDTypeNames) all += (all.empty() ? "" : ", ") + std::string(d.name);
  return all;
}

template <class... Args>
[[noreturn]] void fail_io(const std::string& path, Args&&... what) {
  throw IoError(detail::concat("safetensors file '", path, "': ", std::forward<Args>(what)...));
}

template <class... Args>
[[noreturn]] void fail_tensor(const std::string& path, const std::string& name, Args&&... what) {
  fail_io(path, "tensor '", name, "': ", std::forward<Args>(what)...);
}

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void write_le64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// JSON objects silently keep one of two equal keys; for tensor names that would hide data.
json parse_header(const std::string& path, const char* begin, const char* end) {
  std::set<std::string> seen;
  auto reject_duplicate_names = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && !seen.insert(parsed.get<std::string>()).second)
      fail_io(path, "header names '", parsed.get<std::string>(), "' twice");
    return true;
  };
  try {
    return json::parse(begin, end, reject_duplicate_names);
  } catch (const json::exception& e) {
    fail_io(path, "header is not valid JSON (", e.what(), ")");
  }
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const json& j) {
  if (!j.is_object()) fail_io(path, "\"__metadata__\" must be an object of strings");
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : j.items()) {
    if (!value.is_string()) fail_io(path, "\"__metadata__\" value of '", key, "' is not a string");
    out[key] = value.get<std::string>();
  }
  return out;
}

// Byte count of a tensor, or false when it does not fit in 64 bits.
// Bytes of a tensor; false when the shape is not representable: the product of its non-zero extents
// times the element size must fit in int64 (views compute strides and element counts in int64), even
// when a zero extent makes the tensor empty.
bool byte_count(const std::vector<int64_t>& shape, DType dtype, uint64_t* bytes) {
  constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t nonzero = dtype_size(dtype);
  bool empty = false;
  for (int64_t extent : shape) {
    const auto e = static_cast<uint64_t>(extent);
    if (e == 0) {
      empty = true;
      continue;
    }
    if (nonzero > kMax / e) return false;
    nonzero *= e;
  }
  *bytes = empty ? 0 : nonzero;
  return true;
}

SafetensorsEntry parse_entry(const std::string& path, const std::string& name, const json& j, uint64_t data_size) {
  if (!j.is_object() || !j.contains("dtype") || !j.contains("shape") || !j.contains("data_offsets"))
    fail_tensor(path, name, "entry must be an object with \"dtype\", \"shape\" and \"data_offsets\"");
  SafetensorsEntry e;

  const json& dtype = j["dtype"];
  if (!dtype.is_string()) fail_tensor(path, name, "\"dtype\" must be a string");
  if (!parse_safetensors_dtype(dtype.get<std::string>(), &e.dtype))
    fail_tensor(path, name, "unsupported dtype '", dtype.get<std::string>(), "' (b12x reads ", supported_dtype_list(), ")");

  const json& shape = j["shape"];
  if (!shape.is_array()) fail_tensor(path, name, "\"shape\" must be an array");
  if (shape.size() > static_cast<size_t>(kMaxDims))
    fail_tensor(path, name, "has ", shape.size(), " dimensions; at most ", kMaxDims, " are supported");
  for (const json& extent : shape) {
    if (!extent.is_number_unsigned() || extent.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      fail_tensor(path, name, "shape ", shape.dump(), " must hold non-negative integers");
    e.shape.push_back(extent.get<int64_t>());
  }

  const json& offsets = j["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
    fail_tensor(path, name, "\"data_offsets\" must be two non-negative integers, got ", offsets.dump());
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  if (e.begin > e.end) fail_tensor(path, name, "data_offsets [", e.begin, ", ", e.end, "] begin after they end");
  if (e.end > data_size)
    fail_tensor(path, name, "data_offsets [", e.begin, ", ", e.end, "] run past the end of the ", data_size,
                "-byte data buffer (file truncated?)");

  uint64_t expected = 0;
  if (!byte_count(e.shape, e.dtype, &expected)) fail_tensor(path, name, "shape ", shape_string(e.shape), " is too large");
  if (expected != e.end - e.begin)
    fail_tensor(path, name, "holds ", e.end - e.begin, " bytes but dtype ", dtype.get<std::string>(), " and shape ",
                shape_string(e.shape), " need ", expected);
  return e;
}

// The byte ranges must tile [0, data_size) exactly.
void check_tiling(const std::string& path, const std::map<std::string, SafetensorsEntry>& entries, uint64_t data_size) {
  std::vector<std::pair<std::string, const SafetensorsEntry*>> order;
  for (const auto& [name, e] : entries) order.emplace_back(name, &e);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return std::tie(a.second->begin, a.second->end) < std::tie(b.second->begin, b.second->end);
  });
  uint64_t covered = 0;
  std::string previous;
  for (const auto& [name, e] : order) {
    if (e->begin < covered)
      fail_tensor(path, name, "data_offsets [", e->begin, ", ", e->end, "] overlap tensor '", previous, "'");
    if (e->begin > covered)
      fail_io(path, "bytes [", covered, ", ", e->begin, ") of the data buffer belong to no tensor");
    covered = e->end;
    previous = name;
  }
  if (covered != data_size) fail_io(path, "data buffer has ", data_size - covered, " trailing bytes that belong to no tensor");
}

// write(2) until done; false on error (errno set).
bool write_all(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

std::string_view safetensors_dtype_name(DType t) {
  for (const auto& d : kDTypeNames)
    if (d.dtype == t) return d.name;
  throw Error(detail::concat("dtype ", dtype_name(t), " has no safetensors name"));
}

bool parse_safetensors_dtype(std::string_view name, DType* out) {
  for (const auto& d : kDTypeNames)
    if (d.name == name) {
      *out = d.dtype;
      return true;
    }
  return false;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  // Private copy-on-write mapping: views may be written to without touching the file.
  auto mapping = io_detail::map_file(path, "safetensors", io_detail::MapMode::copy_on_write);
  const uint64_t file_size = mapping->size;
  if (file_size < 8) fail_io(path, "truncated: ", file_size, " bytes, too short for the 8-byte header length");

  const uint8_t* bytes = mapping->data;
  const uint64_t header_len = read_le64(bytes);
  if (header_len > kMaxHeaderBytes) fail_io(path, "header length ", header_len, " exceeds the 100 MB limit");
  if (header_len > file_size - 8)
    fail_io(path, "header length ", header_len, " runs past the end of the file (", file_size, " bytes; truncated?)");

  const char* header = reinterpret_cast<const char*>(bytes + 8);
  const json root = parse_header(path, header, header + header_len);
  if (!root.is_object()) fail_io(path, "header must be a JSON object");

  SafetensorsFile file;
  file.path_ = path;
  file.data_ = bytes + 8 + header_len;
  const uint64_t data_size = file_size - 8 - header_len;
  for (const auto& [name, value] : root.items()) {
    if (name == kMetadataKey)
      file.metadata_ = parse_metadata(path, value);
    else
      file.entries_[name] = parse_entry(path, name, value, data_size);
  }
  check_tiling(path, file.entries_, data_size);
  file.mapping_ = std::move(mapping);
  return file;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& kv : entries_) out.push_back(kv.first);
  return out;
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) fail_tensor(path_, name, "no such tensor");
  return it->second;
}

TensorView SafetensorsFile::tensor(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  return TensorView(const_cast<uint8_t*>(data_ + e.begin), e.dtype, e.shape);
}

HostTensor SafetensorsFile::read(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  HostTensor out(e.dtype, e.shape);
  if (out.nbytes() != 0) std::memcpy(out.ptr<uint8_t>(), data_ + e.begin, out.nbytes());
  return out;
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, TensorView>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::set<std::string> names;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == kMetadataKey) fail_arg("tensors", "invalid tensor name '", name, "'");
    if (!names.insert(name).second) fail_arg("tensors", "tensor name '", name, "' appears twice");
    expect(t, name).host().contiguous();
    safetensors_dtype_name(t.dtype);  // throws for a dtype the format cannot name
  }

  // Largest element first: with an 8-byte-aligned data buffer every tensor is then aligned.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return dtype_size(tensors[a].second.dtype) > dtype_size(tensors[b].second.dtype);
  });

  json header = json::object();
  uint64_t offset = 0;
  for (size_t i : order) {
    const auto& [name, t] = tensors[i];
    header[name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                    {"shape", t.shape_vec()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // pad so the data buffer starts 8-byte aligned
  uint8_t len[8];
  write_le64(len, text.size());

  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail_io(path, "cannot create temporary file '", tmp, "': ", std::strerror(errno));
  bool ok = write_all(fd, len, sizeof len) && write_all(fd, text.data(), text.size());
  for (size_t i : order)
    ok = ok && write_all(fd, tensors[i].second.data, tensors[i].second.nbytes());
  ok = ok && ::fsync(fd) == 0;
  int err = ok ? 0 : errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    fail_io(path, "cannot write: ", std::strerror(err));
  }
}

}  // namespace b12x
