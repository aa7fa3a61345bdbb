// config.json as each model family reads it (parse_llama_config, parse_nemotron_config). A
// config comes from any model folder, so it may hold anything. create_model (models/registry.cpp)
// turns a JSON type error into a config error, so nlohmann::json::exception is allowed here;
// any other exception, or a config accepted against the parser's own checks, is a bug.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz_support.h"
#include "json_mutator.h"
#include "models/llama/llama_config.h"
#include "models/nemotron_h/nemotron_config.h"

namespace lockstep::fuzz {
namespace {

void check(const llama::LlamaConfig& c) {
  if (c.hidden < 1 || c.intermediate < 1 || c.layers < 1 || c.heads < 1 || c.kv_heads < 1 || c.vocab < 1 ||
      c.max_positions < 1)
    fail("a Llama config with a size below 1 was accepted");
  if (c.heads % c.kv_heads != 0 || c.head_dim < 1 || c.head_dim % 2 != 0 || c.head_dim > 512)
    fail("a Llama config with unusable heads was accepted");
  if (!(c.rope.theta > 0) || !(c.rope.factor > 0)) fail("a Llama config with a non-positive rope was accepted");
}

void check(const nemotron_h::NemotronConfig& c) {
  using nemotron_h::LayerKind;
  if (c.layers.empty() || c.hidden < 1 || c.vocab < 1 || c.max_positions < 1)
    fail("a Nemotron-H config with no layers or a size below 1 was accepted");
  if (c.count(LayerKind::attention) > 0 && (c.heads < 1 || c.kv_heads < 1 || c.heads % c.kv_heads != 0 ||
                                            c.head_dim < 1 || c.head_dim > 512))
    fail("a Nemotron-H config with unusable attention heads was accepted");
  if (c.count(LayerKind::mamba) > 0 && (c.mamba_heads < 1 || c.groups < 1 || c.mamba_heads % c.groups != 0 ||
                                        c.conv_kernel < 2 || c.conv_kernel > 16))
    fail("a Nemotron-H config with unusable Mamba2 settings was accepted");
  if (c.count(LayerKind::moe) > 0 && (c.top_k < 1 || c.top_k > c.experts || c.experts % c.expert_groups != 0))
    fail("a Nemotron-H config with unusable MoE settings was accepted");
}

template <class Parse>
void parse(const char* family, const nlohmann::json& config, Parse parse_config) {
  try {
    auto parsed = parse_config(config);
    if (parsed.ok()) check(*parsed);
  } catch (const nlohmann::json::exception&) {
    // A field of an unexpected type: create_model reports it as a config error.
  } catch (const std::exception& e) {
    fail(std::string(family) + " config threw: " + e.what());
  }
}

}  // namespace
}  // namespace lockstep::fuzz

// JSON-aware mutations (json_mutator.h).
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  return lockstep::fuzz::mutate_json(data, size, max_size, seed);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep;
  using namespace lockstep::fuzz;
  if (size > kMaxInputBytes) return 0;
  nlohmann::json config = nlohmann::json::parse(as_text(data, size), nullptr, false);
  // create_model calls a family only for an object whose "architectures" names it.
  if (config.is_discarded() || !config.is_object()) return 0;
  parse("Llama", config, llama::parse_llama_config);
  parse("Nemotron-H", config, nemotron_h::parse_nemotron_config);
  return 0;
}
