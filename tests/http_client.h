// A small blocking HTTP/1.1 client for the server tests: one request per connection, with
// Content-Length or chunked replies, and a way to read a stream piece by piece and hang up.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace lockstep {

struct HttpReply {
  int status = 0;                              // 0: no reply (connection failed or timed out)
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;                            // de-chunked
};

// Sends one request to 127.0.0.1:port and reads the whole reply (timeout in seconds).
HttpReply http_request(int port, const std::string& method, const std::string& path, const std::string& body = "",
                       int timeout_seconds = 60);

// The "data: ..." payloads of a server-sent event stream, in order.
std::vector<std::string> sse_payloads(const std::string& body);

// A request whose reply is read a little at a time; the destructor hangs up.
class OpenRequest {
 public:
  OpenRequest(int port, const std::string& method, const std::string& path, const std::string& body);
  ~OpenRequest();
  OpenRequest(const OpenRequest&) = delete;
  OpenRequest& operator=(const OpenRequest&) = delete;
  bool connected() const { return fd_ >= 0; }
  // Reads until `needle` has arrived (or timeout); returns everything read so far.
  std::string read_until(const std::string& needle, int timeout_seconds = 30);
  void hang_up();

 private:
  int fd_ = -1;
  std::string received_;
};

}  // namespace lockstep
