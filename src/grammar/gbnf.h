// GBNF, the grammar notation of llama.cpp's server (its `grammar` field), compiled to a Grammar
// over bytes for constrained decoding.
//
//   root   ::= answer ("," ws answer)*     # a comment
//   answer ::= "yes" | "no" | [0-9]{1,3}
//   ws     ::= [ \t\n]*
//
// A rule per line: `name ::= alternatives`, names of letters, digits, '-' and '_'. Alternatives
// are split by `|` and go on past a line end after a `|` or inside parentheses. Items: "literal"
// strings, [character classes] (ranges, ^ for the complement), `.` (any character), rule names
// and ( groups ), each optionally followed by *, +, ?, {m}, {m,} or {m,n} (up to 1,024). Escapes,
// in literals and classes: \n \r \t \\ \" \' \[ \] \- \^ \xHH \uHHHH \UHHHHHHHH. Characters are
// Unicode code points, matched as their UTF-8 bytes. The grammar starts at `root`.
#pragma once

#include <string_view>

#include "base/status.h"
#include "grammar/grammar.h"

namespace lockstep {

// Adds the rules of `text` to `grammar` and returns its root rule, or says what is wrong and
// where (line and column): a syntax error, a rule used but never defined or defined twice, no
// `root`, parentheses nested deeper than 128, a repeat past 1,024, or more than
// kMaxGrammarElements elements.
[[nodiscard]] Expected<int32_t> add_gbnf(Grammar& grammar, std::string_view text);

}  // namespace lockstep
