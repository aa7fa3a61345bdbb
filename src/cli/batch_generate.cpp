#include "cli/batch_generate.h"

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

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

// One input line: {"tokens": [...]}, {"prompt": "..."} or {"messages": [...]}, with optional
// max_tokens, temperature, seed, top_k, top_p, min_p.
Line parse_line(const std::string& text, const BatchFlags& flags, const ModelText& model_text) {
  Line line;
  nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded() || !json.is_object()) {
    line.error = "not a JSON object";
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
    if (json.contains("prompt") || json.contains("messages")) {
      auto ids = json.contains("prompt") ? model_text.encode(json.at("prompt").get<std::string>(), true)
                                         : model_text.encode_chat(json.at("messages"), chat_kwargs(flags.no_thinking));
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
    if (json.contains("max_tokens")) request.max_tokens = json.at("max_tokens").get<int64_t>();
    if (json.contains("temperature")) request.sampling.temperature = json.at("temperature").get<float>();
    if (json.contains("top_k")) request.sampling.top_k = json.at("top_k").get<int>();
    if (json.contains("top_p")) request.sampling.top_p = json.at("top_p").get<float>();
    if (json.contains("min_p")) request.sampling.min_p = json.at("min_p").get<float>();
    if (json.contains("seed")) request.sampling.seed = json.at("seed").get<uint64_t>();
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
