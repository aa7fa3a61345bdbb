#include "io/npy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "io/temp_dir.h"

namespace lockstep {
namespace {

class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Expected<TempDir> made = TempDir::create("npy_test");
    ASSERT_TRUE(made.ok()) << made.error().message;
    dir_.emplace(std::move(made).value());
  }
  std::string read_bytes(const std::string& path) {
    std::string out;
    std::FILE* in = std::fopen(path.c_str(), "rb");
    if (!in) return out;
    char buffer[4096];
    size_t got;
    while ((got = std::fread(buffer, 1, sizeof buffer, in)) > 0) out.append(buffer, got);
    std::fclose(in);
    return out;
  }
  // Writes `shape` of counting floats, reads it back, and returns the file's bytes.
  std::string round_trip(const Shape& shape) {
    std::vector<float> values(size_t(shape.numel()));
    for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * float(i) - 3.0f;
    std::string path = dir_->file("x.npy");
    Status written = write_npy_f32(path, values.data(), shape);
    EXPECT_TRUE(written.ok()) << written.message();
    auto read = read_npy_f32(path);
    EXPECT_TRUE(read.ok()) << read.error().message;
    if (read.ok()) {
      EXPECT_EQ(read->first, shape);
      EXPECT_EQ(read->second, values);
    }
    return read_bytes(path);
  }
  // The header text between the 10-byte prefix and the data.
  static std::string header_of(const std::string& bytes) {
    size_t length = uint8_t(bytes[8]) | size_t(uint8_t(bytes[9])) << 8;
    return bytes.substr(10, length);
  }
  std::string read_error(const std::string& contents) {
    auto path = dir_->write_file("bad.npy", contents);
    EXPECT_TRUE(path.ok());
    auto read = read_npy_f32(*path);
    EXPECT_FALSE(read.ok());
    if (read.ok()) return "";
    EXPECT_NE(read.error().message.find(*path), std::string::npos) << read.error().message;
    return read.error().message;
  }

  std::optional<TempDir> dir_;
};

TEST_F(NpyTest, RoundTripsRanks) {
  round_trip({2, 3});
  round_trip({7});
  round_trip({});
  round_trip({0, 3});
  round_trip({2, 1, 3, 2});
}

TEST_F(NpyTest, HeaderLayout) {
  std::string bytes = round_trip({2, 3});
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(bytes[6], 1);
  EXPECT_EQ(bytes[7], 0);
  std::string header = header_of(bytes);
  EXPECT_EQ((10 + header.size()) % 64, 0u);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0), 0u);
  EXPECT_EQ(bytes.size(), 10 + header.size() + 6 * 4);

  EXPECT_NE(header_of(round_trip({5})).find("'shape': (5,)"), std::string::npos);
  EXPECT_NE(header_of(round_trip({})).find("'shape': ()"), std::string::npos);
}

TEST_F(NpyTest, WriteErrors) {
  float x = 0;
  std::string path = dir_->file("no/such/dir/x.npy");
  Status status = write_npy_f32(path, &x, {1});
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find(path), std::string::npos) << status.message();
  EXPECT_FALSE(write_npy_f32(dir_->file("y.npy"), &x, {-1}).ok());
  EXPECT_FALSE(write_npy_f32(dir_->file("y.npy"), nullptr, {2}).ok());
  EXPECT_TRUE(write_npy_f32(dir_->file("y.npy"), nullptr, {0}).ok());
}

TEST_F(NpyTest, ReadErrorsNameTheFile) {
  std::string path = dir_->file("absent.npy");
  auto missing = read_npy_f32(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find(path), std::string::npos);

  std::string good = round_trip({2, 2});
  std::string header = header_of(good);
  std::string prefix = good.substr(0, 10);
  std::string data = good.substr(10 + header.size());
  auto with_header = [&](std::string text) {
    text.resize(header.size(), ' ');
    text.back() = '\n';
    return prefix + text + data;
  };

  EXPECT_NE(read_error("hello world").find("not an .npy file"), std::string::npos);
  EXPECT_NE(read_error(good.substr(0, good.size() - 1)).find("needs 16"), std::string::npos);
  EXPECT_NE(read_error(good + "x").find("holds 17 data bytes"), std::string::npos);
  EXPECT_NE(read_error(with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }"))
                .find("'<f4'"),
            std::string::npos);
  EXPECT_NE(read_error(with_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }"))
                .find("fortran_order"),
            std::string::npos);
  EXPECT_NE(read_error(
                with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 4), }"))
                .find("shape"),
            std::string::npos);
  std::string future = good;
  future[6] = 9;
  EXPECT_NE(read_error(future).find("version 9"), std::string::npos);
  std::string long_header = good;
  long_header[9] = char(0x7f);
  EXPECT_NE(read_error(long_header).find("past the end"), std::string::npos);
}

}  // namespace
}  // namespace lockstep
