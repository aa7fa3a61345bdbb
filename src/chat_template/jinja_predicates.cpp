// jinja2's tests (`value is name`), as its tests.py defines them.
#include <string_view>
#include <utility>

#include "chat_template/jinja_ast.h"
#include "chat_template/jinja_case.h"
#include "chat_template/jinja_filters.h"
#include "chat_template/jinja_operators.h"
#include "chat_template/jinja_strings.h"

namespace lockstep::jinja {
namespace {

Expected<Value> one_argument(const char* test, const CallArgs& args) {
  static const Param kParams[] = {{"other", std::nullopt}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args(test, args, kParams));
  return bound[0];
}

Status no_argument(const char* test, const CallArgs& args) {
  if (!args.positional.empty() || !args.keywords.empty())
    return Error{std::string("test '") + test + "' takes no arguments"};
  return Status();
}

template <bool (*Predicate)(const Value&)>
Expected<bool> simple(const Value& value, const CallArgs& args) {
  LOCKSTEP_TRY(no_argument("is", args));
  return Predicate(value);
}

template <CompareOp Op>
Expected<bool> comparison(const Value& value, const CallArgs& args) {
  LOCKSTEP_JINJA_ASSIGN(Value other, one_argument("comparison", args));
  return compare_op(Op, value, other);
}

// jinja2's `value % 2 == remainder`.
Expected<bool> parity(const Value& value, const CallArgs& args, int remainder) {
  LOCKSTEP_TRY(no_argument("even/odd", args));
  LOCKSTEP_JINJA_ASSIGN(Value modulo, binary_op(BinaryOp::kModulo, value, Value(2)));
  return equals(modulo, Value(remainder));
}

Expected<bool> divisible_by(const Value& value, const CallArgs& args) {
  LOCKSTEP_JINJA_ASSIGN(Value divisor, one_argument("divisibleby", args));
  LOCKSTEP_JINJA_ASSIGN(Value remainder, binary_op(BinaryOp::kModulo, value, divisor));
  return equals(remainder, Value(0));
}

Expected<bool> in_test(const Value& value, const CallArgs& args) {
  LOCKSTEP_JINJA_ASSIGN(Value container, one_argument("in", args));
  return contains(container, value);
}

Expected<bool> same_as(const Value& value, const CallArgs& args) {
  LOCKSTEP_JINJA_ASSIGN(Value other, one_argument("sameas", args));
  return value.same_object(other);
}

Expected<bool> case_test(const Value& value, const CallArgs& args, CharClass char_class) {
  LOCKSTEP_TRY(no_argument("lower/upper", args));
  return python_is(to_str(value), char_class);
}

Expected<bool> named_test(const Value& value, const CallArgs& args, bool filters) {
  LOCKSTEP_TRY(no_argument("filter/test", args));
  if (!value.is_string()) return false;
  return filters ? find_filter(value.as_string()) != nullptr
                 : find_test(value.as_string()) != nullptr;
}

bool is_defined(const Value& v) { return !v.is_undefined(); }
bool is_undefined(const Value& v) { return v.is_undefined(); }
bool is_none(const Value& v) { return v.is_none(); }
bool is_boolean(const Value& v) { return v.is_bool(); }
bool is_false(const Value& v) { return v.is_bool() && !v.as_bool(); }
bool is_true(const Value& v) { return v.is_bool() && v.as_bool(); }
bool is_integer(const Value& v) { return v.is_int(); }
bool is_float(const Value& v) { return v.is_float(); }
bool is_number(const Value& v) { return v.is_number(); }
bool is_string(const Value& v) { return v.is_string(); }
bool is_mapping(const Value& v) { return v.is_dict(); }
// Python's iter() and len()+__getitem__ succeed on jinja2's Undefined too.
bool is_iterable(const Value& v) {
  return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
}
bool is_callable(const Value& v) { return v.is_callable() || v.is_undefined(); }
bool is_escaped(const Value&) { return false; }

constexpr std::pair<std::string_view, TestFunction> kTests[] = {
    {"defined", simple<is_defined>},
    {"undefined", simple<is_undefined>},
    {"none", simple<is_none>},
    {"boolean", simple<is_boolean>},
    {"false", simple<is_false>},
    {"true", simple<is_true>},
    {"integer", simple<is_integer>},
    {"float", simple<is_float>},
    {"number", simple<is_number>},
    {"string", simple<is_string>},
    {"mapping", simple<is_mapping>},
    {"iterable", simple<is_iterable>},
    {"sequence", simple<is_iterable>},
    {"callable", simple<is_callable>},
    {"escaped", simple<is_escaped>},
    {"even", [](const Value& v, const CallArgs& a) { return parity(v, a, 0); }},
    {"odd", [](const Value& v, const CallArgs& a) { return parity(v, a, 1); }},
    {"divisibleby", divisible_by},
    {"eq", comparison<CompareOp::kEqual>},
    {"equalto", comparison<CompareOp::kEqual>},
    {"==", comparison<CompareOp::kEqual>},
    {"ne", comparison<CompareOp::kNotEqual>},
    {"!=", comparison<CompareOp::kNotEqual>},
    {"lt", comparison<CompareOp::kLess>},
    {"lessthan", comparison<CompareOp::kLess>},
    {"<", comparison<CompareOp::kLess>},
    {"le", comparison<CompareOp::kLessEqual>},
    {"<=", comparison<CompareOp::kLessEqual>},
    {"gt", comparison<CompareOp::kGreater>},
    {"greaterthan", comparison<CompareOp::kGreater>},
    {">", comparison<CompareOp::kGreater>},
    {"ge", comparison<CompareOp::kGreaterEqual>},
    {">=", comparison<CompareOp::kGreaterEqual>},
    {"in", in_test},
    {"sameas", same_as},
    {"lower", [](const Value& v, const CallArgs& a) { return case_test(v, a, CharClass::kLower); }},
    {"upper", [](const Value& v, const CallArgs& a) { return case_test(v, a, CharClass::kUpper); }},
    {"filter", [](const Value& v, const CallArgs& a) { return named_test(v, a, true); }},
    {"test", [](const Value& v, const CallArgs& a) { return named_test(v, a, false); }},
};

}  // namespace

TestFunction find_test(std::string_view name) {
  for (const auto& [test_name, test] : kTests)
    if (test_name == name) return test;
  return nullptr;
}

}  // namespace lockstep::jinja
