// Encoding speed of the four real tokenizers on about 1 MB of mixed text: English prose, C++ and
// Python code, numbers, Chinese and Japanese, emoji and whitespace runs. One thread.
//
//   tokenizer_bench [TOKENIZERS_DIR]   (default third_party/tokenizers, as scripts/fetch-tokenizers
//                                       leaves it; run from the repository root)

#include <cstdio>
#include <string>
#include <vector>

#include "machine_load.h"
#include "tokenizer/tokenizer.h"
#include "timing.h"

namespace lockstep::bench {
namespace {

// About `bytes` of text cycling through paragraphs of different kinds, numbered so that words
// and numbers vary as real text does.
std::string mixed_text(size_t bytes) {
  const char* const paragraphs[] = {
      "The committee met on Tuesday to review the quarterly results. Revenue rose in every "
      "region, although costs grew faster than expected; the board asked for a revised plan "
      "before the next meeting. \"We're not worried,\" said the chair, \"but we'll watch it.\"\n\n",
      "int main(int argc, char** argv) {\n  std::vector<int> values(argc, 0);\n  for (int i = 0; "
      "i < argc; ++i) values[i] = std::atoi(argv[i]) * 2 + 1;\n  return values.empty() ? 1 : "
      "values.back();\n}\n\n",
      "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return "
      "a\n\n\tprint(fib(30))  # 832040\n\n",
      "Invoice 2024-11-07: 3 x 149.99 EUR = 449.97 EUR; VAT 19% = 85.49; total 535.46. Ref "
      "#0048213, account DE89 3704 0044 0532 0130 00, due 2024-12-07.\n\n",
      "机器学习是人工智能的一个分支，它使计算机能够从数据中学习而无需明确编程。深度学习使用多层神经网络。\n\n",
      "東京は日本の首都であり、世界で最も人口の多い都市圏の一つです。桜の季節には多くの観光客が訪れます。\n\n",
      "Great news 🎉🎉 — the launch went well 👍🏽! Next stop: 🚀 Mars? 🤔 Family photo: "
      "👨‍👩‍👧‍👦 in 🇫🇷 and 🇯🇵.\n\n",
      "    indented    text   with\t\ttabs   and     runs      of      spaces\r\n\r\n",
  };
  std::string text;
  for (size_t round = 0; text.size() < bytes; ++round) {
    for (const char* paragraph : paragraphs) {
      text += paragraph;
      text += "Section " + std::to_string(round) + "." + std::to_string(text.size() % 97) + "\n";
    }
  }
  text.resize(bytes);
  // Do not end inside a character.
  while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();
  if (!text.empty() && static_cast<unsigned char>(text.back()) >= 0xC0) text.pop_back();
  return text;
}

int run(const std::string& dir) {
  const std::string text = mixed_text(1 << 20);
  const double megabytes = double(text.size()) / 1e6;
  std::printf("input: %zu bytes of mixed text\n", text.size());
  std::printf("%-12s %8s %10s %10s %12s %12s\n", "tokenizer", "load s", "tokens", "bytes/tok",
              "encode MB/s", "decode MB/s");
  CpuSample before = sample_cpu();
  bool any = false;
  for (const char* name : {"qwen3", "llama3_1", "deepseek_v3", "gemma3"}) {
    std::string path = dir + "/" + name + "/tokenizer.json";
    Clock::time_point load_start = Clock::now();
    Expected<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::load(path);
    double load_seconds = seconds_since(load_start);
    if (!tokenizer.ok()) {
      std::printf("%-12s skipped: %s\n", name, tokenizer.error().message.c_str());
      continue;
    }
    any = true;
    std::vector<double> encode_seconds, decode_seconds;
    std::vector<int32_t> ids;
    std::string decoded;
    for (int repeat = 0; repeat < 3; ++repeat) {
      Clock::time_point start = Clock::now();
      ids = (*tokenizer)->encode(text);
      encode_seconds.push_back(seconds_since(start));
      start = Clock::now();
      decoded = (*tokenizer)->decode(ids);
      decode_seconds.push_back(seconds_since(start));
    }
    std::printf("%-12s %8.2f %10zu %10.2f %12.1f %12.1f\n", name, load_seconds, ids.size(),
                double(text.size()) / double(ids.size()), megabytes / median(encode_seconds),
                megabytes / median(decode_seconds));
  }
  CpuSample after = sample_cpu();
  print_foreign_load(before, after);
  return any ? 0 : 1;
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) {
  if (argc > 2) {
    std::fprintf(stderr, "usage: tokenizer_bench [TOKENIZERS_DIR]\n");
    return 2;
  }
  return lockstep::bench::run(argc == 2 ? argv[1] : "third_party/tokenizers");
}
