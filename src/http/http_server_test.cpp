// Requests, keep-alive, pipelining and the server's own error responses, over real sockets on
// 127.0.0.1. Streams, disconnects, limits and stop() are in http_server_lifecycle_test.cpp.
#include "http/http_server.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "http/http_test_client.h"

namespace lockstep {
namespace {

using http_test::ClientResponse;
using http_test::RunningServer;
using http_test::TestClient;

// Answers "METHOD path?query|body|x-test header"; 404 under /missing; throws under /throw;
// returns without answering under /silent.
void echo_handler(const HttpRequest& request, HttpResponder& responder) {
  if (request.path == "/missing") {
    responder.send(404, "application/json", R"({"error":"no such thing"})");
    return;
  }
  if (request.path == "/throw") throw std::runtime_error("handler blew up");
  if (request.path == "/silent") return;
  auto test_header = request.headers.find("x-test");
  std::string text = request.method + " " + request.path + "?" + request.query + "|" +
                     request.body + "|" +
                     (test_header == request.headers.end() ? "" : test_header->second);
  responder.send(200, "text/plain", text, {{"X-Echo", "yes"}});
}

HttpSettings small_limits() {
  HttpSettings settings;
  settings.max_body_bytes = 1000;
  settings.max_header_bytes = 1024;
  return settings;
}

std::string error_type(const ClientResponse& response) {
  return nlohmann::json::parse(response.body)["error"]["type"].get<std::string>();
}

TEST(HttpServer, GetReachesTheHandler) {
  RunningServer server(small_limits(), echo_handler);
  ASSERT_TRUE(server.listened().ok()) << server.listened().message();
  ASSERT_GT(server.port(), 0);
  TestClient client(server.port());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.send("GET /hello?a=1&b=2 HTTP/1.1\r\nHost: x\r\nX-TEST: Value\r\n\r\n"));
  auto response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "GET /hello?a=1&b=2||Value");
  EXPECT_EQ(response->header("content-type"), "text/plain");
  EXPECT_EQ(response->header("x-echo"), "yes");
  EXPECT_EQ(response->header("connection"), "keep-alive");
}

TEST(HttpServer, PostBodyReachesTheHandler) {
  RunningServer server(small_limits(), echo_handler);
  TestClient client(server.port());
  std::string body = R"({"prompt":"hi"})";
  ASSERT_TRUE(client.send("POST /v1/completions HTTP/1.1\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body));
  auto response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "POST /v1/completions?|" + body + "|");
}

TEST(HttpServer, KeepAliveServesTwoRequestsOnOneConnection) {
  RunningServer server(small_limits(), echo_handler);
  TestClient client(server.port());
  for (std::string path : {"/first", "/second"}) {
    ASSERT_TRUE(client.send("GET " + path + " HTTP/1.1\r\n\r\n"));
    auto response = client.read_response();
    ASSERT_TRUE(response) << path;
    EXPECT_EQ(response->body, "GET " + path + "?||");
  }
}

TEST(HttpServer, PipelinedRequestsAreAnsweredInOrder) {
  RunningServer server(small_limits(), echo_handler);
  TestClient client(server.port());
  ASSERT_TRUE(client.send(
      "POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nonePOST /b HTTP/1.1\r\nContent-Length: 3\r\n\r\n"
      "two\r\nGET /c HTTP/1.1\r\nConnection: close\r\n\r\n"));
  for (std::string expected : {"POST /a?|one|", "POST /b?|two|", "GET /c?||"}) {
    auto response = client.read_response();
    ASSERT_TRUE(response) << expected;
    EXPECT_EQ(response->body, expected);
  }
  EXPECT_TRUE(client.closed_by_server());
}

TEST(HttpServer, ExpectContinueGets100BeforeTheBody) {
  RunningServer server(small_limits(), echo_handler);
  TestClient client(server.port());
  ASSERT_TRUE(client.send("POST /up HTTP/1.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  auto interim = client.read_response();
  ASSERT_TRUE(interim);
  EXPECT_EQ(interim->status, 100);
  ASSERT_TRUE(client.send("hello"));
  auto response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "POST /up?|hello|");
}

TEST(HttpServer, HandlerStatusesPassThrough) {
  RunningServer server(small_limits(), echo_handler);
  TestClient client(server.port());
  ASSERT_TRUE(client.send("GET /missing HTTP/1.1\r\n\r\n"));
  auto response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 404);
  EXPECT_EQ(response->body, R"({"error":"no such thing"})");
  EXPECT_EQ(response->header("connection"), "keep-alive");
}

TEST(HttpServer, HandlerExceptionsAndSilenceBecome500) {
  RunningServer server(small_limits(), echo_handler);
  TestClient client(server.port());
  for (std::string path : {"/throw", "/silent", "/ok"}) {
    ASSERT_TRUE(client.send("GET " + path + " HTTP/1.1\r\n\r\n"));
    auto response = client.read_response();
    ASSERT_TRUE(response) << path;
    if (path == "/ok") {
      EXPECT_EQ(response->status, 200);  // the connection and the server carry on
      continue;
    }
    EXPECT_EQ(response->status, 500);
    EXPECT_EQ(error_type(*response), "server_error");
    if (path == "/throw") {
      EXPECT_EQ(nlohmann::json::parse(response->body)["error"]["message"],
                "internal error: handler blew up");
    }
  }
}

// Sends `request` on a fresh connection; expects an error with `status` and a closed connection.
void expect_refused(RunningServer& server, const std::string& request, int status) {
  TestClient client(server.port());
  ASSERT_TRUE(client.send(request));
  auto response = client.read_response();
  ASSERT_TRUE(response) << request.substr(0, 60);
  EXPECT_EQ(response->status, status);
  EXPECT_EQ(response->header("connection"), "close");
  EXPECT_EQ(response->header("content-type"), "application/json");
  EXPECT_EQ(error_type(*response), "invalid_request_error");
  EXPECT_TRUE(client.closed_by_server());
}

TEST(HttpServer, OversizeBodyGets413WithoutReadingIt) {
  RunningServer server(small_limits(), echo_handler);
  expect_refused(server, "POST / HTTP/1.1\r\nContent-Length: 5000\r\n\r\n" + std::string(100, 'x'),
                 413);
  // With 100-continue the client never sends the body.
  expect_refused(server, "POST / HTTP/1.1\r\nContent-Length: 1001\r\nExpect: 100-continue\r\n\r\n",
                 413);
}

TEST(HttpServer, HugeHeaderGets431) {
  RunningServer server(small_limits(), echo_handler);
  expect_refused(server, "GET / HTTP/1.1\r\nX-Big: " + std::string(4000, 'a') + "\r\n\r\n", 431);
  // Still no blank line, and already too long.
  expect_refused(server, "GET / HTTP/1.1\r\nX-Big: " + std::string(4000, 'a'), 431);
}

TEST(HttpServer, GarbageGets400) {
  RunningServer server(small_limits(), echo_handler);
  expect_refused(server, "HELLO THERE\r\n\r\n", 400);
  expect_refused(server, "GET / HTTP/1.1\r\nbad header\r\n\r\n", 400);
  expect_refused(server, "POST / HTTP/1.1\r\nContent-Length: ten\r\n\r\n", 400);
}

TEST(HttpServer, PostWithoutContentLengthGets411) {
  RunningServer server(small_limits(), echo_handler);
  expect_refused(server, "POST / HTTP/1.1\r\n\r\n", 411);
}

TEST(HttpServer, ChunkedRequestGets501) {
  RunningServer server(small_limits(), echo_handler);
  TestClient client(server.port());
  ASSERT_TRUE(client.send("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"));
  auto response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 501);
  EXPECT_EQ(error_type(*response), "invalid_request_error");
  EXPECT_TRUE(client.closed_by_server());
}

TEST(HttpServer, Http10ClosesAfterTheResponse) {
  RunningServer server(small_limits(), echo_handler);
  TestClient client(server.port());
  ASSERT_TRUE(client.send("GET /old HTTP/1.0\r\n\r\n"));
  auto response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->body, "GET /old?||");
  EXPECT_EQ(response->header("connection"), "close");
  EXPECT_TRUE(client.closed_by_server());
}

TEST(HttpServer, HeadGetsTheHeadAlone) {
  RunningServer server(small_limits(), echo_handler);
  TestClient client(server.port());
  ASSERT_TRUE(client.send("HEAD /h HTTP/1.1\r\nConnection: close\r\n\r\n"));
  std::string raw = client.read_until_close();
  EXPECT_NE(raw.find("Content-Length: 10\r\n"), std::string::npos) << raw;
  EXPECT_EQ(raw.substr(raw.size() - 4), "\r\n\r\n") << raw;
}

TEST(HttpServer, ListenErrorNamesTheAddress) {
  RunningServer first(HttpSettings{}, echo_handler);
  ASSERT_TRUE(first.listened().ok());
  HttpSettings settings;
  settings.host = "127.0.0.1";
  settings.port = first.port();
  HttpServer second(settings, echo_handler);
  Status status = second.listen();
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("127.0.0.1:" + std::to_string(first.port())), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("in use"), std::string::npos) << status.message();

  settings.host = "192.0.2.1";  // TEST-NET-1: an address of no interface here
  HttpServer third(settings, echo_handler);
  Status foreign = third.listen();
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.message().find("192.0.2.1:"), std::string::npos) << foreign.message();
}

}  // namespace
}  // namespace lockstep
