// JSON Schema to grammar, for response_format and tool arguments. The JSON is written compactly
// (one optional space after ':' and ','), an object's members in the schema's order, numbers with
// at most 16 digits before and after the point. What a schema says that the grammar cannot keep
// (pattern, format, minimum, ...) is refused, naming the keyword and where it is, never ignored.
//
// Supported: type (one or a list), enum, const, anyOf, $ref to "#", "#/$defs/..." or
// "#/definitions/...", properties, required, additionalProperties (false, true or a schema; with
// properties, only those are written), items, minItems, maxItems, minLength, maxLength, and the
// annotations title, description, default, examples, $schema, $id, $comment, deprecated,
// readOnly, writeOnly. The schema true (or {}) is any JSON value.
#pragma once

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "grammar/grammar.h"

namespace lockstep {

// Adds rules for the JSON texts `schema` accepts; returns the rule. Ordered JSON: members are
// written in the order the schema lists them. A schema whose grammar would pass kMaxGrammarElements
// is refused (the lane thread computes its masks).
[[nodiscard]] Expected<int32_t> add_json_schema(Grammar& grammar, const nlohmann::ordered_json& schema);
// A part of a larger schema: its $refs resolve against `root` (a tool's parameters, say).
[[nodiscard]] Expected<int32_t> add_json_schema(Grammar& grammar, const nlohmann::ordered_json& schema,
                                                const nlohmann::ordered_json& root);

// One UTF-8 encoded character past ASCII (2 to 4 bytes, no surrogates or overlong forms).
int32_t add_utf8_char(Grammar& grammar);
// Any JSON value; any JSON object.
int32_t add_json_value(Grammar& grammar);
int32_t add_json_object(Grammar& grammar);

}  // namespace lockstep
