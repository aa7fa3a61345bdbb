#include "http/http_response.h"

#include <cctype>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace lockstep {
namespace {

bool is_reserved_header(std::string_view name) {
  std::string lowered(name);
  for (char& c : lowered) c = char(std::tolower(static_cast<unsigned char>(c)));
  return lowered == "content-type" || lowered == "content-length" ||
         lowered == "transfer-encoding" || lowered == "connection";
}

bool breaks_framing(std::string_view text) {
  return text.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos;
}

}  // namespace

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "";
  }
}

std::string json_error_body(std::string_view message, std::string_view type) {
  nlohmann::ordered_json error = nlohmann::ordered_json::object();
  error["message"] = std::string(message);
  error["type"] = std::string(type);
  error["param"] = nullptr;  // as the API's own errors have it
  error["code"] = nullptr;
  nlohmann::ordered_json body = nlohmann::ordered_json::object();
  body["error"] = std::move(error);
  // Replace invalid UTF-8 (say, from an exception message) rather than throw.
  return body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string_view error_type_for(int status) {
  if (status == 503) return "server_busy";
  if (status == 500) return "server_error";
  return "invalid_request_error";  // 4xx, and 501 for a request using what is not supported
}

std::string format_response_head(const ResponseHead& head,
                                 const std::map<std::string, std::string>& extra) {
  std::string out = "HTTP/1.1 " + std::to_string(head.status) + " ";
  out += reason_phrase(head.status);
  out += "\r\n";
  if (!head.content_type.empty() && !breaks_framing(head.content_type)) {
    out += "Content-Type: ";
    out += head.content_type;
    out += "\r\n";
  }
  if (head.mode == BodyMode::kLength)
    out += "Content-Length: " + std::to_string(head.content_length) + "\r\n";
  else if (head.mode == BodyMode::kChunked)
    out += "Transfer-Encoding: chunked\r\n";
  out += head.keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const auto& [name, value] : extra) {
    bool bad_name = name.empty() || name.find_first_of(": \t") != std::string::npos;
    if (bad_name || is_reserved_header(name) || breaks_framing(name) || breaks_framing(value))
      continue;
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
  }
  out += "\r\n";
  return out;
}

std::string format_chunk(std::string_view data) {
  char size[32];
  int n = std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  std::string out;
  out.reserve(size_t(n) + data.size() + 2);
  out.append(size, size_t(n));
  out.append(data);
  out += "\r\n";
  return out;
}

}  // namespace lockstep
