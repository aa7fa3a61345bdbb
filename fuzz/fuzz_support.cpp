#include "fuzz_support.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "io/temp_dir.h"

namespace lockstep::fuzz {

void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz: %s\n", what.c_str());
  std::abort();
}

const std::string& scratch_dir() {
  static std::optional<TempDir> dir;  // a static, so that exit() removes it
  if (!dir) {
    Expected<TempDir> made = TempDir::create("lockstep-fuzz");
    if (!made.ok()) fail("cannot make a scratch folder: " + made.error().message);
    dir.emplace(std::move(made).value());
  }
  return dir->path();
}

std::string write_scratch(const std::string& name, std::string_view contents) {
  std::filesystem::path path = std::filesystem::path(scratch_dir()) / name;
  std::error_code ignored;
  std::filesystem::create_directories(path.parent_path(), ignored);
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (!out) fail("cannot write " + path.string());
  bool written = std::fwrite(contents.data(), 1, contents.size(), out) == contents.size();
  if (std::fclose(out) != 0 || !written) fail("cannot write " + path.string());
  return path.string();
}

}  // namespace lockstep::fuzz
