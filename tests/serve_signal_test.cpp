// lockstep serve as users run it: the binary on a free port, a request, then SIGTERM or
// SIGINT: it stops accepting, ends its streams and exits 0.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "http_client.h"
#include "serve_process.h"
#include "test_support.h"

namespace lockstep {
namespace {

TEST(ServeProcess, ExitsZeroOnSigtermAndSigint) {
  for (int signal : {SIGTERM, SIGINT}) {
    ServeProcess server(test_data("llama"));
    ASSERT_GT(server.port, 0) << "no serving line";
    HttpReply reply = http_request(server.port, "POST", "/v1/completions", R"({"prompt": [1, 2, 3], "max_tokens": 4})");
    EXPECT_EQ(reply.status, 200) << reply.body;
    EXPECT_EQ(server.stop_with(signal), 0) << "signal " << signal;
  }
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A model slow enough on the CPU that a 400-token reply is still running when the signal comes.
ServeProcess slow_server() {
  return ServeProcess(test_data("../../bench/models/nemotron_h_small"), {"--dummy-weights", "--context", "1024"});
}

TEST(ServeProcess, StopCancelsStreamsAndEndsTheirRepliesCleanly) {
  for (bool stream : {true, false}) {
    ServeProcess server = slow_server();
    ASSERT_GT(server.port, 0) << "no serving line";
    std::string body = std::string(R"({"prompt": [1, 2, 3], "max_tokens": 400, "ignore_eos": true, "stream": )") +
                       (stream ? "true}" : "false}");
    OpenRequest request(server.port, "POST", "/v1/completions", body);
    ASSERT_TRUE(request.connected());
    if (stream) ASSERT_NE(request.read_until("data: ").find("data: "), std::string::npos);
    else std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto start = Clock::now();
    kill(server.pid, SIGTERM);
    std::string reply = request.read_until(stream ? "data: [DONE]" : "}}", 10);
    if (stream) {
      EXPECT_NE(reply.find(R"("finish_reason":"cancelled")"), std::string::npos) << reply;
      EXPECT_NE(reply.find("data: [DONE]"), std::string::npos) << reply;
    } else {
      EXPECT_EQ(reply.rfind("HTTP/1.1 503", 0), 0u) << reply;
      EXPECT_NE(reply.find("shutting down"), std::string::npos) << reply;
    }
    EXPECT_EQ(server.wait_exit(10), 0);
    EXPECT_LT(seconds_since(start), 5.0);
  }
}

TEST(ServeProcess, AClientStillSendingDoesNotHoldUpStop) {
  ServeProcess server(test_data("llama"));
  ASSERT_GT(server.port, 0) << "no serving line";
  ClientConnection trickle({"127.0.0.1", server.port, {}}, std::chrono::milliseconds(5000));
  ASSERT_TRUE(trickle.open().ok());
  ASSERT_TRUE(trickle.send("POST /v1/completions HTTP/1.1\r\nContent-Length: 1000\r\n\r\n{\"prompt\": ").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto start = Clock::now();
  EXPECT_EQ(server.stop_with(SIGTERM, 10), 0);
  EXPECT_LT(seconds_since(start), 3.0);
  auto reply = trickle.read_reply();
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->status, 503);
}

TEST(ServeProcess, ASecondSignalExitsAtOnce) {
  ServeProcess server = slow_server();
  ASSERT_GT(server.port, 0) << "no serving line";
  kill(server.pid, SIGTERM);
  auto start = Clock::now();
  int status = server.stop_with(SIGINT, 10);
  // 0 if the first stop was over before the second signal came; else 128 + that signal.
  EXPECT_TRUE(status == 0 || status == 128 + SIGINT || status == 128 + SIGTERM) << status;
  EXPECT_LT(seconds_since(start), 2.0);
}

}  // namespace
}  // namespace lockstep
