#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "io/safetensors_writer.h"
#include "io/temp_dir.h"

namespace lockstep {
namespace {

// An 8-byte length, then `header` as given, then `data`: files the writer would refuse to make.
std::string raw_file(const std::string& header, const std::string& data = "") {
  std::string out;
  for (int i = 0; i < 8; ++i) out += char(uint64_t(header.size()) >> (8 * i));
  return out + header + data;
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Expected<TempDir> made = TempDir::create("safetensors_test");
    ASSERT_TRUE(made.ok()) << made.error().message;
    dir_.emplace(std::move(made).value());
  }
  // Writes `contents` as a file and returns what opening it says.
  std::string open_error(const std::string& contents, std::string* path_out = nullptr) {
    Expected<std::string> path = dir_->write_file("bad.safetensors", contents);
    EXPECT_TRUE(path.ok());
    if (path_out) *path_out = *path;
    auto file = SafetensorsFile::open(*path);
    EXPECT_FALSE(file.ok()) << "opened a corrupt file";
    return file.ok() ? "" : file.error().message;
  }
  std::optional<TempDir> dir_;
};

TEST_F(SafetensorsTest, RoundTripsEachDtype) {
  std::vector<float> f32 = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 7.0f};
  std::vector<uint16_t> bf16 = {f32_to_bf16(1.0f), f32_to_bf16(-0.5f), 0x7f80, 0x0001};
  std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x0001, 0x7bff};
  std::vector<int32_t> i32 = {-7, 0, 123456};
  std::vector<int64_t> i64 = {int64_t(1) << 40, -1};
  float scalar = 42.0f;
  std::vector<TensorToWrite> tensors = {
      {"a.f32", DType::f32, {2, 3}, f32.data()},    {"b.bf16", DType::bf16, {4}, bf16.data()},
      {"c.f16", DType::f16, {2, 1, 2}, f16.data()}, {"d.i32", DType::i32, {3}, i32.data()},
      {"e.i64", DType::i64, {1, 2}, i64.data()},    {"f.empty", DType::f16, {0, 5}, nullptr},
      {"g.scalar", DType::f32, {}, &scalar},
  };
  std::string path = dir_->file("model.safetensors");
  ASSERT_TRUE(write_safetensors(path, tensors, {{"format", "pt"}}).ok());

  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ((*file)->path(), path);
  ASSERT_EQ((*file)->tensors().size(), tensors.size());  // "__metadata__" is not a tensor
  for (const TensorToWrite& t : tensors) {
    SCOPED_TRACE(t.name);
    auto it = (*file)->tensors().find(t.name);
    ASSERT_NE(it, (*file)->tensors().end());
    const TensorInfo& info = it->second;
    EXPECT_EQ(info.name, t.name);
    EXPECT_EQ(info.dtype, t.dtype);
    EXPECT_EQ(info.shape, t.shape);
    EXPECT_EQ(info.file, path);
    ASSERT_EQ(info.bytes, size_t(t.shape.numel()) * dtype_size(t.dtype));
    if (info.bytes) {
      EXPECT_EQ(std::memcmp(info.data, t.data, info.bytes), 0);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(info.data) % dtype_size(t.dtype), 0u);
    }
  }
  EXPECT_EQ((*file)->tensors().at("g.scalar").shape.rank, 0);
}

TEST_F(SafetensorsTest, WriterRejectsBadInput) {
  float x = 1.0f;
  std::string path = dir_->file("w.safetensors");
  EXPECT_FALSE(
      write_safetensors(path, {{"a", DType::f32, {1}, &x}, {"a", DType::f32, {1}, &x}}).ok());
  EXPECT_FALSE(write_safetensors(path, {{"__metadata__", DType::f32, {1}, &x}}).ok());
  EXPECT_FALSE(write_safetensors(path, {{"a", DType::f32, {-1}, &x}}).ok());
  EXPECT_FALSE(write_safetensors(path, {{"a", DType::f32, {2}, nullptr}}).ok());
  EXPECT_FALSE(write_safetensors(path, {{"\xff", DType::f32, {1}, &x}}).ok());
  Status status = write_safetensors(dir_->file("no/such/dir.safetensors"), {});
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("no/such/dir.safetensors"), std::string::npos);
}

TEST_F(SafetensorsTest, AcceptsEmptyTensorsAndPaddedHeader) {
  std::string header =
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("z":{"dtype":"F32","shape":[0,3],"data_offsets":[4,4]}})";
  auto path = dir_->write_file("ok.safetensors", raw_file(header + "    ", std::string(8, '\0')));
  ASSERT_TRUE(path.ok());
  auto file = SafetensorsFile::open(*path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ((*file)->tensors().at("z").bytes, 0u);
  EXPECT_EQ((*file)->tensors().size(), 2u);
}

TEST_F(SafetensorsTest, MissingFileNamesIt) {
  std::string path = dir_->file("absent.safetensors");
  auto file = SafetensorsFile::open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.error().message.find(path), std::string::npos) << file.error().message;
}

TEST_F(SafetensorsTest, FolderIsNotAFile) {
  auto file = SafetensorsFile::open(dir_->path());
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.error().message.find("not a regular file"), std::string::npos);
}

TEST_F(SafetensorsTest, TooShort) {
  std::string path;
  std::string message = open_error("abc", &path);
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("too short"), std::string::npos) << message;
}

TEST_F(SafetensorsTest, HeaderLengthPastEnd) {
  std::string contents = raw_file("{}");
  contents[0] = char(200);  // claims 200 header bytes, has 2
  std::string path;
  std::string message = open_error(contents, &path);
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("past the end"), std::string::npos) << message;
}

TEST_F(SafetensorsTest, RealFixtureLoads) {
  std::string path = std::string(LOCKSTEP_TEST_DATA) + "/llama/model.safetensors";
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  const TensorInfo& embed = (*file)->tensors().at("model.embed_tokens.weight");
  EXPECT_EQ(embed.dtype, DType::f32);
  EXPECT_EQ(embed.shape, Shape({512, 128}));
  EXPECT_EQ(embed.bytes, 512u * 128u * 4u);
  float first;
  std::memcpy(&first, embed.data, 4);
  EXPECT_TRUE(std::isfinite(first));
}

// Every single-byte corruption of a small file's length and header either opens to tensors
// that lie inside the file or fails cleanly (run under ASan/UBSan to mean anything).
TEST_F(SafetensorsTest, SurvivesByteCorruption) {
  float values[6] = {1, 2, 3, 4, 5, 6};
  std::string path = dir_->file("good.safetensors");
  ASSERT_TRUE(
      write_safetensors(path, {{"a", DType::f32, {2, 2}, values}, {"b", DType::f16, {4}, values}})
          .ok());
  std::string original;
  std::FILE* in = std::fopen(path.c_str(), "rb");
  ASSERT_NE(in, nullptr);
  char buffer[4096];
  size_t got = std::fread(buffer, 1, sizeof buffer, in);
  std::fclose(in);
  original.assign(buffer, got);
  size_t header_end = 8 + size_t(uint8_t(original[0])) + (size_t(uint8_t(original[1])) << 8);
  for (size_t at = 0; at < header_end; ++at) {
    for (int flip : {0x01, 0x20, 0x80}) {
      std::string bytes = original;
      bytes[at] = char(bytes[at] ^ flip);
      auto mutated = dir_->write_file("mutated.safetensors", bytes);
      ASSERT_TRUE(mutated.ok());
      auto file = SafetensorsFile::open(*mutated);
      if (!file.ok()) continue;
      size_t total = 0;  // tensors do not overlap, so together they fit in the file
      for (const auto& [name, info] : (*file)->tensors()) total += info.bytes;
      EXPECT_LE(total, bytes.size()) << "byte " << at << " ^ " << flip;
    }
  }
}

// A header that must be refused, the data after it, and what the message must contain.
struct CorruptCase {
  const char* label;
  std::string header;
  std::string data;
  std::string expect;  // besides the file path
};

class SafetensorsCorruptTest : public SafetensorsTest,
                               public ::testing::WithParamInterface<CorruptCase> {};

TEST_P(SafetensorsCorruptTest, FailsNamingFileAndCause) {
  const CorruptCase& c = GetParam();
  std::string path;
  std::string message = open_error(raw_file(c.header, c.data), &path);
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find(c.expect), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

std::string entry(const std::string& dtype, const std::string& shape, const std::string& offsets) {
  std::string out = "{";
  if (!dtype.empty()) out += R"("dtype":)" + dtype + ",";
  if (!shape.empty()) out += R"("shape":)" + shape + ",";
  if (!offsets.empty()) out += R"("data_offsets":)" + offsets + ",";
  if (out.back() == ',') out.pop_back();
  return out + "}";
}

std::string one(const std::string& dtype, const std::string& shape, const std::string& offsets) {
  return R"({"w":)" + entry(dtype, shape, offsets) + "}";
}

const std::string k8(8, '\0');
const CorruptCase kCorruptCases[] = {
    {"not_json", "{not json", "", "not valid JSON"},
    {"not_object", "[1, 2]", "", "not a JSON object"},
    {"entry_not_object", R"({"w": 5})", "", "tensor 'w': entry is not"},
    {"missing_dtype", one("", "[2]", "[0,8]"), k8, "tensor 'w': missing or non-string 'dtype'"},
    {"dtype_not_string", one("4", "[2]", "[0,8]"), k8, "tensor 'w': missing or non-string"},
    {"unknown_dtype", one(R"("F8_E5M2")", "[2]", "[0,8]"), k8,
     "tensor 'w': unknown or unsupported dtype 'F8_E5M2'"},
    {"missing_shape", one(R"("F32")", "", "[0,8]"), k8, "tensor 'w': missing 'shape'"},
    {"shape_not_array", one(R"("F32")", "2", "[0,8]"), k8, "tensor 'w': 'shape' is not an array"},
    {"shape_not_integer", one(R"("F32")", "[2.5]", "[0,8]"), k8,
     "tensor 'w': shape 2.5 is not an integer"},
    {"shape_string", one(R"("F32")", R"(["2"])", "[0,8]"), k8, "tensor 'w': shape \"2\" is not"},
    {"negative_dim", one(R"("F32")", "[-2]", "[0,8]"), k8, "tensor 'w': negative dimension -2"},
    {"rank_too_high", one(R"("F32")", "[1,1,1,1,2]", "[0,8]"), k8, "tensor 'w': shape has rank 5"},
    {"dim_past_int64", one(R"("F32")", "[18446744073709551615]", "[0,8]"), k8,
     "tensor 'w': dimension 18446744073709551615 is too large"},
    {"numel_overflow", one(R"("F32")", "[4294967296,4294967296,4294967296]", "[0,8]"), k8,
     "tensor 'w': shape"},
    {"bytes_overflow", one(R"("F32")", "[2305843009213693952,2]", "[0,8]"), k8, "is too large"},
    {"missing_offsets", one(R"("F32")", "[2]", ""), k8, "tensor 'w': missing 'data_offsets'"},
    {"offsets_not_array", one(R"("F32")", "[2]", "8"), k8, "tensor 'w': 'data_offsets' 8 is not"},
    {"offsets_one_value", one(R"("F32")", "[2]", "[8]"), k8,
     "tensor 'w': 'data_offsets' [8] is not"},
    {"offsets_three_values", one(R"("F32")", "[2]", "[0,8,8]"), k8, "tensor 'w': 'data_offsets'"},
    {"offsets_negative", one(R"("F32")", "[2]", "[-8,0]"), k8, "tensor 'w': 'data_offsets'"},
    {"offsets_strings", one(R"("F32")", "[2]", R"(["0","8"])"), k8, "tensor 'w': 'data_offsets'"},
    {"begin_after_end", one(R"("F32")", "[0]", "[8,0]"), k8,
     "tensor 'w': data_offsets [8, 0] has begin > end"},
    {"end_past_data", one(R"("F32")", "[4]", "[0,16]"), k8,
     "tensor 'w': data_offsets [0, 16] lie outside the data section of 8 bytes"},
    {"size_mismatch", one(R"("F32")", "[3]", "[0,8]"), k8,
     "tensor 'w': holds 8 bytes but shape [3] of F32 needs 12"},
    {"overlap",
     R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
     std::string(12, '\0'), "tensors 'a' [0, 8) and 'b' [4, 12) overlap"},
    {"overlap_contained",
     R"({"a":{"dtype":"F16","shape":[6],"data_offsets":[0,12]},)"
     R"("b":{"dtype":"F16","shape":[2],"data_offsets":[4,8]}})",
     std::string(12, '\0'), "overlap"},
    {"empty_header", "", "", "not valid JSON"},
};

INSTANTIATE_TEST_SUITE_P(Cases, SafetensorsCorruptTest, ::testing::ValuesIn(kCorruptCases),
                         [](const ::testing::TestParamInfo<CorruptCase>& info) {
                           return std::string(info.param.label);
                         });

}  // namespace
}  // namespace lockstep
