// The BPE merges a SentencePiece vocabulary implies. A GGUF file of a SentencePiece model
// (tokenizer.ggml.model "llama") lists each token with a score and no merges: SentencePiece's
// BPE joins, at every step, the two neighbouring pieces whose join is the token of the highest
// score. A merge list ranked by those scores makes a BPE tokenizer do the same.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace lockstep {

// `tokens[i]` has score `scores[i]`; only ids with `usable[i]` take part, as joins or halves.
// Every split of a usable token into two usable tokens is a merge; merges are ranked by the
// joined token's score, highest first (ties: lower id first), and the splits of one token by
// the left half's score, then the right half's, highest first (ties: the shorter left half
// first), as transformers ranks them when it reads such a file.
std::vector<std::pair<std::string, std::string>> sentencepiece_merges(const std::vector<std::string>& tokens,
                                                                      const std::vector<double>& scores,
                                                                      const std::vector<bool>& usable);

}  // namespace lockstep
