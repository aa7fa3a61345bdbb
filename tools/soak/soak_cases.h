// The ordinary requests of the soak test, each sent alone once (its alone run), and how a reply,
// whole or streamed, is read and compared with that alone run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "http/http_client.h"

namespace lockstep::soak {

// What a completed reply says: the ids, the text and why it ended.
struct ReplyRecord {
  std::vector<int32_t> ids;
  std::string text;
  std::string finish_reason;
};

struct SoakCase {
  std::string name;           // for failure lines: "chat-sort-greedy"
  std::string path;           // "/v1/completions" or "/v1/chat/completions"
  nlohmann::json body;        // without "stream"
  ReplyRecord alone;          // filled by run_alone
  int64_t prompt_tokens = 0;  // the alone run's usage.prompt_tokens

  bool chat() const { return path == "/v1/chat/completions"; }
  // The body to send, streamed or not.
  std::string text(bool stream) const;
};

// About a dozen requests: completions and chat, greedy and seeded, text and token-id prompts,
// two of them a little short of `max_model_len` tokens. Sizing the long chat prompt sends two
// short probes to `server`.
[[nodiscard]] Expected<std::vector<SoakCase>> make_cases(const HttpEndpoint& server, int64_t max_model_len);

// Sends each case alone, one at a time, and records its reply.
[[nodiscard]] Status run_alone(const HttpEndpoint& server, std::vector<SoakCase>& cases);

// `object`'s member `key`, or null when it has none (nlohmann's const operator[] would be
// undefined there). Also null when `object` is no object.
const nlohmann::json& json_member(const nlohmann::json& object, const char* key);

// A 200 reply's body: one JSON object, or (streamed) server-sent events whose chunks are put
// back together. An error says what is wrong with it.
[[nodiscard]] Expected<ReplyRecord> read_reply_body(const std::string& body, bool chat, bool streamed);
// One streamed chunk's data (not "[DONE]") added to `record`.
[[nodiscard]] Status add_stream_chunk(std::string_view data, bool chat, ReplyRecord& record);

// Empty when `got` equals the alone run, else what differs.
std::string difference(const SoakCase& soak_case, const ReplyRecord& got);
// Empty when `got` (a stream cut short) is a prefix of the alone run, else what differs.
std::string prefix_difference(const SoakCase& soak_case, const ReplyRecord& got);

}  // namespace lockstep::soak
