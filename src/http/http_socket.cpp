#include "http/http_socket.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>

namespace lockstep {
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

PeerState peer_state(int fd) {
  pollfd p = {fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return PeerState::kThere;
  if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return PeerState::kGone;
  char byte;
  ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return PeerState::kThere;
  if (n == 0) return PeerState::kShutWriting;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return PeerState::kThere;
  return PeerState::kGone;
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

void close_promptly(int fd) {
  shutdown(fd, SHUT_WR);
  size_t budget = 1 << 20;
  discard_available(fd, budget);
  close(fd);
}

}  // namespace lockstep
