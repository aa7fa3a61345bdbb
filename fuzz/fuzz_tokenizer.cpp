// The tokenizer, two ways. An input that starts with '{' is a tokenizer.json: Tokenizer::load
// must load it or say why, and a tokenizer that loads encodes and decodes a fixed text by its
// own rules; the same input is then the tokenizer_config.json beside the byte-fallback
// tokenizer.json, loaded as transformers would build it (Tokenizer::load_folder, as ModelText
// does). Any other input is a text whose first byte picks a fixed tokenizer (the byte-level and
// byte-fallback ones built at start-up, and Qwen3's when it was fetched): the text must
// round-trip as tokenizer_roundtrip_test.cpp says it does.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/utf8.h"
#include "fuzz_support.h"
#include "fuzz_tokenizers.h"
#include "json_mutator.h"
#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer/tokenizer_nfc.h"

namespace lockstep::fuzz {
namespace {

// Longer texts only repeat the work. Streaming a run of byte-fallback tokens decodes the run
// again on each push, so only the first kStreamedIds ids are streamed (fuzz_detokenizer
// streams more).
constexpr size_t kMaxTextBytes = 2048;
constexpr size_t kStreamedIds = 64;

// Some of everything the pipelines treat specially: words, digits, spaces, accents, CJK, emoji,
// special-token spellings and an ill-formed tail.
constexpr std::string_view kSampleText =
    "Hello, world! It's 2024: na\u00efve caf\u00e9 e\u0301 \u65e5\u672c\u8a9e \U0001F600\U0001F44D\U0001F3FD\n"
    "  spaced   out\t<|im_start|>user<|im_end|><bos><unk>\u2581x <0x41> aaaa\r\n\xC3";

struct Fixed {
  std::unique_ptr<Tokenizer> tokenizer;
  std::function<std::string(const std::string&)> round_trip;  // what decode(encode(text)) gives
};

std::vector<Fixed>& fixed() {
  static std::vector<Fixed> tokenizers;
  return tokenizers;
}

std::string spaces_for_marks(const std::string& text) {
  std::string out;
  for (size_t at = 0; at < text.size();) {
    if (text.compare(at, 3, "\u2581") == 0) {
      out += ' ';
      at += 3;
    } else {
      out += text[at++];
    }
  }
  return out;
}

// Rules every tokenizer keeps, with `text` as the input.
void check_encoding(const Tokenizer& tokenizer, std::string_view text, size_t max_ids) {
  std::vector<int32_t> ids = tokenizer.encode(text);
  for (int32_t id : ids)
    if (id < 0 || id >= tokenizer.vocab_size() || !tokenizer.id_to_token(id))
      fail("encode gave id " + std::to_string(id) + ", which has no token");
  if (tokenizer.encode(utf8_lossy(text)) != ids) fail("ill-formed UTF-8 is not encoded as U+FFFD");
  std::optional<std::vector<int32_t>> within = tokenizer.encode_within(text, false, max_ids);
  if (ids.size() <= max_ids ? within != ids : within.has_value())
    fail("encode_within " + std::to_string(max_ids) + " ids disagrees with the whole encoding's " +
         std::to_string(ids.size()));
  (void)tokenizer.encode(text, true);
  const std::vector<int32_t> head(ids.begin(), ids.begin() + long(std::min(ids.size(), kStreamedIds)));
  for (bool skip_special : {false, true}) {
    if (!utf8_is_valid(tokenizer.decode(ids, skip_special))) fail("decode gave ill-formed UTF-8");
    StreamingDetokenizer stream(tokenizer, skip_special);
    std::string streamed;
    for (int32_t id : head) streamed += stream.push(id);
    if (streamed + stream.finish() != tokenizer.decode(head, skip_special)) fail("streamed text differs from decode");
  }
}

void load_and_use(std::string_view json) {
  try {
    Expected<std::unique_ptr<Tokenizer>> loaded = Tokenizer::load(write_scratch("input/tokenizer.json", json));
    if (loaded.ok()) check_encoding(**loaded, kSampleText, 8);
  } catch (const std::exception& e) {
    fail(std::string("Tokenizer::load threw (it promises an error instead): ") + e.what());
  }
  try {
    write_scratch("folder/tokenizer_config.json", json);
    Expected<std::unique_ptr<Tokenizer>> loaded = Tokenizer::load_folder(scratch_dir() + "/folder");
    if (loaded.ok()) check_encoding(**loaded, kSampleText, 8);
  } catch (const std::exception& e) {
    fail(std::string("Tokenizer::load_folder threw (it promises an error instead): ") + e.what());
  }
}

void encode_text(const Fixed& use, std::string_view text, size_t max_ids) {
  check_encoding(*use.tokenizer, text, max_ids);
  std::string round_trip = use.tokenizer->decode(use.tokenizer->encode(text));
  if (round_trip != use.round_trip(utf8_lossy(text))) fail("the text does not round-trip");
}

}  // namespace
}  // namespace lockstep::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace lockstep::fuzz;
  auto same = [](const std::string& text) { return text; };
  fixed().push_back({load_tokenizer("byte_level", byte_level_tokenizer_json()), same});
  fixed().push_back({load_tokenizer("byte_fallback", byte_fallback_tokenizer_json()), spaces_for_marks});
  write_scratch("folder/tokenizer.json", byte_fallback_tokenizer_json().dump());
  if (std::string qwen3 = real_tokenizer_file("qwen3", "tokenizer.json"); !qwen3.empty())
    fixed().push_back({load_tokenizer(qwen3), [](const std::string& text) { return lockstep::tokenizer::nfc(text); }});
  return 0;
}

// JSON-aware mutations (json_mutator.h).
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  return lockstep::fuzz::mutate_json(data, size, max_size, seed);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep::fuzz;
  if (size == 0 || size > kMaxInputBytes) return 0;
  if (data[0] == '{') {
    load_and_use(as_text(data, size));
    return 0;
  }
  if (size - 1 > kMaxTextBytes) return 0;
  const Fixed& use = fixed()[data[0] % fixed().size()];
  encode_text(use, as_text(data + 1, size - 1), /*max_ids=*/size_t(data[0] >> 2));
  return 0;
}
