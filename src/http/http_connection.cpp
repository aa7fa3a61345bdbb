#include "http/http_connection.h"

#include <exception>

#include "http/http_responder.h"
#include "http/http_response.h"

namespace lockstep {

std::string error_response(int status, const std::string& message, bool keep_alive,
                           const std::map<std::string, std::string>& extra) {
  std::string body = json_error_body(message, error_type_for(status));
  ResponseHead head{status, "application/json", BodyMode::kLength, body.size(), keep_alive};
  return format_response_head(head, extra) + body;
}

RequestProgress advance(Connection& connection, const HttpSettings& settings) {
  using Kind = RequestProgress::Kind;
  if (!connection.reading && connection.buffer.find_first_not_of("\r\n") != std::string::npos)
    connection.reading = true;
  if (!connection.head_parsed) {
    const size_t max_header_bytes = settings.max_header_bytes;
    HeadParse parsed = parse_request_head(connection.buffer, max_header_bytes, connection.head);
    if (parsed == HeadParse::kIncomplete) return {};
    if (parsed == HeadParse::kTooLarge)
      return {Kind::kRefused, 431,
              "request line and headers are over the limit of " + std::to_string(max_header_bytes) + " bytes"};
    if (parsed == HeadParse::kMalformed) return {Kind::kRefused, 400, "malformed request line or header"};
    BodyFraming framing = body_framing(connection.head, settings.max_body_bytes);
    if (framing.error_status != 0) return {Kind::kRefused, framing.error_status, framing.error_message};
    connection.head_parsed = true;
    connection.body_end = connection.head.head_bytes + framing.content_length;
  }
  if (connection.buffer.size() >= connection.body_end) return {Kind::kComplete, 0, ""};
  if (!connection.continue_sent && expects_continue(connection.head)) return {Kind::kSendContinue, 0, ""};
  return {};
}

RequestHead take_request(Connection& connection) {
  RequestHead head = std::move(connection.head);
  const size_t body_start = head.head_bytes;
  head.request.body = connection.buffer.substr(body_start, connection.body_end - body_start);
  connection.buffer.erase(0, connection.body_end);
  connection.head = RequestHead{};
  connection.head_parsed = false;
  connection.continue_sent = false;
  connection.reading = false;
  connection.body_end = 0;
  return head;
}

AfterResponse serve_request(Connection& connection, RequestHead head, const HttpHandler& handler,
                            const std::atomic<bool>& stopping, const std::map<std::string, std::string>& error_headers) {
  // A client that shut its sending side gets its response, then the connection closes.
  const bool keep_alive = wants_keep_alive(head) && !connection.peer_done;
  SocketResponder responder(connection.fd, head, keep_alive, stopping, connection.peer_done);
  std::string failure;
  try {
    handler(head.request, responder);
  } catch (const std::exception& e) {
    failure = std::string("internal error: ") + e.what();
  } catch (...) {
    failure = "internal error";
  }
  if (responder.state() == SocketResponder::State::kNotStarted && !responder.client_gone()) {
    if (failure.empty()) failure = "internal error: the handler returned without a response";
    responder.send(500, "application/json", json_error_body(failure, error_type_for(500)), error_headers);
  }
  if (responder.connection_reusable()) return AfterResponse::kKeep;
  return responder.response_complete() ? AfterResponse::kClosePromptly : AfterResponse::kCloseNow;
}

}  // namespace lockstep
