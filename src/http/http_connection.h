// One client connection, as the server's event loop (http_server.cpp) and the thread that runs
// its handler see it. The loop reads a request's bytes without blocking (advance() says how far
// the request has come); a complete request goes to a thread of its own (serve_request), and
// the connection comes back to the loop when the response is out. A slow client holds no
// thread while it sends.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "http/http_handler.h"
#include "http/http_parser.h"

namespace lockstep {

using HttpClock = std::chrono::steady_clock;

struct Connection {
  int fd = -1;
  std::string buffer;        // received and not yet used: a partial or pipelined request
  HttpClock::time_point since;  // idle since (no request byte yet), or the request's first byte
  bool reading = false;      // a byte of the next request (not just blank lines) has arrived
  bool peer_done = false;    // the client shut its sending side (a read returned 0)
  bool continue_sent = false;
  bool head_parsed = false;
  RequestHead head;          // the current request's head, once head_parsed
  size_t body_end = 0;       // buffer offset where the current request ends, once head_parsed
  // After an error response: the loop discards what the client still sends until it closes or
  // linger_until passes, so that the close does not reset the connection under the response.
  bool lingering = false;
  HttpClock::time_point linger_until;
  size_t linger_budget = 0;
};

// How far the request at the start of a connection's buffer has come.
struct RequestProgress {
  enum class Kind {
    kNeedMore,      // read more bytes
    kSendContinue,  // answer "100 Continue" (the client waits for it), then read more
    kComplete,      // the request is whole: take_request() it
    kRefused,       // answer error_status and close
  } kind = Kind::kNeedMore;
  int error_status = 0;
  std::string error_message;
};

// Parses what has arrived; marks the connection `reading` at its first request byte (the
// caller sets `since` then). Pure over the buffer: no sockets.
RequestProgress advance(Connection& connection, const HttpSettings& settings);

// The complete request (after advance() said kComplete): removes its bytes from the buffer
// and readies the connection for the next request.
RequestHead take_request(Connection& connection);

// What became of the connection after serve_request.
enum class AfterResponse {
  kKeep,          // a complete keep-alive response: wait for the next request
  kClosePromptly, // a complete response that closes the connection
  kCloseNow,      // the response failed or was cut short
};

// Runs the handler for `head` on the calling thread and writes its response (handler
// exceptions become 500s with `error_headers`; nothing escapes). The connection's socket is
// blocking here, with a send timeout.
AfterResponse serve_request(Connection& connection, RequestHead head, const HttpHandler& handler,
                            const std::atomic<bool>& stopping,
                            const std::map<std::string, std::string>& error_headers = {});

// The status line, headers and JSON body of an error the server answers itself.
std::string error_response(int status, const std::string& message, bool keep_alive,
                           const std::map<std::string, std::string>& extra = {});

}  // namespace lockstep
