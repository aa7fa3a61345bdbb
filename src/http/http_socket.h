// Socket I/O for the server's connections: writes that never raise SIGPIPE, what the peer has
// done, and closes that do not lose the last response.
#pragma once

#include <cstddef>
#include <string_view>

namespace lockstep {

// Writes all of `data`; false when the peer is gone or the socket's send timeout passed.
// Uses MSG_NOSIGNAL, so a closed peer never raises SIGPIPE.
bool send_all(int fd, std::string_view data);

enum class PeerState {
  kThere,        // nothing known against it (bytes waiting to be read count as there)
  kShutWriting,  // end of stream read: the peer shut its sending side or closed altogether
  kGone,         // reset, or both directions closed
};
// What the socket says of its peer, without blocking or consuming anything.
PeerState peer_state(int fd);

// Readies an accepted connection: TCP_NODELAY (streamed tokens go out at once) and a send
// timeout of `send_timeout_seconds` (<= 0: none), so a client that stops reading cannot hold a
// connection thread forever.
void configure_connection(int fd, int send_timeout_seconds);

// Reads and drops what has arrived, at most `budget` bytes (less what it took); false at end of
// stream, on an error, or when the budget is spent.
bool discard_available(int fd, size_t& budget);

// Stops writing, discards bytes that have already arrived (without waiting), and closes.
void close_promptly(int fd);

}  // namespace lockstep
