// The JSON shapes of OpenAI's completion and chat completion replies and stream chunks.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lanes/request.h"
#include "sampling/logprobs.h"
#include "text/model_text.h"

namespace lockstep {

struct StreamEnd;

struct ReplyHeader {
  std::string id;       // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
  bool chat = false;
  uint64_t seed = 0;    // the sampling seed, on every chunk of a stream (as on a whole reply)
};

// A token's text for logprobs: its decoded piece, or its id when there is no tokenizer.
std::string token_text(const ModelText& text, int32_t id);

// The logprobs object of one chat choice, for `tokens` (empty: null).
nlohmann::json chat_logprobs_json(const ModelText& text, const std::vector<TokenLogprobs>& tokens);

// How far a completion's text_offset has got: the characters (code points) of its text so far, as
// a lossy UTF-8 decoder counts them (a well-formed character, or a maximal ill-formed piece shown
// as one U+FFFD), carried over tokens that split a character.
struct TextOffset {
  int64_t characters = 0;
  // A ByteFallback decoder's text shows each ill-formed byte as one U+FFFD, not each piece. A
  // piece is known to be cut short only at the byte after it, so the one token that follows it
  // is given the piece's first character; every token after that is where the text shows it.
  bool per_byte = false;
  void add(std::string_view bytes);

 private:
  int expected_ = 0;                 // continuation bytes the open character still needs
  int taken_ = 0;                    // bytes the open character has
  unsigned char low_ = 0x80, high_ = 0xBF;  // the range its next byte must fall in
};

// The logprobs object of a completion choice (or of one stream chunk of it): `lead`, when given,
// is an echoed prompt's first token, listed with null logprobs (nothing precedes it), then
// `tokens`. text_offset counts characters (code points) of the reply's text from `offset`,
// which it advances past them: a generated token by the characters it adds (a special token,
// which the text leaves out, by none). With `echo` (the prompt's text, these its tokens from its
// start) each token is found where the text has got to: one the text does not hold there (the
// BOS a tokenizer adds) takes no characters. With `ids_echoed` the echo is a prompt of ids'
// decoding, which shows ill-formed bytes otherwise than they are: from the first token not
// found there, each token takes its own bytes' characters. Nothing to list: null.
nlohmann::json completion_logprobs_json(const ModelText& text, std::optional<int32_t> lead,
                                        const std::vector<TokenLogprobs>& tokens, TextOffset& offset,
                                        std::string_view echo = {}, bool ids_echoed = false);
// `more`'s entries appended to `logprobs`' (both completion logprobs objects or null).
void append_logprobs(nlohmann::json& logprobs, const nlohmann::json& more);

// One stream chunk: a text delta (and the role on the first chat chunk), ids, logprobs,
// finish reason (empty: null); a chat delta's thinking in reasoning_content when there is some.
nlohmann::json stream_chunk(const ReplyHeader& header, const std::string& delta, bool first,
                            const std::vector<int32_t>* ids, const nlohmann::json& logprobs,
                            const std::string& finish_reason, const std::string& reasoning = "", int index = 0);

// One choice of a whole reply; `reasoning` (a chat reply that thought): its message's
// reasoning_content.
nlohmann::json reply_choice(const ReplyHeader& header, int index, const std::string& text,
                            const std::vector<int32_t>* ids, const nlohmann::json& logprobs,
                            const std::string& finish_reason, const std::string* reasoning = nullptr);

// The whole reply of a non-streaming request: its choices (reply_choice), usage and seed.
nlohmann::json full_reply(const ReplyHeader& header, const nlohmann::json& choices, const nlohmann::json& usage,
                          uint64_t seed);

// OpenAI's usage object, with prompt_tokens_details.cached_tokens (the prompt positions the
// prompt cache gave, not filled) and completion_tokens_details: accepted_prediction_tokens (the
// generated tokens that were MTP drafts the model agreed with) and rejected_prediction_tokens
// (the drafts it did not take).
nlohmann::json usage_json(size_t prompt_tokens, size_t completion_tokens, const StreamEnd& end);

}  // namespace lockstep
