#include "http/http_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>
#include <system_error>
#include <thread>

#include "http/http_connection.h"

namespace lockstep {
namespace {

// "host:port", with brackets around an IPv6 host.
std::string address_name(const std::string& host, int port) {
  bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// The port a bound socket got (the one asked for, or the kernel's pick for port 0).
int bound_port(int fd) {
  sockaddr_storage address = {};
  socklen_t length = sizeof(address);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return -1;
  if (address.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
  if (address.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  return -1;
}

// A connection's thread; `finished` is set as its last act, so that serve() can join it.
struct ConnectionThread {
  std::thread thread;
  std::atomic<bool> finished{false};
};

}  // namespace

struct HttpServer::Impl {
  HttpSettings settings;
  HttpHandler handler;
  int listen_fd = -1;
  int stop_fd = -1;  // an eventfd: written once by stop(), never drained
  std::atomic<bool> stopping{false};
  std::atomic<int> open_connections{0};
  std::list<ConnectionThread> connections;  // serve()'s thread only

  void accept_ready(const ConnectionContext& context);
  void start_connection(int fd, const ConnectionContext& context);
  // Joins the threads of connections that have ended.
  void join_finished();
};

HttpServer::HttpServer(HttpSettings settings, HttpHandler handler) : impl_(std::make_unique<Impl>()) {
  impl_->settings = std::move(settings);
  impl_->handler = std::move(handler);
  impl_->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

HttpServer::~HttpServer() {
  if (impl_->listen_fd >= 0) close(impl_->listen_fd);
  if (impl_->stop_fd >= 0) close(impl_->stop_fd);
}

Status HttpServer::listen() {
  const HttpSettings& settings = impl_->settings;
  std::string where = "cannot listen on " + address_name(settings.host, settings.port) + ": ";
  if (impl_->listen_fd >= 0) return make_error(where + "already listening");
  if (impl_->stop_fd < 0) return make_error(where + "eventfd: " + std::strerror(errno));
  if (settings.port < 0 || settings.port > 65535) return make_error(where + "port out of range");

  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* addresses = nullptr;
  std::string port_text = std::to_string(settings.port);
  const char* host = settings.host.empty() ? nullptr : settings.host.c_str();
  if (int rc = getaddrinfo(host, port_text.c_str(), &hints, &addresses); rc != 0)
    return make_error(where + gai_strerror(rc));

  std::string failure = "no address";
  for (addrinfo* address = addresses; address != nullptr; address = address->ai_next) {
    int fd = socket(address->ai_family, address->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    address->ai_protocol);
    if (fd < 0) {
      failure = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, address->ai_addr, address->ai_addrlen) != 0) {
      failure = std::strerror(errno);
      close(fd);
      continue;
    }
    if (::listen(fd, SOMAXCONN) != 0) {
      failure = std::string("listen: ") + std::strerror(errno);
      close(fd);
      continue;
    }
    impl_->listen_fd = fd;
    break;
  }
  freeaddrinfo(addresses);
  if (impl_->listen_fd < 0) return make_error(where + failure);
  port_ = bound_port(impl_->listen_fd);
  return Status::success();
}

void HttpServer::serve() {
  Impl& impl = *impl_;
  if (impl.listen_fd < 0) return;
  ConnectionContext context{impl.settings, impl.handler, impl.stop_fd, impl.stopping};
  pollfd fds[2] = {{impl.listen_fd, POLLIN, 0}, {impl.stop_fd, POLLIN, 0}};
  while (!impl.stopping.load()) {
    int n = poll(fds, 2, -1);
    if (n < 0) {
      // Out of memory or the like: wait rather than spin, then try again.
      if (errno != EINTR) poll(nullptr, 0, 100);
      continue;
    }
    if (fds[1].revents != 0) break;
    if (fds[0].revents != 0) impl.accept_ready(context);
    impl.join_finished();
  }
  // Refuse new connections at once rather than leave them queued.
  close(impl.listen_fd);
  impl.listen_fd = -1;
  for (ConnectionThread& connection : impl.connections) connection.thread.join();
  impl.connections.clear();
}

void HttpServer::stop() {
  // Only async-signal-safe steps: an atomic store and a write.
  impl_->stopping.store(true);
  uint64_t one = 1;
  ssize_t written = write(impl_->stop_fd, &one, sizeof(one));
  (void)written;  // fails only when the counter would overflow: it is readable anyway
}

void HttpServer::Impl::accept_ready(const ConnectionContext& context) {
  while (true) {
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        poll(nullptr, 0, 50);  // out of descriptors: give connections time to close
      return;                  // EAGAIN: nothing more to accept
    }
    if (open_connections.load() >= settings.max_connections) {
      reject_busy_connection(fd);
      continue;
    }
    start_connection(fd, context);
  }
}

void HttpServer::Impl::start_connection(int fd, const ConnectionContext& context) {
  ConnectionThread& connection = connections.emplace_back();
  open_connections.fetch_add(1);
  try {
    connection.thread = std::thread([this, fd, &context, &connection] {
      serve_connection(fd, context);
      open_connections.fetch_sub(1);
      connection.finished.store(true);
    });
  } catch (const std::system_error&) {
    // No thread to be had: answer as if at the limit.
    open_connections.fetch_sub(1);
    connections.pop_back();
    reject_busy_connection(fd);
  }
}

void HttpServer::Impl::join_finished() {
  for (auto it = connections.begin(); it != connections.end();) {
    if (it->finished.load()) {
      it->thread.join();
      it = connections.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace lockstep
