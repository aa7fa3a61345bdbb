// Requests the server must refuse: each one's bytes as sent and the 4xx it must answer, always
// with a JSON error body.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "http/http_client.h"

namespace lockstep::soak {

struct BadRequest {
  std::string name;  // for failure lines: "deep-nesting-prompt"
  std::string text;  // the whole request, head and body
  int status = 400;  // the status it must get
};

// Malformed JSON, wrong field types, ids out of range, prompts over the context, deep nesting,
// unknown routes, wrong methods and malformed HTTP.
std::vector<BadRequest> make_bad_requests(const HttpEndpoint& server, int64_t max_model_len);

// Empty when `reply` is the refusal `bad` must get, else what is wrong.
std::string refusal_problem(const BadRequest& bad, const HttpReply& reply);

}  // namespace lockstep::soak
