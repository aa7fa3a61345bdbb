#include "server/openai_request.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cmath>
#include <initializer_list>

#include "server/request_fields.h"
#include "server/structured_output.h"
#include "server/tool_request.h"

namespace lockstep {

namespace {

constexpr int64_t kMaxChoices = 16;  // n: choices a request may ask for

RequestError bad(const std::string& message, const std::string& param = "") {
  return RequestError{400, message, "invalid_request_error", param, ""};
}

// Reads an optional field of one JSON type; nullopt when absent or null.
template <class T>
std::optional<T> field(const nlohmann::json& body, const char* key, std::optional<RequestError>& error) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null() || error) return std::nullopt;
  bool right_type = false;
  if constexpr (std::is_same_v<T, bool>) right_type = it->is_boolean();
  else if constexpr (std::is_integral_v<T>) right_type = it->is_number_integer();
  else if constexpr (std::is_floating_point_v<T>) right_type = it->is_number();
  else if constexpr (std::is_same_v<T, std::string>) right_type = it->is_string();
  if (!right_type) {
    error = bad(std::string("'") + key + "' has the wrong type", key);
    return std::nullopt;
  }
  return it->get<T>();
}

// The seed: any integer from 0 to 2^64 - 1 (the seeds replies report are below 2^53).
std::optional<uint64_t> seed_field(const nlohmann::json& body, std::optional<RequestError>& error) {
  auto it = body.find("seed");
  if (it == body.end() || it->is_null() || error) return std::nullopt;
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  error = it->is_number_integer() ? bad("'seed' must not be negative", "seed")
                                  : bad("'seed' must be an integer from 0 to 2^64 - 1", "seed");
  return std::nullopt;
}

// logit_bias: {"token id": bias, ...}, as OpenAI sends it (keys are decimal ids).
std::optional<RequestError> read_logit_bias(const nlohmann::json& body, LogitAdjustments& adjust) {
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return bad("'logit_bias' must be an object of token ids to biases", "logit_bias");
  if (it->size() > 1024) return bad("'logit_bias' may name at most 1024 tokens", "logit_bias");
  for (auto& [key, value] : it->items()) {
    char* end = nullptr;
    errno = 0;
    const long long id = std::strtoll(key.c_str(), &end, 10);
    // Written as the id alone ("23", not "023", "+23" or " 23"), so no two keys name one token.
    if (key.empty() || *end != '\0' || errno != 0 || id < INT32_MIN || id > INT32_MAX || std::to_string(id) != key)
      return bad("'logit_bias' keys must be token ids, not '" + key + "'", "logit_bias");
    if (!value.is_number()) return bad("'logit_bias' values must be numbers", "logit_bias");
    adjust.bias.push_back({int32_t(id), float(value.get<double>())});
  }
  return std::nullopt;
}

// Whether a chat template's text holds any of `forms`.
bool mentions_any(const std::string& source, std::initializer_list<const char*> forms) {
  return std::any_of(forms.begin(), forms.end(), [&](const char* form) { return source.find(form) != std::string::npos; });
}

// Whether a chat template tells a message's null content from "" (DeepSeek V3's renders an
// assistant's calls only under `message['content'] is none`); most templates read content as
// text, so null goes to them as "".
bool tests_null_content(const std::string& source) {
  return mentions_any(source, {".content is none", "['content'] is none", "[\"content\"] is none",
                               ".content is not none", "['content'] is not none", "[\"content\"] is not none"});
}

// Whether a chat template joins a call's arguments to text as they are (DeepSeek V3's
// `tool['function']['arguments'] + '\n'`): they go to it as the JSON string the client sent.
// Others print them with tojson or read their keys, so they go as an object.
bool joins_argument_text(const std::string& source) {
  return mentions_any(source, {"['arguments'] +", "[\"arguments\"] +", ".arguments +", "+ tool['function']['arguments']"});
}

// Whether a chat template reads a message's content parts itself (Gemma 3's loops over them,
// trimming each): parts go to it as they came, as transformers passes them. Others read content
// as text, so parts go to them joined.
bool iterates_content(const std::string& source) {
  for (const char* form : {" in message['content']", " in message[\"content\"]", " in message.content"}) {
    // A `for` over it, not a test of what it holds (Qwen3's `'<tool_response>' in message.content`).
    for (size_t at = source.find(form); at != std::string::npos; at = source.find(form, at + 1)) {
      const size_t tag = source.rfind("{%", at);
      if (tag != std::string::npos && source.substr(tag, at - tag).find("for ") != std::string::npos) return true;
    }
  }
  return false;
}

// Chat content: a string, or an array of {"type": "text", "text": ...} parts.
std::optional<std::string> content_text(const nlohmann::json& content) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return std::string();
  if (!content.is_array()) return std::nullopt;
  std::string text;
  for (const auto& part : content) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string())
      return std::nullopt;
    text += part["text"].get<std::string>();
  }
  return text;
}

// The refusal of a prompt with more ids than the context holds.
RequestError over_context(int64_t max_context, const char* field) {
  return bad("the prompt has more than " + std::to_string(max_context) + " tokens; the context holds " +
                 std::to_string(max_context) + ", including at least one generated token",
             field);
}

// One completions prompt: a string, or an array of token ids (echoed as their decoded text).
std::optional<RequestError> read_one_prompt(const nlohmann::json& prompt, const RequestContext& context,
                                            PromptEntry& out) {
  const ModelText& text = *context.text;
  const size_t max_ids = size_t(std::max<int64_t>(context.info->max_context, 0));
  const char* what = "'prompt' must be a string, an array of token ids, or an array of either";
  if (prompt.is_string()) {
    out.echo = prompt.get<std::string>();
    out.text = true;
    auto ids = text.encode_within(out.echo, true, max_ids);
    if (!ids.ok()) return bad(ids.error().message, "prompt");
    if (!*ids) return over_context(context.info->max_context, "prompt");
    out.ids = std::move(**ids);
    return std::nullopt;
  }
  if (!prompt.is_array()) return bad(what, "prompt");
  if (prompt.size() > max_ids) return over_context(context.info->max_context, "prompt");
  for (const auto& id : prompt) {
    if (!id.is_number_integer()) return bad(what, "prompt");
    // An integer past int32 is no id (check_request checks the rest against the vocabulary).
    const bool fits = id.is_number_unsigned() ? id.get<uint64_t>() <= uint64_t(INT32_MAX)
                                              : id.get<int64_t>() >= INT32_MIN && id.get<int64_t>() <= INT32_MAX;
    if (!fits)
      return bad("token id " + id.dump() + " is outside the vocabulary [0, " + std::to_string(context.info->vocab_size) +
                     ")",
                 "prompt");
    out.ids.push_back(id.get<int32_t>());
  }
  // Ids outside the vocabulary are refused later (check_request); decode only what can be.
  bool known = text.has_tokenizer();
  for (int32_t id : out.ids) known = known && id >= 0 && id < context.info->vocab_size;
  if (known) out.echo = text.tokenizer().decode(out.ids, false);
  return std::nullopt;
}

std::optional<RequestError> read_prompt(const std::string& raw, const nlohmann::json& body, bool chat,
                                        const RequestContext& context, const std::function<bool()>& cancelled,
                                        CompletionRequest& out) {
  const ModelText& text = *context.text;
  const size_t max_ids = size_t(std::max<int64_t>(context.info->max_context, 0));
  if (chat) {
    // Read again in the body's own key order: templates print tools and call arguments with
    // tojson, which keeps the order they came in (as transformers does).
    const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(raw, nullptr, false);
    auto messages = ordered.find("messages");
    nlohmann::ordered_json normalised;
    if (auto problem = chat_messages(messages == ordered.end() ? nlohmann::ordered_json() : *messages, normalised, &text))
      return *problem;
    nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
    if (!context.thinking) kwargs["enable_thinking"] = false;
    if (auto extra = ordered.find("chat_template_kwargs"); extra != ordered.end() && !extra->is_null()) {
      if (!extra->is_object()) return bad("'chat_template_kwargs' must be an object", "chat_template_kwargs");
      for (auto& [key, value] : extra->items()) kwargs[key] = value;
    }
    if (auto tools_error = read_tools(raw, body, context, kwargs, out)) return *tools_error;
    RenderLimits limits;
    limits.cancelled = cancelled;
    auto ids = text.encode_chat_within(normalised, kwargs, limits, max_ids);
    if (!ids.ok()) return bad(ids.error().message, "messages");
    if (!*ids) return over_context(context.info->max_context, "messages");
    out.generate.prompt = std::move(**ids);
    out.prompts.push_back({out.generate.prompt, ""});
    return std::nullopt;
  }
  auto prompt = body.find("prompt");
  if (prompt == body.end() || prompt->is_null()) return bad("'prompt' is required", "prompt");
  // A string, a list of ids, or a list of either: a completion for each.
  std::vector<const nlohmann::json*> items;
  if (prompt->is_array() && !prompt->empty() && ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
    if (prompt->size() > kMaxPrompts)
      return bad("'prompt' lists more than " + std::to_string(kMaxPrompts) + " prompts", "prompt");
    for (const auto& item : *prompt) items.push_back(&item);
  } else {
    items.push_back(&*prompt);
  }
  for (const nlohmann::json* item : items) {
    PromptEntry entry;
    if (auto problem = read_one_prompt(*item, context, entry)) return problem;
    out.prompts.push_back(std::move(entry));
  }
  out.generate.prompt = out.prompts.front().ids;
  return std::nullopt;
}

}  // namespace

std::optional<RequestError> chat_messages(const nlohmann::ordered_json& messages, nlohmann::ordered_json& out,
                                          const ModelText* text) {
  if (!messages.is_array()) return bad("'messages' must be an array", "messages");
  if (messages.empty()) return bad("'messages' is empty", "messages");
  const bool keep_null = text && tests_null_content(text->chat_template_source());
  const bool argument_text = text && joins_argument_text(text->chat_template_source());
  const bool keep_parts = text && iterates_content(text->chat_template_source());
  out = nlohmann::ordered_json::array();
  for (const auto& message : messages) {
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string())
      return bad("each message needs a string 'role'", "messages");
    // The roles chat templates render: OpenAI's `developer` is the system message by its newer
    // name (templates know only `system`), Llama 3's `ipython` a tool's result. Any other a
    // template would drop or print as it came, so it is refused.
    const std::string& role = message["role"].get_ref<const std::string&>();
    static constexpr std::string_view kRoles[] = {"system", "developer", "user", "assistant", "tool", "ipython"};
    if (std::find(std::begin(kRoles), std::end(kRoles), role) == std::end(kRoles))
      return bad("a message's role \"" + role + "\" is none of system, developer, user, assistant, tool, ipython",
                 "messages");
    auto content = content_text(nlohmann::json(message.value("content", nlohmann::ordered_json())));
    if (!content) return bad("a message's 'content' must be a string or text parts", "messages");
    nlohmann::ordered_json copy = message;
    if (role == "developer") copy["role"] = "system";
    const bool null = message.contains("content") && message["content"].is_null();
    copy["content"] = null && keep_null ? nlohmann::ordered_json() : nlohmann::ordered_json(*content);
    if (keep_parts && message["content"].is_array()) copy["content"] = message["content"];
    // A call's arguments come as a JSON string; templates read them as an object (as
    // transformers' callers pass them).
    if (copy.contains("tool_calls")) {
      if (!copy["tool_calls"].is_array()) return bad("a message's 'tool_calls' must be an array", "messages");
      for (auto& call : copy["tool_calls"]) {
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
          return bad("each tool call needs a 'function' object", "messages");
        auto& arguments = call["function"]["arguments"];
        if (arguments.is_string() && !argument_text) {
          nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(arguments.get<std::string>(), nullptr, false);
          if (parsed.is_object()) arguments = parsed;
        } else if (arguments.is_object() && argument_text) {
          arguments = arguments.dump();
        }
      }
    }
    out.push_back(copy);
  }
  return std::nullopt;
}

std::variant<nlohmann::json, RequestError> parse_body_object(const std::string& text) {
  // Before anything walks it recursively (copies, the chat template's values).
  const JsonTextCheck check = check_json_text(text);
  if (check.too_deep)
    return bad("the body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels of arrays and objects");
  if (check.has_duplicate)
    return bad("the body gives the key '" + check.duplicate + "' twice in one object", check.duplicate);
  nlohmann::json body = nlohmann::json::parse(text, nullptr, false);
  if (body.is_discarded()) return bad("the body is not valid JSON");
  if (!body.is_object()) return bad("the body must be a JSON object");
  return body;
}

std::string error_body(const RequestError& error) {
  nlohmann::json body = {{"error",
                          {{"message", error.message},
                           {"type", error.type},
                           {"param", error.param.empty() ? nlohmann::json() : nlohmann::json(error.param)},
                           {"code", error.code.empty() ? nlohmann::json() : nlohmann::json(error.code)}}}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

std::variant<CompletionRequest, RequestError> parse_body(const std::string& text, bool chat, const RequestContext& context,
                                                         const std::function<bool()>& cancelled) {
  auto parsed = parse_body_object(text);
  if (auto* error = std::get_if<RequestError>(&parsed)) return *error;
  const nlohmann::json& body = std::get<nlohmann::json>(parsed);
  if (auto problem = unsupported_field(body, chat)) return bad(problem->message, problem->field);
  CompletionRequest out;
  out.chat = chat;
  std::optional<RequestError> error;
  auto model = field<std::string>(body, "model", error);
  if (model && *model != context.model_name &&
      std::find(context.aliases.begin(), context.aliases.end(), *model) == context.aliases.end())
    return RequestError{404, "the model '" + *model + "' does not exist; this server serves '" + context.model_name + "'",
                        "invalid_request_error", "model", "model_not_found"};
  if (auto prompt_error = read_prompt(text, body, chat, context, cancelled, out)) return *prompt_error;
  if (auto format_error = read_response_format(text, body, context, out)) return *format_error;
  if (auto grammar_error = read_gbnf_grammar(body, context, out)) return *grammar_error;
  if (auto tool_error = require_tool_call(body, context, out)) return *tool_error;
  if (chat)
    if (auto budget_error = read_reasoning_budget(body, context, out)) return *budget_error;

  size_t longest = 0;
  for (const PromptEntry& prompt : out.prompts) longest = std::max(longest, prompt.ids.size());
  const int64_t room = context.info->max_context - int64_t(longest);
  const bool completion_limit = chat && body.contains("max_completion_tokens") && !body["max_completion_tokens"].is_null();
  if (completion_limit && body.contains("max_tokens") && !body["max_tokens"].is_null() &&
      body["max_tokens"] != body["max_completion_tokens"])
    return bad("'max_tokens' and 'max_completion_tokens' differ: give one of them", "max_tokens");
  auto max_tokens = field<int64_t>(body, completion_limit ? "max_completion_tokens" : "max_tokens", error);
  auto temperature = field<double>(body, "temperature", error);
  auto top_p = field<double>(body, "top_p", error);
  auto top_k = field<int64_t>(body, "top_k", error);
  auto min_p = field<double>(body, "min_p", error);
  auto seed = seed_field(body, error);
  auto n = field<int64_t>(body, "n", error);
  out.stream = field<bool>(body, "stream", error).value_or(false);
  out.return_token_ids = field<bool>(body, "return_token_ids", error).value_or(false);
  out.generate.draft = field<bool>(body, "draft", error).value_or(true);
  LogitAdjustments& adjust = out.generate.adjust;
  adjust.presence = float(field<double>(body, "presence_penalty", error).value_or(0.0));
  adjust.frequency = float(field<double>(body, "frequency_penalty", error).value_or(0.0));
  adjust.repetition = float(field<double>(body, "repetition_penalty", error).value_or(1.0));
  if (auto bias_error = read_logit_bias(body, adjust)) return *bias_error;
  out.echo = !chat && field<bool>(body, "echo", error).value_or(false);
  out.generate.ignore_eos = field<bool>(body, "ignore_eos", error).value_or(false);
  out.generate.cache_prompt = field<bool>(body, "cache_prompt", error).value_or(true);
  if (chat) {
    bool logprobs = field<bool>(body, "logprobs", error).value_or(false);
    auto top = field<int64_t>(body, "top_logprobs", error);
    if (top && (*top < 0 || *top > 20)) return bad("'top_logprobs' must be between 0 and 20", "top_logprobs");
    if (top && !logprobs) return bad("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    if (logprobs) out.generate.top_logprobs = int32_t(top.value_or(0));
  } else {
    auto logprobs = field<int64_t>(body, "logprobs", error);
    if (logprobs && (*logprobs < 0 || *logprobs > 20)) return bad("'logprobs' must be between 0 and 20", "logprobs");
    if (logprobs) out.generate.top_logprobs = int32_t(*logprobs);
    // Echo with logprobs: the prompt's tokens have theirs too (lm-eval-harness's loglikelihood).
    if (logprobs && out.echo) out.generate.prompt_logprobs = int32_t(*logprobs);
  }
  if (error) return *error;
  if (auto options = body.find("stream_options"); options != body.end() && !options->is_null()) {
    if (!options->is_object()) return bad("'stream_options' must be an object", "stream_options");
    for (auto& [key, value] : options->items()) {
      // OpenAI's random padding of chunks, off: asks for nothing.
      if (key == "include_obfuscation" && (value.is_null() || value == false)) continue;
      if (key != "include_usage")
        return bad("'stream_options." + key + "' is not supported (only include_usage)", "stream_options");
      if (!value.is_null() && !value.is_boolean())
        return bad("'stream_options.include_usage' must be a boolean", "stream_options");
      out.include_usage = value.is_boolean() && value.get<bool>();
    }
    if (!out.stream) return bad("'stream_options' is only for a streamed reply ('stream': true)", "stream_options");
  }
  if (auto stop = body.find("stop"); stop != body.end() && !stop->is_null()) {
    if (stop->is_string() && stop->get_ref<const std::string&>().empty()) return bad("the 'stop' string is empty", "stop");
    if (stop->is_string()) out.stop.push_back(stop->get<std::string>());
    else if (stop->is_array() && stop->size() <= 16) {
      for (const auto& s : *stop) {
        if (!s.is_string()) return bad("'stop' must be a string or an array of strings", "stop");
        if (s.get_ref<const std::string&>().empty()) return bad("a 'stop' string is empty", "stop");
        out.stop.push_back(s.get<std::string>());
      }
    } else {
      return bad("'stop' must be a string or an array of up to 16 strings", "stop");
    }
  }
  // Without a tokenizer a reply has no text: no stop string could match, and an echo shows
  // nothing but the prompt's logprobs.
  if (!out.stop.empty() && !context.text->has_tokenizer())
    return bad("'stop' needs the model's tokenizer, and this model has none", "stop");
  if (out.echo && !context.text->has_tokenizer() && out.generate.prompt_logprobs < 0)
    return bad("'echo' needs the model's tokenizer (this model has none), unless 'logprobs' asks for the prompt's logprobs",
               "echo");
  if (n && (*n < 1 || *n > kMaxChoices)) return bad("'n' must be between 1 and " + std::to_string(kMaxChoices), "n");
  out.n = int32_t(n.value_or(1));
  out.generate.max_tokens = max_tokens.value_or(chat ? room : std::min<int64_t>(16, room));
  SamplingParams& sampling = out.generate.sampling;
  sampling.temperature = float(temperature.value_or(context.default_temperature));
  if (top_p) sampling.top_p = float(*top_p);
  if (top_k) {
    if (*top_k < -1 || *top_k > (int64_t(1) << 30)) return bad("'top_k' is out of range", "top_k");
    sampling.top_k = *top_k == -1 ? 0 : int(*top_k);
  }
  if (min_p) sampling.min_p = float(*min_p);
  out.seed_given = seed.has_value();
  sampling.seed = seed ? *seed : fresh_seed();
  // The check every entry point runs (lanes/request.h), then the API's own rule: OpenAI refuses
  // a max_tokens past the context where the lanes would end the stream there.
  if (chat && max_tokens == 0)
    return bad("max_tokens 0 generates nothing; /v1/completions takes it (with echo)", "max_tokens");
  for (const PromptEntry& prompt : out.prompts) {
    GenerateRequest each = out.generate;
    each.prompt = prompt.ids;
    if (auto problem = check_request(*context.info, each)) {
      const bool is_prompt = problem->field == "prompt";
      const bool logprobs = problem->field == "logprobs";
      return bad(problem->message, is_prompt && chat ? "messages" : logprobs && chat ? "top_logprobs" : problem->field);
    }
  }
  if (out.generate.max_tokens > room)
    return bad("the prompt (" + std::to_string(longest) + " tokens) plus max_tokens (" +
                   std::to_string(out.generate.max_tokens) + ") is over this model's context of " +
                   std::to_string(context.info->max_context),
               "max_tokens");
  return out;
}

}  // namespace

std::variant<CompletionRequest, RequestError> parse_completion_request(const std::string& text, bool chat,
                                                                      const RequestContext& context,
                                                                      const std::function<bool()>& cancelled) {
  try {
    return parse_body(text, chat, context, cancelled);
  } catch (const nlohmann::json::exception& error) {
    // A field of a type no check above expected: still the client's error, never a 500.
    return bad(std::string("a field has the wrong type: ") + error.what());
  }
}

}  // namespace lockstep
