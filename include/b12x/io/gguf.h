// GGUF files (llama.cpp / ggml) on the host: a validating, memory-mapped reader.
//
// Layout (GGUF v2 and v3, little-endian; v1 and big-endian files are refused):
//   u32 magic "GGUF", u32 version, u64 tensor count, u64 metadata count,
//   metadata: count x {string key, u32 value type, value}   (strings are u64 length + UTF-8 bytes;
//             arrays are u32 element type + u64 length + elements; arrays of arrays are refused),
//   tensor infos: count x {string name, u32 n_dims (<= 4), u64 ne[n_dims], u32 ggml type, u64 offset},
//   padding to `general.alignment` (u32, a power of two; default 32), then the data section.
// Tensor offsets are relative to the data section and multiples of the alignment.
//
// Dimension order: ne[0] varies fastest (the row length K), so a ggml matrix with ne = [K, N] is the
// row-major W[N, K]; GgufTensorInfo::shape() gives the row-major order. A row of a block-quantized
// type is ne[0] / block_elems blocks back to back, which is exactly ModelOpt's "ggml" packing
// u8 [N, K/group, payload].
//
// The reader rejects anything a malformed or hostile file could use to read outside the mapping or
// to allocate without bound: every length and count is checked against the bytes left in the file
// before anything is allocated, dimension products and byte sizes are checked for overflow, tensor
// byte ranges must be aligned, inside the file and pairwise disjoint, and every tensor must have a
// known ggml type. Every failure is an IoError naming the file, the field or tensor, and the rule.
// Types b12x cannot view (Q4_K, IQ3_S, ...) are still parsed and sized; viewing one throws
// Unsupported "unsupported type <name>" naming the tensor.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "b12x/core/tensor.h"

namespace b12x {

// ---- ggml tensor types -------------------------------------------------------------------------

// ggml type ids as stored in GGUF tensor infos (ggml.h `enum ggml_type`).
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41,
};

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;  // as ggml prints it: "Q8_0", "IQ2_XS", "BF16", ...
  uint32_t block_elems;   // elements per block (1 for plain types)
  uint32_t block_bytes;   // bytes per block
  // The DType b12x views it as: the element dtype for plain types, u8 for the GGML block codecs
  // b12x decodes (Q8_0, IQ2_XXS, IQ2_XS); nullopt when b12x cannot use the type.
  std::optional<DType> dtype;
  bool is_block_codec() const { return block_elems > 1; }
};

// nullptr for an id that is not a ggml type (or one ggml has removed, such as 31..33, 36..38).
const GgmlTypeInfo* ggml_type_info(uint32_t id);
// "Q4_K", or "type 99" for an unknown id.
std::string ggml_type_name(uint32_t id);

// ---- metadata values ---------------------------------------------------------------------------

enum class GgufValueType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7, string = 8, array = 9,
  u64 = 10, i64 = 11, f64 = 12,
};
std::string_view gguf_value_type_name(GgufValueType t);  // "u32", "string", "array", ...

// One metadata value. Integer and bool scalars: `integer` (when the value fits in int64) and
// `uinteger` (when it is not negative), also `real`; float scalars: `real`; strings: `text`.
// Arrays: `element_type` and `count`, numeric and bool elements as their raw little-endian bytes in
// `raw`, string elements in `strings`.
struct GgufValue {
  GgufValueType type = GgufValueType::u8;
  int64_t integer = 0;
  uint64_t uinteger = 0;
  bool fits_int64 = false, fits_uint64 = false;
  double real = 0;
  std::string text;
  GgufValueType element_type = GgufValueType::u8;  // arrays
  uint64_t count = 0;                               // arrays
  std::vector<uint8_t> raw;                         // arrays of numbers/bools
  std::vector<std::string> strings;                 // arrays of strings

  bool is_integer() const;  // integer scalar (not bool)
  bool is_number() const;   // integer or float scalar (not bool)
  // Element i of a numeric array as double / int64 (nullopt: not a numeric array, out of range,
  // or an integer that does not fit).
  std::optional<double> array_real(uint64_t i) const;
  std::optional<int64_t> array_integer(uint64_t i) const;
  std::string describe() const;  // "u32 4096", "string \"llama\"", "array<string>[32000]"
};

// ---- tensors -----------------------------------------------------------------------------------

struct GgufTensorInfo {
  std::string name;
  uint32_t type_id = 0;
  const GgmlTypeInfo* type = nullptr;  // never null for a tensor of an opened file
  std::vector<int64_t> ne;             // ggml order: ne[0] varies fastest
  uint64_t offset = 0;                 // relative to the data section
  uint64_t nbytes = 0;
  int64_t numel = 0;

  // Row-major element shape (ne reversed): ne = [K, N] -> [N, K].
  std::vector<int64_t> shape() const;
  // The shape of the bytes as b12x views them: the element shape for plain types; for block codecs
  // the row-major shape with the last axis split into blocks: ne = [K, N] -> [N, K/group, payload].
  std::vector<int64_t> view_shape() const;
};

class GgufFile {
 public:
  // Maps the file read-only and validates the whole header and tensor table.
  static GgufFile open(const std::string& path);
  // Validates a GGUF image already in memory; `label` names it in errors. The bytes must outlive
  // the returned object and every view taken from it (the fuzz targets and tests use this).
  static GgufFile parse(const uint8_t* data, size_t size, const std::string& label);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the data section
  uint64_t file_size() const { return size_; }

  // Metadata in file order, and lookup by key (nullptr when absent).
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* find(const std::string& key) const;
  // Convenience lookups: nullopt when the key is absent or has another type.
  std::optional<std::string> get_string(const std::string& key) const;
  std::optional<int64_t> get_int(const std::string& key) const;  // any integer type that fits
  std::optional<double> get_real(const std::string& key) const;  // any number

  // Tensor infos in file order, and lookup by name (IoError when absent).
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const GgufTensorInfo& tensor_info(const std::string& name) const;

  // The tensor's raw bytes (nbytes of them) inside the mapping; any type.
  const uint8_t* tensor_bytes(const GgufTensorInfo& t) const { return base_ + data_offset_ + t.offset; }
  // A host view with view_shape() and the type's DType. The mapping is read-only: writing through
  // the view faults; use read() for a writable copy. Unsupported types throw Unsupported naming the
  // tensor ("unsupported type Q4_K").
  TensorView tensor(const std::string& name) const;
  HostTensor read(const std::string& name) const;

 private:
  std::string path_;
  std::shared_ptr<const void> mapping_;  // keeps the file mapped; null for parse()
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::map<std::string, size_t> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> index_;
};

}  // namespace b12x
