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

#include "http_client.h"
#include "test_support.h"

namespace lockstep {
namespace {

// Starts `lockstep serve --port 0` and reads its first log line for the port.
struct ServeProcess {
  pid_t pid = -1;
  int port = 0;
  int err_fd = -1;

  explicit ServeProcess(const std::string& model) {
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) return;
    const std::string binary = lockstep_binary();
    pid = fork();
    if (pid == 0) {
      dup2(pipe_fds[1], STDERR_FILENO);
      close(pipe_fds[0]);
      execl(binary.c_str(), binary.c_str(), "serve", "--model", model.c_str(), "--port", "0", "--threads", "1",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(pipe_fds[1]);
    err_fd = pipe_fds[0];
    std::string log;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    char buffer[256];
    while (log.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      ssize_t n = read(err_fd, buffer, sizeof(buffer));
      if (n <= 0) break;
      log.append(buffer, size_t(n));
    }
    size_t at = log.find("http://127.0.0.1:");
    if (at != std::string::npos) port = std::atoi(log.c_str() + at + 17);
  }
  ~ServeProcess() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (err_fd >= 0) close(err_fd);
  }
  // Sends `signal` and returns the exit status (-1 if it did not exit within 20 s).
  int stop_with(int signal) {
    kill(pid, signal);
    for (int i = 0; i < 200; ++i) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return -1;
  }
};

TEST(ServeProcess, ExitsZeroOnSigtermAndSigint) {
  for (int signal : {SIGTERM, SIGINT}) {
    ServeProcess server(test_data("llama"));
    ASSERT_GT(server.port, 0) << "no serving line";
    HttpReply reply = http_request(server.port, "POST", "/v1/completions", R"({"prompt": [1, 2, 3], "max_tokens": 4})");
    EXPECT_EQ(reply.status, 200) << reply.body;
    EXPECT_EQ(server.stop_with(signal), 0) << "signal " << signal;
  }
}

}  // namespace
}  // namespace lockstep
