#include "http/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

namespace lockstep {

namespace {

using Clock = std::chrono::steady_clock;

std::string lower(std::string text) {
  for (char& c : text) c = char(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// Splits a byte stream into server-sent events and hands each one's data to the handler.
class SseSplitter {
 public:
  explicit SseSplitter(const SseHandler& on_event) : on_event_(on_event) {}

  // False once the handler has hung up.
  bool push(std::string_view bytes, Clock::time_point arrived) {
    pending_.append(bytes);
    size_t at = 0, line_end;
    while ((line_end = pending_.find('\n', at)) != std::string::npos) {
      std::string_view line(pending_.data() + at, line_end - at);
      at = line_end + 1;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty()) {  // a blank line ends an event
        if (!has_data_) continue;
        bool more = on_event_(data_, arrived);
        data_.clear();
        has_data_ = false;
        if (!more) return false;
      } else if (line.starts_with("data:")) {
        line.remove_prefix(5);
        if (line.starts_with(' ')) line.remove_prefix(1);
        if (has_data_) data_ += '\n';
        data_ += line;
        has_data_ = true;
      }  // event:, id:, retry: and comments carry nothing this client uses
    }
    pending_.erase(0, at);
    return true;
  }

 private:
  const SseHandler& on_event_;
  std::string pending_;  // bytes after the last complete line
  std::string data_;     // the current event's data so far
  bool has_data_ = false;
};

Expected<HttpReply> exchange(const HttpEndpoint& server, const std::string& method, const std::string& path,
                             const std::string& body, const SseHandler* on_event, int timeout_seconds) {
  ClientConnection connection(server, std::chrono::seconds(timeout_seconds));
  LOCKSTEP_TRY(connection.open());
  LOCKSTEP_TRY(connection.send(http_request_text(server, method, path, body)));
  HttpReply reply;
  LOCKSTEP_TRY(connection.read_head(reply));
  if (method == "HEAD") return reply;  // a HEAD reply has no body, whatever its Content-Length says
  const bool events = on_event && reply.status / 100 == 2 &&
                      lower(reply.header("content-type")).starts_with("text/event-stream");
  if (events) {
    SseSplitter splitter(*on_event);
    LOCKSTEP_TRY(connection.read_body(reply, [&](std::string_view bytes, Clock::time_point arrived) {
      return splitter.push(bytes, arrived);
    }));
  } else {
    LOCKSTEP_TRY(connection.read_body(reply, [&](std::string_view bytes, Clock::time_point) {
      reply.body.append(bytes);
      return true;
    }));
  }
  return reply;
}

}  // namespace

ClientConnection::ClientConnection(HttpEndpoint server, std::chrono::milliseconds timeout)
    : server_(std::move(server)),
      where_(server_.host + ":" + std::to_string(server_.port)),
      timeout_ms_(int(timeout.count())) {}

ClientConnection::~ClientConnection() { hang_up(); }

void ClientConnection::hang_up() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

void ClientConnection::finish_sending() {
  if (fd_ >= 0) shutdown(fd_, SHUT_WR);
}

Status ClientConnection::open() {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(uint16_t(server_.port));
  const std::string host = server_.host == "localhost" ? "127.0.0.1" : server_.host;
  if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1)
    return make_error("'" + server_.host + "' is not an IPv4 address");
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return make_error(std::string("socket: ") + std::strerror(errno));
  timeval timeout = {timeout_ms_ / 1000, (timeout_ms_ % 1000) * 1000};
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));  // bounds connect() too
  if (connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    const std::string why = errno == EINPROGRESS ? std::string("timed out") : std::strerror(errno);
    hang_up();
    return make_error("cannot connect to " + where_ + ": " + why);
  }
  return Status::success();
}

Status ClientConnection::send(std::string_view data) {
  if (fd_ < 0) return make_error("not connected to " + where_);
  while (!data.empty()) {
    ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return make_error("cannot send to " + where_ + ": " + std::strerror(errno));
    data.remove_prefix(size_t(n));
  }
  return Status::success();
}

Expected<bool> ClientConnection::fill() {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN, 0};
  int ready;
  while ((ready = poll(&p, 1, timeout_ms_)) < 0 && errno == EINTR) {
  }
  if (ready == 0) return make_error(where_ + " sent nothing for " + std::to_string(timeout_ms_) + " ms");
  char scratch[16 << 10];
  ssize_t n;
  while ((n = recv(fd_, scratch, sizeof(scratch), 0)) < 0 && errno == EINTR) {
  }
  if (n < 0) return make_error("cannot read from " + where_ + ": " + std::strerror(errno));
  arrived_ = Clock::now();
  buffer_.append(scratch, size_t(n));
  return n > 0;
}

Status ClientConnection::fill_or_fail() {
  Expected<bool> more = fill();
  if (!more.ok()) return more.error();
  if (!*more) return make_error(where_ + " closed the connection mid-reply");
  return Status::success();
}

Status ClientConnection::read_head(HttpReply& reply) {
  size_t head_end;
  while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos) LOCKSTEP_TRY(fill_or_fail());
  std::string_view head(buffer_.data(), head_end);
  if (!head.starts_with("HTTP/1.") || head.size() < 12) return make_error(where_ + " did not answer with HTTP/1.x");
  std::from_chars(head.data() + 9, head.data() + 12, reply.status);
  size_t line_end = head.find("\r\n");
  while (line_end != std::string_view::npos) {
    size_t start = line_end + 2;
    line_end = head.find("\r\n", start);
    std::string_view line = head.substr(start, line_end == std::string_view::npos ? line_end : line_end - start);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    reply.headers[lower(std::string(line.substr(0, colon)))] = std::string(value);
  }
  buffer_.erase(0, head_end + 4);
  return Status::success();
}

Status ClientConnection::read_body(const HttpReply& reply, const BodySink& sink) {
  if (reply.status < 200 || reply.status == 204 || reply.status == 304) return Status::success();
  if (lower(reply.header("transfer-encoding")).find("chunked") != std::string::npos) {
    while (true) {
      size_t line_end;
      while ((line_end = buffer_.find("\r\n")) == std::string::npos) LOCKSTEP_TRY(fill_or_fail());
      size_t size = 0;
      auto parsed = std::from_chars(buffer_.data(), buffer_.data() + line_end, size, 16);
      if (parsed.ec != std::errc()) return make_error(where_ + " sent a malformed chunk size");
      if (size == 0) {  // the last chunk, then trailer lines up to an empty one
        buffer_.erase(0, line_end + 2);
        while (true) {
          while ((line_end = buffer_.find("\r\n")) == std::string::npos) LOCKSTEP_TRY(fill_or_fail());
          buffer_.erase(0, line_end + 2);
          if (line_end == 0) return Status::success();
        }
      }
      while (buffer_.size() < line_end + 2 + size + 2) LOCKSTEP_TRY(fill_or_fail());
      bool more = sink(std::string_view(buffer_).substr(line_end + 2, size), arrived_);
      buffer_.erase(0, line_end + 2 + size + 2);
      if (!more) return Status::success();
    }
  }
  if (!reply.header("content-length").empty()) {
    const std::string& text = reply.header("content-length");
    size_t left = 0;
    if (std::from_chars(text.data(), text.data() + text.size(), left).ec != std::errc())
      return make_error(where_ + " sent a malformed Content-Length");
    while (left > 0) {
      if (buffer_.empty()) LOCKSTEP_TRY(fill_or_fail());
      size_t take = std::min(left, buffer_.size());
      bool more = sink(std::string_view(buffer_).substr(0, take), arrived_);
      buffer_.erase(0, take);
      left -= take;
      if (!more) return Status::success();
    }
    return Status::success();
  }
  while (true) {  // no framing: the body runs to the close
    if (!buffer_.empty() && !sink(buffer_, arrived_)) return Status::success();
    buffer_.clear();
    Expected<bool> more = fill();
    if (!more.ok()) return more.error();
    if (!*more) return Status::success();
  }
}

Expected<HttpReply> ClientConnection::read_reply() {
  HttpReply reply;
  LOCKSTEP_TRY(read_head(reply));
  LOCKSTEP_TRY(read_body(reply, [&](std::string_view bytes, Clock::time_point) {
    reply.body.append(bytes);
    return true;
  }));
  return reply;
}

std::string ClientConnection::read_until(std::string_view needle) {
  while (buffer_.find(needle) == std::string::npos) {
    Expected<bool> more = fill();
    if (!more.ok() || !*more) break;
  }
  return std::exchange(buffer_, std::string());
}

std::string ClientConnection::read_until_close() {
  while (true) {
    Expected<bool> more = fill();
    if (!more.ok() || !*more) break;
  }
  return std::exchange(buffer_, std::string());
}

bool ClientConnection::closed_by_server() {
  if (!buffer_.empty()) return false;
  Expected<bool> more = fill();
  return more.ok() && !*more && buffer_.empty();
}

std::string http_request_text(const HttpEndpoint& server, const std::string& method, const std::string& path,
                              const std::string& body) {
  std::string text = method + " " + path + " HTTP/1.1\r\nHost: " + server.host + ":" + std::to_string(server.port) +
                     "\r\nConnection: close\r\n";
  if (!server.api_key.empty()) text += "Authorization: Bearer " + server.api_key + "\r\n";
  if (!body.empty() || method == "POST" || method == "PUT")
    text += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  return text + "\r\n" + body;
}

std::string HttpReply::header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

Expected<HttpEndpoint> parse_http_url(const std::string& url) {
  auto bad = [&](const std::string& why) {
    return make_error("'" + url + "' is not a URL of the form http://HOST:PORT (" + why + ")");
  };
  std::string_view rest(url);
  if (!rest.starts_with("http://")) return bad(rest.find("://") != std::string_view::npos ? "only http" : "no http://");
  rest.remove_prefix(7);
  if (rest.ends_with('/')) rest.remove_suffix(1);
  size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos) return bad("no port");
  HttpEndpoint endpoint;
  endpoint.host = std::string(rest.substr(0, colon));
  std::string_view port = rest.substr(colon + 1);
  auto parsed = std::from_chars(port.data(), port.data() + port.size(), endpoint.port);
  if (port.empty() || parsed.ec != std::errc() || parsed.ptr != port.data() + port.size() || endpoint.port < 1 ||
      endpoint.port > 65535)
    return bad("bad port");
  in_addr ignored;
  if (endpoint.host != "localhost" && inet_pton(AF_INET, endpoint.host.c_str(), &ignored) != 1)
    return bad("host must be an IPv4 address or localhost");
  return endpoint;
}

Expected<HttpReply> http_request(const HttpEndpoint& server, const std::string& method, const std::string& path,
                                 const std::string& body, int timeout_seconds) {
  return exchange(server, method, path, body, nullptr, timeout_seconds);
}

Expected<HttpReply> http_stream(const HttpEndpoint& server, const std::string& method, const std::string& path,
                                const std::string& body, const SseHandler& on_event, int timeout_seconds) {
  return exchange(server, method, path, body, &on_event, timeout_seconds);
}

std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> payloads;
  SseHandler collect = [&](std::string_view data, Clock::time_point) {
    payloads.emplace_back(data);
    return true;
  };
  SseSplitter splitter(collect);
  (void)splitter.push(body, Clock::now());
  return payloads;
}

}  // namespace lockstep
