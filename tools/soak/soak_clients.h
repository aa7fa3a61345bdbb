// The soak test's clients: one ordinary request or one hostile act each, and what came of it.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "http/http_client.h"
#include "soak_bad_requests.h"
#include "soak_cases.h"

namespace lockstep::soak {

enum class ClientKind {
  ordinary,           // a request of the set, streamed or not: its reply must equal the alone run
  vanish_mid_stream,  // reads a few events of a stream, then hangs up
  vanish_waiting,     // hangs up 0-300 ms after sending, queued or waiting for a whole reply
  bad_request,        // must get its 4xx with a JSON error body
  slow_client,        // trickles its request over a couple of seconds, then must get its reply
  half_close,         // shuts its sending side after the request, then must get its reply
};
constexpr int kClientKinds = 6;

const char* kind_name(ClientKind kind);
// Ordinary requests half the time, the hostile kinds share the rest.
ClientKind pick_kind(std::mt19937_64& random);

// What the clients aim at; read-only while they run.
struct SoakTarget {
  HttpEndpoint server;
  std::vector<SoakCase> cases;
  std::vector<BadRequest> bad_requests;
};

struct ClientOutcome {
  bool busy = false;      // a 503 with Retry-After: allowed
  bool checked = false;   // a completed reply compared with its alone run, and equal
  bool mismatch = false;  // a completed reply that differs from its alone run
  std::string failure;    // anything wrong (a mismatch too); empty when all was well
};

// Sends one bad request and checks its refusal.
ClientOutcome send_bad_request(const SoakTarget& target, const BadRequest& bad);

// Runs one client of `kind` to its end.
ClientOutcome run_client(ClientKind kind, const SoakTarget& target, std::mt19937_64& random);

}  // namespace lockstep::soak
