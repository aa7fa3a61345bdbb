#include "server/openai_format.h"

#include "lanes/lane_host.h"
#include "tokenizer/tokenizer.h"

namespace lockstep {

std::string token_text(const ModelText& text, int32_t id) {
  if (!text.has_tokenizer()) return std::to_string(id);
  return text.tokenizer().decode({id}, false);
}

namespace {

std::vector<int> bytes_of(const std::string& s) {
  std::vector<int> bytes;
  for (unsigned char c : s) bytes.push_back(c);
  return bytes;
}

// A token's own bytes, as OpenAI's `bytes` gives them: what it adds to the text, a piece of a
// character included (its `token` text shows such a piece as U+FFFD), so a client can join the
// pieces of a character split over tokens.
std::vector<int> token_bytes_of(const ModelText& text, int32_t id) {
  if (!text.has_tokenizer()) return bytes_of(std::to_string(id));
  const Tokenizer& tokenizer = text.tokenizer();
  return bytes_of(tokenizer.is_special(id) ? tokenizer.decode({id}, false) : tokenizer.token_bytes(id));
}

}  // namespace

void TextOffset::add(std::string_view bytes) {
  for (unsigned char c : bytes) {
    if (expected_ > 0 && c >= low_ && c <= high_) {  // the open character goes on
      --expected_;
      ++taken_;
      low_ = 0x80, high_ = 0xBF;
      continue;
    }
    // The open character was cut short: one U+FFFD (counted at its first byte), or one a byte.
    if (expected_ > 0 && per_byte) characters += taken_ - 1;
    ++characters;  // a new character, or one U+FFFD for a byte that cannot start one
    expected_ = 0;
    taken_ = 1;
    low_ = 0x80, high_ = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      expected_ = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      expected_ = 2;
      if (c == 0xE0) low_ = 0xA0;   // no overlong forms
      if (c == 0xED) high_ = 0x9F;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      expected_ = 3;
      if (c == 0xF0) low_ = 0x90;
      if (c == 0xF4) high_ = 0x8F;  // nothing past U+10FFFF
    }
  }
}

nlohmann::json chat_logprobs_json(const ModelText& text, const std::vector<TokenLogprobs>& tokens) {
  if (tokens.empty()) return nullptr;
  nlohmann::json content = nlohmann::json::array();
  for (const TokenLogprobs& token : tokens) {
    nlohmann::json top = nlohmann::json::array();
    for (auto [id, logprob] : token.top)
      top.push_back({{"token", token_text(text, id)}, {"logprob", logprob}, {"bytes", token_bytes_of(text, id)}});
    content.push_back({{"token", token_text(text, token.id)}, {"logprob", token.logprob},
                       {"bytes", token_bytes_of(text, token.id)}, {"top_logprobs", top}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

nlohmann::json completion_logprobs_json(const ModelText& text, std::optional<int32_t> lead,
                                        const std::vector<TokenLogprobs>& tokens, TextOffset& offset,
                                        std::string_view echo, bool ids_echoed) {
  if (tokens.empty() && !lead) return nullptr;
  nlohmann::json pieces = nlohmann::json::array(), logprobs = nlohmann::json::array(),
                 tops = nlohmann::json::array(), offsets = nlohmann::json::array();
  size_t echoed = 0;  // bytes of `echo` the tokens so far cover
  bool lost = false;  // ids_echoed: a token was not found in `echo`
  if (text.has_tokenizer()) offset.per_byte = text.tokenizer().decodes_byte_fallback();
  // Moves `offset` past the characters token `id` takes in the reply's text.
  auto advance = [&](int32_t id) {
    if (!text.has_tokenizer()) return;
    const Tokenizer& tokenizer = text.tokenizer();
    const bool special = tokenizer.is_special(id);
    if (echo.empty()) {
      if (!special) offset.add(tokenizer.token_bytes(id));
      return;
    }
    const std::string bytes = special ? tokenizer.decode({id}, false) : tokenizer.token_bytes(id);
    for (size_t skip = 0; skip < 2 && skip < bytes.size() && !lost; ++skip) {  // a leading space a decoder drops
      const std::string_view found(bytes.data() + skip, bytes.size() - skip);
      if (skip == 1 && bytes[0] != ' ') break;
      if (echo.substr(echoed, found.size()) == found) {
        echoed += found.size();
        offset.add(found);
        return;
      }
    }
    // Not where the text has got to. A text prompt's token its text does not hold (an added BOS)
    // takes nothing. An id prompt's decoding shows ill-formed bytes otherwise than they are, so
    // from there on each of its tokens takes its own bytes' characters.
    if (ids_echoed) {
      lost = true;
      offset.add(bytes);
    }
  };
  auto add = [&](int32_t id, const nlohmann::json& logprob, const nlohmann::json& top) {
    pieces.push_back(token_text(text, id));
    logprobs.push_back(logprob);
    tops.push_back(top);
    offsets.push_back(offset.characters);
    advance(id);
  };
  if (lead) add(*lead, nullptr, nullptr);
  for (const TokenLogprobs& token : tokens) {
    nlohmann::json top = nlohmann::json::object();
    for (auto [id, logprob] : token.top) top[token_text(text, id)] = logprob;
    add(token.id, token.logprob, top);
  }
  return {{"tokens", pieces}, {"token_logprobs", logprobs}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

void append_logprobs(nlohmann::json& logprobs, const nlohmann::json& more) {
  if (more.is_null()) return;
  if (logprobs.is_null()) {
    logprobs = more;
    return;
  }
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
    for (const auto& entry : more[key]) logprobs[key].push_back(entry);
}

nlohmann::json usage_json(size_t prompt_tokens, size_t completion_tokens, const StreamEnd& end) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", end.cached_tokens}}},
          {"completion_tokens_details", {{"accepted_prediction_tokens", end.accepted_drafts},
                                         {"rejected_prediction_tokens", end.drafted - end.accepted_drafts}}}};
}

nlohmann::json stream_chunk(const ReplyHeader& header, const std::string& delta, bool first,
                            const std::vector<int32_t>* ids, const nlohmann::json& logprobs,
                            const std::string& finish_reason, const std::string& reasoning, int index) {
  nlohmann::json choice = {{"index", index},
                           {"logprobs", logprobs},
                           {"finish_reason", finish_reason.empty() ? nlohmann::json() : nlohmann::json(finish_reason)}};
  if (header.chat) {
    nlohmann::json message = nlohmann::json::object();
    if (first) message["role"] = "assistant";
    if (!delta.empty() || first) message["content"] = delta;
    if (first) message["refusal"] = nullptr;
    if (!reasoning.empty()) message["reasoning_content"] = reasoning;
    choice["delta"] = message;
  } else {
    choice["text"] = delta;
  }
  if (ids) choice["token_ids"] = *ids;
  return {{"id", header.id},
          {"object", header.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", header.created},
          {"model", header.model},
          {"choices", nlohmann::json::array({choice})},
          {"seed", header.seed}};
}

nlohmann::json reply_choice(const ReplyHeader& header, int index, const std::string& text,
                            const std::vector<int32_t>* ids, const nlohmann::json& logprobs,
                            const std::string& finish_reason, const std::string* reasoning) {
  nlohmann::json choice = {{"index", index}, {"logprobs", logprobs}, {"finish_reason", finish_reason}};
  if (header.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}, {"refusal", nullptr}};
    if (reasoning) choice["message"]["reasoning_content"] = *reasoning;
  } else {
    choice["text"] = text;
  }
  if (ids) choice["token_ids"] = *ids;
  return choice;
}

nlohmann::json full_reply(const ReplyHeader& header, const nlohmann::json& choices, const nlohmann::json& usage,
                          uint64_t seed) {
  return {{"id", header.id},
          {"object", header.chat ? "chat.completion" : "text_completion"},
          {"created", header.created},
          {"model", header.model},
          {"choices", choices},
          {"usage", usage},
          {"seed", seed}};
}

}  // namespace lockstep
