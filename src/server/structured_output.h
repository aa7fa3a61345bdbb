// Structured output: response_format {"type": "json_object"} or {"type": "json_schema", ...}
// read from a request and compiled into a grammar over the model's vocabulary
// (grammar/json_schema.h), which the lanes then apply to each token (constrained decoding).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "grammar/token_masks.h"
#include "server/openai_request.h"

namespace lockstep {

// The model's tokens as the bytes they add, with its end ids; null without a tokenizer.
std::shared_ptr<const Vocabulary> model_vocabulary(const ModelInfo& info, const ModelText& text);

// Reads body["response_format"] (`text`: the raw body, read again for the schema's member order)
// into out.generate.grammar. A chat prompt that opens thinking gets the grammar after it closes.
[[nodiscard]] std::optional<RequestError> read_response_format(const std::string& text, const nlohmann::json& body,
                                                              const RequestContext& context, CompletionRequest& out);

// Reads body["grammar"] (llama.cpp's GBNF, grammar/gbnf.h) into out.generate.grammar; a request
// with response_format as well is refused.
[[nodiscard]] std::optional<RequestError> read_gbnf_grammar(const nlohmann::json& body, const RequestContext& context,
                                                           CompletionRequest& out);

// Reads max_reasoning_tokens (chat): past that many tokens of thinking, the next is </think>.
// Needs <think> and </think> to be tokens of the model's vocabulary.
[[nodiscard]] std::optional<RequestError> read_reasoning_budget(const nlohmann::json& body, const RequestContext& context,
                                                               CompletionRequest& out);

// Constrains `out` by `grammar` (checked with grammar_problem): its masks over the model's
// vocabulary, from the end of thinking when the prompt opened it. False, and nothing set, when
// the first mask alone would pass kMaxMaskWork. The one step response_format, grammar and a
// required tool call share.
[[nodiscard]] bool constrain_by(std::shared_ptr<const Grammar> grammar, const RequestContext& context,
                                CompletionRequest& out);

// The id that closes thinking when the prompt `ids` left it open (chat), else -1: a grammar
// applies from there.
int32_t grammar_start_after(const ModelText& text, const std::vector<int32_t>& ids, bool chat);

}  // namespace lockstep
