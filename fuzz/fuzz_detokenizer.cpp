// StreamingDetokenizer on any ids a model could generate, against fixed tokenizers (the
// byte-level and byte-fallback ones built at start-up, and Qwen3's when it was fetched). The
// first byte picks the tokenizer, whether special tokens are skipped and where the ids are cut
// into two streams; the rest are the ids, some of them outside the vocabulary. The header's
// promise: each push() is whole UTF-8, and a stream's pieces and finish() add up to decode().
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/utf8.h"
#include "fuzz_support.h"
#include "fuzz_tokenizers.h"
#include "tokenizer/streaming_detokenizer.h"

namespace lockstep::fuzz {
namespace {

// A held-back run of byte-fallback tokens is decoded again on each push, so n ids can cost n^2
// (4096 take seconds here); more would only repeat the same work, slowly.
constexpr size_t kMaxIds = 2048;

std::vector<std::unique_ptr<Tokenizer>>& tokenizers() {
  static std::vector<std::unique_ptr<Tokenizer>> loaded;
  return loaded;
}

// Ids from little-endian groups of 2 bytes (3 for a vocabulary past 2^16), spread a little past
// both ends of the vocabulary.
std::vector<int32_t> ids_from(const uint8_t* data, size_t size, int32_t vocab_size) {
  const size_t width = vocab_size > 65000 ? 3 : 2;
  std::vector<int32_t> ids;
  for (size_t at = 0; at + width <= size && ids.size() < kMaxIds; at += width) {
    uint32_t value = 0;
    for (size_t i = 0; i < width; ++i) value |= uint32_t(data[at + i]) << (8 * i);
    ids.push_back(int32_t(value % uint32_t(vocab_size + 8)) - 4);
  }
  return ids;
}

void stream(const Tokenizer& tokenizer, StreamingDetokenizer& detokenizer, const std::vector<int32_t>& ids,
            bool skip_special) {
  std::string streamed;
  for (int32_t id : ids) {
    std::string piece = detokenizer.push(id);
    if (!utf8_is_valid(piece)) fail("push() gave ill-formed UTF-8");
    streamed += piece;
  }
  std::string rest = detokenizer.finish();
  if (!utf8_is_valid(rest)) fail("finish() gave ill-formed UTF-8");
  if (streamed + rest != tokenizer.decode(ids, skip_special)) fail("the streamed text differs from decode()");
}

}  // namespace
}  // namespace lockstep::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace lockstep::fuzz;
  tokenizers().push_back(load_tokenizer("byte_level", byte_level_tokenizer_json()));
  tokenizers().push_back(load_tokenizer("byte_fallback", byte_fallback_tokenizer_json()));
  if (std::string qwen3 = real_tokenizer_file("qwen3", "tokenizer.json"); !qwen3.empty())
    tokenizers().push_back(load_tokenizer(qwen3));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep;
  using namespace lockstep::fuzz;
  if (size == 0 || size > kMaxInputBytes) return 0;
  const Tokenizer& tokenizer = *tokenizers()[data[0] % tokenizers().size()];
  const bool skip_special = data[0] & 0x80;
  std::vector<int32_t> ids = ids_from(data + 1, size - 1, tokenizer.vocab_size());
  // One detokenizer for two streams: finish() must leave nothing of the first in the second.
  const size_t cut = ids.size() * ((data[0] >> 2) & 0x1F) / 32;
  StreamingDetokenizer detokenizer(tokenizer, skip_special);
  stream(tokenizer, detokenizer, std::vector<int32_t>(ids.begin(), ids.begin() + cut), skip_special);
  stream(tokenizer, detokenizer, std::vector<int32_t>(ids.begin() + cut, ids.end()), skip_special);
  return 0;
}
