// The request surface end to end: fields lockstep does not take are refused by name, seeds of the
// whole unsigned range round-trip, model names and aliases, /version, and the API key.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "http_client.h"
#include "test_server.h"
#include "test_support.h"

namespace lockstep {
namespace {

using nlohmann::json;

json body_of(json extra) {
  json body = {{"model", "llama"}, {"prompt", {1, 2, 3}}, {"max_tokens", 3}};
  body.update(extra);
  return body;
}

// A request with extra header lines (each "Name: value\r\n").
HttpReply request_with(int port, const std::string& method, const std::string& path, const std::string& headers) {
  ClientConnection connection(HttpEndpoint{"127.0.0.1", port, {}}, std::chrono::milliseconds(10000));
  if (!connection.open().ok()) return {};
  const std::string text = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers +
                           "Content-Length: 0\r\nConnection: close\r\n\r\n";
  if (!connection.send(text).ok()) return {};
  auto reply = connection.read_reply();
  return reply.ok() ? *reply : HttpReply{};
}

TEST(ServerApi, AFieldLockstepDoesNotTakeIsRefusedByName) {
  TestServer server(test_data("llama"), "llama", {.parallel = 2, .max_queue = 8});
  const json refused[] = {{{"tools", json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}})}},
                          {{"tool_choice", "required"}},
                          {{"response_format", {{"type", "json_object"}}}},
                          {{"presence_penalty", 2.5}},
                          {{"frequency_penalty", "high"}},
                          {{"repetition_penalty", 0}},
                          {{"logit_bias", {{"five", 10}}}},
                          {{"logit_bias", {{"5", 101}}}},
                          {{"logit_bias", {{"100000", 1}}}},
                          {{"logit_bias", {{"023", 1}}}},
                          {{"logit_bias", {{"+23", 1}}}},
                          {{"best_of", 2}},
                          {{"suffix", "x"}},
                          {{"messages", json::array()}},
                          {{"no_such_field", true}},
                          {{"user", 5}},
                          {{"user", {{"id", 1}}}},
                          // This model has no tokenizer: its replies have no text to stop or echo.
                          {{"stop", "x"}},
                          {{"echo", true}}};
  for (const json& extra : refused) {
    const std::string field = extra.begin().key();
    HttpReply reply = http_request(server.port(), "POST", "/v1/completions", body_of(extra).dump());
    EXPECT_EQ(reply.status, 400) << field;
    EXPECT_EQ(json::parse(reply.body)["error"]["param"], field) << reply.body;
  }
  // Their neutral values ask for nothing, and are taken.
  const json neutral = {{"best_of", 1}, {"tools", json::array()}, {"tool_choice", "none"},
                        {"response_format", {{"type", "text"}}}, {"user", "someone"}};
  HttpReply reply = http_request(server.port(), "POST", "/v1/completions", body_of(neutral).dump());
  EXPECT_EQ(reply.status, 200) << reply.body;
  HttpReply usage = http_request(server.port(), "POST", "/v1/completions",
                                 body_of({{"stream", true}, {"stream_options", {{"include_usage", "yes"}}}}).dump());
  EXPECT_EQ(usage.status, 400) << "a wrong type is the client's error, never a 500";
  EXPECT_EQ(json::parse(usage.body)["error"]["param"], "stream_options");
  HttpReply chat = http_request(server.port(), "POST", "/v1/chat/completions",
                                json{{"messages", json::array()}, {"prompt", "x"}}.dump());
  EXPECT_EQ(chat.status, 400);
  EXPECT_EQ(json::parse(chat.body)["error"]["param"], "prompt") << chat.body;
}

// Penalties and logit_bias act: a bias of +100 makes a greedy reply that token alone, a penalty
// changes a repetitive reply, and a request without them is as before.
TEST(ServerApi, PenaltiesAndLogitBiasChangeTheReply) {
  TestServer server(test_data("llama"), "llama", {.parallel = 2, .max_queue = 8});
  auto ids_of = [&](json extra) {
    json body = body_of(extra);
    body["max_tokens"] = 12;
    body["return_token_ids"] = true;
    body["ignore_eos"] = true;
    HttpReply reply = http_request(server.port(), "POST", "/v1/completions", body.dump());
    EXPECT_EQ(reply.status, 200) << reply.body;
    return json::parse(reply.body)["choices"][0]["token_ids"].get<std::vector<int32_t>>();
  };
  EXPECT_EQ(ids_of({{"logit_bias", {{"7", 100}}}}), std::vector<int32_t>(12, 7));
  const std::vector<int32_t> plain = ids_of(json::object());
  EXPECT_EQ(ids_of({{"presence_penalty", 0}, {"logit_bias", json::object()}}), plain);
  const std::vector<int32_t> penalised = ids_of({{"frequency_penalty", 2}, {"presence_penalty", 2}});
  EXPECT_NE(penalised, plain);
  EXPECT_GT(std::set<int32_t>(penalised.begin(), penalised.end()).size(), std::set<int32_t>(plain.begin(), plain.end()).size())
      << "penalties spread a reply over more tokens";
}

// n choices: choice i is the request with seed + i, streamed or not; usage counts them all.
TEST(ServerApi, ChoiceIIsTheRequestWithSeedPlusI) {
  TestServer server(test_data("llama"), "llama", {.parallel = 4, .max_queue = 16});
  json body = body_of({{"temperature", 1.0}, {"seed", 500}, {"n", 3}, {"max_tokens", 6}, {"return_token_ids", true},
                       {"ignore_eos", true}});
  json reply = json::parse(http_request(server.port(), "POST", "/v1/completions", body.dump()).body);
  ASSERT_EQ(reply["choices"].size(), 3u) << reply.dump();
  EXPECT_EQ(reply["usage"]["completion_tokens"], 18);
  std::vector<json> alone;
  for (int i = 0; i < 3; ++i) {
    json one = body;
    one["n"] = 1;
    one["seed"] = 500 + i;
    alone.push_back(json::parse(http_request(server.port(), "POST", "/v1/completions", one.dump()).body));
    EXPECT_EQ(reply["choices"][i]["index"], i);
    EXPECT_EQ(reply["choices"][i]["token_ids"], alone.back()["choices"][0]["token_ids"]) << "choice " << i;
  }
  EXPECT_NE(alone[0]["choices"][0]["token_ids"], alone[1]["choices"][0]["token_ids"]);
  body["stream"] = true;
  std::vector<std::vector<int32_t>> streamed(3);
  int finished = 0;
  for (const std::string& payload : sse_payloads(http_request(server.port(), "POST", "/v1/completions", body.dump()).body)) {
    if (payload == "[DONE]") break;
    const json chunk = json::parse(payload);
    for (const json& choice : chunk["choices"]) {
      for (int32_t id : choice["token_ids"]) streamed[choice["index"].get<size_t>()].push_back(id);
      finished += !choice["finish_reason"].is_null();
    }
  }
  EXPECT_EQ(finished, 3);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(json(streamed[size_t(i)]), alone[size_t(i)]["choices"][0]["token_ids"]) << "streamed choice " << i;
  HttpReply too_many = http_request(server.port(), "POST", "/v1/completions", body_of({{"n", 17}}).dump());
  EXPECT_EQ(too_many.status, 400);
  EXPECT_EQ(json::parse(too_many.body)["error"]["param"], "n");
  // More choices than the server ever runs and queues at once can never be served: a 400, not a 503.
  TestServer small(test_data("llama"), "llama", {.parallel = 1, .max_queue = 0});
  HttpReply never = http_request(small.port(), "POST", "/v1/completions", body_of({{"n", 2}}).dump());
  EXPECT_EQ(never.status, 400) << never.body;
  EXPECT_EQ(json::parse(never.body)["error"]["param"], "n");
}

TEST(ServerApi, EverySeedAReplyReportsCanBeSentBack) {
  TestServer server(test_data("llama"), "llama", {.parallel = 2, .max_queue = 8});
  for (uint64_t seed : {uint64_t(0), uint64_t(1) << 53, (uint64_t(1) << 63) + 5, ~uint64_t(0)}) {
    json body = body_of({{"temperature", 1.0}, {"seed", seed}});
    HttpReply first = http_request(server.port(), "POST", "/v1/completions", body.dump());
    ASSERT_EQ(first.status, 200) << first.body;
    EXPECT_EQ(json::parse(first.body)["seed"].get<uint64_t>(), seed);
  }
  EXPECT_EQ(http_request(server.port(), "POST", "/v1/completions", body_of({{"seed", -1}}).dump()).status, 400);
  EXPECT_EQ(http_request(server.port(), "POST", "/v1/completions", body_of({{"seed", 1.5}}).dump()).status, 400);
  // A fresh seed fits a JavaScript number, and sent back gives the same reply; streams carry it.
  json sampled = body_of({{"temperature", 1.0}, {"max_tokens", 8}, {"return_token_ids", true}});
  json first = json::parse(http_request(server.port(), "POST", "/v1/completions", sampled.dump()).body);
  const uint64_t seed = first["seed"];
  EXPECT_LT(seed, uint64_t(1) << 53);
  sampled["seed"] = seed;
  json again = json::parse(http_request(server.port(), "POST", "/v1/completions", sampled.dump()).body);
  EXPECT_EQ(again["choices"][0]["token_ids"], first["choices"][0]["token_ids"]);
  sampled["stream"] = true;
  HttpReply streamed = http_request(server.port(), "POST", "/v1/completions", sampled.dump());
  const std::vector<std::string> payloads = sse_payloads(streamed.body);
  ASSERT_FALSE(payloads.empty());
  EXPECT_EQ(json::parse(payloads.front())["seed"].get<uint64_t>(), seed);
}

TEST(ServerApi, ModelNamesAliasesAndVersion) {
  TestServer server(test_data("llama"), "main-name", {.parallel = 2, .max_queue = 8, .aliases = {"other", "org/m"}});
  json models = json::parse(http_request(server.port(), "GET", "/v1/models").body);
  ASSERT_EQ(models["data"].size(), 3u);
  EXPECT_EQ(models["data"][1]["id"], "other");
  EXPECT_EQ(http_request(server.port(), "GET", "/v1/models/other").status, 200);
  // A '/' in a name, escaped as clients escape it or not.
  for (const char* path : {"/v1/models/org%2Fm", "/v1/models/org%2fm", "/v1/models/org/m"}) {
    HttpReply named = http_request(server.port(), "GET", path);
    EXPECT_EQ(named.status, 200) << path;
    EXPECT_EQ(json::parse(named.body)["id"], "org/m") << path;
  }
  EXPECT_EQ(http_request(server.port(), "GET", "/v1/models/org%zzm").status, 400);
  HttpReply missing = http_request(server.port(), "GET", "/v1/models/nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(json::parse(missing.body)["error"]["code"], "model_not_found");
  json body = body_of({{"model", "other"}});
  HttpReply reply = http_request(server.port(), "POST", "/v1/completions", body.dump());
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(json::parse(reply.body)["model"], "main-name");
  HttpReply version = http_request(server.port(), "GET", "/version");
  ASSERT_EQ(version.status, 200);
  EXPECT_TRUE(json::parse(version.body)["version"].is_string());
}

// --cors-origin: every response carries the origin, streams too, and a preflight (no key needed)
// says what a page may send; without the flag there is no CORS header.
TEST(ServerApi, CorsLetsBrowserPagesCallTheApi) {
  TestServer server(test_data("llama"), "llama",
                    {.parallel = 2, .max_queue = 8, .api_key = "k", .cors_origin = "https://app.example"});
  HttpReply preflight = request_with(server.port(), "OPTIONS", "/v1/completions",
                                     "Origin: https://app.example\r\nAccess-Control-Request-Method: POST\r\n");
  EXPECT_EQ(preflight.status, 204);
  EXPECT_EQ(preflight.header("access-control-allow-origin"), "https://app.example");
  EXPECT_NE(preflight.header("access-control-allow-headers").find("Authorization"), std::string::npos);
  EXPECT_NE(preflight.header("access-control-allow-methods").find("POST"), std::string::npos);
  // The headers a client's page asks to send (openai-node sends its own X-Stainless-* ones).
  HttpReply asking = request_with(server.port(), "OPTIONS", "/v1/chat/completions",
                                  "Origin: https://app.example\r\nAccess-Control-Request-Method: POST\r\n"
                                  "Access-Control-Request-Headers: authorization, content-type, x-stainless-os\r\n");
  EXPECT_EQ(asking.status, 204);
  EXPECT_EQ(asking.header("access-control-allow-headers"), "authorization, content-type, x-stainless-os");
  HttpReply odd = request_with(server.port(), "OPTIONS", "/v1/chat/completions",
                               "Origin: https://app.example\r\nAccess-Control-Request-Headers: x-a; y=\"b\"\r\n");
  EXPECT_EQ(odd.header("access-control-allow-headers"), "Authorization, Content-Type");
  HttpReply refused = http_request(server.port(), "GET", "/v1/models");
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(refused.header("access-control-allow-origin"), "https://app.example") << "errors carry it too";
  HttpReply models = request_with(server.port(), "GET", "/v1/models", "Authorization: Bearer k\r\n");
  EXPECT_EQ(models.status, 200);
  EXPECT_EQ(models.header("access-control-allow-origin"), "https://app.example");
  // An error the HTTP layer answers itself (here a body framed two ways) carries it too, and the
  // body has every field the API's own errors have.
  HttpReply framing = request_with(server.port(), "POST", "/v1/completions", "Transfer-Encoding: chunked\r\n");
  EXPECT_EQ(framing.status, 501);
  EXPECT_EQ(framing.header("access-control-allow-origin"), "https://app.example");
  EXPECT_TRUE(json::parse(framing.body)["error"].contains("param")) << framing.body;
  TestServer plain(test_data("llama"), "llama", {.parallel = 2, .max_queue = 8});
  EXPECT_EQ(http_request(plain.port(), "GET", "/v1/models").header("access-control-allow-origin"), "");
}

// Reply ids are unique across servers (a random prefix per process, then a count), and a model's
// `created` is the same on every call. Neutral values of OpenAI fields lockstep has no use for
// are taken (store false, stream_options.include_obfuscation false); others are refused.
TEST(ServerApi, IdsAreUniqueAcrossServersAndNeutralOpenAiFieldsAreTaken) {
  TestServer one(test_data("llama"), "llama", {.parallel = 2, .max_queue = 8});
  TestServer two(test_data("llama"), "llama", {.parallel = 2, .max_queue = 8});
  const std::string body = body_of({{"max_tokens", 1}}).dump();
  const json a = json::parse(http_request(one.port(), "POST", "/v1/completions", body).body);
  const json b = json::parse(http_request(two.port(), "POST", "/v1/completions", body).body);
  ASSERT_TRUE(a.contains("id") && b.contains("id")) << a << b;
  EXPECT_NE(a["id"], b["id"]);
  EXPECT_EQ(a["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  const json models = json::parse(http_request(one.port(), "GET", "/v1/models").body);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(json::parse(http_request(one.port(), "GET", "/v1/models").body)["data"][0]["created"],
            models["data"][0]["created"]);
  const json taken[] = {{{"store", false}}, {{"stream", true}, {"stream_options", {{"include_obfuscation", false}}}}};
  for (const json& extra : taken)
    EXPECT_EQ(http_request(one.port(), "POST", "/v1/completions", body_of(extra).dump()).status, 200) << extra;
  const json refused[] = {{{"store", true}}, {{"stream", true}, {"stream_options", {{"include_obfuscation", true}}}}};
  for (const json& extra : refused)
    EXPECT_EQ(http_request(one.port(), "POST", "/v1/completions", body_of(extra).dump()).status, 400) << extra;
}

TEST(ServerApi, AnApiKeyGuardsEveryRouteButHealth) {
  TestServer server(test_data("llama"), "llama", {.parallel = 2, .max_queue = 8, .api_key = "s3cret"});
  EXPECT_EQ(http_request(server.port(), "GET", "/health").status, 200);
  HttpReply refused = http_request(server.port(), "GET", "/v1/models");
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(refused.header("www-authenticate"), "Bearer");
  EXPECT_EQ(json::parse(refused.body)["error"]["type"], "authentication_error");
  EXPECT_EQ(request_with(server.port(), "GET", "/v1/models", "Authorization: Bearer wrong\r\n").status, 401);
  EXPECT_EQ(request_with(server.port(), "GET", "/v1/models", "Authorization: Bearer s3cret\r\n").status, 200);
  EXPECT_EQ(http_request(server.port(), "POST", "/v1/completions", body_of(json::object()).dump()).status, 401);
  EXPECT_EQ(request_with(server.port(), "GET", "/metrics", "Authorization: Bearer s3cre\r\n").status, 401);
  EXPECT_EQ(request_with(server.port(), "GET", "/v1/models", "Authorization: bearer s3cret\r\n").status, 200)
      << "the scheme's case is free";
  EXPECT_EQ(request_with(server.port(), "GET", "/v1/models", "Authorization: Basic s3cret\r\n").status, 401);
  EXPECT_EQ(request_with(server.port(), "GET", "/v1/models", "Authorization: s3cret\r\n").status, 401);
}

}  // namespace
}  // namespace lockstep
