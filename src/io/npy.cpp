#include "io/npy.h"

#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <system_error>

namespace lockstep {
namespace {

static_assert(std::endian::native == std::endian::little, "npy I/O assumes a little-endian host");

constexpr std::string_view kMagic = "\x93NUMPY";

std::string errno_text(int code) {
  return std::error_code(code, std::generic_category()).message();
}

// The text after `'key':` in a header dict, leading spaces skipped; empty if the key is absent.
std::string_view value_after(std::string_view header, std::string_view key) {
  std::string quoted = "'" + std::string(key) + "'";
  size_t at = header.find(quoted);
  if (at == std::string_view::npos) return {};
  std::string_view rest = header.substr(at + quoted.size());
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  if (rest.empty() || rest.front() != ':') return {};
  rest.remove_prefix(1);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  return rest;
}

// Parses "(2, 3)", "(5,)" or "()" at the start of `text`.
bool parse_shape_tuple(std::string_view text, Shape& shape) {
  if (text.empty() || text.front() != '(') return false;
  text.remove_prefix(1);
  shape = Shape();
  int64_t running = 1;
  while (true) {
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    if (text.empty()) return false;
    if (text.front() == ')') return true;
    if (!std::isdigit(static_cast<unsigned char>(text.front())) || shape.rank == kMaxRank)
      return false;
    int64_t dim = 0;
    while (!text.empty() && std::isdigit(static_cast<unsigned char>(text.front()))) {
      if (__builtin_mul_overflow(dim, int64_t(10), &dim) ||
          __builtin_add_overflow(dim, int64_t(text.front() - '0'), &dim))
        return false;
      text.remove_prefix(1);
    }
    if (__builtin_mul_overflow(running, dim, &running)) return false;
    shape.dims[shape.rank++] = dim;
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    if (!text.empty() && text.front() == ',') text.remove_prefix(1);
  }
}

}  // namespace

Status write_npy_f32(const std::string& path, const float* data, const Shape& shape) {
  std::string dims;
  int64_t count = 1;
  for (int i = 0; i < shape.rank; ++i) {
    if (shape[i] < 0 || __builtin_mul_overflow(count, shape[i], &count) ||
        count > int64_t(SIZE_MAX / sizeof(float)))
      return Error{"cannot write " + path + ": invalid shape " + shape.to_string()};
    dims += std::to_string(shape[i]) + (shape.rank == 1 ? "," : i + 1 < shape.rank ? ", " : "");
  }
  if (count > 0 && data == nullptr) return Error{"cannot write " + path + ": no data"};

  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  size_t unpadded = kMagic.size() + 2 + 2 + header.size() + 1;  // + the final '\n'
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string prefix(kMagic);
  prefix += '\x01';
  prefix += '\x00';
  prefix += char(header.size() & 0xff);
  prefix += char(header.size() >> 8);

  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (!out) return Error{"cannot write " + path + ": " + errno_text(errno)};
  size_t data_bytes = size_t(count) * sizeof(float);
  bool ok = std::fwrite(prefix.data(), 1, prefix.size(), out) == prefix.size() &&
            std::fwrite(header.data(), 1, header.size(), out) == header.size() &&
            (data_bytes == 0 || std::fwrite(data, 1, data_bytes, out) == data_bytes);
  int saved_errno = errno;
  if (std::fclose(out) != 0 && ok) {
    ok = false;
    saved_errno = errno;
  }
  if (!ok) {
    std::remove(path.c_str());
    return Error{"cannot write " + path + ": " + errno_text(saved_errno)};
  }
  return Status::success();
}

Expected<std::pair<Shape, std::vector<float>>> read_npy_f32(const std::string& path) {
  std::FILE* in = std::fopen(path.c_str(), "rb");
  if (!in) return Error{"cannot open " + path + ": " + errno_text(errno)};
  std::string bytes;
  char buffer[1 << 16];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof buffer, in)) > 0) bytes.append(buffer, got);
  bool failed = std::ferror(in) != 0;
  int saved_errno = errno;
  std::fclose(in);
  if (failed) return Error{"cannot read " + path + ": " + errno_text(saved_errno)};

  auto fail = [&](const std::string& problem) { return Error{path + ": " + problem}; };
  if (bytes.size() < 10 || std::string_view(bytes).substr(0, kMagic.size()) != kMagic)
    return fail("not an .npy file");
  auto byte = [&](size_t i) { return size_t(static_cast<uint8_t>(bytes[i])); };
  size_t major = byte(6);
  size_t header_start, header_size;
  if (major == 1) {
    header_start = 10;
    header_size = byte(8) | byte(9) << 8;
  } else if ((major == 2 || major == 3) && bytes.size() >= 12) {
    header_start = 12;
    header_size = byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24;
  } else {
    return fail("unsupported .npy version " + std::to_string(major));
  }
  if (header_size > bytes.size() - header_start)
    return fail("header runs past the end of the file");
  std::string_view header = std::string_view(bytes).substr(header_start, header_size);

  std::string_view descr = value_after(header, "descr");
  if (descr.substr(0, 5) != "'<f4'")
    return fail("dtype is not '<f4' (header " + std::string(header.substr(0, 80)) + ")");
  if (value_after(header, "fortran_order").substr(0, 5) != "False")
    return fail("fortran_order is not False");
  Shape shape;
  if (!parse_shape_tuple(value_after(header, "shape"), shape))
    return fail("cannot read the shape (rank at most " + std::to_string(kMaxRank) + ")");

  size_t data_start = header_start + header_size;
  size_t data_bytes = bytes.size() - data_start;
  if (uint64_t(shape.numel()) > SIZE_MAX / sizeof(float) ||
      data_bytes != size_t(shape.numel()) * sizeof(float))
    return fail("holds " + std::to_string(data_bytes) + " data bytes but shape " +
                shape.to_string() + " needs " + std::to_string(uint64_t(shape.numel()) * 4));
  std::vector<float> values(size_t(shape.numel()));
  if (data_bytes) std::memcpy(values.data(), bytes.data() + data_start, data_bytes);
  return std::pair<Shape, std::vector<float>>(shape, std::move(values));
}

}  // namespace lockstep
