// The HttpResponder of one request on one connection. The connection loop asks it, after the
// handler returns, whether a complete response went out and the connection may be reused.
#pragma once

#include <atomic>
#include <map>
#include <string>
#include <string_view>

#include "http/http_parser.h"
#include "http/http_response.h"
#include "http/http_handler.h"

namespace lockstep {

class SocketResponder final : public HttpResponder {
 public:
  enum class State { kNotStarted, kStreaming, kDone };

  // Writes to `fd` (not owned). The response keeps the connection open when the request asked
  // for it (`keep_alive`) and `stopping` was not yet set when the response head was written.
  // HTTP/1.0 requests get streams without chunking, ended by closing the connection; HEAD
  // requests get the head alone. `peer_done`: the client already shut its sending side.
  SocketResponder(int fd, const RequestHead& head, bool keep_alive,
                  const std::atomic<bool>& stopping, bool peer_done = false);

  // Only the first of send() and start_stream() answers; later calls are ignored, as are
  // write_chunk() and end_stream() outside a stream.
  void send(int status, const std::string& content_type, const std::string& body,
            const std::map<std::string, std::string>& headers = {}) override;
  // Event streams ("text/event-stream") also get "Cache-Control: no-cache" unless `headers`
  // set Cache-Control.
  void start_stream(int status, const std::string& content_type,
                    const std::map<std::string, std::string>& headers = {}) override;
  [[nodiscard]] bool write_chunk(const std::string& data) override;
  void end_stream() override;
  // Gone: a write failed, or the connection was reset or closed. When the client has only shut
  // its sending side, the answer needs a probe: an HTTP/1.1 client that has not had the
  // response head yet gets an interim "100 Continue" (clients must accept one), a stream gets
  // its probe chunk; a client that has closed altogether answers the probe with a reset, seen
  // by a later call. An HTTP/1.0 client that shut its side before its response counts as gone.
  bool client_gone() override;
  void set_probe_chunk(std::string chunk) override { probe_chunk_ = std::move(chunk); }

  State state() const { return state_; }
  // True when a complete response went out with "Connection: keep-alive" and no write failed.
  bool connection_reusable() const;
  // True when the whole response was written (the connection may still have to close).
  bool response_complete() const { return state_ == State::kDone && !write_failed_; }

 private:
  bool write(std::string_view bytes);

  int fd_;
  bool head_only_;        // a HEAD request: no body bytes
  bool chunked_allowed_;  // HTTP/1.1
  bool keep_alive_requested_;
  const std::atomic<bool>& stopping_;

  State state_ = State::kNotStarted;
  BodyMode mode_ = BodyMode::kLength;
  bool keep_alive_ = false;  // what the response head said
  bool write_failed_ = false;
  bool peer_done_;        // the client shut its sending side
  bool probed_ = false;   // a probe went out after peer_done_
  std::string probe_chunk_;
};

}  // namespace lockstep
