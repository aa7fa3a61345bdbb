// Clients that are slow, many, half-closed or still sending when the server stops: the
// connection limit, the whole-request deadline, and stop() under them. Real sockets on
// 127.0.0.1; every wait is bounded.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "http/http_server.h"
#include "http/http_test_client.h"

namespace lockstep {
namespace {

using http_test::ms_since;
using http_test::RunningServer;
using http_test::TestClient;
using http_test::wait_for;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

void hello_handler(const HttpRequest&, HttpResponder& responder) { responder.send(200, "text/plain", "hello"); }

// Status of one plain GET on a fresh connection, or 0.
int get_status(int port) {
  TestClient client(port);
  if (!client.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")) return 0;
  auto response = client.read_response();
  return response ? response->status : 0;
}

TEST(HttpLimits, EveryConnectionBusyGets503) {
  HttpSettings settings;
  settings.max_connections = 1;
  std::atomic<bool> entered{false}, release{false};
  RunningServer server(settings, [&](const HttpRequest&, HttpResponder& responder) {
    entered = true;
    while (!release.load()) std::this_thread::sleep_for(milliseconds(5));
    responder.send(200, "text/plain", "done");
  });
  TestClient first(server.port());
  ASSERT_TRUE(first.send("GET / HTTP/1.1\r\n\r\n"));
  ASSERT_TRUE(wait_for(entered));

  TestClient second(server.port());
  auto busy = second.read_response();
  ASSERT_TRUE(busy);
  EXPECT_EQ(busy->status, 503);
  EXPECT_EQ(busy->header("retry-after"), "1");
  EXPECT_EQ(busy->header("connection"), "close");
  EXPECT_EQ(nlohmann::json::parse(busy->body)["error"]["type"], "server_busy");
  EXPECT_TRUE(second.closed_by_server());

  release = true;
  auto done = first.read_response();
  ASSERT_TRUE(done);
  EXPECT_EQ(done->status, 200);
}

TEST(HttpLimits, AtTheLimitTheLongestWaitingConnectionGivesWay) {
  HttpSettings settings;
  settings.max_connections = 4;
  RunningServer server(settings, hello_handler);
  std::vector<std::unique_ptr<TestClient>> slow;
  for (int i = 0; i < 4; ++i) {
    slow.push_back(std::make_unique<TestClient>(server.port()));
    ASSERT_TRUE(slow.back()->send("GET /slow HTTP/1.1\r\nHost: x\r\n"));  // never finished
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(get_status(server.port()), 200);
  auto evicted = slow.front()->read_response();  // the oldest heard why it was closed
  ASSERT_TRUE(evicted);
  EXPECT_EQ(evicted->status, 503);
}

TEST(HttpLimits, HundredsOfSlowClientsDoNotLockOutOthers) {
  HttpSettings settings;
  settings.max_connections = 128;
  RunningServer server(settings, hello_handler);
  std::vector<std::unique_ptr<TestClient>> slow;
  for (int i = 0; i < 300; ++i) {
    slow.push_back(std::make_unique<TestClient>(server.port()));
    // Half send a head that never ends, half a body that never arrives.
    std::string bytes = i % 2 ? "GET /slow HTTP/1.1\r\nHost: x\r\nX-A: "
                              : "POST /slow HTTP/1.1\r\nContent-Length: 1000\r\n\r\n{\"a\":";
    slow.back()->send(bytes);
  }
  std::atomic<bool> stop_trickle{false};
  std::thread trickle([&] {
    while (!stop_trickle.load()) {
      for (auto& client : slow) client->send("a");
      std::this_thread::sleep_for(milliseconds(50));
    }
  });
  for (int i = 0; i < 20; ++i) {
    auto start = Clock::now();
    EXPECT_EQ(get_status(server.port()), 200) << "request " << i;
    EXPECT_LT(ms_since(start), 1000) << "request " << i;
  }
  stop_trickle = true;
  trickle.join();
}

TEST(HttpLimits, TheWholeRequestHasADeadline) {
  HttpSettings settings;
  settings.request_timeout_seconds = 1;
  RunningServer server(settings, hello_handler);
  for (std::string start : {"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ", "POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n"}) {
    TestClient client(server.port());
    ASSERT_TRUE(client.send(start));
    auto started = Clock::now();
    // A byte every 100 ms keeps every read short; the request as a whole still runs out.
    std::atomic<bool> done{false};
    std::thread trickle([&] {
      while (!done.load() && ms_since(started) < 4000) {
        client.send("a");
        std::this_thread::sleep_for(milliseconds(100));
      }
    });
    std::this_thread::sleep_for(milliseconds(1300));
    done = true;
    trickle.join();
    auto response = client.read_response();
    ASSERT_TRUE(response) << start;
    EXPECT_EQ(response->status, 408) << start;
    EXPECT_LT(ms_since(started), 3000);
  }
}

TEST(HttpLimits, IdleConnectionsTimeOut) {
  HttpSettings settings;
  settings.idle_timeout_seconds = 1;
  RunningServer server(settings, hello_handler);
  TestClient idle(server.port());
  auto start = Clock::now();
  EXPECT_TRUE(idle.closed_by_server());
  EXPECT_GE(ms_since(start), 500);
  EXPECT_LT(ms_since(start), 3000);
}

TEST(HttpHalfClose, AClientThatShutsItsSendingSideGetsItsResponse) {
  std::atomic<int> gone_seen{0};
  RunningServer server(HttpSettings{}, [&](const HttpRequest& request, HttpResponder& responder) {
    for (int i = 0; i < 20; ++i) {  // a handler that watches for its client while it works
      if (responder.client_gone()) gone_seen++;
      std::this_thread::sleep_for(milliseconds(10));
    }
    responder.send(200, "text/plain", "answer to " + request.body);
  });
  TestClient client(server.port());
  ASSERT_TRUE(client.send("POST /x HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"));
  client.half_close();
  auto response = client.read_response();
  while (response && response->status == 100) response = client.read_response();  // the probe
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "answer to hi");
  EXPECT_EQ(response->header("connection"), "close");
  EXPECT_EQ(gone_seen.load(), 0);
}

TEST(HttpStop, AClientStillSendingGets503AndDoesNotDelayStop) {
  RunningServer server(HttpSettings{}, hello_handler);
  TestClient client(server.port());
  ASSERT_TRUE(client.send("POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n{"));
  std::this_thread::sleep_for(milliseconds(50));
  auto start = Clock::now();
  server.stop();  // returns once the refused client has had a second to read its 503
  EXPECT_LT(ms_since(start), 2500);
  auto response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 503);
}

TEST(HttpStop, ConnectionsWaitingToBeAcceptedGet503NotAReset) {
  HttpSettings settings;
  settings.host = "127.0.0.1";
  settings.port = 0;
  HttpServer server(settings, hello_handler);
  ASSERT_TRUE(server.listen().ok());
  // Not serving yet: these wait in the listen backlog, their requests sent.
  std::vector<std::unique_ptr<TestClient>> waiting;
  for (int i = 0; i < 3; ++i) {
    waiting.push_back(std::make_unique<TestClient>(server.port()));
    ASSERT_TRUE(waiting.back()->send("GET / HTTP/1.1\r\n\r\n"));
  }
  server.stop();
  server.serve();  // stops at once, answering the backlog first
  for (auto& client : waiting) {
    auto response = client->read_response();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, 503);
    EXPECT_NE(response->body.find("shutting down"), std::string::npos);
  }
}

TEST(HttpStop, RequestsPastTheGracePeriodLoseTheirConnections) {
  HttpSettings settings;
  settings.stop_grace_ms = 300;
  std::atomic<bool> entered{false};
  RunningServer server(settings, [&](const HttpRequest&, HttpResponder& responder) {
    responder.start_stream(200, "text/event-stream");
    entered = true;
    while (responder.write_chunk("data: more\n\n")) std::this_thread::sleep_for(milliseconds(5));
  });
  TestClient client(server.port());
  ASSERT_TRUE(client.send("GET / HTTP/1.1\r\n\r\n"));
  ASSERT_TRUE(wait_for(entered));
  auto start = Clock::now();
  server.stop();
  EXPECT_GE(ms_since(start), 250);
  EXPECT_LT(ms_since(start), 2000);
}

}  // namespace
}  // namespace lockstep
