// The HTTP request reader on arbitrary bytes from a client: parse_request_head, body_framing and
// wants_keep_alive on the bytes as one buffer, then a Connection read by advance() and
// take_request() as the server's event loop reads it. The bytes arrive whole, in two parts cut
// where the input's last byte says, and (for short inputs) one byte at a time: TCP may split a
// request anywhere, so every way must give the same requests and the same refusal.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "http/http_connection.h"
#include "http/http_parser.h"

namespace lockstep::fuzz {
namespace {

// Small limits, so that inputs reach them.
HttpSettings small_limits() {
  HttpSettings settings;
  settings.max_header_bytes = 2048;
  settings.max_body_bytes = 4096;
  return settings;
}

// A head parsed from the start of `buffered` bytes.
void check_head(const RequestHead& head, size_t buffered, const HttpSettings& settings) {
  if (head.head_bytes == 0 || head.head_bytes > buffered || head.head_bytes > settings.max_header_bytes)
    fail("a complete head claims " + std::to_string(head.head_bytes) + " bytes of a " +
         std::to_string(buffered) + "-byte buffer");
  if (head.minor_version != 0 && head.minor_version != 1) fail("minor version " + std::to_string(head.minor_version));
  if (head.request.method.empty() || head.request.path.empty()) fail("a complete head without method or path");
  for (const auto& [name, value] : head.request.headers)
    for (char c : name)
      if (std::tolower(static_cast<unsigned char>(c)) != c) fail("header name '" + name + "' is not lower-cased");
  BodyFraming framing = body_framing(head, settings.max_body_bytes);
  if (framing.error_status == 0 && framing.content_length > settings.max_body_bytes)
    fail("a body over the limit is accepted");
  if (framing.error_status != 0 && framing.error_message.empty()) fail("a refusal without a message");
  (void)wants_keep_alive(head);
  (void)expects_continue(head);
}

// What a connection made of the bytes: each request taken, then a refusal or what is pending.
std::string read_connection(const std::vector<std::string_view>& arrivals, const HttpSettings& settings) {
  Connection connection;
  std::string outcome;
  for (std::string_view arrival : arrivals) {
    connection.buffer += arrival;
    while (true) {
      RequestProgress progress = advance(connection, settings);
      using Kind = RequestProgress::Kind;
      if (progress.kind == Kind::kRefused) {
        if (progress.error_status < 400 || progress.error_status > 599) fail("refused with a non-error status");
        return outcome + "refused " + std::to_string(progress.error_status) + " " + progress.error_message + "\n";
      }
      if (progress.kind == Kind::kSendContinue) {
        if (connection.continue_sent) fail("100 Continue asked for twice");
        connection.continue_sent = true;  // as the loop does once it is sent
        break;
      }
      if (progress.kind == Kind::kNeedMore) break;
      const size_t buffered = connection.buffer.size();
      check_head(connection.head, buffered, settings);
      RequestHead head = take_request(connection);
      if (connection.buffer.size() != buffered - head.head_bytes - head.request.body.size())
        fail("take_request removed the wrong number of bytes");
      if (connection.head_parsed || connection.body_end != 0 || connection.continue_sent)
        fail("take_request left the last request's state behind");
      const HttpRequest& request = head.request;
      outcome += request.method + " " + request.path + "?" + request.query + " 1." +
                 std::to_string(head.minor_version) + (wants_keep_alive(head) ? " keep" : " close") + "\n";
      for (const auto& [name, value] : request.headers) outcome += name + ": " + value + "\n";
      outcome += "body " + request.body + "\n";
    }
  }
  return outcome + "pending " + std::to_string(connection.buffer.size()) + "\n";
}

}  // namespace
}  // namespace lockstep::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep;
  using namespace lockstep::fuzz;
  if (size > kMaxInputBytes) return 0;
  const std::string_view bytes = as_text(data, size);
  const HttpSettings settings = small_limits();

  RequestHead head;
  HeadParse parsed = parse_request_head(bytes, settings.max_header_bytes, head);
  RequestHead again;
  if (parse_request_head(bytes, settings.max_header_bytes, again) != parsed) fail("parse_request_head is not pure");
  if (parsed == HeadParse::kComplete) check_head(head, size, settings);

  const std::string whole = read_connection({bytes}, settings);
  const size_t cut = size == 0 ? 0 : size_t(data[size - 1]) * size / 256;
  if (read_connection({bytes.substr(0, cut), bytes.substr(cut)}, settings) != whole)
    fail("the bytes cut at " + std::to_string(cut) + " read differently from the bytes whole");
  if (size <= 1024) {
    std::vector<std::string_view> one_by_one;
    for (size_t i = 0; i < size; ++i) one_by_one.push_back(bytes.substr(i, 1));
    if (read_connection(one_by_one, settings) != whole) fail("the bytes one at a time read differently");
  }
  return 0;
}
