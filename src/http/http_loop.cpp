#include "http/http_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

#include "http/http_socket.h"

namespace lockstep {
namespace {

constexpr size_t kReadBytes = 64 << 10;  // per connection per wake-up: one client cannot hog the loop
constexpr auto kLinger = std::chrono::milliseconds(1000);
constexpr size_t kLingerBytes = 1 << 20;
constexpr auto kAcceptRest = std::chrono::milliseconds(100);
constexpr const char* kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

int ms_until(HttpClock::time_point when) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(when - HttpClock::now()).count();
  return left <= 0 ? 0 : int(std::min<int64_t>(left, 1 << 30));
}

std::chrono::seconds seconds(int value) { return std::chrono::seconds(value); }

// Sends without blocking; true when every byte went (a small response into a fresh buffer does).
bool send_now(int fd, const std::string& bytes) {
  ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  return n == ssize_t(bytes.size());
}

void epoll_add(int epoll_fd, int fd) {
  epoll_event event = {};
  event.events = EPOLLIN | EPOLLRDHUP;
  event.data.fd = fd;
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event);
}

}  // namespace

ServerLoop::ServerLoop(const HttpSettings& settings, const HttpHandler& handler, int listen_fd, int stop_fd,
                       const std::atomic<bool>& stopping)
    : settings_(settings), handler_(handler), listen_fd_(listen_fd), stop_fd_(stop_fd), stopping_(stopping) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  back_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_add(epoll_fd_, listen_fd_);
  epoll_add(epoll_fd_, stop_fd_);
  epoll_add(epoll_fd_, back_fd_);
}

ServerLoop::~ServerLoop() {
  for (Handling& handling : handling_)
    if (handling.thread.joinable()) handling.thread.join();
  for (auto& entry : waiting_) close(entry.first);
  if (listen_fd_ >= 0) close(listen_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (back_fd_ >= 0) close(back_fd_);
}

void ServerLoop::run() {
  if (epoll_fd_ < 0 || back_fd_ < 0) return;
  if (stopping_.load()) begin_stop();
  epoll_event events[64];
  while (!done()) {
    int n = epoll_wait(epoll_fd_, events, 64, next_wake_ms_);
    if (n < 0 && errno != EINTR) n = 0;  // out of memory or the like: the sweep still runs
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == stop_fd_) {
        if (!stop_begun_) begin_stop();
      } else if (fd == back_fd_) {
        take_back();
      } else if (fd == listen_fd_) {
        accept_ready();
      } else {
        read_ready(fd);
      }
    }
    sweep();
  }
}

void ServerLoop::accept_ready() {
  while (listen_fd_ >= 0) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: rest, rather than wake again and again for the same connection.
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        accept_paused_ = true;
        accept_resume_at_ = HttpClock::now() + kAcceptRest;
      }
      return;  // EAGAIN: nothing more to accept
    }
    configure_connection(fd, settings_.idle_timeout_seconds);
    auto connection = std::make_unique<Connection>();
    connection->fd = fd;
    connection->since = HttpClock::now();
    bool room = int(handling_.size() + waiting_.size()) < settings_.max_connections || make_room();
    watch(std::move(connection));
    if (stop_begun_) {
      refuse(fd, 503, "the server is shutting down", /*busy=*/true);
    } else if (!room) {
      refuse(fd, 503, "the server is at its connection limit; retry", /*busy=*/true);
    }
  }
}

bool ServerLoop::make_room() {
  int open = int(handling_.size());
  Connection* oldest = nullptr;
  for (auto& entry : waiting_) {
    Connection& connection = *entry.second;
    if (connection.lingering) continue;
    ++open;
    if (!oldest || connection.since < oldest->since) oldest = &connection;
  }
  if (open < settings_.max_connections) return true;
  if (!oldest) return false;
  if (oldest->reading)
    refuse(oldest->fd, 503, "the server is at its connection limit; retry", /*busy=*/true);
  else
    close_connection(oldest->fd, /*promptly=*/true);
  return true;
}

void ServerLoop::watch(std::unique_ptr<Connection> connection) {
  int fd = connection->fd;
  waiting_[fd] = std::move(connection);
  epoll_add(epoll_fd_, fd);
}

void ServerLoop::read_ready(int fd) {
  auto found = waiting_.find(fd);
  if (found == waiting_.end()) return;
  Connection& connection = *found->second;
  if (connection.lingering) {
    if (!discard_available(fd, connection.linger_budget)) close_connection(fd, /*promptly=*/false);
    return;
  }
  if (connection.peer_done) return;  // processed already; waits for its deadline
  std::string& buffer = connection.buffer;
  size_t old_size = buffer.size();
  buffer.resize(old_size + kReadBytes);
  ssize_t n = recv(fd, buffer.data() + old_size, kReadBytes, MSG_DONTWAIT);
  buffer.resize(old_size + (n > 0 ? size_t(n) : 0));
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) return;
    return close_connection(fd, /*promptly=*/false);
  }
  if (n == 0) connection.peer_done = true;
  process(fd);
}

void ServerLoop::process(int fd) {
  Connection& connection = *waiting_.at(fd);
  const bool was_reading = connection.reading;
  RequestProgress progress = advance(connection, settings_);
  if (!was_reading && connection.reading) connection.since = HttpClock::now();
  switch (progress.kind) {
    case RequestProgress::Kind::kComplete:
      return start_handler(fd);
    case RequestProgress::Kind::kRefused:
      return refuse(fd, progress.error_status, progress.error_message);
    case RequestProgress::Kind::kSendContinue:
      connection.continue_sent = true;
      if (!send_now(fd, kContinue)) return close_connection(fd, /*promptly=*/false);
      break;
    case RequestProgress::Kind::kNeedMore:
      break;
  }
  // The client stopped sending before a whole request: nothing to answer.
  if (connection.peer_done) close_connection(fd, /*promptly=*/true);
}

void ServerLoop::start_handler(int fd) {
  auto node = waiting_.extract(fd);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  Handling& handling = handling_.emplace_back();
  handling.connection = std::move(node.mapped());
  handling.fd = fd;
  auto at = std::prev(handling_.end());
  RequestHead head = take_request(*handling.connection);
  try {
    handling.thread = std::thread([this, at, head = std::move(head)]() mutable {
      AfterResponse after = serve_request(*at->connection, std::move(head), handler_, stopping_, settings_.error_headers);
      std::lock_guard lock(mutex_);
      handed_back_.push_back({at, after});
      uint64_t one = 1;
      ssize_t written = write(back_fd_, &one, sizeof(one));
      (void)written;  // fails only when the counter would overflow: it is readable anyway
    });
  } catch (const std::system_error&) {
    // No thread to be had: answer as if at the limit.
    std::unique_ptr<Connection> connection = std::move(at->connection);
    handling_.erase(at);
    watch(std::move(connection));
    refuse(fd, 503, "the server has no thread for this request; retry", /*busy=*/true);
  }
}

void ServerLoop::take_back() {
  uint64_t count = 0;
  ssize_t got = read(back_fd_, &count, sizeof(count));
  (void)got;
  std::vector<HandedBack> back;
  {
    std::lock_guard lock(mutex_);
    back.swap(handed_back_);
  }
  for (HandedBack& item : back) {
    item.handling->thread.join();
    std::unique_ptr<Connection> connection = std::move(item.handling->connection);
    handling_.erase(item.handling);
    int fd = connection->fd;
    if (item.after != AfterResponse::kKeep || stop_begun_) {
      close_promptly(fd);  // discards what arrived: a cut-off response just closes
      continue;
    }
    connection->since = HttpClock::now();
    watch(std::move(connection));
    process(fd);  // a pipelined request may be whole already
  }
}

void ServerLoop::refuse(int fd, int status, const std::string& message, bool busy) {
  Connection& connection = *waiting_.at(fd);
  std::map<std::string, std::string> extra = settings_.error_headers;
  if (busy) extra["Retry-After"] = "1";
  if (!send_now(fd, error_response(status, message, /*keep_alive=*/false, extra)))
    return close_connection(fd, /*promptly=*/false);
  shutdown(fd, SHUT_WR);
  connection.lingering = true;
  connection.linger_until = HttpClock::now() + kLinger;
  connection.linger_budget = kLingerBytes;
  connection.buffer.clear();
  connection.buffer.shrink_to_fit();
}

void ServerLoop::close_connection(int fd, bool promptly) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  waiting_.erase(fd);
  if (promptly)
    close_promptly(fd);
  else
    close(fd);
}

void ServerLoop::begin_stop() {
  stop_begun_ = true;
  stop_at_ = HttpClock::now();
  // Connections already made but not yet accepted hear 503 rather than a reset.
  accept_ready();
  if (listen_fd_ >= 0) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
    close(listen_fd_);
    listen_fd_ = -1;
  }
  std::vector<int> idle, reading;
  for (auto& entry : waiting_) {
    if (entry.second->lingering) continue;
    (entry.second->reading ? reading : idle).push_back(entry.first);
  }
  for (int fd : idle) close_connection(fd, /*promptly=*/true);
  for (int fd : reading) refuse(fd, 503, "the server is shutting down", /*busy=*/true);
}

void ServerLoop::sweep() {
  const HttpClock::time_point now = HttpClock::now();
  HttpClock::time_point wake = HttpClock::time_point::max();
  std::vector<int> expired, timed_out;
  for (auto& entry : waiting_) {
    Connection& connection = *entry.second;
    HttpClock::time_point deadline = HttpClock::time_point::max();
    if (connection.lingering)
      deadline = connection.linger_until;
    else if (connection.reading && settings_.request_timeout_seconds > 0)
      deadline = connection.since + seconds(settings_.request_timeout_seconds);
    else if (!connection.reading && settings_.idle_timeout_seconds > 0)
      deadline = connection.since + seconds(settings_.idle_timeout_seconds);
    if (deadline <= now)
      (connection.reading && !connection.lingering ? timed_out : expired).push_back(entry.first);
    else
      wake = std::min(wake, deadline);
  }
  for (int fd : expired) close_connection(fd, /*promptly=*/true);
  for (int fd : timed_out) {
    refuse(fd, 408, "timed out reading the request");
    auto found = waiting_.find(fd);
    if (found != waiting_.end()) wake = std::min(wake, found->second->linger_until);
  }
  if (accept_paused_) {
    if (now >= accept_resume_at_ && listen_fd_ >= 0) {
      accept_paused_ = false;
      epoll_add(epoll_fd_, listen_fd_);
    } else {
      wake = std::min(wake, accept_resume_at_);
    }
  }
  if (stop_begun_ && !handling_.empty()) {
    // Past the grace period, requests still in flight lose their connections: their writes
    // fail and their handlers return. The handler threads still own (and close) nothing: the
    // descriptors stay open until handed back, so shutting them cannot touch another socket.
    HttpClock::time_point shut_at = stop_at_ + std::chrono::milliseconds(settings_.stop_grace_ms);
    if (now >= shut_at) {
      for (Handling& handling : handling_)
        if (!handling.shut) {
          shutdown(handling.fd, SHUT_RDWR);
          handling.shut = true;
        }
    } else {
      wake = std::min(wake, shut_at);
    }
  }
  next_wake_ms_ = wake == HttpClock::time_point::max() ? -1 : ms_until(wake) + 1;
}

}  // namespace lockstep
