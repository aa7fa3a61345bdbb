// Blocking socket I/O for the server's connections: waits with timeouts and a wake-up fd,
// writes that never raise SIGPIPE, and closes that do not lose the last response.
#pragma once

#include <string_view>

namespace lockstep {

enum class WaitResult {
  kReadable,  // bytes, end of stream or an error wait on the socket: recv() will not block
  kTimeout,
  kWoken,     // wake_fd became readable (the server is stopping)
};

// Waits until `fd` is readable, `wake_fd` is readable (when >= 0), or `timeout_ms` passes
// (< 0: no limit). A readable wake_fd wins over a readable fd.
WaitResult wait_readable(int fd, int wake_fd, int timeout_ms);

// Writes all of `data`; false when the peer is gone or the socket's send timeout passed.
// Uses MSG_NOSIGNAL, so a closed peer never raises SIGPIPE.
bool send_all(int fd, std::string_view data);

// True when the peer has closed or reset the connection. Does not block and consumes nothing:
// bytes waiting to be read (a pipelined request) mean the peer is still there.
bool peer_closed(int fd);

// Readies an accepted connection: TCP_NODELAY (streamed tokens go out at once) and a send
// timeout of `send_timeout_seconds` (<= 0: none), so a client that stops reading cannot hold a
// connection thread forever.
void configure_connection(int fd, int send_timeout_seconds);

// Closes after a response that left request bytes unread (an error before the body was read):
// stops writing, then discards what the client still sends until it closes, for at most
// `max_wait_ms` and a bounded number of bytes. Closing with unread bytes makes the kernel send
// a reset, which can destroy the response before the client reads it.
void close_lingering(int fd, int max_wait_ms);

// Stops writing, discards bytes that have already arrived (without waiting), and closes.
void close_promptly(int fd);

}  // namespace lockstep
