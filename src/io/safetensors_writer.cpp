#include "io/safetensors_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

namespace lockstep {
namespace {

using nlohmann::json;

Error write_error(const std::string& path, const std::string& problem) {
  return Error{"cannot write " + path + ": " + problem};
}

// Bytes of a tensor, or an error if its shape is invalid or too large.
Expected<uint64_t> tensor_bytes(const std::string& path, const TensorToWrite& t) {
  uint64_t count = 1;
  for (int i = 0; i < t.shape.rank; ++i) {
    if (t.shape[i] < 0)
      return write_error(
          path, "tensor '" + t.name + "' has negative dimension in shape " + t.shape.to_string());
    if (__builtin_mul_overflow(count, uint64_t(t.shape[i]), &count) || count > uint64_t(INT64_MAX))
      return write_error(path,
                         "tensor '" + t.name + "' shape " + t.shape.to_string() + " is too large");
  }
  uint64_t bytes;
  if (__builtin_mul_overflow(count, uint64_t(dtype_size(t.dtype)), &bytes))
    return write_error(path,
                       "tensor '" + t.name + "' shape " + t.shape.to_string() + " is too large");
  return bytes;
}

bool write_all(std::FILE* out, const void* data, size_t bytes) {
  return bytes == 0 || std::fwrite(data, 1, bytes, out) == bytes;
}

}  // namespace

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  // Widest element first, then by name: every tensor starts aligned to its element size.
  std::vector<const TensorToWrite*> order;
  for (const TensorToWrite& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorToWrite* a, const TensorToWrite* b) {
    if (dtype_size(a->dtype) != dtype_size(b->dtype))
      return dtype_size(a->dtype) > dtype_size(b->dtype);
    return a->name < b->name;
  });

  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  std::vector<uint64_t> sizes;
  uint64_t offset = 0;
  for (const TensorToWrite* t : order) {
    if (t->name.empty() || t->name == "__metadata__")
      return write_error(path, "invalid tensor name '" + t->name + "'");
    if (!names.insert(t->name).second)
      return write_error(path, "duplicate tensor name '" + t->name + "'");
    Expected<uint64_t> bytes = tensor_bytes(path, *t);
    if (!bytes.ok()) return bytes.error();
    if (*bytes > 0 && t->data == nullptr)
      return write_error(path, "tensor '" + t->name + "' has no data");
    json shape = json::array();
    for (int i = 0; i < t->shape.rank; ++i) shape.push_back(t->shape[i]);
    header[t->name] = {{"dtype", std::string(dtype_to_safetensors(t->dtype))},
                       {"shape", shape},
                       {"data_offsets", {offset, offset + *bytes}}};
    sizes.push_back(*bytes);
    offset += *bytes;
  }

  std::string header_text;
  try {
    header_text = header.dump();
  } catch (const json::exception& e) {  // a name or metadata that is not UTF-8
    return write_error(path, std::string("cannot encode header: ") + e.what());
  }
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = uint8_t(uint64_t(header_text.size()) >> (8 * i));

  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (!out) return write_error(path, std::error_code(errno, std::generic_category()).message());
  bool ok = write_all(out, length, 8) && write_all(out, header_text.data(), header_text.size());
  for (size_t i = 0; ok && i < order.size(); ++i) ok = write_all(out, order[i]->data, sizes[i]);
  int saved_errno = errno;
  if (std::fclose(out) != 0 && ok) {
    ok = false;
    saved_errno = errno;
  }
  if (!ok) {
    std::remove(path.c_str());  // leave no truncated file behind
    return write_error(path, std::error_code(saved_errno, std::generic_category()).message());
  }
  return Status::success();
}

}  // namespace lockstep
