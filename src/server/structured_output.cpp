#include "server/structured_output.h"

#include <algorithm>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "server/reasoning.h"

namespace lockstep {
namespace {

RequestError bad_format(const std::string& message) {
  return RequestError{400, message, "invalid_request_error", "response_format", ""};
}

}  // namespace

std::shared_ptr<const Vocabulary> model_vocabulary(const ModelInfo& info, const ModelText& text) {
  if (!text.has_tokenizer()) return nullptr;
  const Tokenizer& tokenizer = text.tokenizer();
  std::vector<std::string> spelled(size_t(std::max<int64_t>(info.vocab_size, 0)));
  for (int32_t id = 0; id < int32_t(spelled.size()) && id < tokenizer.vocab_size(); ++id)
    spelled[size_t(id)] = tokenizer.token_bytes(id);
  return std::make_shared<const Vocabulary>(spelled, info.eos_ids);
}

std::optional<RequestError> read_gbnf_grammar(const nlohmann::json& body, const RequestContext& context,
                                              CompletionRequest& out) {
  auto field = body.find("grammar");
  if (field == body.end() || field->is_null()) return std::nullopt;
  auto bad = [](const std::string& message) {
    return RequestError{400, message, "invalid_request_error", "grammar", ""};
  };
  if (!field->is_string()) return bad("'grammar' must be a string (GBNF)");
  if (out.generate.grammar) return bad("'grammar' cannot go with a 'response_format' that constrains the reply");
  if (!context.vocabulary) return bad("'grammar' needs the model's tokenizer, and this model has none");
  auto grammar = std::make_shared<Grammar>();
  Expected<int32_t> root = add_gbnf(*grammar, field->get<std::string>());
  if (!root.ok()) return bad(root.error().message);
  grammar->set_root(*root);
  if (std::string problem = grammar_problem(*grammar); !problem.empty()) return bad("grammar: " + problem);
  if (!constrain_by(grammar, context, out)) return bad(kGrammarTooCostly);
  return std::nullopt;
}

bool constrain_by(std::shared_ptr<const Grammar> grammar, const RequestContext& context, CompletionRequest& out) {
  auto masks = std::make_shared<TokenMasks>(std::move(grammar), context.vocabulary);
  if (!masks->affordable(masks->start())) return false;
  out.generate.grammar = std::move(masks);
  out.generate.grammar_after = grammar_start_after(*context.text, out.generate.prompt, out.chat);
  return true;
}

int32_t grammar_start_after(const ModelText& text, const std::vector<int32_t>& ids, bool chat) {
  if (!chat || !text.has_tokenizer()) return -1;
  const Tokenizer& tokenizer = text.tokenizer();
  const size_t tail = std::min<size_t>(ids.size(), 16);
  if (!prompt_opens_thinking(tokenizer.decode(std::vector<int32_t>(ids.end() - int64_t(tail), ids.end())))) return -1;
  return tokenizer.token_to_id("</think>").value_or(-1);
}

std::optional<RequestError> read_reasoning_budget(const nlohmann::json& body, const RequestContext& context,
                                                  CompletionRequest& out) {
  auto field = body.find("max_reasoning_tokens");
  if (field == body.end() || field->is_null()) return std::nullopt;
  auto bad = [](const std::string& message) {
    return RequestError{400, message, "invalid_request_error", "max_reasoning_tokens", ""};
  };
  if (!field->is_number_integer() || (field->is_number_integer() && !field->is_number_unsigned() && field->get<int64_t>() < 0))
    return bad("'max_reasoning_tokens' must be a non-negative integer");
  const Tokenizer* tokenizer = context.text->has_tokenizer() ? &context.text->tokenizer() : nullptr;
  const std::optional<int32_t> open = tokenizer ? tokenizer->token_to_id("<think>") : std::nullopt;
  const std::optional<int32_t> close = tokenizer ? tokenizer->token_to_id("</think>") : std::nullopt;
  if (!open || !close) return bad("'max_reasoning_tokens' needs a model whose vocabulary has <think> and </think> tokens");
  out.generate.think_budget = int64_t(std::min<uint64_t>(field->get<uint64_t>(), uint64_t(1) << 40));
  out.generate.think_open = *open;
  out.generate.think_close = *close;
  out.generate.thinking_at_start = grammar_start_after(*context.text, out.generate.prompt, true) >= 0;
  return std::nullopt;
}

std::optional<RequestError> read_response_format(const std::string& text, const nlohmann::json& body,
                                                 const RequestContext& context, CompletionRequest& out) {
  auto format = body.find("response_format");
  if (format == body.end() || format->is_null()) return std::nullopt;
  if (!format->is_object() || !format->contains("type") || !(*format)["type"].is_string())
    return bad_format("'response_format' must be an object with a string 'type'");
  const std::string type = (*format)["type"].get<std::string>();
  for (auto& [key, value] : format->items())
    if (key != "type" && !(type == "json_schema" && key == "json_schema"))
      return bad_format("'response_format." + key + "' is not a field of a " + type + " response_format");
  if (type == "text") return std::nullopt;
  if (type != "json_object" && type != "json_schema")
    return bad_format("'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
  if (!context.vocabulary) return bad_format("'response_format' needs the model's tokenizer, and this model has none");
  auto grammar = std::make_shared<Grammar>();
  if (type == "json_object") {
    grammar->set_root(add_json_object(*grammar));
  } else {
    // Again, in order: members are written in the order the schema lists them.
    const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text, nullptr, false);
    const auto spec = ordered.find("response_format")->find("json_schema");
    if (spec == ordered.find("response_format")->end() || !spec->is_object())
      return bad_format("'response_format.json_schema' must be an object with a 'schema'");
    for (auto& [key, value] : spec->items()) {
      if (key == "name" || key == "description") {
        if (!value.is_string()) return bad_format("'response_format.json_schema." + key + "' must be a string");
      } else if (key == "strict") {
        if (!value.is_boolean() && !value.is_null()) return bad_format("'response_format.json_schema.strict' must be a boolean");
      } else if (key != "schema") {
        return bad_format("'response_format.json_schema." + key + "' is not a field of json_schema");
      }
    }
    // OpenAI's default for a json_schema without one: any JSON object.
    Expected<int32_t> root = spec->contains("schema") ? add_json_schema(*grammar, (*spec)["schema"])
                                                      : Expected<int32_t>(add_json_object(*grammar));
    if (!root) return bad_format("response_format.json_schema." + root.error().message);
    grammar->set_root(*root);
  }
  if (std::string problem = grammar_problem(*grammar); !problem.empty()) return bad_format("response_format: " + problem);
  if (!constrain_by(grammar, context, out)) return bad_format(kGrammarTooCostly);
  return std::nullopt;
}

}  // namespace lockstep
