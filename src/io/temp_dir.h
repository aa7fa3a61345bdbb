// A scratch folder for tests and tools: created fresh, removed with its contents on destruction.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"

namespace lockstep {

class TempDir {
 public:
  // Creates a new, uniquely named folder "<prefix>.XXXXXX" under $TMPDIR (or /tmp).
  [[nodiscard]] static Expected<TempDir> create(const std::string& prefix = "lockstep");

  // Removes the folder and everything in it; errors are ignored.
  ~TempDir();
  TempDir(TempDir&& other) noexcept;
  TempDir& operator=(TempDir&& other) noexcept;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name; creates nothing.
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Writes `contents` to file(name), replacing it, and returns that path.
  [[nodiscard]] Expected<std::string> write_file(const std::string& name,
                                                 std::string_view contents) const;

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  void remove();

  std::string path_;  // empty once moved from
};

}  // namespace lockstep
