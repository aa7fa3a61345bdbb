// What the fuzz targets share: a scratch folder for the files a target must hand over by path,
// and how a target reports a broken invariant. A target aborts only through fail() (or a
// sanitizer); whatever else an input makes the code do is fine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace lockstep::fuzz {

// Longer inputs are skipped, so that one input costs at most a few milliseconds.
constexpr size_t kMaxInputBytes = 64 << 10;

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Prints "fuzz: <what>" and aborts: libFuzzer saves the input that got here as a crash.
[[noreturn]] void fail(const std::string& what);

// A folder for this process's files, made on first use and removed at exit.
const std::string& scratch_dir();
// Writes `contents` to scratch_dir()/<name> (a sub-folder is made as needed); returns the path.
std::string write_scratch(const std::string& name, std::string_view contents);

}  // namespace lockstep::fuzz
