// GGUF reader: a valid file read back field by field (in memory and memory-mapped), and one
// hand-built byte buffer per validation rule, each checked for the IoError naming the file, the
// field or tensor, and the rule.
#include "b12x/io/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "b12x/core/error.h"

namespace b12x {
namespace {

namespace fs = std::filesystem;
using VT = GgufValueType;

// Builds GGUF images byte by byte (little-endian), so each test can break exactly one rule.
class Builder {
 public:
  Builder& u8(uint8_t v) {
    b_.push_back(v);
    return *this;
  }
  Builder& u32(uint32_t v) { return le(v, 4); }
  Builder& u64(uint64_t v) { return le(v, 8); }
  Builder& str(const std::string& s) {
    u64(s.size());
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  Builder& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    b_.insert(b_.end(), {'G', 'G', 'U', 'F'});
    u32(version);
    u64(n_tensors);
    return u64(n_kv);
  }
  Builder& kv_u32(const std::string& key, uint32_t v) {
    str(key);
    u32(static_cast<uint32_t>(VT::u32));
    return u32(v);
  }
  Builder& kv_string(const std::string& key, const std::string& v) {
    str(key);
    u32(static_cast<uint32_t>(VT::string));
    return str(v);
  }
  Builder& tensor(const std::string& name, std::vector<uint64_t> ne, GgmlType type, uint64_t offset) {
    str(name);
    u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t e : ne) u64(e);
    u32(static_cast<uint32_t>(type));
    return u64(offset);
  }
  Builder& pad(size_t alignment = 32) {
    while (b_.size() % alignment) b_.push_back(0);
    return *this;
  }
  Builder& data(size_t n, uint8_t seed = 1) {
    for (size_t i = 0; i < n; ++i) b_.push_back(static_cast<uint8_t>(seed + 13 * i));
    return *this;
  }
  std::vector<uint8_t>& bytes() { return b_; }
  size_t size() const { return b_.size(); }

 private:
  Builder& le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b_.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  std::vector<uint8_t> b_;
};

// The IoError message of parsing `bytes`, or "" when it parses.
std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    GgufFile::parse(bytes.data(), bytes.size(), "t.gguf");
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

// Every fragment must occur in the message (which always names the file first).
void expect_error(const std::vector<uint8_t>& bytes, const std::vector<std::string>& fragments) {
  const std::string msg = parse_error(bytes);
  ASSERT_FALSE(msg.empty()) << "expected an IoError mentioning " << ::testing::PrintToString(fragments);
  EXPECT_EQ(msg.rfind("gguf file 't.gguf': ", 0), 0u) << msg;
  for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "missing '" << f << "' in: " << msg;
}

// A small valid file: metadata of every value type, and tensors of several ggml types.
std::vector<uint8_t> valid_file() {
  Builder b;
  b.header(/*tensors=*/4, /*kv=*/15);
  b.kv_string("general.architecture", "llama");
  b.kv_u32("llama.block_count", 2);
  b.str("u8").u32(0).u8(200);
  b.str("i8").u32(1).u8(0xFE);  // -2
  b.str("u16").u32(2).u8(0x34).u8(0x12);
  b.str("i16").u32(3).u8(0xFF).u8(0xFF);  // -1
  b.str("i32").u32(5).u32(0xFFFFFFF6u);  // -10
  b.str("f32").u32(6).u32(std::bit_cast<uint32_t>(1.5f));
  b.str("bool").u32(7).u8(1);
  b.str("u64").u32(10).u64(~0ull);
  b.str("i64").u32(11).u64(static_cast<uint64_t>(-5));
  b.str("f64").u32(12).u64(std::bit_cast<uint64_t>(0.25));
  b.str("arr_u32").u32(9).u32(4).u64(3).u32(7).u32(8).u32(9);
  b.str("arr_str").u32(9).u32(8).u64(2).str("a").str("bc");
  b.str("arr_f32").u32(9).u32(6).u64(1).u32(std::bit_cast<uint32_t>(-2.0f));
  // ne = [K, N]: F32 [K=4, N=2] (32 bytes), Q8_0 [64, 3] (3 rows x 2 blocks x 34 = 204 bytes),
  // IQ2_XS [256, 2] (148 bytes), BF16 [8] (16 bytes); offsets aligned to 32.
  b.tensor("f32.weight", {4, 2}, GgmlType::F32, 0);
  b.tensor("q8.weight", {64, 3}, GgmlType::Q8_0, 32);
  b.tensor("iq2.weight", {256, 2}, GgmlType::IQ2_XS, 256);
  b.tensor("norm.weight", {8}, GgmlType::BF16, 416);
  b.pad();
  b.data(432);
  return b.bytes();
}

TEST(GgufTest, ReadsMetadataOfEveryValueType) {
  const auto bytes = valid_file();
  const GgufFile f = GgufFile::parse(bytes.data(), bytes.size(), "t.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.metadata().size(), 15u);
  EXPECT_EQ(f.metadata()[0].first, "general.architecture");
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.block_count"), 2);
  EXPECT_EQ(f.get_int("u8"), 200);
  EXPECT_EQ(f.get_int("i8"), -2);
  EXPECT_EQ(f.get_int("u16"), 0x1234);
  EXPECT_EQ(f.get_int("i16"), -1);
  EXPECT_EQ(f.get_int("i32"), -10);
  EXPECT_EQ(f.get_real("f32"), 1.5);
  EXPECT_EQ(f.find("bool")->type, VT::boolean);
  EXPECT_EQ(f.find("bool")->uinteger, 1u);
  EXPECT_EQ(f.get_int("bool"), std::nullopt);                  // a bool is not an integer
  EXPECT_EQ(f.get_int("u64"), std::nullopt);                   // does not fit in int64
  EXPECT_EQ(f.find("u64")->uinteger, ~0ull);
  EXPECT_EQ(f.get_int("i64"), -5);
  EXPECT_EQ(f.get_real("f64"), 0.25);
  EXPECT_EQ(f.get_string("u8"), std::nullopt);                 // wrong type
  EXPECT_EQ(f.find("missing"), nullptr);
  const GgufValue* arr = f.find("arr_u32");
  ASSERT_NE(arr, nullptr);
  EXPECT_EQ(arr->type, VT::array);
  EXPECT_EQ(arr->element_type, VT::u32);
  EXPECT_EQ(arr->count, 3u);
  EXPECT_EQ(arr->array_integer(2), 9);
  EXPECT_EQ(arr->array_integer(3), std::nullopt);
  EXPECT_EQ(arr->describe(), "array<u32>[3]");
  EXPECT_EQ(f.find("arr_str")->strings, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(f.find("arr_f32")->array_real(0), -2.0);
  EXPECT_EQ(f.find("general.architecture")->describe(), "string \"llama\"");
}

TEST(GgufTest, ReadsTensorInfosShapesAndBytes) {
  const auto bytes = valid_file();
  const GgufFile f = GgufFile::parse(bytes.data(), bytes.size(), "t.gguf");
  ASSERT_EQ(f.tensors().size(), 4u);
  const uint64_t data_offset = f.data_offset();
  EXPECT_EQ(data_offset % 32, 0u);
  EXPECT_EQ(bytes.size(), data_offset + 432);

  const GgufTensorInfo& q8 = f.tensor_info("q8.weight");
  EXPECT_EQ(q8.type->name, "Q8_0");
  EXPECT_EQ(q8.ne, (std::vector<int64_t>{64, 3}));
  EXPECT_EQ(q8.shape(), (std::vector<int64_t>{3, 64}));  // W[N, K]
  EXPECT_EQ(q8.view_shape(), (std::vector<int64_t>{3, 2, 34}));
  EXPECT_EQ(q8.nbytes, 204u);
  EXPECT_EQ(q8.numel, 192);
  const TensorView v = f.tensor("q8.weight");
  EXPECT_EQ(v.dtype, DType::u8);
  EXPECT_EQ(v.shape_vec(), (std::vector<int64_t>{3, 2, 34}));
  EXPECT_EQ(v.data, bytes.data() + data_offset + 32);
  EXPECT_EQ(f.tensor_bytes(q8), bytes.data() + data_offset + 32);

  EXPECT_EQ(f.tensor("f32.weight").describe(), "f32[2, 4] host");
  EXPECT_EQ(f.tensor("iq2.weight").describe(), "u8[2, 1, 74] host");
  EXPECT_EQ(f.tensor("norm.weight").describe(), "bf16[8] host");
  const HostTensor copy = f.read("iq2.weight");
  EXPECT_EQ(std::memcmp(copy.ptr<uint8_t>(), bytes.data() + data_offset + 256, 148), 0);
  EXPECT_FALSE(f.contains("nope"));
  try {
    f.tensor_info("nope");
    ADD_FAILURE() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'nope': no such tensor"), std::string::npos) << e.what();
  }
}

TEST(GgufTest, OpensMemoryMappedFiles) {
  const auto bytes = valid_file();
  const fs::path path = fs::temp_directory_path() / ("b12x-gguf-" + std::to_string(::getpid()) + ".gguf");
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  {
    const GgufFile f = GgufFile::open(path.string());
    EXPECT_EQ(f.path(), path.string());
    EXPECT_EQ(f.file_size(), bytes.size());
    const HostTensor t = f.read("f32.weight");
    EXPECT_EQ(std::memcmp(t.ptr<uint8_t>(), bytes.data() + f.data_offset(), 32), 0);
    const GgufFile copy = f;  // copies share the mapping
    EXPECT_EQ(copy.tensor("q8.weight").data, f.tensor("q8.weight").data);
  }
  fs::remove(path);

  for (const std::string& bad : {(fs::temp_directory_path() / "b12x-no-such-file.gguf").string(),
                                 fs::temp_directory_path().string()}) {
    try {
      GgufFile::open(bad);
      ADD_FAILURE() << "expected IoError for " << bad;
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(GgufTest, HonoursAlignmentAndVersion2) {
  Builder b;
  b.header(1, 1, /*version=*/2);
  b.kv_u32("general.alignment", 64);
  b.tensor("a", {3}, GgmlType::F32, 0);
  b.pad(64);
  b.data(12);
  const GgufFile f = GgufFile::parse(b.bytes().data(), b.size(), "t.gguf");
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.tensor("a").nbytes(), 12u);
}

TEST(GgufTest, AcceptsEmptyTensorsAndFilesWithoutTensors) {
  Builder b;
  b.header(2, 0);
  b.tensor("empty", {0, 5}, GgmlType::Q8_0, 0);
  b.tensor("one", {1}, GgmlType::F16, 0);  // an empty tensor overlaps nothing
  b.pad();
  b.data(2);
  const GgufFile f = GgufFile::parse(b.bytes().data(), b.size(), "t.gguf");
  EXPECT_EQ(f.tensor_info("empty").nbytes, 0u);
  EXPECT_EQ(f.tensor("empty").shape_vec(), (std::vector<int64_t>{5, 0, 34}));

  Builder none;
  none.header(0, 1).kv_string("k", "v");
  EXPECT_EQ(parse_error(none.bytes()), "");
}

TEST(GgufTest, UnsupportedTypesParseButCannotBeViewed) {
  Builder b;
  b.header(1, 0);
  b.tensor("blk.0.ffn_down.weight", {256, 2}, GgmlType::Q4_K, 0);
  b.pad();
  b.data(288);
  const GgufFile f = GgufFile::parse(b.bytes().data(), b.size(), "t.gguf");
  EXPECT_EQ(f.tensor_info("blk.0.ffn_down.weight").nbytes, 288u);
  try {
    f.tensor("blk.0.ffn_down.weight");
    ADD_FAILURE() << "expected Unsupported";
  } catch (const Unsupported& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("tensor 'blk.0.ffn_down.weight': unsupported type Q4_K"), std::string::npos) << msg;
  }
  EXPECT_EQ(ggml_type_name(12), "Q4_K");
  EXPECT_EQ(ggml_type_name(31), "type 31");  // removed from ggml
  EXPECT_EQ(ggml_type_info(17)->block_bytes, 74u);
  EXPECT_EQ(ggml_type_info(16)->block_bytes, 66u);
  EXPECT_EQ(ggml_type_info(8)->block_elems, 32u);
}

// ---- one test per rule ---------------------------------------------------------------------------

TEST(GgufErrors, Truncated) {
  auto full = valid_file();
  expect_error(std::vector<uint8_t>(full.begin(), full.begin() + 10), {"header: truncated", "24 bytes"});
  // Cut inside the metadata, inside the tensor infos, and inside the data section.
  const uint64_t data_offset = GgufFile::parse(full.data(), full.size(), "t.gguf").data_offset();
  expect_error(std::vector<uint8_t>(full.begin(), full.begin() + 250), {"metadata entry 10 key", "truncated"});
  expect_error(std::vector<uint8_t>(full.begin(), full.begin() + data_offset - 40), {"tensor 'norm.weight'", "truncated"});
  expect_error(std::vector<uint8_t>(full.begin(), full.end() - 1), {"tensor 'norm.weight'", "run past the end"});
  for (size_t n = 0; n < full.size(); n += 7)
    EXPECT_NE(parse_error(std::vector<uint8_t>(full.begin(), full.begin() + n)), "") << "prefix of " << n << " bytes";
}

TEST(GgufErrors, BadMagic) {
  auto bytes = valid_file();
  bytes[0] = 'X';
  expect_error(bytes, {"header: bad magic", "\"GGUF\"", "58 47 55 46"});
}

TEST(GgufErrors, Version) {
  Builder v1, v4, be;
  v1.header(0, 0, 1).data(8);
  v4.header(0, 0, 4).data(8);
  be.header(0, 0, 0x03000000u).data(8);
  expect_error(v1.bytes(), {"version 1 is not supported"});
  expect_error(v4.bytes(), {"unsupported GGUF version 4", "2 and 3"});
  expect_error(be.bytes(), {"big-endian"});
}

TEST(GgufErrors, HugeCounts) {
  Builder kv, tensors, arr, strs;
  kv.header(0, 1ull << 60);
  expect_error(kv.bytes(), {"header: metadata count 1152921504606846976 cannot fit"});
  tensors.header(~0ull, 0);
  expect_error(tensors.bytes(), {"header: tensor count 18446744073709551615 cannot fit"});
  arr.header(0, 1).str("a").u32(9).u32(static_cast<uint32_t>(VT::u64)).u64(1ull << 61);
  expect_error(arr.bytes(), {"metadata key 'a'", "array of 2305843009213693952 u64 values", "cannot fit"});
  strs.header(0, 1).str("s").u32(9).u32(static_cast<uint32_t>(VT::string)).u64(1000);
  expect_error(strs.bytes(), {"metadata key 's'", "array of 1000 strings cannot fit"});
}

TEST(GgufErrors, StringLengths) {
  Builder key_past_end, value_past_end, key_too_long, elem_past_end;
  key_past_end.header(0, 1).u64(1000).data(20);
  expect_error(key_past_end.bytes(), {"metadata entry 0 key", "string of 1000 bytes", "runs past the end"});
  value_past_end.header(0, 1).str("k").u32(static_cast<uint32_t>(VT::string)).u64(~0ull >> 1);
  expect_error(value_past_end.bytes(), {"metadata key 'k'", "exceeds the limit"});
  key_too_long.header(0, 1).u64(1u << 20).data(1u << 20);
  expect_error(key_too_long.bytes(), {"metadata entry 0 key", "string length 1048576 exceeds the limit of 65536"});
  elem_past_end.header(0, 1).str("s").u32(9).u32(static_cast<uint32_t>(VT::string)).u64(2).str("x").u64(500).data(8);
  expect_error(elem_past_end.bytes(), {"metadata key 's'[1]", "string of 500 bytes"});
}

TEST(GgufErrors, MetadataValues) {
  Builder unknown, nested, boolean, bool_array, dup, empty, utf8;
  unknown.header(0, 1).str("k").u32(13).u64(0);
  expect_error(unknown.bytes(), {"metadata key 'k'", "unknown value type 13"});
  nested.header(0, 1).str("k").u32(9).u32(9).u64(0);
  expect_error(nested.bytes(), {"metadata key 'k'", "arrays of arrays are not supported"});
  boolean.header(0, 1).str("k").u32(7).u8(2).data(7);
  expect_error(boolean.bytes(), {"metadata key 'k'", "bool value 2 is not 0 or 1"});
  bool_array.header(0, 1).str("k").u32(9).u32(7).u64(2).u8(0).u8(5).data(8);
  expect_error(bool_array.bytes(), {"metadata key 'k'[1]", "bool value 5"});
  dup.header(0, 2).kv_u32("k", 1).kv_u32("k", 2);
  expect_error(dup.bytes(), {"metadata key 'k'", "appears twice"});
  empty.header(0, 1).kv_u32("", 1);
  expect_error(empty.bytes(), {"metadata entry 0", "key is empty"});
  utf8.header(0, 1).kv_u32("\xC3(", 1);
  expect_error(utf8.bytes(), {"metadata entry 0", "not valid UTF-8"});
}

TEST(GgufErrors, Alignment) {
  Builder type, zero, npot;
  type.header(0, 1).str("general.alignment").u32(static_cast<uint32_t>(VT::u64)).u64(32);
  expect_error(type.bytes(), {"metadata key 'general.alignment'", "must be a u32", "u64 32"});
  zero.header(0, 1).kv_u32("general.alignment", 0);
  expect_error(zero.bytes(), {"general.alignment", "non-zero power of two, got 0"});
  npot.header(0, 1).kv_u32("general.alignment", 48);
  expect_error(npot.bytes(), {"general.alignment", "non-zero power of two, got 48"});
}

TEST(GgufErrors, TensorInfoRules) {
  auto one = [](auto&& add_tensor, size_t data = 64) {
    Builder b;
    b.header(1, 0);
    add_tensor(b);
    b.pad();
    b.data(data);
    return b.bytes();
  };
  expect_error(one([](Builder& b) { b.tensor("w", {1, 1, 1, 1, 1}, GgmlType::F32, 0); }),
               {"tensor 'w'", "has 5 dimensions", "at most 4"});
  expect_error(one([](Builder& b) { b.tensor("w", {1ull << 63}, GgmlType::F32, 0); }),
               {"tensor 'w'", "ne[0] = 9223372036854775808 does not fit in int64"});
  expect_error(one([](Builder& b) { b.tensor("w", {1ull << 32, 1ull << 32}, GgmlType::F32, 0); }),
               {"tensor 'w'", "element count overflows int64 at ne[1]"});
  expect_error(one([](Builder& b) { b.tensor("w", {0, 1ull << 40, 1ull << 40}, GgmlType::F32, 0); }),
               {"tensor 'w'", "element count overflows"});  // even when empty: strides would overflow
  expect_error(one([](Builder& b) { b.tensor("w", {1ull << 61}, GgmlType::F64, 0); }),
               {"tensor 'w'", "byte size overflows"});
  expect_error(one([](Builder& b) { b.tensor("w", {4}, static_cast<GgmlType>(99), 0); }),
               {"tensor 'w'", "unknown ggml type id 99"});
  expect_error(one([](Builder& b) { b.tensor("w", {4}, static_cast<GgmlType>(31), 0); }),
               {"tensor 'w'", "unknown ggml type id 31"});
  expect_error(one([](Builder& b) { b.tensor("w", {48, 2}, GgmlType::Q8_0, 0); }),
               {"tensor 'w'", "row length ne[0] = 48 is not a multiple of the Q8_0 block size 32"});
  expect_error(one([](Builder& b) { b.tensor("w", {128}, GgmlType::IQ2_XXS, 0); }),
               {"tensor 'w'", "not a multiple of the IQ2_XXS block size 256"});
  expect_error(one([](Builder& b) { b.tensor("w", {2}, GgmlType::F32, 8); }),
               {"tensor 'w'", "offset 8 is not a multiple of the alignment 32"});
  expect_error(one([](Builder& b) { b.tensor("", {2}, GgmlType::F32, 0); }), {"tensor info 0", "name is empty"});
  expect_error(one([](Builder& b) { b.tensor("\xFF", {2}, GgmlType::F32, 0); }), {"tensor info 0", "not valid UTF-8"});
  expect_error(one([](Builder& b) { b.tensor("w", {32}, GgmlType::F32, 0); }, 64),
               {"tensor 'w'", "bytes [0, 0 + 128) run past the end of the data section (64 bytes"});
  expect_error(one([](Builder& b) { b.tensor("w", {2}, GgmlType::F32, 1ull << 63); }),
               {"tensor 'w'", "run past the end"});
}

TEST(GgufErrors, TensorsMustBeUniqueAndDisjoint) {
  Builder dup, overlap, inside;
  dup.header(2, 0).tensor("w", {8}, GgmlType::F32, 0).tensor("w", {8}, GgmlType::F32, 32).pad().data(64);
  expect_error(dup.bytes(), {"tensor 'w'", "name appears twice"});
  overlap.header(2, 0).tensor("a", {16}, GgmlType::F32, 0).tensor("b", {8}, GgmlType::F32, 32).pad().data(96);
  expect_error(overlap.bytes(), {"tensor 'b'", "bytes [32, 64) overlap tensor 'a' [0, 64)"});
  inside.header(2, 0).tensor("big", {64}, GgmlType::F32, 0).tensor("small", {1}, GgmlType::F32, 64).pad().data(256);
  expect_error(inside.bytes(), {"overlap tensor 'big'"});
}

TEST(GgufErrors, DataSectionPastTheEnd) {
  // The tensor infos end right at the end of the file; padding to the alignment would run past it.
  Builder b;
  b.header(1, 1).kv_u32("general.alignment", 1u << 20).tensor("w", {0}, GgmlType::F32, 0);
  expect_error(b.bytes(), {"tensor 'w'", "data section would start at offset 1048576, past the end"});
}

}  // namespace
}  // namespace b12x
