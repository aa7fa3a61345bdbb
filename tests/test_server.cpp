#include "test_server.h"

#include <gtest/gtest.h>

namespace lockstep {

TestServer::TestServer(const std::string& dir, const std::string& model_name, TestServerOptions options) {
  ModelOptions model_options;
  model_options.max_rows = 64;
  model_options.max_context = options.context;
  // As `lockstep serve` does: with the prompt cache, as many slots again for its snapshots.
  model_options.state_slots = options.prompt_cache ? 2 * options.parallel : options.parallel;
  model_options.kv_pages = int32_t(options.parallel * ((options.context + 15) / 16));
  model_options.draft_state_slots = options.draft_tokens * options.parallel;
  model_options.tensor_parallel = options.tensor_parallel;
  auto model = load_model(dir, backend_, model_options, options.weights);
  EXPECT_TRUE(model.ok()) << model.error().message;
  if (!model.ok()) std::abort();
  model_ = std::move(*model);
  auto text = ModelText::load(dir);
  EXPECT_TRUE(text.ok()) << text.error().message;
  if (!text.ok()) std::abort();
  text_ = std::move(*text);
  ServeSettings settings;
  settings.model_name = model_name;
  settings.aliases = options.aliases;
  settings.api_key = options.api_key;
  settings.cors_origin = options.cors_origin;
  settings.lanes = {64, options.parallel, options.max_queue};
  settings.lanes.prompt_cache = options.prompt_cache;
  settings.lanes.host_bytes = size_t(1) << 28;
  settings.lanes.snapshot_slots = options.prompt_cache ? options.parallel : 0;
  settings.lanes.draft_tokens = options.draft_tokens;
  settings.lanes.draft_width = options.parallel;
  runner_ = std::make_unique<ModelRunner>(*model_);
  api_ = std::make_unique<OpenAiServer>(*runner_, text_, settings);
  HttpSettings http;
  http.port = 0;
  http.max_body_bytes = options.max_body;
  http.error_headers = cors_headers(options.cors_origin);
  http_ = std::make_unique<HttpServer>(http, [this](const HttpRequest& r, HttpResponder& w) { api_->handle(r, w); });
  Status listening = http_->listen();
  EXPECT_TRUE(listening.ok()) << listening.message();
  thread_ = std::thread([this] { http_->serve(); });
}

TestServer::~TestServer() {
  http_->stop();
  thread_.join();
  api_->stop();
}

}  // namespace lockstep
