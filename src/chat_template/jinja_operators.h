// Python's operators on template values, as jinja2 evaluates them: arithmetic, `in`,
// subscripts and slices (on code points for strings), attribute lookup (methods first, then
// dict keys, as jinja2's sandbox does), and `|`-free comparisons. Pure functions.
#pragma once

#include <optional>
#include <string>

#include "chat_template/jinja_ast.h"
#include "chat_template/jinja_value.h"

namespace lockstep::jinja {

// a OP b for + - * / // % ** with Python's types and rules (str + str, list + list, str * int,
// floor division and modulo toward negative infinity, int / int gives a float).
[[nodiscard]] Expected<Value> binary_op(BinaryOp op, const Value& a, const Value& b);
// -a and +a.
[[nodiscard]] Expected<Value> negate(const Value& a);
[[nodiscard]] Expected<Value> positive(const Value& a);
// a OP b for == != < <= > >= in, not in.
[[nodiscard]] Expected<bool> compare_op(CompareOp op, const Value& a, const Value& b);
// `item in container`: a substring, a list element, a dict key; false for undefined.
[[nodiscard]] Expected<bool> contains(const Value& container, const Value& item);

// value[key]: list and string indices (negative from the end), dict keys; an undefined value
// when absent (as jinja2's getitem).
[[nodiscard]] Expected<Value> get_item(const Value& value, const Value& key);
// value.name: a method of strings, dicts and lists, a dict key or a namespace attribute; an
// undefined value when absent. Fails on an undefined value (as jinja2's default Undefined).
[[nodiscard]] Expected<Value> get_attribute(const Value& value, const std::string& name);
// value[start:stop:step] for lists, tuples and strings; absent parts are None.
[[nodiscard]] Expected<Value> slice(const Value& value, const Value& start, const Value& stop,
                                    const Value& step);

}  // namespace lockstep::jinja
