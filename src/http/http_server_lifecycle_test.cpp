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
using http_test::ms_since;
using http_test::wait_for;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

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
