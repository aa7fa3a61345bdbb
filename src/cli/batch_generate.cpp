#include "cli/batch_generate.h"

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "lanes/lane_host.h"
#include "models/registry.h"

namespace lockstep::cli {

namespace {

struct Line {
  std::optional<GenerateRequest> request;
  std::string error;
  std::vector<int32_t> ids;
  std::optional<StreamEnd> end;
};

// One input line: {"tokens": [...]} with optional max_tokens, temperature, seed, top_k, top_p, min_p.
Line parse_line(const std::string& text, const BatchFlags& flags) {
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
    if (!json.contains("tokens")) {
      line.error = json.contains("prompt") || json.contains("messages")
                       ? "text prompts need a tokenizer (tokenizer.json) in the model folder"
                       : "the line has no \"tokens\"";
      return line;
    }
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
  std::vector<Line> lines;
  std::string text;
  while (std::getline(input, text))
    if (text.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(parse_line(text, flags));

  ModelOptions options;
  options.max_rows = std::max<int64_t>(flags.chunk, flags.parallel);
  options.max_context = model_flags.context;
  options.state_slots = flags.parallel;
  auto loaded = load(model_flags, options);
  if (!loaded.ok()) return fail(loaded.error().message);
  LaneHost host(*loaded->model, {flags.chunk, flags.parallel, int32_t(lines.size()) + 1});
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
      out["finish_reason"] = finish_reason_name(line.end->reason);
    }
    std::cout << out.dump() << "\n";
  }
  return exit_code;
}

}  // namespace lockstep::cli
