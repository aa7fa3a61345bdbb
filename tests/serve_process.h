// `lockstep serve` as a user runs it: the binary on a free port, in its own process.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

namespace lockstep {

// Starts `lockstep serve --port 0` and reads its log up to the line that names the port.
struct ServeProcess {
  pid_t pid = -1;
  int port = 0;
  int err_fd = -1;

  explicit ServeProcess(const std::string& model, std::vector<std::string> extra = {}) {
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) return;
    const std::string binary = lockstep_binary();
    pid = fork();
    if (pid == 0) {
      dup2(pipe_fds[1], STDERR_FILENO);
      close(pipe_fds[0]);
      std::vector<std::string> args = {binary, "serve", "--model", model, "--port", "0", "--threads", "1"};
      args.insert(args.end(), extra.begin(), extra.end());
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    close(pipe_fds[1]);
    err_fd = pipe_fds[0];
    std::string log;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    char buffer[256];
    auto named = [&log] {
      const size_t at = log.find("http://127.0.0.1:");
      return at != std::string::npos && log.find('\n', at) != std::string::npos;
    };
    while (!named() && std::chrono::steady_clock::now() < deadline) {
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
  // Sends `signal` and returns the exit status (-1 if it did not exit within `seconds`).
  int stop_with(int signal, int seconds = 20) {
    kill(pid, signal);
    return wait_exit(seconds);
  }
  int wait_exit(int seconds) {
    for (int i = 0; i < seconds * 10; ++i) {
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

}  // namespace lockstep
