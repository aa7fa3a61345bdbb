#include "cli/batch_generate.h"

#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <type_traits>

#include "cli/cli_common.h"
#include "lanes/lane_host.h"
#include "models/registry.h"
#include "runner/model_runner.h"
#include "text/model_text.h"

namespace lockstep::cli {

namespace {

struct Line {
  std::optional<GenerateRequest> request;
  std::string error;
  std::vector<int32_t> ids;
  std::optional<StreamEnd> end;
};

// A line's number field `key` as T: an integer field must be a JSON integer in T's range, a
// float field any number; otherwise an error naming the field.
template <class T>
T number_field(const nlohmann::json& json, const char* key) {
  const nlohmann::json& value = json.at(key);
  if constexpr (std::is_floating_point_v<T>) {
    if (!value.is_number()) throw std::invalid_argument(std::string("\"") + key + "\" must be a number");
    return value.get<T>();
  } else {
    bool fits = value.is_number_integer();
    if (fits && value.is_number_unsigned()) {
      fits = value.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max());
    } else if (fits) {
      const int64_t v = value.get<int64_t>();
      fits = v >= int64_t(std::numeric_limits<T>::min()) && (v < 0 || uint64_t(v) <= uint64_t(std::numeric_limits<T>::max()));
    }
    if (!fits)
      throw std::invalid_argument(std::string("\"") + key + "\" must be an integer from " +
                                  std::to_string(std::numeric_limits<T>::min()) + " to " +
                                  std::to_string(std::numeric_limits<T>::max()));
    return value.get<T>();
  }
}

// One input line: {"tokens": [...]}, {"prompt": "..."} or {"messages": [...]}, with optional
// max_tokens, temperature, seed, top_k, top_p, min_p and ignore_eos. Any other key is an error.
Line parse_line(const std::string& text, const BatchFlags& flags, const ModelText& model_text) {
  static const std::set<std::string> kKeys = {"tokens", "prompt", "messages", "max_tokens", "temperature", "seed",
                                              "top_k",  "top_p",  "min_p",    "ignore_eos"};
  Line line;
  nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded() || !json.is_object()) {
    line.error = "not a JSON object";
    return line;
  }
  for (const auto& [key, value] : json.items())
    if (!kKeys.contains(key)) {
      line.error = "\"" + key + "\" is not a field a batch line takes (tokens, prompt, messages, max_tokens, "
                   "temperature, seed, top_k, top_p, min_p, ignore_eos)";
      return line;
    }
  GenerateRequest request;
  request.max_tokens = flags.max_tokens;
  request.sampling = flags.sampling;
  request.ignore_eos = flags.ignore_eos;
  try {
    int given = int(json.contains("tokens")) + int(json.contains("prompt")) + int(json.contains("messages"));
    if (given != 1) {
      line.error = "a line needs one of \"tokens\", \"prompt\" and \"messages\"";
      return line;
    }
    if (json.contains("prompt") && !json.at("prompt").is_string()) throw std::invalid_argument("\"prompt\" must be a string");
    if (json.contains("tokens") && !json.at("tokens").is_array()) throw std::invalid_argument("\"tokens\" must be an array of ids");
    if (json.contains("prompt") || json.contains("messages")) {
      Expected<std::vector<int32_t>> ids = std::vector<int32_t>();
      if (json.contains("prompt")) {
        ids = model_text.encode(json.at("prompt").get<std::string>(), true);
      } else {
        auto messages = chat_messages_of(json.at("messages"), model_text);
        ids = messages.ok() ? model_text.encode_chat(*messages, chat_kwargs(flags.no_thinking))
                            : Expected<std::vector<int32_t>>(messages.error());
      }
      if (!ids.ok()) {
        line.error = ids.error().message;
        return line;
      }
      request.prompt = *ids;
    }
    if (json.contains("tokens"))
    for (const auto& id : json.at("tokens")) {
      if (!id.is_number_integer()) throw std::invalid_argument("\"tokens\" must hold integer ids");
      int64_t value = id.get<int64_t>();
      if (value < 0 || value > INT32_MAX) throw std::invalid_argument("token id " + std::to_string(value) + " is out of range");
      request.prompt.push_back(int32_t(value));
    }
    if (json.contains("max_tokens")) request.max_tokens = number_field<int64_t>(json, "max_tokens");
    if (json.contains("temperature")) request.sampling.temperature = number_field<float>(json, "temperature");
    if (json.contains("top_k")) request.sampling.top_k = number_field<int>(json, "top_k");
    if (json.contains("top_p")) request.sampling.top_p = number_field<float>(json, "top_p");
    if (json.contains("min_p")) request.sampling.min_p = number_field<float>(json, "min_p");
    if (json.contains("seed")) request.sampling.seed = number_field<uint64_t>(json, "seed");
    if (json.contains("ignore_eos")) {
      if (!json.at("ignore_eos").is_boolean()) throw std::invalid_argument("\"ignore_eos\" must be true or false");
      request.ignore_eos = json.at("ignore_eos").get<bool>();
    }
  } catch (const std::exception& error) {
    line.error = error.what();
    return line;
  }
  line.request = std::move(request);
  return line;
}

}  // namespace

int run_batch(const ModelFlags& model_flags, const BatchFlags& flags) {
  std::ifstream input(flags.path);
  if (!input) return fail("cannot read the batch file '" + flags.path + "'");
  auto model_text = ModelText::load(model_flags.model_dir, {.tokenizer_json_only = model_flags.tokenizer_json_only});
  if (!model_text.ok()) return fail(model_text.error().message);
  std::vector<Line> lines;
  std::string text;
  while (std::getline(input, text))
    if (text.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(parse_line(text, flags, *model_text));

  ModelOptions options;
  // A pass holds a fill chunk and a row of every stream beside it (LaneHost::fill_step).
  options.max_rows = flags.chunk + flags.parallel;
  options.max_context = model_flags.context;
  options.kv_sequences = flags.parallel;  // every stream of the batch at its full context
  options.state_slots = flags.parallel;
  size_draft_slots(flags.drafts, model_flags.backend, flags.parallel, options);
  auto loaded = load(model_flags, options);
  if (!loaded.ok()) return fail(loaded.error().message);
  ModelRunner runner(*loaded->model);
  LaneSettings lanes{flags.chunk, flags.parallel, int32_t(lines.size()) + 1};
  if (Status drafts = apply_draft_flags(flags.drafts, model_flags.backend, loaded->model->info(), flags.parallel, lanes); !drafts.ok())
    return fail(drafts.message());
  LaneHost host(runner, lanes);
  for (Line& line : lines) {
    if (!line.request) continue;
    auto submitted = host.submit(*line.request, {[&line](int32_t id) { line.ids.push_back(id); },
                                                 [&line](const StreamEnd& end) { line.end = end; }});
    if (submitted.error) line.error = submitted.error->message;
  }
  while (host.step()) {
  }
  int exit_code = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const Line& line = lines[i];
    nlohmann::json out = {{"index", i}};
    if (!line.error.empty() || !line.end || line.end->kind != StreamEnd::Kind::finished) {
      out["error"] = !line.error.empty() ? line.error : line.end ? line.end->error : "the stream did not finish";
      exit_code = 1;
    } else {
      out["ids"] = line.ids;
      if (model_text->has_tokenizer()) out["text"] = model_text->tokenizer().decode(line.ids, true);
      out["finish_reason"] = finish_reason_name(line.end->reason);
    }
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  return exit_code;
}

}  // namespace lockstep::cli
