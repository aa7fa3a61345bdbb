#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace lockstep {

namespace {

Error file_error(const std::string& path, const std::string& what, int code) {
  return make_error(path + ": " + what + ": " + std::strerror(code));
}

}  // namespace

Expected<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return file_error(path, "cannot open", errno);
  struct stat info;
  if (fstat(fd, &info) != 0) {
    int code = errno;
    ::close(fd);
    return file_error(path, "cannot stat", code);
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return make_error(path + ": not a regular file");
  }
  const size_t size = size_t(info.st_size);
  void* mapping = nullptr;
  if (size > 0) {
    mapping = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) {
      int code = errno;
      ::close(fd);
      return file_error(path, "cannot mmap", code);
    }
  }
  ::close(fd);  // the mapping keeps the file open
  return std::unique_ptr<MappedFile>(new MappedFile(path, mapping, size));
}

MappedFile::~MappedFile() {
  if (mapping_) munmap(mapping_, size_);
}

}  // namespace lockstep
