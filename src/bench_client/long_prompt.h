// `lockstep bench --long-prompt N`: how much a long prompt's fill stalls a stream that is
// decoding beside it, and how long the long prompt waits for its first token.
#pragma once

#include <string>
#include <vector>

#include "bench_client/bench_requests.h"

namespace lockstep::bench {

struct LongPromptResult {
  int prompt_tokens = 0;          // stream 2's prompt: exactly this many byte ids
  int decode_tokens = 0;          // stream 1's max_tokens
  double fill_s = 0;              // stream 2 from its send to its first token: its time to first token
  double decode_max_gap_s = 0;    // stream 1's largest gap between tokens that overlaps the fill
  int decode_tokens_in_fill = 0;  // stream 1's tokens that arrived during the fill
  bool decode_covered = false;    // stream 1 was still decoding when stream 2's first token came
  double alone_ttft_s = 0;        // a prompt of the same length sent alone
  // The timeline, in seconds since stream 1 was sent:
  std::vector<double> decode_token_times_s;  // [stream 1's tokens] each token's arrival
  double fill_sent_s = 0;                    // stream 2 sent
  double fill_first_token_s = 0;             // stream 2's first token arrived
};

// Starts stream 1 (prompt 0, greedy, `decode_tokens` tokens); once its first token is back, sends
// stream 2 (`prompt_tokens` ids, one token); hangs stream 1 up at its first token after stream
// 2's. Then sends a different prompt of the same length alone.
[[nodiscard]] Expected<LongPromptResult> run_long_prompt(const Target& target, const std::vector<std::string>& prompts,
                                                         int prompt_tokens, int decode_tokens);

}  // namespace lockstep::bench
