#include "http/http_connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <exception>
#include <string>

#include "http/http_parser.h"
#include "http/http_responder.h"
#include "http/http_response.h"
#include "http/http_socket.h"

namespace lockstep {
namespace {

constexpr size_t kReadBytes = 16 << 10;
// How long an error response waits for the client to stop sending before the socket closes.
constexpr int kLingerMs = 1000;

enum class ReadResult { kData, kClosed, kTimeout, kStopped };

using Clock = std::chrono::steady_clock;

// Status line, headers and JSON body of an error the server answers itself.
std::string error_response(int status, const std::string& message, bool keep_alive,
                           const std::map<std::string, std::string>& extra = {}) {
  std::string body = json_error_body(message, error_type_for(status));
  ResponseHead head{status, "application/json", BodyMode::kLength, body.size(), keep_alive};
  return format_response_head(head, extra) + body;
}

class Connection {
 public:
  Connection(int fd, const ConnectionContext& context) : fd_(fd), context_(context) {}

  // Serves requests until the connection ends; closes fd_.
  void run() {
    while (serve_one_request()) {
    }
  }

 private:
  // Reads, answers and consumes one request; false once the connection has been closed.
  bool serve_one_request();
  // Reads the head of the next request into `head`; false once the connection has been closed.
  bool read_head(RequestHead& head);
  // Appends what the socket has to buffer_, waiting at most `timeout_ms` (< 0: no limit). With
  // `watch_stop`, a stopping server interrupts the wait.
  ReadResult read_more(bool watch_stop, int timeout_ms);
  void call_handler(const HttpRequest& request, SocketResponder& responder);
  // Sends a server error response and closes; returns false for serve_one_request.
  bool refuse(int status, const std::string& message);

  int idle_timeout_ms() const {
    int seconds = context_.settings.idle_timeout_seconds;
    if (seconds <= 0) return -1;
    return seconds >= INT_MAX / 1000 ? INT_MAX : seconds * 1000;
  }
  // What is left of the idle timeout that started at `start` (< 0: no limit).
  int ms_left(Clock::time_point start) const {
    int timeout_ms = idle_timeout_ms();
    if (timeout_ms < 0) return -1;
    auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    return spent.count() >= timeout_ms ? 0 : timeout_ms - int(spent.count());
  }

  int fd_;
  const ConnectionContext& context_;
  std::string buffer_;  // received and not yet consumed: a partial or pipelined request
};

bool Connection::serve_one_request() {
  RequestHead head;
  if (!read_head(head)) return false;

  BodyFraming framing = body_framing(head, context_.settings.max_body_bytes);
  if (framing.error_status != 0) return refuse(framing.error_status, framing.error_message);

  size_t body_end = head.head_bytes + framing.content_length;
  if (buffer_.size() < body_end && expects_continue(head) && !send_all(fd_, kContinueResponse)) {
    close(fd_);
    return false;
  }
  while (buffer_.size() < body_end) {
    ReadResult result = read_more(/*watch_stop=*/false, idle_timeout_ms());
    if (result == ReadResult::kTimeout) return refuse(408, "timed out reading the request body");
    if (result != ReadResult::kData) {
      close(fd_);
      return false;
    }
  }
  head.request.body = buffer_.substr(head.head_bytes, framing.content_length);
  buffer_.erase(0, body_end);

  SocketResponder responder(fd_, head, wants_keep_alive(head), context_.stopping);
  call_handler(head.request, responder);
  if (responder.connection_reusable()) return true;
  // A complete response closes gently; a failed or cut-off one (the client may not know
  // where the body ends) just closes.
  if (responder.response_complete())
    close_promptly(fd_);
  else
    close(fd_);
  return false;
}

bool Connection::read_head(RequestHead& head) {
  // The whole head must arrive within the idle timeout: a byte now and then does not keep a
  // connection (and its thread) forever.
  const Clock::time_point start = Clock::now();
  const size_t max_header_bytes = context_.settings.max_header_bytes;
  HeadParse parsed = parse_request_head(buffer_, max_header_bytes, head);
  while (parsed == HeadParse::kIncomplete) {
    ReadResult result = read_more(/*watch_stop=*/true, ms_left(start));
    if (result == ReadResult::kTimeout) {
      bool partial = buffer_.find_first_not_of("\r\n") != std::string::npos;
      if (partial) return refuse(408, "timed out reading the request head");
    }
    if (result != ReadResult::kData) {
      close_promptly(fd_);
      return false;
    }
    parsed = parse_request_head(buffer_, max_header_bytes, head);
  }
  if (parsed == HeadParse::kTooLarge)
    return refuse(431, "request line and headers are over the limit of " +
                           std::to_string(max_header_bytes) + " bytes");
  if (parsed == HeadParse::kMalformed) return refuse(400, "malformed request line or header");
  return true;
}

ReadResult Connection::read_more(bool watch_stop, int timeout_ms) {
  int wake_fd = watch_stop ? context_.stop_fd : -1;
  while (true) {
    WaitResult waited = wait_readable(fd_, wake_fd, timeout_ms);
    if (waited == WaitResult::kTimeout) return ReadResult::kTimeout;
    if (waited == WaitResult::kWoken) return ReadResult::kStopped;
    size_t old_size = buffer_.size();
    buffer_.resize(old_size + kReadBytes);
    ssize_t n = recv(fd_, buffer_.data() + old_size, kReadBytes, MSG_DONTWAIT);
    buffer_.resize(old_size + (n > 0 ? size_t(n) : 0));
    if (n > 0) return ReadResult::kData;
    if (n == 0) return ReadResult::kClosed;
    if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) return ReadResult::kClosed;
  }
}

void Connection::call_handler(const HttpRequest& request, SocketResponder& responder) {
  std::string failure;
  try {
    context_.handler(request, responder);
  } catch (const std::exception& e) {
    failure = std::string("internal error: ") + e.what();
  } catch (...) {
    failure = "internal error";
  }
  if (responder.state() != SocketResponder::State::kNotStarted) return;
  if (failure.empty()) failure = "internal error: the handler returned without a response";
  responder.send(500, "application/json", json_error_body(failure, error_type_for(500)));
}

bool Connection::refuse(int status, const std::string& message) {
  if (send_all(fd_, error_response(status, message, /*keep_alive=*/false)))
    close_lingering(fd_, kLingerMs);
  else
    close(fd_);
  return false;
}

}  // namespace

void serve_connection(int fd, const ConnectionContext& context) {
  configure_connection(fd, context.settings.idle_timeout_seconds);
  Connection connection(fd, context);
  connection.run();
}

void reject_busy_connection(int fd) {
  std::string response = error_response(503, "the server is at its connection limit; retry",
                                        /*keep_alive=*/false, {{"Retry-After", "1"}});
  // A fresh socket's send buffer takes a small response whole, so this does not block.
  send(fd, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  close_promptly(fd);
}

}  // namespace lockstep
