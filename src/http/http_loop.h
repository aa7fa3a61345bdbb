// The server's event loop (epoll), on serve()'s thread: accepts connections, reads every
// request without blocking and under a deadline for the whole request, hands each complete
// request to a thread of its own, and takes the connection back when the response is out.
// Waiting and slow clients cost a buffer, not a thread. It also keeps the connection limit and
// carries out stop(): no new connections, 503 to requests still arriving, and after a grace
// period the connections of requests still in flight are shut.
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "http/http_connection.h"

namespace lockstep {

class ServerLoop {
 public:
  // `listen_fd` is non-blocking and listening; the loop closes it. `stop_fd` becomes readable
  // (and stays so) once `stopping` is set.
  ServerLoop(const HttpSettings& settings, const HttpHandler& handler, int listen_fd, int stop_fd,
             const std::atomic<bool>& stopping);
  ~ServerLoop();
  ServerLoop(const ServerLoop&) = delete;
  ServerLoop& operator=(const ServerLoop&) = delete;

  // Runs until stopped and every connection has closed.
  void run();

 private:
  // A connection whose request runs on `thread`, which owns `connection` until it hands it back.
  struct Handling {
    std::unique_ptr<Connection> connection;
    int fd = -1;
    std::thread thread;
    bool shut = false;  // shut down after the stop grace period
  };
  struct HandedBack {
    std::list<Handling>::iterator handling;
    AfterResponse after;
  };

  void accept_ready();
  // Frees a place at the connection limit: the connection that has waited longest for its
  // request goes. False when every connection has a request in flight.
  bool make_room();
  void watch(std::unique_ptr<Connection> connection);
  void read_ready(int fd);
  // Acts on what the connection's buffer holds: waits, refuses, or starts the handler.
  void process(int fd);
  void start_handler(int fd);
  void take_back();
  // Sends an error response, then lingers (see Connection::lingering).
  void refuse(int fd, int status, const std::string& message, bool busy = false);
  void close_connection(int fd, bool promptly);
  void begin_stop();
  // Times out requests, idle and lingering connections; shuts handlers past the stop grace;
  // sets next_wake_ms_.
  void sweep();
  bool done() const { return stop_begun_ && handling_.empty() && waiting_.empty(); }

  const HttpSettings& settings_;
  const HttpHandler& handler_;
  int listen_fd_;
  const int stop_fd_;
  const std::atomic<bool>& stopping_;
  int epoll_fd_ = -1;
  int back_fd_ = -1;  // an eventfd: a handler thread handed a connection back

  std::unordered_map<int, std::unique_ptr<Connection>> waiting_;  // idle, reading or lingering
  std::list<Handling> handling_;
  bool stop_begun_ = false;
  HttpClock::time_point stop_at_;
  bool accept_paused_ = false;  // out of descriptors: accepting rests for a moment
  HttpClock::time_point accept_resume_at_;
  int next_wake_ms_ = -1;

  std::mutex mutex_;                   // guards handed_back_
  std::vector<HandedBack> handed_back_;
};

}  // namespace lockstep
