#include "http/http_socket.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;

int ms_until(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() < 0 ? 0 : int(left.count());
}

// Reads and drops what has arrived; false at end of stream or on an error.
bool discard_available(int fd, size_t& budget) {
  char scratch[16 << 10];
  while (budget > 0) {
    ssize_t n = recv(fd, scratch, sizeof(scratch), MSG_DONTWAIT);
    if (n > 0) {
      budget = size_t(n) >= budget ? 0 : budget - size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  return false;
}

}  // namespace

WaitResult wait_readable(int fd, int wake_fd, int timeout_ms) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  pollfd fds[2] = {{fd, POLLIN | POLLRDHUP, 0}, {wake_fd, POLLIN, 0}};
  while (true) {
    int wait_ms = timeout_ms < 0 ? -1 : ms_until(deadline);
    int n = poll(fds, wake_fd >= 0 ? 2 : 1, wait_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      return WaitResult::kReadable;  // let recv() report the error
    }
    if (n == 0) return WaitResult::kTimeout;
    if (wake_fd >= 0 && fds[1].revents != 0) return WaitResult::kWoken;
    if (fds[0].revents != 0) return WaitResult::kReadable;
  }
}

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;  // EPIPE, ECONNRESET, or EAGAIN after the send timeout
    }
    data.remove_prefix(size_t(n));
  }
  return true;
}

bool peer_closed(int fd) {
  pollfd p = {fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
  char byte;
  ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;
  if (n == 0) return true;
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

void configure_connection(int fd, int send_timeout_seconds) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (send_timeout_seconds > 0) {
    timeval timeout = {};
    timeout.tv_sec = send_timeout_seconds;
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  }
}

void close_lingering(int fd, int max_wait_ms) {
  shutdown(fd, SHUT_WR);
  size_t budget = 1 << 20;
  auto deadline = Clock::now() + std::chrono::milliseconds(max_wait_ms);
  while (budget > 0 && discard_available(fd, budget)) {
    int wait_ms = ms_until(deadline);
    if (wait_ms == 0 || wait_readable(fd, -1, wait_ms) != WaitResult::kReadable) break;
  }
  close(fd);
}

void close_promptly(int fd) {
  shutdown(fd, SHUT_WR);
  size_t budget = 1 << 20;
  discard_available(fd, budget);
  close(fd);
}

}  // namespace lockstep
