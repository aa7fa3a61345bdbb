// The server tests' HTTP helpers: the library client (http/http_client.h) aimed at 127.0.0.1,
// with failures as status 0, and a request that can hang up mid-reply.
#pragma once

#include <string>
#include <vector>

#include "http/http_client.h"

namespace lockstep {

// Sends one request to 127.0.0.1:port and reads the whole reply (timeout in seconds); a reply
// with status 0 when the connection failed or timed out.
HttpReply http_request(int port, const std::string& method, const std::string& path, const std::string& body = "",
                       int timeout_seconds = 60);

// The token ids of a completion reply (return_token_ids), streamed or not; empty when it has none.
std::vector<int32_t> reply_ids(const HttpReply& reply, bool stream);

// The value of one series of a /metrics text (a name, with its labels if it has any); NaN where
// the text has no such series.
double metric_value(const std::string& metrics, const std::string& series);

// A request whose reply is read a little at a time; the destructor hangs up.
class OpenRequest {
 public:
  OpenRequest(int port, const std::string& method, const std::string& path, const std::string& body);
  OpenRequest(const OpenRequest&) = delete;
  OpenRequest& operator=(const OpenRequest&) = delete;
  bool connected() const { return connected_; }
  // Reads until `needle` has arrived (or timeout); returns everything read so far.
  std::string read_until(const std::string& needle, int timeout_seconds = 30);
  void hang_up();

 private:
  ClientConnection connection_;  // reads wait at most 200 ms at a time, so read_until keeps its deadline
  bool connected_ = false;
  std::string received_;
};

}  // namespace lockstep
