// A real lockstep server in the test process: a model folder behind OpenAiServer and
// HttpServer on a free loopback port, serving on its own thread until destroyed.
#pragma once

#include <memory>
#include <string>
#include <vector>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "models/registry.h"
#include "runner/model_runner.h"
#include "http/http_server.h"
#include "server/openai_server.h"
#include "text/model_text.h"

namespace lockstep {

struct TestServerOptions {
  int32_t parallel = 4;
  int32_t max_queue = 64;
  size_t max_body = 1 << 20;
  int64_t context = 512;
  WeightChoice weights = WeightChoice::checkpoint;
  bool prompt_cache = false;
  int32_t draft_tokens = 0;  // with a model that has an MTP head: drafts in rounds up to `parallel` wide
  std::vector<std::string> aliases = {};  // more model ids (--served-model-name)
  std::string api_key = "";              // --api-key
  std::string cors_origin = "";          // --cors-origin
  int32_t tensor_parallel = 1;           // --tensor-parallel
};

class TestServer {
 public:
  // dir: a model folder; model_name: the id clients send.
  TestServer(const std::string& dir, const std::string& model_name, TestServerOptions options = {});
  ~TestServer();
  int port() const { return http_->port(); }
  OpenAiServer& api() { return *api_; }
  const ModelText& text() const { return text_; }
  const ModelInfo& info() const { return model_->info(); }

 private:
  CpuBackend backend_{2};
  std::unique_ptr<Model> model_;
  std::unique_ptr<ModelRunner> runner_;
  ModelText text_;
  std::unique_ptr<OpenAiServer> api_;
  std::unique_ptr<HttpServer> http_;
  std::thread thread_;
};

}  // namespace lockstep
