// Safetensors reader/writer: round trip, atomic replacement, and one test per validation rule.
#include "b12x/io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "b12x/core/error.h"

namespace b12x {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "b12x-safetensors-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A file with the given header length field, header text and `data_bytes` bytes of data.
  std::string raw_file(const std::string& header, size_t data_bytes, uint64_t header_len_field) {
    const std::string p = path("raw.safetensors");
    std::ofstream f(p, std::ios::binary);
    for (int i = 0; i < 8; ++i) f.put(static_cast<char>(header_len_field >> (8 * i)));
    f << header << std::string(data_bytes, '\x01');
    return p;
  }
  std::string raw_file(const std::string& header, size_t data_bytes) {
    return raw_file(header, data_bytes, header.size());
  }

  fs::path dir_;
};

// The IoError message of opening `file`, or "" when it opens.
std::string open_error(const std::string& file) {
  try {
    SafetensorsFile::open(file);
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

TEST_F(SafetensorsTest, RoundTripKeepsDtypesShapesBytesAndMetadata) {
  HostTensor a(DType::bf16, {2, 3});
  HostTensor b(DType::f8_e4m3, {5});
  HostTensor c(DType::ue8m0, {2, 2});
  HostTensor d(DType::i64, {3});
  HostTensor scalar(DType::f32, {});
  HostTensor empty(DType::f32, {0, 4});
  for (HostTensor* t : {&a, &b, &c, &d, &scalar})
    for (size_t i = 0; i < t->nbytes(); ++i) t->ptr<uint8_t>()[i] = static_cast<uint8_t>(7 * i + t->nbytes());
  const std::string file = path("rt.safetensors");
  write_safetensors(file,
                    {{"a", a.view()}, {"b", b.view()}, {"c", c.view()}, {"d", d.view()}, {"scalar", scalar.view()},
                     {"empty", empty.view()}},
                    {{"format", "nvfp4"}, {"input_scale", "0.125"}});

  const SafetensorsFile f = SafetensorsFile::open(file);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"a", "b", "c", "d", "empty", "scalar"}));
  EXPECT_TRUE(f.contains("a"));
  EXPECT_FALSE(f.contains("z"));
  EXPECT_EQ(f.metadata().at("format"), "nvfp4");
  EXPECT_EQ(f.metadata().at("input_scale"), "0.125");
  const std::pair<const char*, HostTensor*> expected[] = {{"a", &a}, {"b", &b},           {"c", &c},
                                                          {"d", &d}, {"scalar", &scalar}, {"empty", &empty}};
  for (const auto& [name, t] : expected) {
    const TensorView v = f.tensor(name);
    EXPECT_EQ(v.dtype, t->dtype()) << name;
    EXPECT_EQ(v.shape_vec(), t->view().shape_vec()) << name;
    ASSERT_EQ(v.nbytes(), t->nbytes()) << name;
    if (t->nbytes() != 0) {  // an empty HostTensor has no buffer: memcmp(p, nullptr, 0) is UB
      EXPECT_EQ(std::memcmp(v.data, t->ptr<uint8_t>(), t->nbytes()), 0) << name;
    }
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data) % dtype_size(v.dtype), 0u) << name << " is misaligned";
    const HostTensor copy = f.read(name);
    EXPECT_EQ(copy.bytes(), t->bytes()) << name;
  }
  EXPECT_THROW(f.tensor("z"), IoError);
}

TEST_F(SafetensorsTest, WriterReplacesAtomicallyAndLeavesNoTemporaries) {
  const std::string file = path("w.safetensors");
  HostTensor one(DType::f32, {1});
  write_safetensors(file, {{"t", one.view()}});
  HostTensor two(DType::u8, {4});
  write_safetensors(file, {{"u", two.view()}});
  EXPECT_EQ(SafetensorsFile::open(file).names(), std::vector<std::string>{"u"});
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir_)) entries += e.is_regular_file();
  EXPECT_EQ(entries, 1);
}

TEST_F(SafetensorsTest, WriterRejectsBadInputs) {
  HostTensor t(DType::f32, {2, 2});
  TensorView transposed = t.view();
  std::swap(transposed.strides[0], transposed.strides[1]);
  EXPECT_THROW(write_safetensors(path("x"), {{"t", transposed}}), BadArgument);
  EXPECT_THROW(write_safetensors(path("x"), {{"t", t.view()}, {"t", t.view()}}), BadArgument);
  EXPECT_THROW(write_safetensors(path("x"), {{"__metadata__", t.view()}}), BadArgument);
  EXPECT_THROW(write_safetensors(path("no/such/dir/x"), {{"t", t.view()}}), IoError);
}

TEST_F(SafetensorsTest, MissingFileNamesThePath) {
  const std::string e = open_error(path("absent.safetensors"));
  EXPECT_NE(e.find("absent.safetensors"), std::string::npos) << e;
}

TEST_F(SafetensorsTest, DirectoryAndEmptyFileAreRejectedByName) {
  const std::string dir = path("a-directory");
  fs::create_directory(dir);
  const std::string e = open_error(dir);
  EXPECT_NE(e.find("not a regular file"), std::string::npos) << e;
  EXPECT_NE(e.find("a-directory"), std::string::npos) << e;
  const std::string empty = path("empty.safetensors");
  std::ofstream(empty, std::ios::binary).flush();
  EXPECT_NE(open_error(empty).find("truncated: 0 bytes"), std::string::npos) << open_error(empty);
}

TEST_F(SafetensorsTest, RejectsTruncatedFile) {
  const std::string p = path("short.safetensors");
  std::ofstream(p, std::ios::binary) << "abc";
  EXPECT_NE(open_error(p).find("truncated"), std::string::npos) << open_error(p);
}

TEST_F(SafetensorsTest, RejectsHeaderLengthBeyondFile) {
  const std::string header = R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";
  EXPECT_NE(open_error(raw_file(header, 2, header.size() + 3)).find("runs past the end of the file"), std::string::npos);
  EXPECT_NE(open_error(raw_file(header, 2, 200'000'000)).find("100 MB"), std::string::npos);
}

TEST_F(SafetensorsTest, RejectsTruncatedData) {
  const std::string e = open_error(raw_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 12));
  EXPECT_NE(e.find("tensor 'a'"), std::string::npos) << e;
  EXPECT_NE(e.find("run past the end"), std::string::npos) << e;
}

TEST_F(SafetensorsTest, RejectsOverlappingOffsets) {
  const std::string e = open_error(raw_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                            R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                                            6));
  EXPECT_NE(e.find("overlap"), std::string::npos) << e;
  EXPECT_NE(e.find("tensor 'b'"), std::string::npos) << e;
}

TEST_F(SafetensorsTest, RejectsHolesAndTrailingBytes) {
  EXPECT_NE(open_error(raw_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", 4)).find("belong to no tensor"),
            std::string::npos);
  EXPECT_NE(open_error(raw_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", 5)).find("trailing"),
            std::string::npos);
}

TEST_F(SafetensorsTest, RejectsSizeMismatch) {
  const std::string e = open_error(raw_file(R"({"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,8]}})", 8));
  EXPECT_NE(e.find("tensor 'w'"), std::string::npos) << e;
  EXPECT_NE(e.find("need 12"), std::string::npos) << e;
}

TEST_F(SafetensorsTest, RejectsUnknownDtypeNamingTensorAndDtype) {
  for (const char* dtype : {"I16", "BOOL", "F4", "bogus"}) {
    const std::string header = std::string(R"({"ids":{"dtype":")") + dtype + R"(","shape":[1],"data_offsets":[0,2]}})";
    const std::string e = open_error(raw_file(header, 2));
    EXPECT_NE(e.find("tensor 'ids'"), std::string::npos) << e;
    EXPECT_NE(e.find(std::string("'") + dtype + "'"), std::string::npos) << e;
  }
}

TEST_F(SafetensorsTest, RejectsBadJson) {
  EXPECT_NE(open_error(raw_file(R"({"a":{"dtype":"U8",)", 0)).find("not valid JSON"), std::string::npos);
  EXPECT_NE(open_error(raw_file("[1, 2]", 0)).find("JSON object"), std::string::npos);
}

TEST_F(SafetensorsTest, RejectsMalformedEntries) {
  const auto error_for = [&](const std::string& entry, size_t data) { return open_error(raw_file("{\"t\":" + entry + "}", data)); };
  EXPECT_NE(error_for(R"({"dtype":"U8","shape":[-1],"data_offsets":[0,0]})", 0).find("non-negative"), std::string::npos);
  EXPECT_NE(error_for(R"({"dtype":"U8","shape":[1,1,1,1,1,1,1],"data_offsets":[0,1]})", 1).find("dimensions"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"dtype":"U8","shape":[0],"data_offsets":[3,1]})", 3).find("begin after"), std::string::npos);
  EXPECT_NE(error_for(R"({"dtype":"U8","shape":[1]})", 1).find("data_offsets"), std::string::npos);
  EXPECT_NE(error_for(R"({"dtype":"U8","shape":[1],"data_offsets":[0]})", 1).find("two non-negative"), std::string::npos);
  // Empty (a zero extent) but with non-zero extents whose product overflows int64: still too large
  // (views count elements and strides in int64; found by fuzz_safetensors).
  EXPECT_NE(error_for(R"({"dtype":"U8","shape":[0,4611686018427387904,4611686018427387904],"data_offsets":[0,0]})", 0)
                .find("too large"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,1]})", 1).find("too large"),
            std::string::npos);
}

TEST_F(SafetensorsTest, RejectsDuplicateNamesAndBadMetadata) {
  EXPECT_NE(open_error(raw_file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                                R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                                2))
                .find("twice"),
            std::string::npos);
  EXPECT_NE(open_error(raw_file(R"({"__metadata__":{"k":1}})", 0)).find("not a string"), std::string::npos);
}

TEST_F(SafetensorsTest, AcceptsEmptyFileWithMetadataOnly) {
  const SafetensorsFile f = SafetensorsFile::open(raw_file(R"({"__metadata__":{"k":"v"}})", 0));
  EXPECT_TRUE(f.names().empty());
  EXPECT_EQ(f.metadata().at("k"), "v");
}

}  // namespace
}  // namespace b12x
