#include "http/http_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "http/http_loop.h"

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

}  // namespace

struct HttpServer::Impl {
  HttpSettings settings;
  HttpHandler handler;
  int listen_fd = -1;  // until serve() hands it to the loop
  int stop_fd = -1;    // an eventfd: written once by stop(), never drained
  std::atomic<bool> stopping{false};
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
  int listen_fd = impl.listen_fd;
  impl.listen_fd = -1;  // the loop closes it
  ServerLoop loop(impl.settings, impl.handler, listen_fd, impl.stop_fd, impl.stopping);
  loop.run();
}

void HttpServer::stop() {
  // Only async-signal-safe steps: an atomic store and a write.
  impl_->stopping.store(true);
  uint64_t one = 1;
  ssize_t written = write(impl_->stop_fd, &one, sizeof(one));
  (void)written;  // fails only when the counter would overflow: it is readable anyway
}

}  // namespace lockstep
