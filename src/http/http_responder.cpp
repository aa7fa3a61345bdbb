#include "http/http_responder.h"

#include <cctype>

#include "http/http_socket.h"

namespace lockstep {
namespace {

bool has_header(const std::map<std::string, std::string>& headers, std::string_view name) {
  for (const auto& entry : headers) {
    const std::string& key = entry.first;
    if (key.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < key.size() && same; ++i)
      same = std::tolower(static_cast<unsigned char>(key[i])) == name[i];
    if (same) return true;
  }
  return false;
}

}  // namespace

SocketResponder::SocketResponder(int fd, const RequestHead& head, bool keep_alive,
                                 const std::atomic<bool>& stopping, bool peer_done)
    : fd_(fd),
      head_only_(head.request.method == "HEAD"),
      chunked_allowed_(head.minor_version >= 1),
      keep_alive_requested_(keep_alive),
      stopping_(stopping),
      peer_done_(peer_done) {}

void SocketResponder::send(int status, const std::string& content_type, const std::string& body,
                           const std::map<std::string, std::string>& headers) {
  if (state_ != State::kNotStarted) return;
  state_ = State::kDone;
  mode_ = BodyMode::kLength;
  keep_alive_ = keep_alive_requested_ && !stopping_.load() && !peer_done_;
  ResponseHead head{status, content_type, BodyMode::kLength, body.size(), keep_alive_};
  std::string bytes = format_response_head(head, headers);
  if (!head_only_) bytes += body;
  write(bytes);
}

void SocketResponder::start_stream(int status, const std::string& content_type,
                                   const std::map<std::string, std::string>& headers) {
  if (state_ != State::kNotStarted) return;
  state_ = State::kStreaming;
  mode_ = chunked_allowed_ ? BodyMode::kChunked : BodyMode::kUntilClose;
  keep_alive_ = mode_ == BodyMode::kChunked && keep_alive_requested_ && !stopping_.load() && !peer_done_;
  ResponseHead head{status, content_type, mode_, 0, keep_alive_};
  bool event_stream = content_type.rfind("text/event-stream", 0) == 0;
  if (event_stream && !has_header(headers, "cache-control")) {
    std::map<std::string, std::string> with_cache = headers;
    with_cache["Cache-Control"] = "no-cache";
    write(format_response_head(head, with_cache));
  } else {
    write(format_response_head(head, headers));
  }
}

bool SocketResponder::write_chunk(const std::string& data) {
  if (state_ != State::kStreaming || write_failed_) return false;
  if (data.empty() || head_only_) return true;
  return write(mode_ == BodyMode::kChunked ? format_chunk(data) : data);
}

void SocketResponder::end_stream() {
  if (state_ != State::kStreaming) return;
  state_ = State::kDone;
  if (mode_ == BodyMode::kChunked && !head_only_) write(kLastChunk);
}

bool SocketResponder::client_gone() {
  if (write_failed_) return true;
  PeerState peer = peer_state(fd_);
  if (peer == PeerState::kGone) return true;
  if (peer == PeerState::kShutWriting) peer_done_ = true;
  if (!peer_done_ || probed_) return false;
  probed_ = true;
  if (state_ == State::kNotStarted) {
    if (!chunked_allowed_) return true;  // HTTP/1.0: no interim responses
    if (!send_all(fd_, "HTTP/1.1 100 Continue\r\n\r\n")) write_failed_ = true;
  } else if (state_ == State::kStreaming && !probe_chunk_.empty()) {
    (void)write_chunk(probe_chunk_);
  }
  return write_failed_;
}

bool SocketResponder::connection_reusable() const {
  return response_complete() && keep_alive_;
}

bool SocketResponder::write(std::string_view bytes) {
  if (write_failed_) return false;
  if (!send_all(fd_, bytes)) write_failed_ = true;
  return !write_failed_;
}

}  // namespace lockstep
