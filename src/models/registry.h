// Model families register themselves here, one folder each: a family's .cpp file calls
// register_family() from a static initializer, and load_model() finds it by the
// architecture name in config.json. Adding a family edits nothing outside its folder.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"
#include "io/checkpoint.h"
#include "models/model.h"

namespace lockstep {

using ModelFactory = Expected<std::unique_ptr<Model>> (*)(const nlohmann::json& config, const WeightSource& weights,
                                                         Backend& backend, const ModelOptions& options);

struct Family {
  std::string name;                        // the folder, e.g. "llama"
  std::vector<std::string> architectures;  // config.json "architectures" values it serves
  ModelFactory create;
};

// Adds a family. Returns true so it can initialise a static.
bool register_family(Family family);
const std::vector<Family>& registered_families();

// Builds a model from a parsed config.json and its weights.
[[nodiscard]] Expected<std::unique_ptr<Model>> create_model(const nlohmann::json& config, const WeightSource& weights,
                                                            Backend& backend, const ModelOptions& options);
enum class WeightChoice {
  checkpoint,  // the folder's safetensors
  dummy,       // random weights from config.json alone (DummyWeights), for benchmarks
};

// Loads a Hugging Face model folder: config.json, the safetensors weights (or dummy ones),
// and the end ids of generation_config.json when present.
[[nodiscard]] Expected<std::unique_ptr<Model>> load_model(const std::string& dir, Backend& backend,
                                                          const ModelOptions& options,
                                                          WeightChoice weights = WeightChoice::checkpoint);

}  // namespace lockstep
