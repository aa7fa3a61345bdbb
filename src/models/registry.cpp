#include "models/registry.h"

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <set>
#include <new>

#include "io/dummy_weights.h"
#include "io/gguf_model.h"
#include "io/json_file.h"

namespace lockstep {

namespace {

std::vector<Family>& family_list() {
  static std::vector<Family> list;
  return list;
}

// eos_token_id may be one id or a list.
std::vector<int32_t> read_eos_ids(const nlohmann::json& json) {
  std::vector<int32_t> ids;
  auto it = json.find("eos_token_id");
  if (it == json.end()) return ids;
  if (it->is_number_integer()) ids.push_back(it->get<int32_t>());
  if (it->is_array())
    for (const auto& id : *it)
      if (id.is_number_integer()) ids.push_back(id.get<int32_t>());
  return ids;
}

}  // namespace

bool register_family(Family family) {
  family_list().push_back(std::move(family));
  return true;
}

const std::vector<Family>& registered_families() { return family_list(); }

Expected<std::unique_ptr<Model>> create_model(const nlohmann::json& config, const WeightSource& weights,
                                              Backend& backend, const ModelOptions& options) {
  if (options.max_rows < 1 || options.page_size < 1 || (options.page_size & (options.page_size - 1)) != 0 ||
      options.max_context < 0 || options.kv_pages < 0)
    return make_error("model options: max_rows must be positive and page_size a power of two");
  std::string architecture;
  auto it = config.find("architectures");
  if (it != config.end() && it->is_array() && !it->empty() && (*it)[0].is_string())
    architecture = (*it)[0].get<std::string>();
  std::string supported;
  for (const Family& family : registered_families()) {
    for (const std::string& name : family.architectures) {
      if (name == architecture) {
        try {
          auto model = family.create(config, weights, backend, options);
          if (model.ok()) (*model)->set_eos_ids(read_eos_ids(config));
          return model;
        } catch (const nlohmann::json::exception& error) {  // a field of an unexpected type
          return make_error(std::string("config.json: ") + error.what());
        }
      }
      supported += (supported.empty() ? "" : ", ") + name;
    }
  }
  return make_error("unsupported architecture '" + architecture + "' in config.json; supported: " + supported);
}

namespace {

// A checkpoint that records the weights the model takes, and reports the bytes of those taken so
// far (when given a report).
class ProgressWeights : public WeightSource {
 public:
  ProgressWeights(std::unique_ptr<WeightSource> inner, std::function<void(int64_t, int64_t)> report)
      : inner_(std::move(inner)), report_(std::move(report)) {
    for (const std::string& name : inner_->names())
      if (auto info = inner_->find(name); info.ok()) total_ += int64_t(info->bytes);
  }
  // The checkpoint's tensors the model did not take: neither read, nor the parts of a quantized
  // weight it read (`X.scales`, `X.biases`, `X.weight_scale`, ... beside `X.weight`).
  std::vector<std::string> untaken() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const std::string& name : inner_->names()) {
      if (taken_.count(name)) continue;
      const size_t dot = name.rfind('.');
      static const char* const kParts[] = {"scales", "biases", "weight_scale", "weight_scale_inv", "input_scale"};
      const bool part = dot != std::string::npos &&
                        std::any_of(std::begin(kParts), std::end(kParts), [&](const char* p) { return name.compare(dot + 1, std::string::npos, p) == 0; }) &&
                        taken_.count(name.substr(0, dot) + ".weight");
      if (!part) out.push_back(name);
    }
    return out;
  }
  bool has(const std::string& name) const override { return inner_->has(name); }
  std::vector<std::string> names() const override { return inner_->names(); }
  Expected<TensorInfo> find(const std::string& name) const override {
    Expected<TensorInfo> info = inner_->find(name);
    if (info.ok()) taken(name, info->bytes);
    return info;
  }
  Expected<std::optional<QuantizedWeight>> quantized(const std::string& name, const Shape& expected) const override {
    auto stored = inner_->quantized(name, expected);
    if (stored.ok() && *stored) taken(name, (*stored)->rows.size());
    return stored;
  }

 private:
  void taken(const std::string& name, size_t bytes) const {
    std::lock_guard lock(mutex_);
    if (taken_.insert(name).second) {
      done_ += int64_t(bytes);
      if (report_) report_(done_, total_);
    }
  }

  std::unique_ptr<WeightSource> inner_;
  std::function<void(int64_t, int64_t)> report_;
  int64_t total_ = 0;
  mutable std::mutex mutex_;
  mutable std::set<std::string> taken_;
  mutable int64_t done_ = 0;
};

// A checkpoint's quantization, as its config.json names it: the methods lockstep reads (the
// layout itself is read off the tensors' shapes), or an error naming the one it does not, rather
// than a missing tensor later or, where the file also holds plain weights, a silent run of those.
Status check_quantization_config(const nlohmann::json& config) {
  for (const char* key : {"quantization_config", "quantization"}) {
    auto it = config.find(key);
    if (it == config.end() || !it->is_object()) continue;
    const std::string method = it->value("quant_method", "");
    static const char* const kRead[] = {"", "fp8", "modelopt", "mlx", "compressed-tensors"};
    if (std::find_if(std::begin(kRead), std::end(kRead), [&](const char* name) { return method == name; }) == std::end(kRead))
      return make_error("config.json " + std::string(key) + ".quant_method '" + method +
                        "' is not a quantization lockstep reads (MLX affine, FP8: fp8, modelopt; or GGUF files)");
    if (auto block = it->find("weight_block_size"); block != it->end() && !block->is_null()) {
      const bool square = block->is_array() && block->size() == 2 && (*block)[0].is_number_integer() && (*block)[0] == (*block)[1];
      const int64_t side = square ? (*block)[0].get<int64_t>() : 0;
      if (side != 32 && side != 64 && side != 128)
        return make_error("config.json " + std::string(key) + ".weight_block_size " + block->dump() +
                          " is not a block lockstep reads ([128, 128], [64, 64] or [32, 32])");
    }
  }
  return Status::success();
}

}  // namespace

Expected<std::unique_ptr<Model>> load_model(const std::string& dir, Backend& backend, const ModelOptions& options,
                                            WeightChoice choice) {
  namespace fs = std::filesystem;
  const bool gguf = is_gguf_path(dir);
  if (!gguf && fs::is_regular_file(dir))
    return make_error("'" + dir + "' is a file: give the model folder that holds it (or a .gguf file)");
  if (!gguf && !fs::is_directory(dir)) return make_error("model folder '" + dir + "' does not exist");
  Expected<nlohmann::json> config = make_error("");
  std::unique_ptr<WeightSource> weights;
  ProgressWeights* recorded = nullptr;  // a safetensors checkpoint's, owned by `weights`
  if (gguf) {
    // A GGUF file holds its config in its metadata (and its end ids: no generation_config).
    auto file = GgufModel::open(dir);
    if (!file.ok()) return file.error();
    config = (*file)->config();
    if (!config.ok()) return config.error();
    if (choice == WeightChoice::checkpoint) weights = std::move(*file);
  } else {
    config = read_json_file((fs::path(dir) / "config.json").string());
    if (!config.ok()) return config.error();
    if (Status known = check_quantization_config(*config); !known.ok()) return known.error();
  }
  if (weights) {
    if (options.on_progress) weights = std::make_unique<ProgressWeights>(std::move(weights), options.on_progress);
  } else if (choice == WeightChoice::dummy) {
    weights = std::make_unique<DummyWeights>();
  } else {
    auto checkpoint = Checkpoint::open(dir);
    if (!checkpoint.ok()) return checkpoint.error();
    // Recorded, so that tensors the model leaves unread are reported (a checkpoint of more
    // layers than its config says, a bias the config turns off: a different model than it runs).
    recorded = new ProgressWeights(std::move(*checkpoint), options.on_progress);
    weights.reset(recorded);
  }
  weights->set_matmul_quantization(options.quantize);
  Expected<std::unique_ptr<Model>> model = make_error("");
  try {
    model = create_model(*config, *weights, backend, options);
  } catch (const std::bad_alloc& e) {
    // Everything allocated so far was freed on the way here.
    return make_error(std::string("not enough memory for this model: ") + e.what() +
                      ". Lower --parallel or --context, or use a smaller model");
  }
  if (!model.ok()) {
    // A GGUF file's config is its metadata, read as config.json: say which file it came from.
    if (gguf && model.error().message.find("config.json") != std::string::npos)
      return make_error(dir + ": its metadata (read as config.json): " + model.error().message);
    return model.error();
  }
  if (recorded && options.on_warning) {
    const std::vector<std::string> unread = recorded->untaken();
    if (!unread.empty()) {
      std::string names;
      for (size_t i = 0; i < unread.size() && i < 3; ++i) names += (i ? ", " : "") + unread[i];
      options.on_warning(std::to_string(unread.size()) + " of the checkpoint's tensors are not read by the model " +
                         "its config.json describes (" + names + (unread.size() > 3 ? ", ..." : "") +
                         "): check that the config is this checkpoint's");
    }
  }
  if (gguf) {
    if (config->contains("eos_token_id")) (*model)->set_eos_ids(read_eos_ids(*config));
    return model;
  }
  fs::path generation = fs::path(dir) / "generation_config.json";
  if (fs::exists(generation)) {
    auto generation_config = read_json_file(generation.string());
    if (!generation_config.ok()) return generation_config.error();
    std::vector<int32_t> ids = read_eos_ids(*generation_config);
    if (!ids.empty()) (*model)->set_eos_ids(std::move(ids));
  }
  return model;
}

}  // namespace lockstep
