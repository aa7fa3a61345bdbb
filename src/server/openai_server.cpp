#include "server/openai_server.h"

#include <ctime>
#include <nlohmann/json.hpp>

namespace lockstep {

OpenAiServer::OpenAiServer(StepRunner& runner, const ModelText& text, ServeSettings settings)
    : text_(text), settings_(std::move(settings)), lanes_(runner, settings_.lanes) {
  context_.info = &runner.info();
  context_.text = &text;
  context_.model_name = settings_.model_name;
  context_.default_temperature = settings_.default_temperature;
  context_.thinking = settings_.thinking;
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

void OpenAiServer::handle(const HttpRequest& request, HttpResponder& responder) {
  const std::string& path = request.path;
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
  if (path == "/metrics") {
    if (!get) return wrong_method("GET, HEAD");
    return responder.send(200, "text/plain; version=0.0.4", metrics_.render(lanes_.stats(), lanes_.info().kv_page_bytes));
  }
  if (path == "/v1/models") {
    if (!get) return wrong_method("GET, HEAD");
    nlohmann::json body = {{"object", "list"},
                           {"data",
                            {{{"id", settings_.model_name},
                              {"object", "model"},
                              {"created", int64_t(std::time(nullptr))},
                              {"owned_by", "lockstep"},
                              {"max_model_len", lanes_.info().max_context}}}}};
    return responder.send(200, "application/json", body.dump());
  }
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (!post) return wrong_method("POST");
    return completion(request, responder, path == "/v1/chat/completions");
  }
  send_error(responder, {404, "no route for " + request.method + " " + path, "invalid_request_error", "", ""}, "invalid");
}

}  // namespace lockstep
