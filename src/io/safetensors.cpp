#include "io/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

namespace lockstep {
namespace {

using nlohmann::json;

Error file_error(const std::string& path, const std::string& problem) {
  return Error{path + ": " + problem};
}

Error tensor_error(const std::string& path, const std::string& name, const std::string& problem) {
  return Error{path + ": tensor '" + name + "': " + problem};
}

// A tensor entry after validation, with its offsets kept for the overlap check.
struct ParsedEntry {
  TensorInfo info;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// "shape": an array of at most kMaxRank non-negative integers whose running product fits in
// int64 (so Shape::numel() can never overflow for a tensor that loaded).
Expected<Shape> parse_shape(const json& value, const std::string& path, const std::string& name) {
  if (!value.is_array()) return tensor_error(path, name, "'shape' is not an array");
  if (value.size() > size_t(kMaxRank))
    return tensor_error(path, name,
                        "shape has rank " + std::to_string(value.size()) + ", more than " +
                            std::to_string(kMaxRank));
  Shape shape;
  int64_t running = 1;
  for (const json& dim : value) {
    if (!dim.is_number_integer())
      return tensor_error(path, name, "shape " + dim.dump() + " is not an integer");
    int64_t d;
    if (dim.is_number_unsigned()) {
      uint64_t u = dim.get<uint64_t>();
      if (u > uint64_t(std::numeric_limits<int64_t>::max()))
        return tensor_error(path, name, "dimension " + std::to_string(u) + " is too large");
      d = int64_t(u);
    } else {
      d = dim.get<int64_t>();
    }
    if (d < 0) return tensor_error(path, name, "negative dimension " + std::to_string(d));
    if (__builtin_mul_overflow(running, d, &running))
      return tensor_error(path, name, "shape " + value.dump() + " is too large");
    shape.dims[shape.rank++] = d;
  }
  return shape;
}

Expected<ParsedEntry> parse_entry(const std::string& path, const std::string& name,
                                  const json& entry, uint64_t data_size) {
  if (!entry.is_object()) return tensor_error(path, name, "entry is not a JSON object");

  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string())
    return tensor_error(path, name, "missing or non-string 'dtype'");
  std::string dtype_text = dtype_it->get<std::string>();
  std::optional<DType> dtype = dtype_from_safetensors(dtype_text);
  if (!dtype) return tensor_error(path, name, "unknown or unsupported dtype '" + dtype_text + "'");

  auto shape_it = entry.find("shape");
  if (shape_it == entry.end()) return tensor_error(path, name, "missing 'shape'");
  Expected<Shape> shape = parse_shape(*shape_it, path, name);
  if (!shape.ok()) return shape.error();

  auto offsets_it = entry.find("data_offsets");
  if (offsets_it == entry.end()) return tensor_error(path, name, "missing 'data_offsets'");
  const json& offsets = *offsets_it;
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    return tensor_error(path, name,
                        "'data_offsets' " + offsets.dump() +
                            " is not [begin, end] of two "
                            "non-negative integers");
  uint64_t begin = offsets[0].get<uint64_t>();
  uint64_t end = offsets[1].get<uint64_t>();
  std::string range = "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
  if (begin > end) return tensor_error(path, name, "data_offsets " + range + " has begin > end");
  if (end > data_size)
    return tensor_error(path, name,
                        "data_offsets " + range + " lie outside the data section of " +
                            std::to_string(data_size) + " bytes");

  uint64_t expected_bytes;
  if (__builtin_mul_overflow(uint64_t(shape->numel()), uint64_t(dtype_size(*dtype)),
                             &expected_bytes))
    return tensor_error(path, name, "shape " + shape->to_string() + " is too large");
  if (expected_bytes != end - begin)
    return tensor_error(path, name,
                        "holds " + std::to_string(end - begin) + " bytes but shape " +
                            shape->to_string() + " of " + dtype_text + " needs " +
                            std::to_string(expected_bytes));

  ParsedEntry parsed;
  parsed.info.name = name;
  parsed.info.dtype = *dtype;
  parsed.info.shape = *shape;
  parsed.info.bytes = size_t(expected_bytes);
  parsed.info.file = path;
  parsed.begin = begin;
  parsed.end = end;
  return parsed;
}

// Sorted by begin, each non-empty tensor must end at or before the next one begins.
Status check_no_overlap(const std::string& path, const std::vector<ParsedEntry>& entries) {
  std::vector<const ParsedEntry*> spans;
  for (const ParsedEntry& e : entries)
    if (e.end > e.begin) spans.push_back(&e);
  std::sort(spans.begin(), spans.end(),
            [](const ParsedEntry* a, const ParsedEntry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < spans.size(); ++i) {
    const ParsedEntry& prev = *spans[i - 1];
    const ParsedEntry& next = *spans[i];
    if (prev.end > next.begin)
      return file_error(path, "tensors '" + prev.info.name + "' [" + std::to_string(prev.begin) +
                                  ", " + std::to_string(prev.end) + ") and '" + next.info.name +
                                  "' [" + std::to_string(next.begin) + ", " +
                                  std::to_string(next.end) + ") overlap");
  }
  return Status::success();
}

}  // namespace

Expected<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  auto mapped = MappedFile::open(path);
  if (!mapped.ok()) return mapped.error();
  if ((*mapped)->size() < 8)
    return file_error(path, "file is " + std::to_string((*mapped)->size()) +
                                " bytes, too short for a safetensors header");
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile(std::move(*mapped)));
  file->path_ = path;
  LOCKSTEP_TRY(file->parse_header());
  return file;
}

Status SafetensorsFile::parse_header() {
  const auto* bytes = reinterpret_cast<const uint8_t*>(file_->data());
  const size_t mapping_bytes = file_->size();
  uint64_t header_bytes = 0;
  for (int i = 0; i < 8; ++i) header_bytes |= uint64_t(bytes[i]) << (8 * i);
  uint64_t after_length = mapping_bytes - 8;
  if (header_bytes > after_length)
    return file_error(path_, "header length " + std::to_string(header_bytes) +
                                 " runs past the end of the file (" +
                                 std::to_string(mapping_bytes) + " bytes)");
  uint64_t data_size = after_length - header_bytes;
  const auto* data = bytes + 8 + header_bytes;

  const char* header_text = reinterpret_cast<const char*>(bytes + 8);
  try {
    json header = json::parse(header_text, header_text + header_bytes);
    if (!header.is_object()) return file_error(path_, "header is not a JSON object");

    std::vector<ParsedEntry> entries;
    entries.reserve(header.size());
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") continue;
      Expected<ParsedEntry> entry = parse_entry(path_, it.key(), it.value(), data_size);
      if (!entry.ok()) return entry.error();
      entry->info.data = data + entry->begin;
      entries.push_back(std::move(entry).value());
    }
    LOCKSTEP_TRY(check_no_overlap(path_, entries));
    for (ParsedEntry& e : entries) tensors_.emplace(e.info.name, std::move(e.info));
  } catch (const json::parse_error& e) {
    return file_error(path_, std::string("header is not valid JSON: ") + e.what());
  } catch (const json::exception& e) {  // a type error the checks above failed to rule out
    return file_error(path_, std::string("malformed header: ") + e.what());
  }
  return Status::success();
}

}  // namespace lockstep
