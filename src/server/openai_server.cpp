#include "server/openai_server.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <optional>
#include <random>
#include <nlohmann/json.hpp>

#include "base/version.h"
#include "http/http_parser.h"
#include "server/structured_output.h"

namespace lockstep {

OpenAiServer::OpenAiServer(StepRunner& runner, const ModelText& text, ServeSettings settings)
    : text_(text), settings_(std::move(settings)), lanes_(runner, settings_.lanes) {
  // Reply ids: this process's random prefix, then a count, so no two servers' replies share one.
  std::random_device random;
  char prefix[17];
  std::snprintf(prefix, sizeof(prefix), "%08x%08x", random(), random());
  id_prefix_ = prefix;
  context_.info = &runner.info();
  context_.text = &text;
  context_.model_name = settings_.model_name;
  context_.aliases = settings_.aliases;
  context_.default_temperature = settings_.default_temperature;
  context_.thinking = settings_.thinking;
  context_.vocabulary = model_vocabulary(runner.info(), text);
  lanes_.start();
}

OpenAiServer::~OpenAiServer() { stop(); }

void OpenAiServer::stop() {
  stopping_.store(true);
  lanes_.stop();
}

void OpenAiServer::send_error(HttpResponder& responder, const RequestError& error, const std::string& outcome,
                              std::map<std::string, std::string> headers) {
  if (error.status == 503) headers["Retry-After"] = "1";
  responder.send(error.status, "application/json", error_body(error), headers);
  metrics_.request_done(outcome);
}

bool OpenAiServer::authorized(const HttpRequest& request) const {
  if (settings_.api_key.empty()) return true;
  auto header = request.headers.find("authorization");
  if (header == request.headers.end()) return false;
  // The scheme's case is free (RFC 9110: "bearer" is "Bearer").
  const std::string& header_value = header->second;
  constexpr std::string_view kScheme = "bearer ";
  if (header_value.size() < kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(header_value[i])) != kScheme[i]) return false;
  // Compared in full whatever the first difference, so the time says nothing about the key.
  const std::string_view given = std::string_view(header_value).substr(kScheme.size());
  const std::string& expected = settings_.api_key;
  unsigned char differ = given.size() != expected.size();
  for (size_t i = 0; i < expected.size(); ++i) differ |= (i < given.size() ? given[i] : 0) ^ expected[i];
  return differ == 0;
}

nlohmann::json OpenAiServer::model_object(const std::string& id) const {
  return {{"id", id},
          {"object", "model"},
          {"created", started_},  // when the model was loaded: the same on every call
          {"owned_by", "lockstep"},
          {"max_model_len", lanes_.info().max_context}};
}

std::map<std::string, std::string> cors_headers(const std::string& origin) {
  if (origin.empty()) return {};
  std::map<std::string, std::string> headers = {{"Access-Control-Allow-Origin", origin}};
  if (origin != "*") headers["Vary"] = "Origin";
  return headers;
}

namespace {

// Adds the CORS header to every response of a server that allows an origin.
class CorsResponder final : public HttpResponder {
 public:
  CorsResponder(HttpResponder& inner, const std::string& origin) : inner_(inner), origin_(origin) {}
  void send(int status, const std::string& content_type, const std::string& body,
            const std::map<std::string, std::string>& headers) override {
    inner_.send(status, content_type, body, with_origin(headers));
  }
  void start_stream(int status, const std::string& content_type,
                    const std::map<std::string, std::string>& headers) override {
    inner_.start_stream(status, content_type, with_origin(headers));
  }
  bool write_chunk(const std::string& data) override { return inner_.write_chunk(data); }
  void end_stream() override { inner_.end_stream(); }
  bool client_gone() override { return inner_.client_gone(); }
  void set_probe_chunk(std::string chunk) override { inner_.set_probe_chunk(std::move(chunk)); }

 private:
  std::map<std::string, std::string> with_origin(std::map<std::string, std::string> headers) const {
    headers.merge(cors_headers(origin_));
    return headers;
  }
  HttpResponder& inner_;
  const std::string& origin_;
};

// The request headers a preflight may allow: the ones the browser asks for (clients such as
// openai-node send their own X-Stainless-* headers), when the list is header names alone, else
// Authorization and Content-Type. No header grants more than the API key does.
std::string preflight_headers(const HttpRequest& request) {
  const auto asked = request.headers.find("access-control-request-headers");
  if (asked == request.headers.end() || asked->second.empty() || asked->second.size() > 2048) return "Authorization, Content-Type";
  for (char c : asked->second)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ',' || c == ' '))
      return "Authorization, Content-Type";
  return asked->second;
}

}  // namespace

void OpenAiServer::handle(const HttpRequest& request, HttpResponder& plain) {
  std::optional<CorsResponder> cors;
  if (!settings_.cors_origin.empty()) cors.emplace(plain, settings_.cors_origin);
  HttpResponder& responder = cors ? static_cast<HttpResponder&>(*cors) : plain;
  const std::string& path = request.path;
  // A browser's preflight: which methods and headers it may send (before any API key, which a
  // preflight never carries).
  if (cors && request.method == "OPTIONS")
    return responder.send(204, "text/plain", "",
                          {{"Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS"},
                           {"Access-Control-Allow-Headers", preflight_headers(request)},
                           {"Access-Control-Max-Age", "600"},
                           {"Vary", "Origin, Access-Control-Request-Headers"}});
  // HEAD is GET without the body (the responder leaves it out).
  const bool get = request.method == "GET" || request.method == "HEAD", post = request.method == "POST";
  auto wrong_method = [&](const char* allowed) {
    send_error(responder, {405, std::string("use ") + allowed, "invalid_request_error", "", ""}, "invalid",
               {{"Allow", allowed}});
  };
  if (path == "/health") {
    if (!get) return wrong_method("GET, HEAD");
    return responder.send(200, "application/json", R"({"status":"ok"})");
  }
  if (!authorized(request))
    return send_error(responder, {401, "this server needs an API key: send 'Authorization: Bearer <key>'",
                                  "authentication_error", "", "invalid_api_key"},
                      "invalid", {{"WWW-Authenticate", "Bearer"}});
  if (path == "/version") {
    if (!get) return wrong_method("GET, HEAD");
    return responder.send(200, "application/json", nlohmann::json{{"version", kVersion}, {"device", settings_.device}}.dump());
  }
  if (path == "/metrics") {
    if (!get) return wrong_method("GET, HEAD");
    return responder.send(200, "text/plain; version=0.0.4", metrics_.render(lanes_.stats(), lanes_.info().kv_page_bytes));
  }
  if (path == "/v1/models") {
    if (!get) return wrong_method("GET, HEAD");
    nlohmann::json data = nlohmann::json::array({model_object(settings_.model_name)});
    for (const std::string& alias : settings_.aliases) data.push_back(model_object(alias));
    return responder.send(200, "application/json",
                          nlohmann::json{{"object", "list"}, {"data", data}}.dump(-1, ' ', false,
                                                                                  nlohmann::json::error_handler_t::replace));
  }
  if (path.rfind("/v1/models/", 0) == 0) {
    if (!get) return wrong_method("GET, HEAD");
    // Clients escape a '/' in the id (openai-node: "org%2Fmodel"); a bare one works too.
    const std::optional<std::string> decoded = percent_decoded(std::string_view(path).substr(11));
    if (!decoded)
      return send_error(responder, {400, "the model id in '" + path + "' has a '%' that is not followed by two hex digits",
                                    "invalid_request_error", "model", ""},
                        "invalid");
    const std::string& id = *decoded;
    const bool served = id == settings_.model_name ||
                        std::find(settings_.aliases.begin(), settings_.aliases.end(), id) != settings_.aliases.end();
    if (!served)
      return send_error(responder, {404, "the model '" + id + "' does not exist; this server serves '" +
                                             settings_.model_name + "'",
                                    "invalid_request_error", "model", "model_not_found"},
                        "invalid");
    return responder.send(200, "application/json",
                          model_object(id).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  if (path == "/tokenize" || path == "/detokenize" || path == "/apply-template") {
    if (!post) return wrong_method("POST");
    return text_route(request, responder);
  }
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (!post) return wrong_method("POST");
    return completion(request, responder, path == "/v1/chat/completions");
  }
  send_error(responder, {404, "no route for " + request.method + " " + path, "invalid_request_error", "", ""}, "invalid");
}

}  // namespace lockstep
