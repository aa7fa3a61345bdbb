#include "soak_bad_requests.h"

#include <nlohmann/json.hpp>

#include "soak_cases.h"

namespace lockstep::soak {

namespace {

using nlohmann::json;

constexpr int kDeepNesting = 10000;

std::string nested(int levels, const std::string& open, const std::string& close, const std::string& inside) {
  std::string text;
  for (int i = 0; i < levels; ++i) text += open;
  text += inside;
  for (int i = 0; i < levels; ++i) text += close;
  return text;
}

std::string many_ids(int64_t count) {
  json ids = json::array();
  for (int64_t i = 0; i < count; ++i) ids.push_back(10 + i % 1000);
  return ids.dump();
}

std::string user_chat(const std::string& content_json) {
  return R"({"messages": [{"role": "user", "content": )" + content_json + "}]}";
}

}  // namespace

std::vector<BadRequest> make_bad_requests(const HttpEndpoint& server, int64_t max_model_len) {
  std::vector<BadRequest> bad;
  auto post = [&](std::string name, const std::string& path, const std::string& body, int status = 400) {
    bad.push_back({std::move(name), http_request_text(server, "POST", path, body), status});
  };
  auto request = [&](std::string name, const std::string& method, const std::string& path, int status) {
    bad.push_back({std::move(name), http_request_text(server, method, path, ""), status});
  };
  auto raw = [&](std::string name, std::string text, int status) { bad.push_back({std::move(name), std::move(text), status}); };
  const std::string completions = "/v1/completions", chat = "/v1/chat/completions";
  const std::string question = R"("What is 1 + 1?")";
  // Each digit is a token of its own in the embedded model, and any tokenizer gives a token
  // for at most a few characters: four characters a token of context is over it.
  std::string over_context_text;
  while (int64_t(over_context_text.size()) < 4 * max_model_len) over_context_text += "1234567890";

  post("malformed-json", completions, R"({"prompt": "What is 1 + 1?", "max_tokens": )");
  post("not-an-object", completions, "[1, 2, 3]");
  post("invalid-utf8", completions, "{\"prompt\": \"\xff\xfe\"}");
  post("max-tokens-a-string", completions, R"({"prompt": )" + question + R"(, "max_tokens": "ten"})");
  post("temperature-a-string", completions, R"({"prompt": )" + question + R"(, "temperature": "hot"})");
  post("stream-a-number", chat, user_chat(question).insert(1, R"("stream": 1, )"));
  post("messages-a-string", chat, R"({"messages": "hello"})");
  post("content-a-number", chat, user_chat("42"));
  post("prompt-an-object", completions, R"({"prompt": {"text": "hi"}})");
  post("empty-prompt", completions, R"({"prompt": ""})");
  post("empty-ids", completions, R"({"prompt": []})");
  post("id-past-vocabulary", completions, R"({"prompt": [1, 2, 1000000]})");
  post("id-negative", completions, R"({"prompt": [5, -1]})");
  post("id-past-int32", completions, R"({"prompt": [5, 1099511627776]})");
  post("ids-over-context", completions, R"({"prompt": )" + many_ids(max_model_len + 1) + "}");
  post("text-over-context", completions, json{{"prompt", over_context_text}, {"max_tokens", 1}}.dump());
  post("chat-over-context", chat, json{{"messages", {{{"role", "user"}, {"content", over_context_text}}}}}.dump());
  post("max-tokens-over-context", completions,
       R"({"prompt": )" + question + R"(, "max_tokens": )" + std::to_string(2 * max_model_len) + "}");
  post("max-tokens-negative", completions, R"({"prompt": )" + question + R"(, "max_tokens": -3})");
  post("n-two", completions, R"({"prompt": )" + question + R"(, "n": 2})");
  post("seed-negative", completions, R"({"prompt": )" + question + R"(, "seed": -1})");
  post("logprobs-too-many", completions, R"({"prompt": )" + question + R"(, "logprobs": 50})");
  post("deep-nesting-prompt", completions, R"({"prompt": )" + nested(kDeepNesting, "[", "]", "1") + "}");
  post("deep-nesting-content", chat, user_chat(nested(kDeepNesting, R"({"a": )", "}", "1")));
  post("unknown-model", completions, R"({"model": "no-such-model", "prompt": )" + question + "}", 404);
  post("unknown-route", "/v1/nothing", R"({"prompt": )" + question + "}", 404);
  request("unknown-route-get", "GET", "/v2/models", 404);
  request("get-completions", "GET", completions, 405);
  request("delete-models", "DELETE", "/v1/models", 405);
  post("post-health", "/health", "{}", 405);
  raw("malformed-request-line", "NOT HTTP AT ALL\r\n\r\n", 400);
  raw("body-over-limit", "POST " + completions + " HTTP/1.1\r\nHost: x\r\nContent-Length: 9437184\r\n\r\n", 413);
  raw("bad-content-length", "POST " + completions + " HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n", 400);
  raw("headers-over-limit",
      "GET /health HTTP/1.1\r\nHost: x\r\nX-Padding: " + std::string(70 << 10, 'a') + "\r\n\r\n", 431);
  return bad;
}

std::string refusal_problem(const BadRequest& bad, const HttpReply& reply) {
  if (reply.status != bad.status)
    return "answered " + std::to_string(reply.status) + " where " + std::to_string(bad.status) +
           " was due: " + reply.body.substr(0, 300);
  json body = json::parse(reply.body, nullptr, false);
  if (!json_member(json_member(body, "error"), "message").is_string())
    return "a " + std::to_string(reply.status) + " without a JSON error body: " + reply.body.substr(0, 300);
  if (bad.status == 405 && reply.header("allow").empty()) return "a 405 without Allow";
  return "";
}

}  // namespace lockstep::soak
