#include "bench_client/bench_requests.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench_client/timed_stream.h"

namespace lockstep::bench {

Expected<std::vector<std::string>> load_prompts(const std::string& path) {
  std::ifstream file(path);
  if (!file) return make_error("cannot read the prompts file " + path);
  std::stringstream text;
  text << file.rdbuf();
  nlohmann::json parsed = nlohmann::json::parse(text.str(), nullptr, false);
  if (!parsed.is_array() || parsed.empty()) return make_error(path + ": expected a non-empty JSON array of strings");
  std::vector<std::string> prompts;
  for (const nlohmann::json& prompt : parsed) {
    if (!prompt.is_string() || prompt.get<std::string>().empty())
      return make_error(path + ": every prompt must be a non-empty string");
    prompts.push_back(prompt.get<std::string>());
  }
  return prompts;
}

std::string default_prompts_path() {
#ifdef LOCKSTEP_BENCH_PROMPTS
  if (std::filesystem::exists(LOCKSTEP_BENCH_PROMPTS)) return LOCKSTEP_BENCH_PROMPTS;
#endif
  return "bench/prompts.json";
}

std::vector<int32_t> byte_ids(std::string_view text) {
  std::vector<int32_t> ids;
  for (unsigned char byte : text) ids.push_back(int32_t(byte));
  return ids;
}

std::vector<int32_t> long_prompt_ids(const std::vector<std::string>& prompts, size_t count, size_t first) {
  std::vector<int32_t> ids;
  for (size_t i = first; ids.size() < count; ++i) {
    std::vector<int32_t> more = byte_ids(prompts[i % prompts.size()] + "\n\n");
    ids.insert(ids.end(), more.begin(), more.begin() + std::min(more.size(), count - ids.size()));
  }
  return ids;
}

nlohmann::json prompt_json(const Target& target, const std::string& text) {
  return target.prompt_ids ? nlohmann::json(byte_ids(text)) : nlohmann::json(text);
}

nlohmann::json completion_body(const Target& target, const nlohmann::json& prompt, int max_tokens, double temperature,
                               std::optional<uint64_t> seed) {
  nlohmann::json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", temperature},
                         {"stream", true},   {"return_token_ids", true}, {"ignore_eos", true}};
  if (!target.model.empty()) body["model"] = target.model;
  if (seed) body["seed"] = *seed;
  return body;
}

Expected<Target> warm_up(const HttpEndpoint& server, bool force_ids, const std::string& prompt, int timeout_seconds) {
  Target target{server, "", force_ids, timeout_seconds};
  Expected<HttpReply> models = http_request(server, "GET", "/v1/models", "", timeout_seconds);
  if (!models.ok()) return models.error();
  nlohmann::json listed = nlohmann::json::parse(models->body, nullptr, false);
  if (models->status == 200 && listed.is_object() && listed.contains("data") && listed["data"].is_array() &&
      !listed["data"].empty() && listed["data"][0].contains("id") && listed["data"][0]["id"].is_string())
    target.model = listed["data"][0]["id"].get<std::string>();
  // lockstep's /version names its device; another server may have no such route.
  if (Expected<HttpReply> version = http_request(server, "GET", "/version", "", timeout_seconds);
      version.ok() && version->status == 200) {
    nlohmann::json said = nlohmann::json::parse(version->body, nullptr, false);
    if (said.is_object() && said.contains("device") && said["device"].is_string())
      target.device = said["device"].get<std::string>();
  }
  while (true) {
    nlohmann::json body = completion_body(target, prompt_json(target, prompt), 4, 0.0, std::nullopt);
    body["stream"] = false;
    Expected<HttpReply> reply = http_request(server, "POST", "/v1/completions", body.dump(), timeout_seconds);
    if (!reply.ok()) return reply.error();
    if (reply->status == 200) return target;
    if (reply->status == 400 && !target.prompt_ids && reply->body.find("tokenizer") != std::string::npos) {
      target.prompt_ids = true;  // a model folder without tokenizer files takes ids only
      continue;
    }
    return make_error(reply_error("warm-up request", *reply));
  }
}

}  // namespace lockstep::bench
