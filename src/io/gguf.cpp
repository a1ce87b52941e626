// GGUF reader. Every read goes through a bounds-checked cursor; every count is compared with the
// bytes left before anything is reserved, so a hostile header cannot make the reader allocate more
// than a small multiple of the file size or touch memory outside it. The rules follow ggml's own
// loader (ggml/src/gguf.cpp) where it has one: version 2 or 3, general.alignment a u32 power of two,
// at most 4 dimensions, non-negative extents whose product fits in int64, row length a multiple of
// the block size, unique tensor names and keys, offsets aligned and inside the data section. ggml
// additionally requires tensors to be packed in file order; b12x only requires them to be disjoint.
#include "b12x/io/gguf.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <sstream>

#include "b12x/core/error.h"
#include "io/mapped_file.h"

namespace b12x {

namespace {

constexpr uint32_t kMagic = 0x46554747;        // "GGUF" read as a little-endian u32
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDimsGgml = 4;           // GGML_MAX_DIMS
constexpr uint64_t kMaxNameBytes = 65536;      // keys and tensor names
constexpr uint64_t kMaxStringBytes = 1ull << 30;  // any other string
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;    // key length, value type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset

constexpr GgmlTypeInfo kTypes[] = {
    {GgmlType::F32, "F32", 1, 4, DType::f32},
    {GgmlType::F16, "F16", 1, 2, DType::f16},
    {GgmlType::Q4_0, "Q4_0", 32, 18, std::nullopt},
    {GgmlType::Q4_1, "Q4_1", 32, 20, std::nullopt},
    {GgmlType::Q5_0, "Q5_0", 32, 22, std::nullopt},
    {GgmlType::Q5_1, "Q5_1", 32, 24, std::nullopt},
    {GgmlType::Q8_0, "Q8_0", 32, 34, DType::u8},
    {GgmlType::Q8_1, "Q8_1", 32, 40, std::nullopt},
    {GgmlType::Q2_K, "Q2_K", 256, 84, std::nullopt},
    {GgmlType::Q3_K, "Q3_K", 256, 110, std::nullopt},
    {GgmlType::Q4_K, "Q4_K", 256, 144, std::nullopt},
    {GgmlType::Q5_K, "Q5_K", 256, 176, std::nullopt},
    {GgmlType::Q6_K, "Q6_K", 256, 210, std::nullopt},
    {GgmlType::Q8_K, "Q8_K", 256, 292, std::nullopt},
    {GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66, DType::u8},
    {GgmlType::IQ2_XS, "IQ2_XS", 256, 74, DType::u8},
    {GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98, std::nullopt},
    {GgmlType::IQ1_S, "IQ1_S", 256, 50, std::nullopt},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 18, std::nullopt},
    {GgmlType::IQ3_S, "IQ3_S", 256, 110, std::nullopt},
    {GgmlType::IQ2_S, "IQ2_S", 256, 82, std::nullopt},
    {GgmlType::IQ4_XS, "IQ4_XS", 256, 136, std::nullopt},
    {GgmlType::I8, "I8", 1, 1, DType::i8},
    {GgmlType::I16, "I16", 1, 2, std::nullopt},
    {GgmlType::I32, "I32", 1, 4, DType::i32},
    {GgmlType::I64, "I64", 1, 8, DType::i64},
    {GgmlType::F64, "F64", 1, 8, DType::f64},
    {GgmlType::IQ1_M, "IQ1_M", 256, 56, std::nullopt},
    {GgmlType::BF16, "BF16", 1, 2, DType::bf16},
    {GgmlType::TQ1_0, "TQ1_0", 256, 54, std::nullopt},
    {GgmlType::TQ2_0, "TQ2_0", 256, 66, std::nullopt},
    {GgmlType::MXFP4, "MXFP4", 32, 17, std::nullopt},
    {GgmlType::NVFP4, "NVFP4", 64, 36, std::nullopt},
    {GgmlType::Q1_0, "Q1_0", 128, 18, std::nullopt},
};

struct ValueTypeInfo {
  GgufValueType type;
  std::string_view name;
  uint64_t size;  // bytes of a scalar; 0 for string and array
};
constexpr ValueTypeInfo kValueTypes[] = {
    {GgufValueType::u8, "u8", 1},        {GgufValueType::i8, "i8", 1},     {GgufValueType::u16, "u16", 2},
    {GgufValueType::i16, "i16", 2},      {GgufValueType::u32, "u32", 4},   {GgufValueType::i32, "i32", 4},
    {GgufValueType::f32, "f32", 4},      {GgufValueType::boolean, "bool", 1}, {GgufValueType::string, "string", 0},
    {GgufValueType::array, "array", 0},  {GgufValueType::u64, "u64", 8},   {GgufValueType::i64, "i64", 8},
    {GgufValueType::f64, "f64", 8},
};

const ValueTypeInfo* value_type_info(uint32_t id) {
  for (const auto& v : kValueTypes)
    if (static_cast<uint32_t>(v.type) == id) return &v;
  return nullptr;
}

bool is_int_type(GgufValueType t) {
  switch (t) {
    case GgufValueType::u8: case GgufValueType::i8: case GgufValueType::u16: case GgufValueType::i16:
    case GgufValueType::u32: case GgufValueType::i32: case GgufValueType::u64: case GgufValueType::i64:
      return true;
    default:
      return false;
  }
}
bool is_signed_type(GgufValueType t) {
  return t == GgufValueType::i8 || t == GgufValueType::i16 || t == GgufValueType::i32 || t == GgufValueType::i64;
}
bool is_float_type(GgufValueType t) { return t == GgufValueType::f32 || t == GgufValueType::f64; }

uint64_t load_le(const uint8_t* p, uint64_t n) {
  uint64_t v = 0;
  for (uint64_t i = n; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

// Decodes a scalar of numeric/bool type `t` from its little-endian bytes into v's scalar fields.
void decode_number(GgufValueType t, const uint8_t* p, GgufValue& v) {
  const uint64_t size = value_type_info(static_cast<uint32_t>(t))->size;
  const uint64_t bits = load_le(p, size);
  if (t == GgufValueType::f32) {
    v.real = std::bit_cast<float>(static_cast<uint32_t>(bits));
  } else if (t == GgufValueType::f64) {
    v.real = std::bit_cast<double>(bits);
  } else if (is_signed_type(t)) {
    const int shift = static_cast<int>(64 - 8 * size);  // sign-extend
    const auto s = static_cast<int64_t>(bits << shift) >> shift;
    v.integer = s;
    v.fits_int64 = true;
    v.uinteger = static_cast<uint64_t>(s);
    v.fits_uint64 = s >= 0;
    v.real = static_cast<double>(s);
  } else {  // unsigned or bool
    v.uinteger = bits;
    v.fits_uint64 = true;
    v.integer = static_cast<int64_t>(bits);
    v.fits_int64 = bits <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    v.real = static_cast<double>(bits);
  }
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  while (i < s.size()) {
    const unsigned char c = p[i];
    size_t n;
    uint32_t cp;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { n = 1; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { n = 2; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { n = 3; cp = c & 0x07; }
    else return false;
    if (i + n >= s.size()) return false;
    for (size_t k = 1; k <= n; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    const uint32_t min_cp = n == 1 ? 0x80 : n == 2 ? 0x800 : 0x10000;
    if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

// A printable rendering of a (possibly binary) name for error messages.
std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s.substr(0, 200)) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > 200) out += "...";
  return out;
}

// Bounds-checked little-endian reader over the file image; errors name the file and the field.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& label) : p_(data), size_(size), label_(label) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  template <class... Args>
  [[noreturn]] void fail(Args&&... what) const {
    throw IoError(detail::concat("gguf file '", label_, "': ", std::forward<Args>(what)...));
  }

  void need(uint64_t n, const std::string& field) const {
    if (n > left())
      fail(field, ": truncated: needs ", n, " bytes at offset ", pos_, " but the file has ", left(), " left (",
           size_, " bytes in all)");
  }
  const uint8_t* take(uint64_t n, const std::string& field) {
    need(n, field);
    const uint8_t* at = p_ + pos_;
    pos_ += n;
    return at;
  }
  uint32_t u32(const std::string& field) { return static_cast<uint32_t>(load_le(take(4, field), 4)); }
  uint64_t u64(const std::string& field) { return load_le(take(8, field), 8); }

  std::string string(const std::string& field, uint64_t max_bytes) {
    return string_named([&] { return field; }, max_bytes);
  }
  // As string(), with the field name built only when there is an error (array elements).
  template <class Name>
  std::string string_named(const Name& field, uint64_t max_bytes) {
    if (left() < 8) need(8, field() + " (string length)");
    const uint64_t len = load_le(p_ + pos_, 8);
    pos_ += 8;
    if (len > max_bytes) fail(field(), ": string length ", len, " exceeds the limit of ", max_bytes, " bytes");
    if (len > left())
      fail(field(), ": truncated: string of ", len, " bytes at offset ", pos_, " runs past the end of the file (",
           left(), " bytes left)");
    const auto* at = reinterpret_cast<const char*>(p_ + pos_);
    pos_ += len;
    return std::string(at, len);
  }

 private:
  const uint8_t* p_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& label_;
};

GgufValueType read_value_type(Cursor& c, const std::string& field) {
  const uint32_t id = c.u32(field + " (value type)");
  if (!value_type_info(id)) c.fail(field, ": unknown value type ", id, " (GGUF types are 0..12)");
  return static_cast<GgufValueType>(id);
}

GgufValue read_value(Cursor& c, const std::string& field) {
  GgufValue v;
  v.type = read_value_type(c, field);
  if (v.type == GgufValueType::string) {
    v.text = c.string(field, kMaxStringBytes);
    return v;
  }
  if (v.type != GgufValueType::array) {
    const ValueTypeInfo* info = value_type_info(static_cast<uint32_t>(v.type));
    const uint8_t* at = c.take(info->size, field);
    if (v.type == GgufValueType::boolean && at[0] > 1) c.fail(field, ": bool value ", int{at[0]}, " is not 0 or 1");
    decode_number(v.type, at, v);
    return v;
  }
  v.element_type = read_value_type(c, field + " (array element type)");
  if (v.element_type == GgufValueType::array) c.fail(field, ": arrays of arrays are not supported");
  v.count = c.u64(field + " (array length)");
  if (v.element_type == GgufValueType::string) {
    // Each string needs at least its 8-byte length.
    if (v.count > c.left() / 8)
      c.fail(field, ": array of ", v.count, " strings cannot fit in the ", c.left(), " bytes left in the file");
    v.strings.reserve(v.count);
    for (uint64_t i = 0; i < v.count; ++i)
      v.strings.push_back(c.string_named([&] { return detail::concat(field, "[", i, "]"); }, kMaxStringBytes));
    return v;
  }
  const uint64_t size = value_type_info(static_cast<uint32_t>(v.element_type))->size;
  if (v.count > c.left() / size)
    c.fail(field, ": array of ", v.count, " ", gguf_value_type_name(v.element_type), " values (", size,
           " bytes each) cannot fit in the ", c.left(), " bytes left in the file");
  const uint8_t* at = c.take(v.count * size, field);
  v.raw.assign(at, at + v.count * size);
  if (v.element_type == GgufValueType::boolean)
    for (uint64_t i = 0; i < v.count; ++i)
      if (v.raw[i] > 1) c.fail(field, "[", i, "]: bool value ", int{v.raw[i]}, " is not 0 or 1");
  return v;
}

template <class... Args>
[[noreturn]] void fail_file(const std::string& label, Args&&... what) {
  throw IoError(detail::concat("gguf file '", label, "': ", std::forward<Args>(what)...));
}

}  // namespace

// ---- types -------------------------------------------------------------------------------------

const GgmlTypeInfo* ggml_type_info(uint32_t id) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return &t;
  return nullptr;
}

std::string ggml_type_name(uint32_t id) {
  if (const GgmlTypeInfo* t = ggml_type_info(id)) return std::string(t->name);
  return "type " + std::to_string(id);
}

std::string_view gguf_value_type_name(GgufValueType t) {
  const ValueTypeInfo* info = value_type_info(static_cast<uint32_t>(t));
  return info ? info->name : "unknown";
}

// ---- values ------------------------------------------------------------------------------------

bool GgufValue::is_integer() const { return is_int_type(type); }
bool GgufValue::is_number() const { return is_int_type(type) || is_float_type(type); }

std::optional<double> GgufValue::array_real(uint64_t i) const {
  if (type != GgufValueType::array || i >= count) return std::nullopt;
  if (!is_int_type(element_type) && !is_float_type(element_type)) return std::nullopt;
  const uint64_t size = value_type_info(static_cast<uint32_t>(element_type))->size;
  GgufValue e;
  decode_number(element_type, raw.data() + i * size, e);
  return e.real;
}

std::optional<int64_t> GgufValue::array_integer(uint64_t i) const {
  if (type != GgufValueType::array || i >= count || !is_int_type(element_type)) return std::nullopt;
  const uint64_t size = value_type_info(static_cast<uint32_t>(element_type))->size;
  GgufValue e;
  decode_number(element_type, raw.data() + i * size, e);
  if (!e.fits_int64) return std::nullopt;
  return e.integer;
}

std::string GgufValue::describe() const {
  std::ostringstream os;
  os << gguf_value_type_name(type);
  if (type == GgufValueType::array) {
    os << "<" << gguf_value_type_name(element_type) << ">[" << count << "]";
  } else if (type == GgufValueType::string) {
    os << " \"" << printable(text) << "\"";
  } else if (type == GgufValueType::boolean) {
    os << (uinteger ? " true" : " false");
  } else if (is_float_type(type)) {
    os << " " << real;
  } else if (is_signed_type(type)) {
    os << " " << integer;
  } else {
    os << " " << uinteger;
  }
  return os.str();
}

// ---- tensors -----------------------------------------------------------------------------------

std::vector<int64_t> GgufTensorInfo::shape() const { return {ne.rbegin(), ne.rend()}; }

std::vector<int64_t> GgufTensorInfo::view_shape() const {
  std::vector<int64_t> s = shape();
  if (type == nullptr || !type->is_block_codec()) return s;
  if (s.empty()) s.push_back(1);
  s.back() /= type->block_elems;
  s.push_back(type->block_bytes);
  return s;
}

// ---- file --------------------------------------------------------------------------------------

GgufFile GgufFile::open(const std::string& path) {
  auto mapping = io_detail::map_file(path, "gguf", io_detail::MapMode::read_only);
  if (mapping->size < 24)
    fail_file(path, "header: truncated: ", mapping->size, " bytes, too short for the 24-byte GGUF header");
  GgufFile f = parse(mapping->data, mapping->size, path);
  f.mapping_ = std::move(mapping);
  return f;
}

GgufFile GgufFile::parse(const uint8_t* data, size_t size, const std::string& label) {
  GgufFile f;
  f.path_ = label;
  f.base_ = data;
  f.size_ = size;
  Cursor c(data, size, f.path_);

  // Header.
  c.need(24, "header");
  const uint32_t magic = c.u32("header (magic)");
  if (magic != kMagic) {
    char got[48];
    std::snprintf(got, sizeof got, "%02x %02x %02x %02x", data[0], data[1], data[2], data[3]);
    c.fail("header: bad magic: expected \"GGUF\" (47 47 55 46), got bytes ", got, " ('",
           printable(std::string_view(reinterpret_cast<const char*>(data), 4)), "')");
  }
  f.version_ = c.u32("header (version)");
  if (f.version_ == 1) c.fail("header: GGUF version 1 is not supported (b12x reads versions 2 and 3)");
  if (f.version_ != 2 && f.version_ != 3) {
    if ((f.version_ & 0xFFFF) == 0 && (f.version_ >> 16) != 0)
      c.fail("header: version field reads ", f.version_, ": big-endian GGUF files are not supported");
    c.fail("header: unsupported GGUF version ", f.version_, " (b12x reads versions 2 and 3)");
  }
  const uint64_t n_tensors = c.u64("header (tensor count)");
  const uint64_t n_kv = c.u64("header (metadata count)");
  if (n_kv > c.left() / kMinKvBytes)
    c.fail("header: metadata count ", n_kv, " cannot fit in the ", c.left(), " bytes left in the file (each entry needs at least ",
           kMinKvBytes, ")");

  // Metadata.
  f.metadata_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string where = detail::concat("metadata entry ", i);
    std::string key = c.string(where + " key", kMaxNameBytes);
    if (key.empty()) c.fail(where, ": key is empty");
    if (!valid_utf8(key)) c.fail(where, ": key '", printable(key), "' is not valid UTF-8");
    const std::string field = "metadata key '" + key + "'";
    if (f.metadata_index_.count(key)) c.fail(field, ": key appears twice");
    GgufValue value = read_value(c, field);
    f.metadata_index_[key] = f.metadata_.size();
    f.metadata_.emplace_back(std::move(key), std::move(value));
  }
  if (const GgufValue* a = f.find("general.alignment")) {
    if (a->type != GgufValueType::u32)
      c.fail("metadata key 'general.alignment': must be a u32, got ", a->describe());
    if (a->uinteger == 0 || !std::has_single_bit(a->uinteger))
      c.fail("metadata key 'general.alignment': must be a non-zero power of two, got ", a->uinteger);
    f.alignment_ = a->uinteger;
  } else {
    f.alignment_ = kDefaultAlignment;
  }

  // Tensor infos.
  if (n_tensors > c.left() / kMinTensorInfoBytes)
    c.fail("header: tensor count ", n_tensors, " cannot fit in the ", c.left(), " bytes left in the file (each tensor info needs at least ",
           kMinTensorInfoBytes, ")");
  f.tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = c.string(detail::concat("tensor info ", i, " name"), kMaxNameBytes);
    if (t.name.empty()) c.fail("tensor info ", i, ": name is empty");
    if (!valid_utf8(t.name)) c.fail("tensor info ", i, ": name '", printable(t.name), "' is not valid UTF-8");
    const std::string field = "tensor '" + t.name + "'";
    if (f.index_.count(t.name)) c.fail(field, ": name appears twice");

    const uint32_t n_dims = c.u32(field + " (n_dims)");
    if (n_dims > kMaxDimsGgml) c.fail(field, ": has ", n_dims, " dimensions; GGUF allows at most ", kMaxDimsGgml);
    // Both the element count and the product of the non-zero extents must fit in int64 (the latter
    // bounds every stride of a view, even of an empty tensor).
    int64_t numel = 1, span = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t e = c.u64(detail::concat(field, " (ne[", d, "])"));
      if (e > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        c.fail(field, ": ne[", d, "] = ", e, " does not fit in int64");
      const auto extent = static_cast<int64_t>(e);
      if (extent != 0 && span > std::numeric_limits<int64_t>::max() / extent)
        c.fail(field, ": element count overflows int64 at ne[", d, "] = ", extent);
      span *= extent != 0 ? extent : 1;
      numel *= extent;
      t.ne.push_back(extent);
    }
    t.numel = numel;
    t.type_id = c.u32(field + " (type)");
    t.type = ggml_type_info(t.type_id);
    if (!t.type) c.fail(field, ": unknown ggml type id ", t.type_id);
    const int64_t row = n_dims ? t.ne[0] : 1;
    if (row % t.type->block_elems != 0)
      c.fail(field, ": row length ne[0] = ", row, " is not a multiple of the ", t.type->name, " block size ",
             t.type->block_elems);
    const auto blocks = static_cast<uint64_t>(span) / t.type->block_elems;
    if (blocks > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / t.type->block_bytes)
      c.fail(field, ": byte size overflows int64");
    t.nbytes = static_cast<uint64_t>(numel) / t.type->block_elems * t.type->block_bytes;
    t.offset = c.u64(field + " (offset)");
    if (t.offset % f.alignment_ != 0)
      c.fail(field, ": offset ", t.offset, " is not a multiple of the alignment ", f.alignment_);
    f.index_[t.name] = f.tensors_.size();
    f.tensors_.push_back(std::move(t));
  }

  // Data section: starts at the next multiple of the alignment after the tensor infos.
  const uint64_t infos_end = c.pos();
  f.data_offset_ = (infos_end + f.alignment_ - 1) / f.alignment_ * f.alignment_;  // no overflow: both < 2^33 + 2^32
  const uint64_t data_size = f.data_offset_ <= size ? size - f.data_offset_ : 0;
  for (const GgufTensorInfo& t : f.tensors_) {
    if (f.data_offset_ > size)
      c.fail("tensor '", t.name, "': the data section would start at offset ", f.data_offset_, ", past the end of the ",
             size, "-byte file (truncated?)");
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      c.fail("tensor '", t.name, "': bytes [", t.offset, ", ", t.offset, " + ", t.nbytes,
             ") run past the end of the data section (", data_size, " bytes; file truncated?)");
  }
  std::vector<const GgufTensorInfo*> order;
  for (const GgufTensorInfo& t : f.tensors_)
    if (t.nbytes) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const GgufTensorInfo* a, const GgufTensorInfo* b) {
    return a->offset < b->offset;
  });
  for (size_t i = 1; i < order.size(); ++i) {
    const GgufTensorInfo& a = *order[i - 1];
    const GgufTensorInfo& b = *order[i];
    if (b.offset < a.offset + a.nbytes)
      c.fail("tensor '", b.name, "': bytes [", b.offset, ", ", b.offset + b.nbytes, ") overlap tensor '", a.name, "' [",
             a.offset, ", ", a.offset + a.nbytes, ")");
  }
  return f;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

std::optional<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v || v->type != GgufValueType::string) return std::nullopt;
  return v->text;
}

std::optional<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v || !v->is_integer() || !v->fits_int64) return std::nullopt;
  return v->integer;
}

std::optional<double> GgufFile::get_real(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v || !v->is_number()) return std::nullopt;
  return v->real;
}

const GgufTensorInfo& GgufFile::tensor_info(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) fail_file(path_, "tensor '", name, "': no such tensor");
  return tensors_[it->second];
}

TensorView GgufFile::tensor(const std::string& name) const {
  const GgufTensorInfo& t = tensor_info(name);
  if (!t.type->dtype)
    fail_unsupported("gguf file '", path_, "': tensor '", name, "': unsupported type ", t.type->name,
                     " (b12x reads F32, F16, BF16, F64, I8, I32, I64, Q8_0, IQ2_XXS and IQ2_XS)");
  return TensorView(const_cast<uint8_t*>(tensor_bytes(t)), *t.type->dtype, t.view_shape());
}

HostTensor GgufFile::read(const std::string& name) const {
  const TensorView v = tensor(name);
  HostTensor out(v.dtype, v.shape_vec());
  if (out.nbytes() != 0) std::memcpy(out.ptr<uint8_t>(), v.data, out.nbytes());
  return out;
}

}  // namespace b12x
