// OpenAiServer, part three (openai_server.h): the text routes, as llama.cpp's server names them.
// POST /tokenize {"content", "add_special", "with_pieces"} -> {"tokens"}; POST /detokenize
// {"tokens"} -> {"content"}; POST /apply-template {"messages", "chat_template_kwargs", "tools"} -> {"prompt"}.
// Each refuses a field it does not take, as the completions do.
#include <nlohmann/json.hpp>
#include <variant>

#include "server/openai_server.h"

namespace lockstep {

namespace {

using nlohmann::json;

RequestError bad(const std::string& message, const std::string& param = "") {
  return {400, message, "invalid_request_error", param, ""};
}

// The body as an object whose fields are all in `allowed`, or why not.
std::variant<json, RequestError> read_body(const std::string& text, std::initializer_list<const char*> allowed) {
  auto parsed = parse_body_object(text);
  if (auto* error = std::get_if<RequestError>(&parsed)) return *error;
  json& body = std::get<json>(parsed);
  for (auto& [key, value] : body.items()) {
    bool known = false;
    for (const char* name : allowed) known |= key == name;
    if (!known) return bad("'" + key + "' is not a field of this route", key);
  }
  return std::move(body);
}

}  // namespace

void OpenAiServer::text_route(const HttpRequest& request, HttpResponder& responder) {
  const std::string& path = request.path;
  auto refuse = [&](const RequestError& error) { send_error(responder, error, "invalid"); };
  auto reply = [&](const json& body) {
    responder.send(200, "application/json", body.dump(-1, ' ', false, json::error_handler_t::replace));
  };
  // A large body waits for a parse slot (its trees are large too); the whole route holds it.
  ParseGate::Pass pass(parse_gate_, request.body.size(), [&] { return stopping_.load() || responder.client_gone(); });
  if (!pass.entered()) return send_error(responder, {503, "the server is stopping", "server_error", "", ""}, "busy");
  try {
    if (path == "/apply-template") {
      auto body = read_body(request.body, {"messages", "chat_template_kwargs", "tools"});
      if (auto* error = std::get_if<RequestError>(&body)) return refuse(*error);
      const json& fields = std::get<json>(body);
      if (!text_.has_chat_template()) return refuse(bad("this model folder has no chat template"));
      // In the body's own key order, as the chat route renders (tojson keeps it).
      const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(request.body, nullptr, false);
      nlohmann::ordered_json messages;
      if (auto problem = chat_messages(ordered.value("messages", nlohmann::ordered_json()), messages, &text_))
        return refuse(*problem);
      nlohmann::ordered_json kwargs = ordered.value("chat_template_kwargs", nlohmann::ordered_json::object());
      if (!kwargs.is_object()) return refuse(bad("'chat_template_kwargs' must be an object", "chat_template_kwargs"));
      if (!settings_.thinking && !kwargs.contains("enable_thinking")) kwargs["enable_thinking"] = false;
      if (fields.contains("tools") && !fields["tools"].is_null()) {
        if (!fields["tools"].is_array()) return refuse(bad("'tools' must be an array", "tools"));
        kwargs["tools"] = ordered["tools"];
      }
      RenderLimits limits;  // a long render gives up when its client leaves or the server stops
      limits.cancelled = [&] { return stopping_.load() || responder.client_gone(); };
      auto prompt = text_.render(messages, kwargs, limits);
      if (!prompt.ok()) return refuse(bad(prompt.error().message, "messages"));
      return reply({{"prompt", *prompt}});
    }
    if (!text_.has_tokenizer()) return refuse(bad("this model folder has no tokenizer"));
    if (path == "/tokenize") {
      auto body = read_body(request.body, {"content", "add_special", "with_pieces"});
      if (auto* error = std::get_if<RequestError>(&body)) return refuse(*error);
      const json& fields = std::get<json>(body);
      if (!fields.contains("content") || !fields["content"].is_string())
        return refuse(bad("'content' must be a string", "content"));
      for (const char* flag : {"add_special", "with_pieces"})
        if (fields.contains(flag) && !fields[flag].is_boolean() && !fields[flag].is_null())
          return refuse(bad(std::string("'") + flag + "' must be a boolean", flag));
      const auto flag = [&](const char* name) { return fields.contains(name) && fields[name].is_boolean() && fields[name].get<bool>(); };
      const bool add_special = flag("add_special"), with_pieces = flag("with_pieces");
      auto ids = text_.encode(fields["content"].get<std::string>(), add_special);
      if (!ids.ok()) return refuse(bad(ids.error().message, "content"));
      json tokens = json::array();
      for (int32_t id : *ids)
        tokens.push_back(with_pieces ? json{{"id", id}, {"piece", text_.tokenizer().decode({id})}} : json(id));
      return reply({{"tokens", tokens}});
    }
    auto body = read_body(request.body, {"tokens"});
    if (auto* error = std::get_if<RequestError>(&body)) return refuse(*error);
    const json& fields = std::get<json>(body);
    if (!fields.contains("tokens") || !fields["tokens"].is_array())
      return refuse(bad("'tokens' must be an array of ids", "tokens"));
    std::vector<int32_t> ids;
    for (const json& id : fields["tokens"]) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= text_.tokenizer().vocab_size())
        return refuse(bad("token id " + id.dump() + " is outside the vocabulary [0, " +
                              std::to_string(text_.tokenizer().vocab_size()) + ")",
                          "tokens"));
      ids.push_back(id.get<int32_t>());
    }
    return reply({{"content", text_.tokenizer().decode(ids)}});
  } catch (const json::exception& error) {
    return refuse(bad(std::string("a field has the wrong type: ") + error.what()));
  }
}

}  // namespace lockstep
