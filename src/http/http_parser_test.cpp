#include "http/http_parser.h"

#include <gtest/gtest.h>

namespace lockstep {
namespace {

constexpr size_t kLimit = 1024;

RequestHead parse_ok(std::string_view text) {
  RequestHead head;
  EXPECT_EQ(parse_request_head(text, kLimit, head), HeadParse::kComplete) << text;
  return head;
}

HeadParse parse(std::string_view text, size_t limit = kLimit) {
  RequestHead head;
  return parse_request_head(text, limit, head);
}

TEST(HttpParser, ReadsRequestLineAndHeaders) {
  std::string text =
      "POST /v1/completions?stream=1&x=%20 HTTP/1.1\r\nHost: localhost\r\n"
      "Content-Type:application/json  \r\nX-Mixed-CASE: \t a b \r\n\r\nBODY";
  RequestHead head = parse_ok(text);
  EXPECT_EQ(head.request.method, "POST");
  EXPECT_EQ(head.request.path, "/v1/completions");
  EXPECT_EQ(head.request.query, "stream=1&x=%20");
  EXPECT_EQ(head.minor_version, 1);
  EXPECT_EQ(head.head_bytes, text.size() - 4);
  EXPECT_EQ(head.request.headers.at("host"), "localhost");
  EXPECT_EQ(head.request.headers.at("content-type"), "application/json");
  EXPECT_EQ(head.request.headers.at("x-mixed-case"), "a b");
  EXPECT_TRUE(head.request.body.empty());
}

TEST(HttpParser, IncompleteUntilTheBlankLine) {
  std::string text = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
  for (size_t n = 0; n < text.size(); ++n)
    EXPECT_EQ(parse(text.substr(0, n)), HeadParse::kIncomplete) << n;
  EXPECT_EQ(parse(text), HeadParse::kComplete);
}

TEST(HttpParser, SkipsLeadingEmptyLinesAndAcceptsBareLineFeeds) {
  RequestHead head = parse_ok("\r\n\nGET /a HTTP/1.0\nAccept: */*\n\nnext");
  EXPECT_EQ(head.request.path, "/a");
  EXPECT_EQ(head.minor_version, 0);
  EXPECT_EQ(head.request.headers.at("accept"), "*/*");
  EXPECT_EQ(head.head_bytes, std::string_view("\r\n\nGET /a HTTP/1.0\nAccept: */*\n\n").size());
}

TEST(HttpParser, JoinsRepeatedHeaders) {
  RequestHead head = parse_ok("GET / HTTP/1.1\r\nX-A: 1\r\nx-a: 2\r\n\r\n");
  EXPECT_EQ(head.request.headers.at("x-a"), "1, 2");
}

TEST(HttpParser, AbsoluteFormKeepsPathAndQuery) {
  EXPECT_EQ(parse_ok("GET http://host:8/p/q?x=1 HTTP/1.1\r\n\r\n").request.path, "/p/q");
  EXPECT_EQ(parse_ok("GET http://host:8/p/q?x=1 HTTP/1.1\r\n\r\n").request.query, "x=1");
  EXPECT_EQ(parse_ok("GET HTTPS://host HTTP/1.1\r\n\r\n").request.path, "/");
  EXPECT_EQ(parse_ok("OPTIONS * HTTP/1.1\r\n\r\n").request.path, "*");
}

TEST(HttpParser, LaterMinorVersionsAreAnsweredAsHttp11) {
  EXPECT_EQ(parse_ok("GET / HTTP/1.7\r\n\r\n").minor_version, 1);
}

TEST(HttpParser, RejectsMalformedHeads) {
  const char* bad[] = {
      "HELLO\r\n\r\n",
      "GET /\r\n\r\n",
      "GET / HTTP/2.0\r\n\r\n",
      "GET / HTTP/1.1 extra\r\n\r\n",
      "GET  / HTTP/1.1\r\n\r\n",
      "GET / http/1.1\r\n\r\n",
      "GET / HTTP/1.x\r\n\r\n",
      "G(T / HTTP/1.1\r\n\r\n",
      "GET nopath HTTP/1.1\r\n\r\n",
      "GET * HTTP/1.1\r\n\r\n",
      "GET /a\x01 HTTP/1.1\r\n\r\n",
      "GET / HTTP/1.1\r\nNo-Colon\r\n\r\n",
      "GET / HTTP/1.1\r\nSpace : before colon\r\n\r\n",
      "GET / HTTP/1.1\r\n: empty name\r\n\r\n",
      "GET / HTTP/1.1\r\nA: 1\r\n folded\r\n\r\n",
      "GET / HTTP/1.1\r\nA: bad\x01value\r\n\r\n",
      "GET / HTTP/1.1\r\nA: bare\rcr\r\n\r\n",
  };
  for (const char* text : bad) EXPECT_EQ(parse(text), HeadParse::kMalformed) << text;
}

TEST(HttpParser, HeadsOverTheLimitAreTooLarge) {
  std::string head = "GET / HTTP/1.1\r\nX: " + std::string(100, 'a') + "\r\n\r\n";
  EXPECT_EQ(parse(head, head.size()), HeadParse::kComplete);
  EXPECT_EQ(parse(head, head.size() - 1), HeadParse::kTooLarge);
  // Without its blank line yet, but already past the limit.
  EXPECT_EQ(parse(head.substr(0, 60), 50), HeadParse::kTooLarge);
  EXPECT_EQ(parse(head.substr(0, 50), 50), HeadParse::kIncomplete);
  EXPECT_EQ(parse(std::string(100, '\n'), 50), HeadParse::kTooLarge);
}

BodyFraming framing_of(const std::string& head_text, size_t max_body = 100) {
  return body_framing(parse_ok(head_text), max_body);
}

TEST(HttpParser, BodyFramingByContentLength) {
  EXPECT_EQ(framing_of("GET / HTTP/1.1\r\n\r\n").error_status, 0);
  EXPECT_EQ(framing_of("GET / HTTP/1.1\r\n\r\n").content_length, 0u);
  EXPECT_EQ(framing_of("POST / HTTP/1.1\r\nContent-Length: 42\r\n\r\n").content_length, 42u);
  EXPECT_EQ(framing_of("POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n").error_status, 0);
  EXPECT_EQ(framing_of("POST / HTTP/1.1\r\nContent-Length: 7\r\ncontent-length: 7\r\n\r\n")
                .content_length, 7u);
}

TEST(HttpParser, BodyFramingRefusals) {
  EXPECT_EQ(framing_of("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n").error_status, 413);
  EXPECT_EQ(framing_of("POST / HTTP/1.1\r\n\r\n").error_status, 411);
  EXPECT_EQ(framing_of("PUT / HTTP/1.1\r\n\r\n").error_status, 411);
  EXPECT_EQ(framing_of("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").error_status, 501);
  EXPECT_EQ(framing_of("GET / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n").error_status, 501);
  for (const char* length : {"-1", "1x", "", " ", "0x10", "1, 2", "99999999999999999999999"})
    EXPECT_EQ(framing_of(std::string("POST / HTTP/1.1\r\nContent-Length: ") + length + "\r\n\r\n")
                  .error_status, 400) << length;
}

TEST(HttpParser, KeepAliveRules) {
  EXPECT_TRUE(wants_keep_alive(parse_ok("GET / HTTP/1.1\r\n\r\n")));
  EXPECT_FALSE(wants_keep_alive(parse_ok("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n")));
  EXPECT_FALSE(wants_keep_alive(parse_ok("GET / HTTP/1.1\r\nConnection: te, close\r\n\r\n")));
  EXPECT_FALSE(wants_keep_alive(parse_ok("GET / HTTP/1.0\r\n\r\n")));
  EXPECT_TRUE(wants_keep_alive(parse_ok("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")));
}

TEST(HttpParser, ExpectContinue) {
  EXPECT_TRUE(expects_continue(parse_ok("POST / HTTP/1.1\r\nExpect: 100-Continue\r\n\r\n")));
  EXPECT_FALSE(expects_continue(parse_ok("POST / HTTP/1.1\r\n\r\n")));
  EXPECT_FALSE(expects_continue(parse_ok("POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n")));
}

TEST(HttpParser, PercentDecodedSegments) {
  EXPECT_EQ(percent_decoded("org%2Fmodel"), "org/model");
  EXPECT_EQ(percent_decoded("a%2fb%20c+d"), "a/b c+d");
  EXPECT_EQ(percent_decoded("plain-name_1.5"), "plain-name_1.5");
  EXPECT_EQ(percent_decoded(""), "");
  for (const char* bad : {"%", "%2", "a%zz", "%g0", "x%"}) EXPECT_EQ(percent_decoded(bad), std::nullopt) << bad;
}

}  // namespace
}  // namespace lockstep
