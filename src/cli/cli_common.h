// What the lockstep subcommands share: model and backend flags, token-list parsing.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"
#include "models/model.h"
#include "models/registry.h"
#include "text/model_text.h"

namespace lockstep::cli {

struct ModelFlags {
  std::string model_dir;
  std::string backend = "cpu";
  int threads = -1;  // -1: not given (one per core)
  int64_t context = 0;
  bool dummy_weights = false;
  std::string quantize;              // --quantize: q8_0, q4_0, q4, fp8 (empty: as stored)
  int32_t tensor_parallel = 1;       // --tensor-parallel: ranks, run one after another on the one device
  bool tokenizer_json_only = false;  // --tokenizer-json-only, for the commands that read text
};

// Adds --model, --backend, --threads, --context, --dummy-weights, --quantize and --tensor-parallel to a subcommand. --model is required
// unless model_required is false.
void add_model_flags(CLI::App& command, ModelFlags& flags, bool model_required = true);

// The embedded model's folder (models/tiny-arith in the source tree), found next to the
// binary's build folder or where the build was configured; empty when neither has it.
std::string embedded_model_dir();

struct LoadedModel {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
};

// Opens the backend and loads the model with `options` (max_context comes from the flags).
[[nodiscard]] Expected<LoadedModel> load(const ModelFlags& flags, ModelOptions options);

// "1,2,3" -> {1, 2, 3}; an error for anything but comma-separated integers.
[[nodiscard]] Expected<std::vector<int32_t>> parse_token_list(const std::string& text);

// Adds --tokenizer-json-only: run the folder's tokenizer.json as written instead of the
// tokenizer transformers builds from the folder (see tokenizer/tokenizer_transformers.h).
void add_tokenizer_flag(CLI::App& command, bool& tokenizer_json_only);

// A --messages file: a non-empty JSON array of {role, content}, as chat_messages_of gives it.
[[nodiscard]] Expected<nlohmann::json> read_messages(const std::string& path, const ModelText& text);
// Chat messages as the server's chat route takes them (chat_messages): each with a string role,
// its content a string (text parts joined, null as empty), a call's arguments as an object.
[[nodiscard]] Expected<nlohmann::json> chat_messages_of(const nlohmann::json& messages, const ModelText& text);
// The chat template's extra arguments: enable_thinking=false with --no-thinking.
nlohmann::json chat_kwargs(bool no_thinking);

// Prints "lockstep: error: <message>" to stderr and returns the exit code 1.
int fail(const std::string& message);

// The API key a server takes or a client sends: `given`, else LOCKSTEP_API_KEY from the
// environment, else none (empty).
std::string api_key_of(const std::string& given);

}  // namespace lockstep::cli
