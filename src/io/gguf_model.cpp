#include "io/gguf_model.h"

#include <cstring>
#include <filesystem>

namespace lockstep {

namespace {

// llama.cpp's names of a block's tensors, and the Hugging Face names they stand for.
const std::map<std::string, std::string>& block_names() {
  static const std::map<std::string, std::string> names = {
      {"attn_norm", "input_layernorm"},  {"ffn_norm", "post_attention_layernorm"},
      {"attn_q", "self_attn.q_proj"},    {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},    {"attn_output", "self_attn.o_proj"},
      {"attn_q_norm", "self_attn.q_norm"}, {"attn_k_norm", "self_attn.k_norm"},
      {"ffn_gate", "mlp.gate_proj"},     {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
  };
  return names;
}

// The Hugging Face name of a GGUF tensor of a Llama-family model; empty for one no model reads
// (biases among them: the Llama and Qwen3 configs lockstep makes have none).
std::string hf_name(const std::string& gguf) {
  if (gguf == "token_embd.weight") return "model.embed_tokens.weight";
  if (gguf == "output_norm.weight") return "model.norm.weight";
  if (gguf == "output.weight") return "lm_head.weight";
  // blk.<layer>.<name>.weight
  const std::string prefix = "blk.", suffix = ".weight";
  if (gguf.size() <= prefix.size() + suffix.size() || gguf.compare(0, prefix.size(), prefix) != 0 ||
      gguf.compare(gguf.size() - suffix.size(), suffix.size(), suffix) != 0)
    return "";
  const std::string middle = gguf.substr(prefix.size(), gguf.size() - prefix.size() - suffix.size());
  const size_t dot = middle.find('.');
  if (dot == 0 || dot == std::string::npos || dot > 6) return "";
  const std::string layer = middle.substr(0, dot);
  if (layer.find_first_not_of("0123456789") != std::string::npos) return "";
  auto it = block_names().find(middle.substr(dot + 1));
  if (it == block_names().end()) return "";
  return "model.layers." + layer + "." + it->second + ".weight";
}

// The CONTROL tokens llama.cpp also ends generation at, beside the eos/eot/eom ids it names.
bool ends_generation(const std::string& token) {
  static const char* const ends[] = {"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|endoftext|>",
                                     "<|im_end|>", "<|end|>",    "<end_of_turn>",   "</s>"};
  for (const char* end : ends)
    if (token == end) return true;
  return false;
}

Shape hf_shape(const GgufTensor& tensor) {
  Shape shape;
  for (auto it = tensor.dims.rbegin(); it != tensor.dims.rend(); ++it) shape.dims[shape.rank++] = *it;
  return shape;
}

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
                    ", which lockstep does not read (it reads F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K and Q6_K)");
}

// A metadata value as an integer or a float, if it is one.
std::optional<int64_t> integer(const nlohmann::json& metadata, const std::string& key) {
  auto it = metadata.find(key);
  if (it == metadata.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}
std::optional<double> number(const nlohmann::json& metadata, const std::string& key) {
  auto it = metadata.find(key);
  if (it == metadata.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
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
      if (integer(meta, "split.no") != int64_t(i) || integer(meta, "split.count") != int64_t(paths.size()))
        return make_error(paths[i] + ": split.no and split.count do not say part " + std::to_string(i) + " of " +
                          std::to_string(paths.size()) + " (counting from 0)");
    }
    model->files_.push_back(std::move(*file));
  }
  auto arch = model->metadata().find("general.architecture");
  if (arch == model->metadata().end() || !arch->is_string())
    return make_error(path + ": no general.architecture in the metadata");
  model->architecture_ = arch->get<std::string>();
  if (model->architecture_ != "llama" && model->architecture_ != "qwen3")
    return make_error(path + ": GGUF architecture '" + model->architecture_ + "' is not one lockstep reads (llama, qwen3)");
  for (const auto& file : model->files_)
    for (const GgufTensor& tensor : file->tensors()) {
      const std::string name = hf_name(tensor.name);
      if (name.empty()) {
        if (tensor.name == "rope_freqs.weight") continue;  // read by config()
        return make_error(file->path() + ": tensor '" + tensor.name + "' is not one lockstep reads in a " +
                          model->architecture_ + " model");
      }
      if (!model->by_hf_name_.emplace(name, &tensor).second)
        return make_error(file->path() + ": tensor '" + tensor.name + "' appears twice");
    }
  // Llama's q and k rows are un-interleaved per head: each must hold whole heads of an even size.
  if (model->architecture_ == "llama") {
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
  return hf_shape(*tensor);
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
  auto it = unpermuted_.find(name);
  if (it != unpermuted_.end()) return it->second;
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
  return unpermuted_.emplace(name, std::move(out)).first->second;
}

int64_t GgufModel::heads_of(const std::string& name) const {
  const int64_t heads = integer(metadata(), architecture_ + ".attention.head_count").value_or(0);
  if (name.find("k_proj") == std::string::npos) return heads;
  return integer(metadata(), architecture_ + ".attention.head_count_kv").value_or(heads);
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
  info.shape = hf_shape(*tensor);
  info.data = tensor->data;
  info.bytes = tensor->bytes;
  info.file = files_.front()->path();
  const bool permuted = architecture_ == "llama" && (name.find("q_proj.weight") != std::string::npos ||
                                                     name.find("k_proj.weight") != std::string::npos);
  if (permuted && tensor->dims.size() == 2)
    info.data = unpermuted(name, *tensor, size_t(tensor->dims[0]) * dtype_size(*dtype)).data();
  return info;
}

Expected<std::optional<QuantizedWeight>> GgufModel::quantized(const std::string& name, const Shape& expected) const {
  const GgufTensor* tensor = tensor_for(name);
  if (!tensor || plain_dtype(tensor->type)) return std::optional<QuantizedWeight>{};
  std::optional<QuantFormat> format = ggml_quant_format(tensor->type);
  if (!format) return unsupported_type(files_.front()->path(), *tensor);
  if (tensor->dims.size() != 2)
    return make_error(files_.front()->path() + ": tensor '" + tensor->name + "' is " + ggml_type_name(tensor->type) +
                      " with " + std::to_string(tensor->dims.size()) + " dimensions; lockstep reads quantized matrices");
  const Shape shape = hf_shape(*tensor);
  if (!(shape == expected))
    return make_error(files_.front()->path() + ": tensor '" + tensor->name + "' has shape " + shape.to_string() +
                      ", expected " + expected.to_string());
  QuantizedWeight weight{QuantLayout{*format}, shape, {}};
  const size_t row_bytes = tensor->bytes / size_t(shape[0]);
  const bool permuted = architecture_ == "llama" && (name.find("q_proj.weight") != std::string::npos ||
                                                     name.find("k_proj.weight") != std::string::npos);
  if (permuted) {
    const std::vector<std::byte>& rows = unpermuted(name, *tensor, row_bytes);
    weight.rows.assign(rows.begin(), rows.end());
  } else {
    weight.rows.assign(tensor->data, tensor->data + tensor->bytes);
  }
  return std::optional<QuantizedWeight>{std::move(weight)};
}

Expected<nlohmann::json> GgufModel::config() const {
  const nlohmann::json& meta = metadata();
  const std::string& a = architecture_;
  const std::string file = files_.front()->path();
  auto need = [&](const std::string& key) -> Expected<int64_t> {
    auto value = integer(meta, a + "." + key);
    if (!value || *value <= 0) return make_error(file + ": metadata " + a + "." + key + " is missing or not positive");
    return *value;
  };
  nlohmann::json config;
  config["architectures"] = {a == "qwen3" ? "Qwen3ForCausalLM" : "LlamaForCausalLM"};
  auto hidden = need("embedding_length"), inner = need("feed_forward_length"), layers = need("block_count"),
       heads = need("attention.head_count");
  for (auto* value : {&hidden, &inner, &layers, &heads})
    if (!value->ok()) return value->error();
  config["hidden_size"] = *hidden;
  config["intermediate_size"] = *inner;
  config["num_hidden_layers"] = *layers;
  config["num_attention_heads"] = *heads;
  config["num_key_value_heads"] = integer(meta, a + ".attention.head_count_kv").value_or(*heads);
  const int64_t head_dim = integer(meta, a + ".attention.key_length").value_or(*hidden / *heads);
  config["head_dim"] = head_dim;
  if (auto rotary = integer(meta, a + ".rope.dimension_count"); rotary && *rotary != head_dim)
    return make_error(file + ": rope over " + std::to_string(*rotary) + " of " + std::to_string(head_dim) +
                      " head dimensions (partial rotary) is not one lockstep runs");
  config["rms_norm_eps"] = number(meta, a + ".attention.layer_norm_rms_epsilon").value_or(1e-5);
  config["rope_theta"] = number(meta, a + ".rope.freq_base").value_or(10000.0);
  config["max_position_embeddings"] = integer(meta, a + ".context_length").value_or(4096);
  const GgufTensor* embed = tensor_for("model.embed_tokens.weight");
  if (!embed) return make_error(file + ": no token_embd.weight");
  config["vocab_size"] = embed->dims.size() == 2 ? embed->dims[1] : 0;
  config["tie_word_embeddings"] = !has("lm_head.weight");
  if (auto scaling = meta.find(a + ".rope.scaling.type"); scaling != meta.end() && scaling->is_string()) {
    const std::string type = scaling->get<std::string>();
    if (type == "linear") {
      config["rope_scaling"] = {{"rope_type", "linear"}, {"factor", number(meta, a + ".rope.scaling.factor").value_or(1.0)}};
    } else if (type != "none") {
      return make_error(file + ": rope scaling '" + type + "' is not one lockstep runs from a GGUF file (linear is)");
    }
  }
  // Llama 3's scaling: llama.cpp's converter stores each pair's frequency divisor as rope_freqs.
  for (const auto& f : files_)
    for (const GgufTensor& tensor : f->tensors()) {
      if (tensor.name != "rope_freqs.weight") continue;
      if (tensor.type != uint32_t(GgmlType::f32) || tensor.dims.size() != 1 || tensor.dims[0] != head_dim / 2)
        return make_error(file + ": rope_freqs.weight is not f32 [" + std::to_string(head_dim / 2) + "]");
      nlohmann::json divisors = nlohmann::json::array();
      for (int64_t i = 0; i < tensor.dims[0]; ++i) {
        float value;
        std::memcpy(&value, tensor.data + 4 * i, 4);
        divisors.push_back(value);
      }
      config["rope_scaling"] = {{"rope_type", "frequency_divisors"}, {"divisors", divisors}};
    }
  // End ids: those the file names (end of text, of a turn, of a message), and the CONTROL tokens
  // llama.cpp also ends at (Llama 3.1's <|eom_id|> and <|end_of_text|>, Qwen's <|endoftext|>),
  // which the Hugging Face folder lists in its generation_config.
  nlohmann::json ends = nlohmann::json::array();
  auto add_end = [&](int64_t id) {
    if (std::find(ends.begin(), ends.end(), id) == ends.end()) ends.push_back(id);
  };
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (auto id = integer(meta, key); id && *id >= 0) add_end(*id);
  auto tokens = meta.find("tokenizer.ggml.tokens");
  auto types = meta.find("tokenizer.ggml.token_type");
  if (tokens != meta.end() && types != meta.end() && tokens->is_array() && types->is_array() &&
      tokens->size() == types->size())
    for (size_t id = 0; id < tokens->size(); ++id)
      if ((*types)[id] == 3 && (*tokens)[id].is_string() && ends_generation((*tokens)[id].get<std::string>()))
        add_end(int64_t(id));
  if (!ends.empty()) config["eos_token_id"] = ends;
  if (auto bos = integer(meta, "tokenizer.ggml.bos_token_id")) config["bos_token_id"] = *bos;
  return config;
}

}  // namespace lockstep
