// A GGUF file of metadata alone (version 3, no tensors), as gguf-py's writer lays it out: the
// tokenizer tests write the tokenizer.ggml.* keys llama.cpp's converter would.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace lockstep {

class MetadataWriter {
 public:
  void string(const std::string& key, const std::string& value) { entry(key, 8), text(value); }
  void u32(const std::string& key, uint32_t value) { entry(key, 4), raw(value); }
  void boolean(const std::string& key, bool value) { entry(key, 7), raw(uint8_t(value)); }
  void strings(const std::string& key, const std::vector<std::string>& values) {
    entry(key, 9), raw(uint32_t(8)), raw(uint64_t(values.size()));
    for (const std::string& value : values) text(value);
  }
  void i32s(const std::string& key, const std::vector<int32_t>& values) {
    entry(key, 9), raw(uint32_t(5)), raw(uint64_t(values.size()));
    for (int32_t value : values) raw(value);
  }
  void f32s(const std::string& key, const std::vector<float>& values) {
    entry(key, 9), raw(uint32_t(6)), raw(uint64_t(values.size()));
    for (float value : values) raw(value);
  }
  // The entries written so far, and how many: to add to another file's metadata.
  const std::string& body() const { return body_; }
  uint64_t count() const { return keys_; }
  void write(const std::string& path) const {
    std::ofstream out(path, std::ios::binary);
    const uint32_t magic = 0x46554747, version = 3;
    const uint64_t tensors = 0;
    out.write(reinterpret_cast<const char*>(&magic), 4);
    out.write(reinterpret_cast<const char*>(&version), 4);
    out.write(reinterpret_cast<const char*>(&tensors), 8);
    out.write(reinterpret_cast<const char*>(&keys_), 8);
    out << body_;
  }

 private:
  template <class T>
  void raw(T value) {
    body_.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  void text(const std::string& value) {
    raw(uint64_t(value.size()));
    body_ += value;
  }
  void entry(const std::string& key, uint32_t type) {
    ++keys_;
    text(key);
    raw(type);
  }
  std::string body_;
  uint64_t keys_ = 0;
};

}  // namespace lockstep
