#include "io/temp_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <vector>

namespace lockstep {

Expected<TempDir> TempDir::create(const std::string& prefix) {
  std::error_code ec;
  std::filesystem::path base = std::filesystem::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string pattern = (base / (prefix + ".XXXXXX")).string();
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr)
    return Error{"cannot create a folder " + pattern + ": " +
                 std::error_code(errno, std::generic_category()).message()};
  return TempDir(std::string(buffer.data()));
}

TempDir::~TempDir() { remove(); }

TempDir::TempDir(TempDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }

TempDir& TempDir::operator=(TempDir&& other) noexcept {
  if (this != &other) {
    remove();
    path_ = std::move(other.path_);
    other.path_.clear();
  }
  return *this;
}

void TempDir::remove() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  path_.clear();
}

Expected<std::string> TempDir::write_file(const std::string& name,
                                          std::string_view contents) const {
  std::string path = file(name);
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (!out)
    return Error{"cannot write " + path + ": " +
                 std::error_code(errno, std::generic_category()).message()};
  bool ok = std::fwrite(contents.data(), 1, contents.size(), out) == contents.size();
  ok = std::fclose(out) == 0 && ok;
  if (!ok) return Error{"cannot write " + path};
  return path;
}

}  // namespace lockstep
