#include "run_command.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace lockstep {

namespace {

Error errno_error(const std::string& what) { return make_error(what + ": " + std::strerror(errno)); }

void close_both(int fds[2]) {
  if (fds[0] >= 0) close(fds[0]);
  if (fds[1] >= 0) close(fds[1]);
}

// The child's side: wire the pipes to stdout and stderr, then exec. Only async-signal-safe calls.
[[noreturn]] void exec_child(const std::vector<char*>& argv, int out_fd, int err_fd) {
  int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
  dup2(out_fd, STDOUT_FILENO);
  dup2(err_fd, STDERR_FILENO);
  execv(argv[0], argv.data());
  const char message[] = "run_command: exec failed\n";
  ssize_t ignored = write(STDERR_FILENO, message, sizeof(message) - 1);
  (void)ignored;
  _exit(127);
}

// Reads both pipes until each reaches end of file; polling both keeps a child that fills one
// pipe's buffer from blocking while we wait on the other.
Status drain(int out_fd, int err_fd, std::string& out, std::string& err) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&out, &err};
  int open_count = 2;
  char buffer[4096];
  while (open_count > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return errno_error("poll");
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        fds[i].fd = -1;  // poll skips negative descriptors
        --open_count;
        continue;
      }
      sinks[i]->append(buffer, size_t(n));
    }
  }
  return Status::success();
}

}  // namespace

Expected<CommandResult> run_command(const std::string& program, const std::vector<std::string>& args) {
  std::vector<std::string> words = {program};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);

  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return errno_error("pipe");
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close_both(out_pipe);
    return errno_error("pipe");
  }
  pid_t pid = fork();
  if (pid < 0) {
    close_both(out_pipe);
    close_both(err_pipe);
    return errno_error("fork");
  }
  if (pid == 0) exec_child(argv, out_pipe[1], err_pipe[1]);

  close(out_pipe[1]);
  close(err_pipe[1]);
  CommandResult result;
  Status drained = drain(out_pipe[0], err_pipe[0], result.out, result.err);
  close(out_pipe[0]);
  close(err_pipe[0]);

  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return errno_error("waitpid");
  if (!drained.ok()) return drained.error();
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
  return result;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

}  // namespace lockstep
