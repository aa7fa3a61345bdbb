#include "http/http_response.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace lockstep {
namespace {

TEST(HttpResponse, HeadWithLengthAndExtraHeaders) {
  ResponseHead head{404, "application/json", BodyMode::kLength, 12, true};
  std::string text = format_response_head(
      head, {{"Retry-After", "1"}, {"content-length", "5"}, {"X-Bad", "a\r\nInjected: 1"},
             {"Bad Name", "x"}});
  EXPECT_EQ(text,
            "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 12\r\n"
            "Connection: keep-alive\r\nRetry-After: 1\r\n\r\n");
}

TEST(HttpResponse, ChunkedAndUntilCloseHeads) {
  ResponseHead chunked{200, "text/event-stream", BodyMode::kChunked, 0, false};
  EXPECT_EQ(format_response_head(chunked, {}),
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
  ResponseHead until_close{299, "", BodyMode::kUntilClose, 0, false};
  EXPECT_EQ(format_response_head(until_close, {}), "HTTP/1.1 299 \r\nConnection: close\r\n\r\n");
}

TEST(HttpResponse, ReasonPhrases) {
  for (int status : {200, 400, 404, 405, 411, 413, 429, 431, 500, 501, 503})
    EXPECT_FALSE(reason_phrase(status).empty()) << status;
  EXPECT_EQ(reason_phrase(431), "Request Header Fields Too Large");
  EXPECT_EQ(reason_phrase(299), "");
}

TEST(HttpResponse, ChunkFraming) {
  EXPECT_EQ(format_chunk("hello"), "5\r\nhello\r\n");
  EXPECT_EQ(format_chunk(std::string(255, 'x')).substr(0, 4), "ff\r\n");
  EXPECT_EQ(kLastChunk, "0\r\n\r\n");
}

TEST(HttpResponse, JsonErrorBodyEscapesTheMessage) {
  std::string body = json_error_body("bad \"quote\"\n and \xff byte", "invalid_request_error");
  nlohmann::json parsed = nlohmann::json::parse(body);
  EXPECT_EQ(parsed["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(parsed["error"]["code"].is_null());
  EXPECT_EQ(parsed["error"]["message"].get<std::string>().substr(0, 19), "bad \"quote\"\n and \xef\xbf");
  // OpenAI's key order, for people reading raw responses.
  EXPECT_EQ(json_error_body("m", "t"), R"({"error":{"message":"m","type":"t","param":null,"code":null}})");
  EXPECT_EQ(error_type_for(404), "invalid_request_error");
  EXPECT_EQ(error_type_for(503), "server_busy");
  EXPECT_EQ(error_type_for(500), "server_error");
  EXPECT_EQ(error_type_for(501), "invalid_request_error");
}

}  // namespace
}  // namespace lockstep
