// One accepted connection, served on its own thread: reads requests (keep-alive, pipelining,
// "Expect: 100-continue"), calls the handler, and writes its responses until the client
// closes, a request is refused, the connection idles too long, or the server stops.
#pragma once

#include <atomic>

#include "http/http_handler.h"

namespace lockstep {

// What every connection of one server shares; outlives the connections.
struct ConnectionContext {
  const HttpSettings& settings;
  const HttpHandler& handler;
  int stop_fd;                        // becomes readable (and stays so) when the server stops
  const std::atomic<bool>& stopping;  // set before stop_fd is made readable
};

// Serves the connection on `fd` until it ends, then closes `fd`. Handler exceptions become
// 500 responses; nothing escapes. A connection waiting for its next request closes as soon as
// the server stops; one with a request in flight finishes that response (with
// "Connection: close") first.
void serve_connection(int fd, const ConnectionContext& context);

// Answers a connection past max_connections with 503 (Retry-After: 1) and closes it, without
// blocking the accept loop.
void reject_busy_connection(int fd);

}  // namespace lockstep
