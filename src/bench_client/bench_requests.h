// How `lockstep bench` words its requests: the prompts file, prompts as text or as byte ids,
// the completion request bodies, and the warm-up that finds out which the server takes.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "http/http_client.h"

namespace lockstep::bench {

// The server as the bench talks to it.
struct Target {
  HttpEndpoint server;
  std::string model;         // the id from /v1/models, sent as "model"; empty: not sent
  bool prompt_ids = false;   // prompts go as byte ids: the server has no tokenizer, or --ids
  int timeout_seconds = 600; // the longest wait for any byte of a reply
  std::string device = "";   // what the server runs on, from its GET /version (empty: it does not say)
};

// A prompts file: a JSON array of non-empty strings.
[[nodiscard]] Expected<std::vector<std::string>> load_prompts(const std::string& path);

// The bundled bench/prompts.json: its path in the source tree, compiled in
// (LOCKSTEP_BENCH_PROMPTS), when that file exists; otherwise bench/prompts.json under the
// current directory.
std::string default_prompts_path();

// Each byte of the UTF-8 text as a token id: a valid prompt for any vocabulary of >= 256 ids.
std::vector<int32_t> byte_ids(std::string_view text);

// `count` byte ids cut from the prompts laid end to end (and repeated), starting at prompt
// `first`: a long prompt of an exact length in tokens whatever the tokenizer.
std::vector<int32_t> long_prompt_ids(const std::vector<std::string>& prompts, size_t count, size_t first);

// The prompt as the target takes it: the text, or its byte ids.
nlohmann::json prompt_json(const Target& target, const std::string& text);

// A streaming /v1/completions body that runs the full max_tokens (ignore_eos) and returns the
// ids of every chunk; greedy at temperature 0, else seeded with `seed`.
nlohmann::json completion_body(const Target& target, const nlohmann::json& prompt, int max_tokens, double temperature,
                               std::optional<uint64_t> seed);

// Reads the model's name from /v1/models, then sends one short request: as text unless
// `force_ids`, falling back to ids when the server answers 400 about its tokenizer. An error
// when the server cannot be reached or refuses the warm-up.
[[nodiscard]] Expected<Target> warm_up(const HttpEndpoint& server, bool force_ids, const std::string& prompt,
                                       int timeout_seconds);

}  // namespace lockstep::bench
