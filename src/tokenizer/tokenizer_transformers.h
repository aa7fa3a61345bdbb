// What transformers (v5) builds from a model folder's tokenizer files, where that is not
// tokenizer.json as written.
//
// AutoTokenizer instantiates the class that tokenizer_config.json names ("LlamaTokenizerFast" is
// an alias of LlamaTokenizer), except for model types whose Hub files are known to name the
// wrong class (DeepSeek V2 and V3: config.json's model_type decides, so a folder without
// config.json gets the named class). A class with its own __init__ keeps only the vocabulary,
// merges, added tokens and post-processor of tokenizer.json and builds the rest from its
// definition. LlamaTokenizer's definition is SentencePiece's pipeline, which differs from the
// byte-level tokenizer.json of DeepSeek V3: its spaces become "▁", which that vocabulary lacks,
// and are dropped. Qwen2Tokenizer and GemmaTokenizer also rebuild, to the very pipeline that the
// Qwen and Gemma files declare, so those files are kept as written here (the chat fixtures check
// that the ids agree); PreTrainedTokenizerFast keeps the file. Every class then takes the
// add_bos_token / add_eos_token of tokenizer_config.json, where given, as its post-processor.
//
// Read from transformers 5.x: models/auto/tokenization_auto.py (AutoTokenizer.from_pretrained,
// MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS), models/llama/tokenization_llama.py
// (LlamaTokenizer.__init__), tokenization_utils_tokenizers.py (TokenizersBackend:
// convert_to_native_format, __init__, update_post_processor), tokenization_utils_base.py
// (_get_prepend_scheme).
#pragma once

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace lockstep::tokenizer {

// Rewrites `tokenizer_json` (a parsed tokenizer.json) into the pipeline transformers builds from
// a folder with these tokenizer_config.json and config.json (each an empty object when the
// folder lacks it). Fails naming what it cannot rebuild.
[[nodiscard]] Status rebuild_as_transformers(nlohmann::json& tokenizer_json,
                                             const nlohmann::json& tokenizer_config,
                                             const nlohmann::json& model_config);

}  // namespace lockstep::tokenizer
