// The tokenizers the fuzz targets run on: small ones built at start-up (so that a target runs
// without the fetched files) and the real ones of third_party/tokenizers/ when they are there.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/tokenizer.h"

namespace lockstep::fuzz {

// The byte-level BPE of tests/server_text_test.cpp: 256 bytes, merges of letter pairs up to id
// 509, and the special tokens <|im_start|> (510) and <|im_end|> (511).
nlohmann::json byte_level_tokenizer_json();
// A tokenizer_config.json for it with a ChatML chat template (also as that test writes it).
nlohmann::json chatml_tokenizer_config_json();
// A byte-fallback BPE in Gemma's style: spaces spelled "▁", the letters a-z and a few merges,
// each byte as a <0xNN> token for everything else, and the special tokens <unk> and <bos>.
nlohmann::json byte_fallback_tokenizer_json();

// Loads a tokenizer.json from `path`; fails (the harness is broken) when it does not load.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);
// Writes `json` to the scratch folder as <name>/tokenizer.json and loads it.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& name, const nlohmann::json& json);

// third_party/tokenizers/<name>/<file> when scripts/fetch-tokenizers fetched it, else "".
std::string real_tokenizer_file(const std::string& name, const std::string& file);

}  // namespace lockstep::fuzz
