// The bodies of POST /v1/completions and /v1/chat/completions, parsed and checked. Every
// problem is a RequestError with the HTTP status and OpenAI's error fields, so a client gets
// a clear 4xx and nothing else is touched.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "grammar/token_masks.h"
#include "io/json_file.h"
#include "server/tool_calls.h"
#include "lanes/request.h"
#include "models/model_info.h"
#include "text/model_text.h"

namespace lockstep {

struct RequestError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the field at fault, when one is
  std::string code;   // e.g. "model_not_found"
};

// What the server knows when it reads a request.
struct RequestContext {
  const ModelInfo* info = nullptr;
  const ModelText* text = nullptr;
  std::string model_name;       // the id /v1/models lists, and replies carry
  float default_temperature = 0.0f;
  bool thinking = true;         // false: --no-thinking (enable_thinking=false unless the request says)
  std::vector<std::string> aliases = {};  // more names a request may give as "model" (--served-model-name)
  std::shared_ptr<const Vocabulary> vocabulary = nullptr;  // the tokens as bytes, for grammars (null: no tokenizer)
};

// One prompt of a request: its ids, and the text echo repeats (the prompt's own text, or its
// ids decoded).
struct PromptEntry {
  std::vector<int32_t> ids;
  std::string echo;
  bool text = false;  // given as text (else as ids)
};

constexpr size_t kMaxPrompts = 256;  // the most prompts one completions request may list

struct CompletionRequest {
  bool chat = false;
  GenerateRequest generate;     // the first prompt's ids, max_tokens, sampling, logprobs
  // Every prompt (chat: one). Completions may list several: prompt p's choice i is the reply's
  // choice p * n + i, the stream of `generate` with that prompt and seed + i.
  std::vector<PromptEntry> prompts;
  bool seed_given = false;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;   // stream_options.include_usage
  bool return_token_ids = false;
  int32_t n = 1;                // choices: choice i samples with seed + i
  bool echo = false;            // completions: the reply text starts with the prompt (with logprobs: its logprobs too)
  // Tools (chat): the reply is parsed for calls in tool_format (none: it is not).
  ToolFormat tool_format = ToolFormat::none;
  nlohmann::ordered_json tools; // the request's tools, in its own order
  bool tool_named = false;      // tool_choice named a function: the finish reason stays "stop"
  bool tool_forced = false;     // tool_choice "required" or named: a grammar makes the reply calls alone
  bool parallel_tool_calls = true;
};

// Parses and checks a body. chat selects the chat endpoint's fields (messages, ...). A text
// prompt is encoded only as far as the context can hold (more is refused); a chat template
// renders under RenderLimits, asking `cancelled` (when given) whether to give up.
[[nodiscard]] std::variant<CompletionRequest, RequestError> parse_completion_request(
    const std::string& body, bool chat, const RequestContext& context, const std::function<bool()>& cancelled = {});

// A request body as a JSON object, or the 400 that says why not: not JSON, not an object,
// nested deeper than kMaxJsonDepth, or an object with a key twice (found before any tree is
// built). Every route with a body reads it so.
[[nodiscard]] std::variant<nlohmann::json, RequestError> parse_body_object(const std::string& text);

// {"error": {"message", "type", "param", "code"}}
std::string error_body(const RequestError& error);

// A chat request's messages as the template takes them: each an object with a string role, its
// content a string (text parts joined; null as ""), a call's arguments an object. Where `text`'s
// template tells null content apart (`content is none`, as DeepSeek V3's does for a message of
// calls alone), null stays null; where it joins arguments to text as they are (DeepSeek V3's
// again), they stay the client's string; where it loops over content parts (Gemma 3's), they
// stay parts. The chat route, /apply-template and the CLI all use it.
[[nodiscard]] std::optional<RequestError> chat_messages(const nlohmann::ordered_json& messages,
                                                        nlohmann::ordered_json& out, const ModelText* text = nullptr);

}  // namespace lockstep
