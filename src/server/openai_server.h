// The OpenAI-compatible API over the lane host: POST /v1/completions and
// /v1/chat/completions (with server-sent events when stream is true), GET /v1/models (and
// /v1/models/{id}), /health, /metrics, /version, and POST /tokenize, /detokenize and
// /apply-template; with an API key, every route but /health needs it. Each request is one stream; a client that goes away cancels it.
//
// Code: openai_server.cpp (routes, the small endpoints), openai_completion.cpp (a completion:
// one stream from submission to the last byte of its reply), text_routes.cpp (tokenize,
// detokenize, apply-template).
#pragma once

#include <atomic>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <vector>

#include "http/http_server.h"
#include "lanes/lane_host.h"
#include "server/metrics.h"
#include "server/parse_gate.h"
#include "server/openai_request.h"
#include "text/model_text.h"

namespace lockstep {

struct ServeSettings {
  std::string model_name;           // the id clients send as "model"
  std::vector<std::string> aliases; // more ids a client may send (--served-model-name beyond the first)
  std::string api_key;              // non-empty: every route but /health needs "Authorization: Bearer <key>"
  std::string cors_origin;          // non-empty: browsers from this origin ("*": any) may call the API
  LaneSettings lanes;
  float default_temperature = 0.0f;
  bool thinking = true;             // false: --no-thinking
  std::string device;               // what it runs on (Backend::device), for /version
};

// The headers that let browsers from `origin` ("*": any) read a response; none for "". Every
// API response carries them, and so should the HTTP layer's own errors (HttpSettings).
std::map<std::string, std::string> cors_headers(const std::string& origin);

class OpenAiServer {
 public:
  // The runner (runner/model_runner.h over the loaded model) and the text must outlive the
  // server. Starts the lane thread, which alone uses the runner.
  OpenAiServer(StepRunner& runner, const ModelText& text, ServeSettings settings);
  ~OpenAiServer();

  // The HTTP handler: routes one request. Safe from many connection threads at once.
  void handle(const HttpRequest& request, HttpResponder& responder);
  // Cancels every stream and stops the lane thread.
  void stop();

  LaneHost& lanes() { return lanes_; }
  ServerMetrics& metrics() { return metrics_; }

 private:
  void completion(const HttpRequest& request, HttpResponder& responder, bool chat);
  bool authorized(const HttpRequest& request) const;
  // POST /tokenize, /detokenize and /apply-template (text_routes.cpp).
  void text_route(const HttpRequest& request, HttpResponder& responder);
  nlohmann::json model_object(const std::string& id) const;
  // Sends error's body (with Retry-After on a 503) and any `headers`, and counts the outcome.
  void send_error(HttpResponder& responder, const RequestError& error, const std::string& outcome,
                  std::map<std::string, std::string> headers = {});

  const ModelText& text_;
  ServeSettings settings_;
  RequestContext context_;
  LaneHost lanes_;
  ServerMetrics metrics_;
  std::atomic<uint64_t> next_id_{1};
  std::string id_prefix_;                             // random, per process: reply ids are unique
  const int64_t started_ = int64_t(std::time(nullptr));  // the models' "created"
  std::atomic<bool> stopping_{false};
  ParseGate parse_gate_{2};  // large bodies are parsed two at a time
};

}  // namespace lockstep
