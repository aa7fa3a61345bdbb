#include "io/gguf_file.h"

#include <cstring>

#include "base/utf8.h"

namespace lockstep {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF", little end first
constexpr int kMaxArrayDepth = 4;
// A tensor's name is at most this long (llama.cpp allows 63 bytes).
constexpr size_t kMaxNameBytes = 256;
// Metadata values held at most, arrays' elements counted: a tokenizer's tokens, merges and types
// come to a few million at the most, and each value costs tens of bytes in memory.
constexpr uint64_t kMaxMetadataValues = uint64_t(1) << 24;
constexpr uint32_t kMaxDims = 4;

enum ValueType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7, string = 8, array = 9,
  u64 = 10, i64 = 11, f64 = 12,
};

// Reads little-endian values from the header, every read checked against the end.
class Reader {
 public:
  Reader(const std::byte* data, size_t size) : data_(data), size_(size) {}
  size_t at() const { return at_; }
  size_t left() const { return size_ - at_; }

  template <class T>
  [[nodiscard]] bool read(T& value) {
    if (left() < sizeof(T)) return false;
    std::memcpy(&value, data_ + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  [[nodiscard]] bool read_string(std::string& text) {
    uint64_t length = 0;
    if (!read(length) || length > left()) return false;
    text.assign(reinterpret_cast<const char*>(data_ + at_), size_t(length));
    at_ += size_t(length);
    return true;
  }

 private:
  const std::byte* data_;
  size_t size_;
  size_t at_ = 0;
};

// The bytes of a value of `type` at the least (arrays: their count and type), to bound counts.
size_t least_bytes(uint32_t type) {
  switch (type) {
    case u8: case i8: case boolean: return 1;
    case u16: case i16: return 2;
    case u32: case i32: case f32: return 4;
    case string: case u64: case i64: case f64: return 8;
    case array: return 12;
    default: return 0;
  }
}

template <class T>
bool read_number(Reader& in, nlohmann::json& out) {
  T value;
  if (!in.read(value)) return false;
  out = value;
  return true;
}

// One value of `type`; false with `fault` set when it cannot be read. `values` counts the values
// read so far, against kMaxMetadataValues.
bool read_value(Reader& in, uint32_t type, int depth, nlohmann::json& out, std::string& fault, uint64_t& values) {
  if (++values > kMaxMetadataValues) return fault = "more metadata values than lockstep holds (2^24)", false;
  switch (type) {
    case u8: return read_number<uint8_t>(in, out);
    case i8: return read_number<int8_t>(in, out);
    case u16: return read_number<uint16_t>(in, out);
    case i16: return read_number<int16_t>(in, out);
    case u32: return read_number<uint32_t>(in, out);
    case i32: return read_number<int32_t>(in, out);
    case u64: return read_number<uint64_t>(in, out);
    case i64: return read_number<int64_t>(in, out);
    case f32: return read_number<float>(in, out);
    case f64: return read_number<double>(in, out);
    case boolean: {
      uint8_t value;
      if (!in.read(value)) return false;
      if (value > 1) return fault = "a bool of value " + std::to_string(value), false;
      out = value == 1;
      return true;
    }
    case string: {
      std::string text;
      if (!in.read_string(text)) return false;
      // GGUF strings are UTF-8 (JSON, which holds them here, takes nothing else).
      if (!utf8_is_valid(text)) return fault = "a string that is not UTF-8", false;
      out = std::move(text);
      return true;
    }
    case array: {
      uint32_t item_type;
      uint64_t count;
      if (!in.read(item_type) || !in.read(count)) return false;
      if (depth >= kMaxArrayDepth) return fault = "arrays nested deeper than " + std::to_string(kMaxArrayDepth), false;
      const size_t least = least_bytes(item_type);
      if (least == 0) return fault = "an array of unknown value type " + std::to_string(item_type), false;
      if (count > in.left() / least) return fault = "an array of " + std::to_string(count) + " values past the end", false;
      if (count > kMaxMetadataValues - values) return fault = "more metadata values than lockstep holds (2^24)", false;
      out = nlohmann::json::array();
      for (uint64_t i = 0; i < count; ++i) {
        nlohmann::json item;
        if (!read_value(in, item_type, depth + 1, item, fault, values)) return false;
        out.push_back(std::move(item));
      }
      return true;
    }
    default: return fault = "unknown value type " + std::to_string(type), false;
  }
}

// Values per block and bytes per block of the types lockstep reads; {0, 0} for others.
std::pair<int64_t, int64_t> type_block(uint32_t type) {
  switch (GgmlType(type)) {
    case GgmlType::f32: return {1, 4};
    case GgmlType::f16:
    case GgmlType::bf16: return {1, 2};
    case GgmlType::q4_0:
    case GgmlType::iq4_nl: return {32, 18};
    case GgmlType::q4_1: return {32, 20};
    case GgmlType::q5_0: return {32, 22};
    case GgmlType::q5_1: return {32, 24};
    case GgmlType::q8_0: return {32, 34};
    case GgmlType::q4_k: return {256, 144};
    case GgmlType::q5_k: return {256, 176};
    case GgmlType::q6_k: return {256, 210};
  }
  return {0, 0};
}

}  // namespace

std::string ggml_type_name(uint32_t type) {
  static const char* const names[] = {"F32",  "F16",  "Q4_0", "Q4_1", "Q4_2", "Q4_3",   "Q5_0",    "Q5_1",
                                      "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K",   "Q6_K",    "Q8_K",
                                      "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
                                      "I8",   "I16",  "I32",  "I64",  "F64",  "IQ1_M",  "BF16"};
  if (type < sizeof(names) / sizeof(names[0])) return names[type];
  return "type " + std::to_string(type);
}

std::optional<QuantFormat> ggml_quant_format(uint32_t type) {
  switch (GgmlType(type)) {
    case GgmlType::q4_0: return QuantFormat::q4_0;
    case GgmlType::q4_1: return QuantFormat::q4_1;
    case GgmlType::q5_0: return QuantFormat::q5_0;
    case GgmlType::q5_1: return QuantFormat::q5_1;
    case GgmlType::iq4_nl: return QuantFormat::iq4_nl;
    case GgmlType::q8_0: return QuantFormat::q8_0;
    case GgmlType::q4_k: return QuantFormat::q4_k;
    case GgmlType::q5_k: return QuantFormat::q5_k;
    case GgmlType::q6_k: return QuantFormat::q6_k;
    default: return std::nullopt;
  }
}

Expected<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file.ok()) return file.error();
  std::unique_ptr<GgufFile> gguf(new GgufFile(std::move(*file)));
  Status parsed = gguf->parse();
  if (!parsed.ok()) return make_error(path + ": " + parsed.message());
  return gguf;
}

Status GgufFile::parse() {
  Reader in(file_->data(), file_->size());
  uint32_t magic = 0, version = 0;
  uint64_t tensor_count = 0, key_count = 0;
  if (!in.read(magic) || magic != kMagic) return make_error("not a GGUF file (no \"GGUF\" at its start)");
  if (!in.read(version) || (version != 2 && version != 3))
    return make_error("GGUF version " + std::to_string(version) + ", lockstep reads 2 and 3");
  if (!in.read(tensor_count) || !in.read(key_count)) return make_error("the header ends early");
  // Each key takes at least 12 bytes and each tensor's entry at least 28: counts past that lie.
  if (key_count > in.left() / 12 || tensor_count > in.left() / 28)
    return make_error(std::to_string(key_count) + " keys and " + std::to_string(tensor_count) +
                      " tensors cannot fit in the file");
  uint64_t values = 0;
  for (uint64_t i = 0; i < key_count; ++i) {
    std::string key, fault;
    uint32_t type;
    if (!in.read_string(key) || !in.read(type)) return make_error("metadata key " + std::to_string(i) + " ends early");
    if (!utf8_is_valid(key)) return make_error("metadata key " + std::to_string(i) + " is not UTF-8");
    nlohmann::json value;
    if (!read_value(in, type, 0, value, fault, values))
      return make_error("metadata '" + key + "': " + (fault.empty() ? "ends early" : fault));
    if (metadata_.contains(key)) return make_error("metadata '" + key + "' appears twice");
    metadata_[key] = std::move(value);
  }
  std::vector<uint64_t> offsets;
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensor tensor;
    uint32_t n_dims = 0;
    if (!in.read_string(tensor.name) || !in.read(n_dims))
      return make_error("tensor entry " + std::to_string(i) + " ends early");
    if (!utf8_is_valid(tensor.name)) return make_error("tensor entry " + std::to_string(i) + " has a name that is not UTF-8");
    if (tensor.name.size() > kMaxNameBytes)
      return make_error("tensor entry " + std::to_string(i) + " has a name of " + std::to_string(tensor.name.size()) +
                        " bytes (at most " + std::to_string(kMaxNameBytes) + ")");
    if (n_dims == 0 || n_dims > kMaxDims)
      return make_error("tensor '" + tensor.name + "' has " + std::to_string(n_dims) + " dimensions");
    int64_t count = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim;
      if (!in.read(dim)) return make_error("tensor '" + tensor.name + "' ends early");
      if (dim == 0 || dim > uint64_t(INT64_MAX) || __builtin_mul_overflow(count, int64_t(dim), &count))
        return make_error("tensor '" + tensor.name + "' has a dimension of " + std::to_string(dim));
      tensor.dims.push_back(int64_t(dim));
    }
    uint64_t offset;
    if (!in.read(tensor.type) || !in.read(offset)) return make_error("tensor '" + tensor.name + "' ends early");
    const auto [values, bytes] = type_block(tensor.type);
    if (values > 0) {
      if (tensor.dims[0] % values != 0)
        return make_error("tensor '" + tensor.name + "' has rows of " + std::to_string(tensor.dims[0]) +
                          " values, not whole " + ggml_type_name(tensor.type) + " blocks of " + std::to_string(values));
      int64_t size = 0;
      if (__builtin_mul_overflow(count / values, bytes, &size))
        return make_error("tensor '" + tensor.name + "' is too large");
      tensor.bytes = size_t(size);
    }
    offsets.push_back(offset);
    tensors_.push_back(std::move(tensor));
  }
  uint64_t alignment = 32;
  if (metadata_.contains("general.alignment")) {
    const nlohmann::json& value = metadata_["general.alignment"];
    if (!value.is_number_unsigned() || value.get<uint64_t>() == 0 || value.get<uint64_t>() > (1u << 20) ||
        (value.get<uint64_t>() & (value.get<uint64_t>() - 1)) != 0)
      return make_error("general.alignment is not a power of two up to 2^20");
    alignment = value.get<uint64_t>();
  }
  const uint64_t start = (in.at() + alignment - 1) / alignment * alignment;
  if (start > file_->size() && !tensors_.empty()) return make_error("the tensor data starts past the end of the file");
  const uint64_t data_size = file_->size() > start ? file_->size() - start : 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    GgufTensor& tensor = tensors_[i];
    if (offsets[i] % alignment != 0)
      return make_error("tensor '" + tensor.name + "' at offset " + std::to_string(offsets[i]) + " is not aligned to " +
                        std::to_string(alignment) + " bytes");
    if (offsets[i] > data_size || tensor.bytes > data_size - offsets[i])
      return make_error("tensor '" + tensor.name + "' at offset " + std::to_string(offsets[i]) + " runs past the end");
    tensor.data = file_->data() + start + offsets[i];
  }
  return Status::success();
}

std::optional<int64_t> gguf_integer(const nlohmann::json& metadata, const std::string& key) {
  auto it = metadata.find(key);
  if (it == metadata.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

std::optional<double> gguf_number(const nlohmann::json& metadata, const std::string& key) {
  auto it = metadata.find(key);
  if (it == metadata.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::optional<int64_t> gguf_layer_integer(const nlohmann::json& metadata, const std::string& key, int64_t layer) {
  auto it = metadata.find(key);
  if (it == metadata.end()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (!it->is_array() || layer < 0 || size_t(layer) >= it->size() || !(*it)[size_t(layer)].is_number_integer())
    return std::nullopt;
  return (*it)[size_t(layer)].get<int64_t>();
}

}  // namespace lockstep
