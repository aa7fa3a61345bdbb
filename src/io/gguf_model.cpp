#include "io/gguf_model.h"

#include <cmath>
#include <cstring>
#include <filesystem>

#include "io/gguf_names.h"

namespace lockstep {

namespace {

std::optional<DType> plain_dtype(uint32_t type) {
  switch (GgmlType(type)) {
    case GgmlType::f32: return DType::f32;
    case GgmlType::f16: return DType::f16;
    case GgmlType::bf16: return DType::bf16;
    default: return std::nullopt;
  }
}

Error unsupported_type(const std::string& file, const GgufTensor& tensor) {
  return make_error(file + ": tensor '" + tensor.name + "' is " + ggml_type_name(tensor.type) +
                    ", which lockstep does not read (it reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q4_K, Q5_K and Q6_K)");
}

}  // namespace

bool is_gguf_path(const std::string& path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
}

Expected<std::unique_ptr<GgufModel>> GgufModel::open(const std::string& path) {
  std::unique_ptr<GgufModel> model(new GgufModel());
  // A split: NAME-00002-of-00003.gguf; any of its files opens all of them, the first first.
  std::vector<std::string> paths = {path};
  const std::string tail = "-00000-of-00000.gguf";
  auto digits = [](const std::string& text) { return text.find_first_not_of("0123456789") == std::string::npos; };
  if (path.size() > tail.size()) {
    const std::string end = path.substr(path.size() - tail.size());
    const std::string part = end.substr(1, 5), of = end.substr(10, 5);
    if (end[0] == '-' && end.compare(6, 4, "-of-") == 0 && digits(part) && digits(of)) {
      const int count = std::stoi(of), index = std::stoi(part);
      if (count < 1 || index < 1 || index > count)
        return make_error(path + ": the name says part " + part + " of " + of);
      paths.clear();
      const std::string stem = path.substr(0, path.size() - tail.size());
      for (int i = 1; i <= count; ++i) {
        char name[32];
        std::snprintf(name, sizeof(name), "-%05d-of-%05d.gguf", i, count);
        paths.push_back(stem + name);
      }
    }
  }
  for (size_t i = 0; i < paths.size(); ++i) {
    auto file = GgufFile::open(paths[i]);
    if (!file.ok()) return file.error();
    if (paths.size() > 1) {
      const nlohmann::json& meta = (*file)->metadata();
      if (gguf_integer(meta, "split.no") != int64_t(i) || gguf_integer(meta, "split.count") != int64_t(paths.size()))
        return make_error(paths[i] + ": split.no and split.count do not say part " + std::to_string(i) + " of " +
                          std::to_string(paths.size()) + " (counting from 0)");
    }
    model->files_.push_back(std::move(*file));
  }
  auto arch = model->metadata().find("general.architecture");
  if (arch == model->metadata().end() || !arch->is_string())
    return make_error(path + ": no general.architecture in the metadata");
  model->architecture_ = arch->get<std::string>();
  if (!gguf_architecture_known(model->architecture_))
    return make_error(path + ": GGUF architecture '" + model->architecture_ +
                      "' is not one lockstep reads (llama, qwen3, nemotron_h, nemotron_h_moe)");
  for (const auto& file : model->files_)
    for (const GgufTensor& tensor : file->tensors()) {
      const std::string name = gguf_hf_name(model->architecture_, tensor.name);
      if (name.empty()) {
        if (tensor.name == "rope_freqs.weight") continue;  // read by config()
        return make_error(file->path() + ": tensor '" + tensor.name + "' is not one lockstep reads in a " +
                          model->architecture_ + " model");
      }
      if (!model->by_hf_name_.emplace(name, &tensor).second)
        return make_error(file->path() + ": tensor '" + tensor.name + "' appears twice");
    }
  // Llama's and Nemotron-H's q and k rows are un-interleaved per head: each must hold whole
  // heads of an even size.
  if (model->permutes_qk()) {
    for (const char* projection : {"q_proj", "k_proj"})
      for (const auto& [name, tensor] : model->by_hf_name_) {
        if (name.find(projection) == std::string::npos || tensor->dims.size() != 2) continue;
        const int64_t heads = model->heads_of(name);
        if (heads <= 0 || tensor->dims[1] % heads != 0 || (tensor->dims[1] / heads) % 2 != 0)
          return make_error(path + ": tensor '" + tensor->name + "' of " + std::to_string(tensor->dims[1]) +
                            " rows is not whole heads of an even size for " + std::to_string(heads) + " heads");
      }
  }
  return model;
}

const GgufTensor* GgufModel::tensor_for(const std::string& name) const {
  auto it = by_hf_name_.find(name);
  return it == by_hf_name_.end() ? nullptr : it->second;
}

std::optional<Shape> GgufModel::shape(const std::string& name) const {
  const GgufTensor* tensor = tensor_for(name);
  if (!tensor) return std::nullopt;
  return gguf_hf_shape(name, *tensor);
}

bool GgufModel::permutes_qk() const { return architecture_ == "llama" || gguf_is_nemotron(architecture_); }

bool GgufModel::permuted(const std::string& name) const {
  return permutes_qk() &&
         (name.find("q_proj.weight") != std::string::npos || name.find("k_proj.weight") != std::string::npos);
}

bool GgufModel::has(const std::string& name) const { return tensor_for(name) != nullptr; }

std::vector<std::string> GgufModel::names() const {
  std::vector<std::string> out;
  for (const auto& [name, tensor] : by_hf_name_) out.push_back(name);
  return out;
}

const std::vector<std::byte>& GgufModel::unpermuted(const std::string& name, const GgufTensor& tensor,
                                                     size_t row_bytes) const {
  std::lock_guard lock(mutex_);
  auto it = derived_.find(name);
  if (it != derived_.end()) return it->second;
  const int64_t rows = tensor.dims[1];
  const int64_t heads = heads_of(name);  // open() checked it divides the rows into even heads
  const int64_t d = rows / heads, half = d / 2;
  std::vector<std::byte> out(size_t(rows) * row_bytes);
  // llama.cpp's converter moved Hugging Face's row h*d + j*half + i to h*d + 2*i + j.
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t i = 0; i < half; ++i)
        std::memcpy(out.data() + size_t(h * d + j * half + i) * row_bytes,
                    tensor.data + size_t(h * d + 2 * i + j) * row_bytes, row_bytes);
  return derived_.emplace(name, std::move(out)).first->second;
}

const std::vector<std::byte>& GgufModel::a_log(const std::string& name, const GgufTensor& tensor) const {
  std::lock_guard lock(mutex_);
  auto it = derived_.find(name);
  if (it != derived_.end()) return it->second;
  // llama.cpp's converter stored A = -exp(A_log); the models take A_log and compute
  // -exp(A_log) (the CPU backend with std::exp in float). log(-A) rounded to a float, moved by
  // an ulp or two where that float's exp is not A's magnitude, gives the stored A back exactly.
  std::vector<std::byte> out(tensor.bytes);
  for (size_t i = 0; i < tensor.bytes / 4; ++i) {
    float a;
    std::memcpy(&a, tensor.data + 4 * i, 4);
    const float guess = float(std::log(-double(a)));
    float value = guess, up = guess, down = guess;
    for (int step = 0; step < 4 && std::exp(value) != -a; ++step) {
      up = std::nextafter(up, INFINITY), down = std::nextafter(down, -INFINITY);
      value = std::exp(up) == -a ? up : std::exp(down) == -a ? down : guess;
    }
    std::memcpy(out.data() + 4 * i, &value, 4);
  }
  return derived_.emplace(name, std::move(out)).first->second;
}

int64_t GgufModel::heads_of(const std::string& name) const {
  const int64_t layer = hf_layer_of(name);
  const int64_t heads = gguf_layer_integer(metadata(), architecture_ + ".attention.head_count", layer).value_or(0);
  if (name.find("k_proj") == std::string::npos) return heads;
  return gguf_layer_integer(metadata(), architecture_ + ".attention.head_count_kv", layer).value_or(heads);
}

Expected<TensorInfo> GgufModel::find(const std::string& name) const {
  const GgufTensor* tensor = tensor_for(name);
  if (!tensor) return make_error("missing tensor '" + name + "' in " + files_.front()->path());
  std::optional<DType> dtype = plain_dtype(tensor->type);
  if (!dtype) {
    if (ggml_quant_format(tensor->type)) {
      return make_error(files_.front()->path() + ": tensor '" + tensor->name + "' is " + ggml_type_name(tensor->type) +
                        " (quantized), where lockstep reads only f32, bf16 or f16 values");
    }
    return unsupported_type(files_.front()->path(), *tensor);
  }
  TensorInfo info;
  info.name = name;
  info.dtype = *dtype;
  info.shape = gguf_hf_shape(name, *tensor);
  info.data = tensor->data;
  info.bytes = tensor->bytes;
  info.file = files_.front()->path();
  if (permuted(name) && tensor->dims.size() == 2)
    info.data = unpermuted(name, *tensor, size_t(tensor->dims[0]) * dtype_size(*dtype)).data();
  if (gguf_is_nemotron(architecture_) && name.size() > 6 && name.compare(name.size() - 6, 6, ".A_log") == 0) {
    if (*dtype != DType::f32)
      return make_error(files_.front()->path() + ": tensor '" + tensor->name + "' (A) is " +
                        ggml_type_name(tensor->type) + ", where lockstep reads A as F32");
    info.data = a_log(name, *tensor).data();
  }
  return info;
}

Expected<std::optional<QuantizedWeight>> GgufModel::quantized(const std::string& name, const Shape& expected) const {
  const GgufTensor* tensor = tensor_for(name);
  if (!tensor || plain_dtype(tensor->type)) return std::optional<QuantizedWeight>{};
  std::optional<QuantFormat> format = ggml_quant_format(tensor->type);
  if (!format) return unsupported_type(files_.front()->path(), *tensor);
  if (tensor->dims.size() != 2 && tensor->dims.size() != 3)
    return make_error(files_.front()->path() + ": tensor '" + tensor->name + "' is " + ggml_type_name(tensor->type) +
                      " with " + std::to_string(tensor->dims.size()) +
                      " dimensions; lockstep reads quantized matrices and stacks of them");
  const Shape shape = gguf_hf_shape(name, *tensor);
  if (!(shape == expected))
    return make_error(files_.front()->path() + ": tensor '" + tensor->name + "' has shape " + shape.to_string() +
                      ", expected " + expected.to_string());
  QuantizedWeight weight{QuantLayout{*format}, shape, {}};
  const size_t row_bytes = tensor->bytes / size_t(shape[0]);
  if (permuted(name) && shape.rank == 2) {
    const std::vector<std::byte>& rows = unpermuted(name, *tensor, row_bytes);
    weight.rows.assign(rows.begin(), rows.end());
  } else {
    weight.rows.assign(tensor->data, tensor->data + tensor->bytes);
  }
  return std::optional<QuantizedWeight>{std::move(weight)};
}

}  // namespace lockstep
