// A file mapped read-only into memory for as long as the object lives.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "base/status.h"

namespace lockstep {

class MappedFile {
 public:
  // Maps the regular file `path`; errors name it ("<path>: cannot open: No such file ...").
  [[nodiscard]] static Expected<std::unique_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return static_cast<const std::byte*>(mapping_); }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, void* mapping, size_t size) : path_(std::move(path)), mapping_(mapping), size_(size) {}

  std::string path_;
  void* mapping_ = nullptr;
  size_t size_ = 0;
};

}  // namespace lockstep
