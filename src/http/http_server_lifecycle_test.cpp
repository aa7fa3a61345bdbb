// Streams, clients that go away, the connection limit, idle timeouts and stop(), over real
// sockets on 127.0.0.1. Every wait is bounded, so a broken server fails rather than hangs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "http/http_server.h"
#include "http/http_test_client.h"

namespace lockstep {
namespace {

using http_test::RunningServer;
using http_test::TestClient;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Waits up to five seconds for `flag`; true when it was set.
bool wait_for(const std::atomic<bool>& flag) {
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!flag.load()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return true;
}

int64_t ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
}

const std::string kBigPiece(100000, 'z');

void stream_handler(const HttpRequest&, HttpResponder& responder) {
  responder.start_stream(200, "text/event-stream");
  for (const std::string& piece : {std::string("data: one\n\n"), std::string(), kBigPiece,
                                   std::string("data: [DONE]\n\n")})
    if (!responder.write_chunk(piece)) return;
  responder.end_stream();
}

TEST(HttpStream, ChunkedResponseIsDeChunkedAndTheConnectionKept) {
  RunningServer server(HttpSettings{}, stream_handler);
  TestClient client(server.port());
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(client.send("GET /stream HTTP/1.1\r\n\r\n"));
    auto response = client.read_response();
    ASSERT_TRUE(response) << round;
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(response->header("transfer-encoding"), "chunked");
    EXPECT_EQ(response->header("cache-control"), "no-cache");
    EXPECT_EQ(response->header("content-type"), "text/event-stream");
    EXPECT_EQ(response->header("connection"), "keep-alive");
    EXPECT_EQ(response->body, "data: one\n\n" + kBigPiece + "data: [DONE]\n\n");
  }
}

TEST(HttpStream, Http10StreamEndsWithTheConnection) {
  RunningServer server(HttpSettings{}, stream_handler);
  TestClient client(server.port());
  ASSERT_TRUE(client.send("GET /stream HTTP/1.0\r\n\r\n"));
  auto response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->header("transfer-encoding"), "");
  EXPECT_EQ(response->header("connection"), "close");
  EXPECT_EQ(response->body, "data: one\n\n" + kBigPiece + "data: [DONE]\n\n");
}

TEST(HttpStream, ClientGoneIsNoticedWithinASecond) {
  std::atomic<bool> entered{false}, done{false}, noticed{false};
  std::atomic<int64_t> handler_ms{0};
  Clock::time_point start = Clock::now();
  RunningServer server(HttpSettings{}, [&](const HttpRequest&, HttpResponder& responder) {
    entered = true;
    auto handler_start = Clock::now();
    while (ms_since(handler_start) < 5000) {
      if (responder.client_gone()) {
        noticed = true;
        break;
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
    handler_ms = ms_since(start);
    responder.send(200, "text/plain", "too late");
    done = true;
  });
  TestClient client(server.port());
  ASSERT_TRUE(client.send("POST /wait HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"));
  ASSERT_TRUE(wait_for(entered));
  std::this_thread::sleep_for(milliseconds(50));  // the handler sees a live client first
  EXPECT_FALSE(noticed.load());
  int64_t closed_ms = ms_since(start);
  client.close();
  ASSERT_TRUE(wait_for(done));
  EXPECT_TRUE(noticed.load());
  EXPECT_LT(handler_ms.load() - closed_ms, 1000);
}

TEST(HttpStream, PipelinedRequestIsNotAGoneClient) {
  std::atomic<int> gone_seen{0};
  RunningServer server(HttpSettings{}, [&](const HttpRequest& request, HttpResponder& responder) {
    if (request.path == "/first") {
      std::this_thread::sleep_for(milliseconds(100));  // the second request arrives meanwhile
      if (responder.client_gone()) gone_seen++;
    }
    responder.send(200, "text/plain", request.path);
  });
  TestClient client(server.port());
  ASSERT_TRUE(client.send("GET /first HTTP/1.1\r\n\r\nGET /second HTTP/1.1\r\n\r\n"));
  for (std::string path : {"/first", "/second"}) {
    auto response = client.read_response();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->body, path);
  }
  EXPECT_EQ(gone_seen.load(), 0);
}

TEST(HttpStream, WriteChunkFailsAfterTheClientDisconnects) {
  std::atomic<bool> streaming{false}, failed{false}, done{false};
  std::atomic<int64_t> failed_ms{0};
  Clock::time_point start = Clock::now();
  RunningServer server(HttpSettings{}, [&](const HttpRequest&, HttpResponder& responder) {
    responder.start_stream(200, "text/event-stream");
    auto handler_start = Clock::now();
    while (ms_since(handler_start) < 5000) {
      if (!responder.write_chunk("data: token\n\n")) {
        failed = true;
        failed_ms = ms_since(start);
        break;
      }
      streaming = true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    responder.end_stream();
    done = true;
  });
  TestClient client(server.port());
  ASSERT_TRUE(client.send("GET /stream HTTP/1.1\r\n\r\n"));
  ASSERT_TRUE(wait_for(streaming));
  int64_t closed_ms = ms_since(start);
  client.close();
  ASSERT_TRUE(wait_for(done));
  EXPECT_TRUE(failed.load());
  EXPECT_LT(failed_ms.load() - closed_ms, 1000);
}

void hello_handler(const HttpRequest&, HttpResponder& responder) {
  responder.send(200, "text/plain", "hello");
}

TEST(HttpLimits, ConnectionsPastTheLimitGet503) {
  HttpSettings settings;
  settings.max_connections = 1;
  RunningServer server(settings, hello_handler);
  auto first = std::make_unique<TestClient>(server.port());
  ASSERT_TRUE(first->send("GET / HTTP/1.1\r\n\r\n"));
  ASSERT_TRUE(first->read_response());  // now idle, and still holding the only place

  TestClient second(server.port());
  auto busy = second.read_response();
  ASSERT_TRUE(busy);
  EXPECT_EQ(busy->status, 503);
  EXPECT_EQ(busy->header("retry-after"), "1");
  EXPECT_EQ(busy->header("connection"), "close");
  auto error = nlohmann::json::parse(busy->body)["error"];
  EXPECT_EQ(error["type"], "server_busy");
  EXPECT_FALSE(error["message"].get<std::string>().empty());
  EXPECT_TRUE(second.closed_by_server());

  // Once the first client leaves, its place is free again.
  first.reset();
  int status = 0;
  for (auto start = Clock::now(); ms_since(start) < 3000 && status != 200;) {
    TestClient next(server.port());
    next.send("GET / HTTP/1.1\r\n\r\n");
    auto response = next.read_response();
    status = response ? response->status : 0;
    if (status != 200) std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(status, 200);
}

TEST(HttpLimits, IdleConnectionsTimeOut) {
  HttpSettings settings;
  settings.idle_timeout_seconds = 1;
  RunningServer server(settings, hello_handler);
  TestClient idle(server.port());
  TestClient partial(server.port());
  ASSERT_TRUE(partial.send("GET / HTTP/1.1\r\nHost: x\r\n"));
  auto start = Clock::now();
  EXPECT_TRUE(idle.closed_by_server());
  EXPECT_GE(ms_since(start), 500);
  EXPECT_LT(ms_since(start), 3000);
  auto response = partial.read_response();  // a half-sent request hears why
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 408);
}

TEST(HttpStop, IdleKeepAliveConnectionDoesNotDelayStop) {
  RunningServer server(HttpSettings{}, hello_handler);  // idle timeout: 60 s
  TestClient client(server.port());
  ASSERT_TRUE(client.send("GET / HTTP/1.1\r\n\r\n"));
  ASSERT_TRUE(client.read_response());
  auto start = Clock::now();
  server.stop();
  EXPECT_LT(ms_since(start), 1000);
  EXPECT_TRUE(client.closed_by_server());
}

TEST(HttpStop, RequestInFlightFinishes) {
  std::atomic<bool> entered{false};
  RunningServer server(HttpSettings{}, [&](const HttpRequest&, HttpResponder& responder) {
    entered = true;
    std::this_thread::sleep_for(milliseconds(300));
    responder.send(200, "text/plain", "finished");
  });
  TestClient client(server.port());
  ASSERT_TRUE(client.send("GET / HTTP/1.1\r\n\r\n"));
  ASSERT_TRUE(wait_for(entered));
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    server.stop();
    stopped = true;
  });
  auto response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "finished");
  EXPECT_EQ(response->header("connection"), "close");
  EXPECT_TRUE(client.closed_by_server());
  EXPECT_TRUE(wait_for(stopped));
  stopper.join();
  TestClient late(server.port());
  EXPECT_FALSE(late.connected());  // the listening socket is closed
}

TEST(HttpStop, StopBeforeServeAndTwice) {
  HttpSettings settings;
  settings.port = 0;
  HttpServer server(settings, hello_handler);
  ASSERT_TRUE(server.listen().ok());
  server.stop();
  server.stop();
  auto start = Clock::now();
  server.serve();  // returns at once
  EXPECT_LT(ms_since(start), 1000);
}

}  // namespace
}  // namespace lockstep
