#include "soak_cases.h"

#include <algorithm>

namespace lockstep::soak {

namespace {

using nlohmann::json;

// The embedded model's chat format, for completions given text.
std::string chatml(const std::string& question) {
  return "<|im_start|>user\n" + question + "<|im_end|>\n<|im_start|>assistant\n";
}

json user_says(const std::string& content) { return json::array({{{"role", "user"}, {"content", content}}}); }

// Token ids from a fixed generator, clear of the first few (special) ids of a small vocabulary.
std::vector<int32_t> some_ids(size_t count, uint32_t seed) {
  std::vector<int32_t> ids;
  uint32_t state = seed;
  for (size_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    ids.push_back(int32_t(10 + (state >> 8) % 1000));
  }
  return ids;
}

SoakCase completion(std::string name, json prompt, json fields) {
  fields["prompt"] = std::move(prompt);
  fields["return_token_ids"] = true;
  return {std::move(name), "/v1/completions", std::move(fields), {}, 0};
}

SoakCase chat(std::string name, const std::string& content, json fields) {
  fields["messages"] = user_says(content);
  fields["return_token_ids"] = true;
  return {std::move(name), "/v1/chat/completions", std::move(fields), {}, 0};
}

json seeded(double temperature, int64_t seed) { return {{"temperature", temperature}, {"seed", seed}}; }

Expected<HttpReply> post(const HttpEndpoint& server, const std::string& path, const std::string& body) {
  auto reply = http_request(server, "POST", path, body, 300);
  if (!reply.ok()) return reply.error();
  if (reply->status != 200)
    return make_error(path + " answered " + std::to_string(reply->status) + ": " + reply->body.substr(0, 300));
  return reply;
}

// usage.prompt_tokens of a chat prompt of `content`.
Expected<int64_t> chat_prompt_tokens(const HttpEndpoint& server, const std::string& content) {
  json body = {{"messages", user_says(content)}, {"max_tokens", 1}};
  auto reply = post(server, "/v1/chat/completions", body.dump());
  if (!reply.ok()) return reply.error();
  json parsed = json::parse(reply->body, nullptr, false);
  const json& tokens = json_member(json_member(parsed, "usage"), "prompt_tokens");
  if (!tokens.is_number_integer()) return make_error("a chat reply without usage.prompt_tokens: " + reply->body.substr(0, 300));
  return tokens.get<int64_t>();
}

// A chat question about many numbers, about `target` tokens long once rendered: the tokens a
// repetition adds are measured with one and two repetitions.
Expected<std::string> long_chat_content(const HttpEndpoint& server, int64_t target) {
  const std::string lead = "Sort these numbers:", unit = " 42 7 19 88 3 61 5";
  auto one = chat_prompt_tokens(server, lead + unit);
  if (!one.ok()) return one.error();
  auto two = chat_prompt_tokens(server, lead + unit + unit);
  if (!two.ok()) return two.error();
  const int64_t per_unit = *two - *one, base = *one - per_unit;
  if (per_unit <= 0) return make_error("a repeated phrase adds no tokens to a chat prompt");
  std::string content = lead;
  for (int64_t i = 0; i < (target - base) / per_unit; ++i) content += unit;
  return content;
}

Expected<json> parse_object(std::string_view text) {
  json parsed = json::parse(text, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) return make_error("not a JSON object: " + std::string(text.substr(0, 200)));
  return parsed;
}

Status add_ids(const json& choice, ReplyRecord& record) {
  const json& ids = json_member(choice, "token_ids");
  if (!ids.is_array()) return make_error("a choice without token_ids");
  for (const json& id : ids) {
    if (!id.is_number_integer()) return make_error("a token id that is not an integer");
    record.ids.push_back(id.get<int32_t>());
  }
  return Status::success();
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "]";
}

std::string show(const ReplyRecord& record) {
  return "ids " + ids_text(record.ids) + " text " + json(record.text).dump(-1, ' ', false, json::error_handler_t::replace) +
         " finish " + record.finish_reason;
}

}  // namespace

const json& json_member(const json& object, const char* key) {
  static const json none;
  auto it = object.find(key);  // end() for anything but an object
  return it == object.end() ? none : *it;
}

std::string SoakCase::text(bool stream) const {
  json sent = body;
  sent["stream"] = stream;
  return sent.dump();
}

Expected<std::vector<SoakCase>> make_cases(const HttpEndpoint& server, int64_t max_model_len) {
  if (max_model_len < 256) return make_error("the server's context (" + std::to_string(max_model_len) + ") is too short for the soak");
  std::vector<SoakCase> cases;
  cases.push_back(completion("cmpl-add-greedy", chatml("What is 1234 + 4321?"), {{"max_tokens", 16}}));
  json mul = seeded(0.8, 7);
  mul["max_tokens"] = 24;
  mul["ignore_eos"] = true;
  cases.push_back(completion("cmpl-mul-seeded-ignore-eos", chatml("What is 12 * 34?"), mul));
  cases.push_back(completion("cmpl-ids-greedy", some_ids(40, 1),
                             {{"max_tokens", 8}, {"stream_options", {{"include_usage", true}}}}));
  json ids_seeded = seeded(0.8, 42);
  ids_seeded["max_tokens"] = 48;
  ids_seeded["ignore_eos"] = true;
  cases.push_back(completion("cmpl-ids-seeded-ignore-eos", some_ids(25, 2), ids_seeded));
  cases.push_back(completion("cmpl-sort-stop", chatml("Sort these numbers: 42 7 19 88 3"),
                             {{"max_tokens", 20}, {"stop", " 42"}}));
  json filtered = seeded(0.8, 1234);
  filtered["top_k"] = 20;
  filtered["top_p"] = 0.9;
  filtered["max_tokens"] = 32;
  filtered["ignore_eos"] = true;
  cases.push_back(completion("cmpl-ids-top-k-top-p", some_ids(60, 3), filtered));
  cases.push_back(chat("chat-sort-greedy", "Sort these numbers: 42 7 19 88 3", {{"max_tokens", 32}}));
  json reverse = seeded(0.8, 3);
  reverse["max_tokens"] = 12;
  cases.push_back(chat("chat-reverse-seeded", "Reverse the word planet.", reverse));
  cases.push_back(chat("chat-count-ignore-eos", "How many times does the letter a appear in banana?",
                       {{"max_tokens", 40}, {"ignore_eos", true}}));
  json subtract = seeded(0.8, 99);
  subtract["max_completion_tokens"] = 4;
  cases.push_back(chat("chat-sub-seeded", "Compute 9000 minus 1234.", subtract));

  // The two long prompts: a few dozen tokens short of the context, with their max_tokens.
  json long_ids = seeded(0.8, 5);
  long_ids["max_tokens"] = 48;
  long_ids["ignore_eos"] = true;
  cases.push_back(completion("cmpl-long-ids-seeded", some_ids(size_t(max_model_len - 48 - 8), 4), long_ids));
  auto content = long_chat_content(server, max_model_len - 16 - 48);
  if (!content.ok()) return content.error();
  cases.push_back(chat("chat-long-greedy", *content, {{"max_tokens", 16}, {"ignore_eos", true}}));
  return cases;
}

Status run_alone(const HttpEndpoint& server, std::vector<SoakCase>& cases) {
  for (SoakCase& soak_case : cases) {
    auto reply = post(server, soak_case.path, soak_case.text(false));
    if (!reply.ok()) return make_error(soak_case.name + ": " + reply.error().message);
    auto record = read_reply_body(reply->body, soak_case.chat(), false);
    if (!record.ok()) return make_error(soak_case.name + ": " + record.error().message);
    const json parsed = json::parse(reply->body);
    soak_case.alone = *record;
    const json& tokens = json_member(json_member(parsed, "usage"), "prompt_tokens");
    soak_case.prompt_tokens = tokens.is_number_integer() ? tokens.get<int64_t>() : 0;
  }
  return Status::success();
}

Status add_stream_chunk(std::string_view data, bool chat, ReplyRecord& record) {
  auto chunk = parse_object(data);
  if (!chunk.ok()) return chunk.error();
  if (chunk->contains("error")) return make_error("the stream carried an error: " + std::string(data.substr(0, 300)));
  const json& choices = json_member(*chunk, "choices");
  if (!choices.is_array()) return make_error("a chunk without choices");
  if (choices.empty()) return Status::success();  // the usage chunk
  const json& choice = choices[0];
  LOCKSTEP_TRY(add_ids(choice, record));
  const json& piece = chat ? json_member(json_member(choice, "delta"), "content") : json_member(choice, "text");
  if (piece.is_string()) record.text += piece.get<std::string>();
  if (const json& finish = json_member(choice, "finish_reason"); finish.is_string()) record.finish_reason = finish;
  return Status::success();
}

Expected<ReplyRecord> read_reply_body(const std::string& body, bool chat, bool streamed) {
  ReplyRecord record;
  if (streamed) {
    std::vector<std::string> payloads = sse_payloads(body);
    if (payloads.empty() || payloads.back() != "[DONE]") return make_error("a stream that does not end with [DONE]");
    payloads.pop_back();
    for (const std::string& data : payloads) LOCKSTEP_TRY(add_stream_chunk(data, chat, record));
    return record;
  }
  auto reply = parse_object(body);
  if (!reply.ok()) return reply.error();
  const json& choices = json_member(*reply, "choices");
  if (!choices.is_array() || choices.size() != 1) return make_error("a reply without one choice");
  const json& choice = choices[0];
  LOCKSTEP_TRY(add_ids(choice, record));
  const json& text = chat ? json_member(json_member(choice, "message"), "content") : json_member(choice, "text");
  if (!text.is_string()) return make_error("a reply without text");
  record.text = text;
  if (const json& finish = json_member(choice, "finish_reason"); finish.is_string()) record.finish_reason = finish;
  return record;
}

std::string difference(const SoakCase& soak_case, const ReplyRecord& got) {
  const ReplyRecord& alone = soak_case.alone;
  if (got.ids == alone.ids && got.text == alone.text && got.finish_reason == alone.finish_reason) return "";
  return "differs from its alone run: got " + show(got) + "; alone " + show(alone);
}

std::string prefix_difference(const SoakCase& soak_case, const ReplyRecord& got) {
  const ReplyRecord& alone = soak_case.alone;
  const bool ids = got.ids.size() <= alone.ids.size() && std::equal(got.ids.begin(), got.ids.end(), alone.ids.begin());
  if (ids && alone.text.starts_with(got.text)) return "";
  return "a stream cut short is not a prefix of its alone run: got " + show(got) + "; alone " + show(alone);
}

}  // namespace lockstep::soak
