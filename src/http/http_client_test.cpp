#include "http/http_client.h"

#include <gtest/gtest.h>

namespace lockstep {
namespace {

TEST(HttpClient, ParsesHttpHostPortUrlsOnly) {
  auto url = parse_http_url("http://127.0.0.1:8080");
  ASSERT_TRUE(url.ok()) << url.error().message;
  EXPECT_EQ(url->host, "127.0.0.1");
  EXPECT_EQ(url->port, 8080);
  auto local = parse_http_url("http://localhost:9/");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->host, "localhost");
  EXPECT_EQ(local->port, 9);
  for (const char* bad : {"", "127.0.0.1:8080", "https://127.0.0.1:8080", "http://127.0.0.1", "http://127.0.0.1:",
                          "http://127.0.0.1:0", "http://127.0.0.1:65536", "http://127.0.0.1:80x", "http://host:80",
                          "http://1.2.3:80", "http://127.0.0.1:80/v1"})
    EXPECT_FALSE(parse_http_url(bad).ok()) << bad;
}

TEST(HttpClient, SplitsServerSentEvents) {
  std::string body = "data: {\"a\":1}\n\n: a comment\n\nevent: x\r\ndata: two\r\ndata: lines\r\n\r\ndata:[DONE]\n\n";
  EXPECT_EQ(sse_payloads(body), (std::vector<std::string>{"{\"a\":1}", "two\nlines", "[DONE]"}));
  EXPECT_TRUE(sse_payloads("data: no blank line after it\n").empty());
}

TEST(HttpClient, AnUnreachableServerIsAnError) {
  auto reply = http_request(HttpEndpoint{"127.0.0.1", 1, {}}, "GET", "/health", "", 2);
  ASSERT_FALSE(reply.ok());
  EXPECT_NE(reply.error().message.find("cannot connect to 127.0.0.1:1"), std::string::npos) << reply.error().message;
}

}  // namespace
}  // namespace lockstep
