// The values a chat template computes with, modelled on the Python objects jinja2 sees: jinja2's
// Undefined, None, bool, int, float, str, list and tuple, dict (insertion-ordered, string keys),
// jinja2's namespace, and callables (methods, macros, globals such as raise_exception).
// Lists and dicts are immutable and shared by reference; a namespace is the one mutable value,
// shared as Python shares it. Values are cheap to copy.
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "base/status.h"

namespace lockstep::jinja {

class Value;

struct List {
  std::vector<Value> items;
  bool is_tuple = false;  // prints as (a, b); otherwise a list
};

// A dict or a namespace's attributes, in insertion order.
struct Dict {
  std::vector<std::pair<std::string, Value>> entries;

  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);  // replaces an existing key in place
};

// Arguments of a call: positional, then keyword (in the order written).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
};

struct Callable {
  std::string name;  // for error messages
  std::function<Expected<Value>(const CallArgs&)> call;
};

// jinja2's Undefined: falsy, prints as "", iterates as empty, `is defined` false. Any other use
// fails with `hint` ("'name' is undefined", "'dict object' has no attribute 'x'").
struct Undefined {
  std::string hint;
};
struct None {};
struct Namespace {
  std::shared_ptr<Dict> attributes;
};

class Value {
 public:
  // In the order of data_'s alternatives.
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kCallable
  };

  Value() : data_(Undefined{}) {}
  Value(Undefined undefined) : data_(std::move(undefined)) {}
  Value(None) : data_(None{}) {}
  Value(bool b) : data_(b) {}
  template <std::integral I>
  requires(!std::same_as<I, bool>) Value(I i) : data_(static_cast<int64_t>(i)) {}
  Value(double d) : data_(d) {}
  Value(std::string s) : data_(std::move(s)) {}
  Value(const char* s) : data_(std::string(s)) {}
  Value(List list) : data_(std::make_shared<const List>(std::move(list))) {}
  Value(Dict dict) : data_(std::make_shared<const Dict>(std::move(dict))) {}
  Value(Namespace ns) : data_(std::move(ns)) {}
  Value(Callable callable) : data_(std::make_shared<const Callable>(std::move(callable))) {}

  static Value list(std::vector<Value> items) { return Value(List{std::move(items), false}); }
  static Value tuple(std::vector<Value> items) { return Value(List{std::move(items), true}); }

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  // int, float or bool (a Python bool is an int).
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_namespace() const { return kind() == Kind::kNamespace; }
  bool is_callable() const { return kind() == Kind::kCallable; }

  // Accessors; each requires the matching kind.
  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const;    // an int or a bool
  double as_double() const;  // any number
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const List& as_list() const { return *std::get<std::shared_ptr<const List>>(data_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(data_); }
  Dict& namespace_attributes() const { return *std::get<Namespace>(data_).attributes; }
  const Callable& as_callable() const { return *std::get<std::shared_ptr<const Callable>>(data_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(data_).hint; }

  // Python's `is`: the same object for shared values, equal for the others.
  bool same_object(const Value& other) const;

 private:
  std::variant<Undefined, None, bool, int64_t, double, std::string, std::shared_ptr<const List>,
               std::shared_ptr<const Dict>, Namespace, std::shared_ptr<const Callable>>
      data_;
};

// Python's type name: 'str', 'int', 'list', 'dict', 'NoneType', ...
[[nodiscard]] std::string type_name(const Value& value);
// The failure of using an undefined value (its hint, or "undefined value").
[[nodiscard]] Error undefined_error(const Value& value);

[[nodiscard]] bool truthy(const Value& value);
// str(value) as jinja2 prints it; an undefined value prints as "".
[[nodiscard]] std::string to_str(const Value& value);
// repr(value): how a value prints inside a list or dict.
[[nodiscard]] std::string repr(const Value& value);
// Python's ==.
[[nodiscard]] bool equals(const Value& a, const Value& b);
// Python's ordering of numbers, strings and lists: <0, 0, >0; an error for other kinds.
[[nodiscard]] Expected<int> compare(const Value& a, const Value& b);
// len(value); an undefined value has length 0.
[[nodiscard]] Expected<int64_t> length(const Value& value);
// The items of `for x in value`: list items, dict keys, string characters, nothing for undefined.
[[nodiscard]] Expected<std::vector<Value>> iterate(const Value& value);

// JSON input (order of object keys is kept as the json type keeps it).
[[nodiscard]] Value from_json(const nlohmann::json& json);
[[nodiscard]] Value from_json(const nlohmann::ordered_json& json);

// Python's json.dumps(value, ensure_ascii, indent, separators, sort_keys). `indent`: no value
// for one line, else the text of one indentation level.
struct JsonStyle {
  bool ensure_ascii = false;
  std::optional<std::string> indent;
  std::optional<std::pair<std::string, std::string>> separators;  // item, key
  bool sort_keys = false;
};
[[nodiscard]] Expected<std::string> to_json_text(const Value& value, const JsonStyle& style);

// One parameter of a built-in function: its name and, when optional, its default.
struct Param {
  std::string name;
  std::optional<Value> default_value;
};
// Binds call arguments to parameters as Python does (positional first, then keywords); fails
// naming `function` on a missing, repeated, unknown or surplus argument.
[[nodiscard]] Expected<std::vector<Value>> bind_args(const std::string& function,
                                                     const CallArgs& args,
                                                     std::span<const Param> params);

// Fails naming `function` when the call has any argument.
[[nodiscard]] Status expect_no_args(const std::string& function, const CallArgs& args);

}  // namespace lockstep::jinja

// Evaluates an Expected expression; on error returns the error from the enclosing function,
// else assigns the value to `lhs`, which may declare a variable: LOCKSTEP_JINJA_ASSIGN(Value v,
// eval(e)). Several statements: brace it in an if.
#define LOCKSTEP_JINJA_CONCAT_INNER(a, b) a##b
#define LOCKSTEP_JINJA_CONCAT(a, b) LOCKSTEP_JINJA_CONCAT_INNER(a, b)
#define LOCKSTEP_JINJA_ASSIGN(lhs, expr) \
  LOCKSTEP_JINJA_ASSIGN_IMPL(LOCKSTEP_JINJA_CONCAT(lockstep_assign_, __LINE__), lhs, expr)
#define LOCKSTEP_JINJA_ASSIGN_IMPL(tmp, lhs, expr)      \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return ::lockstep::Error{tmp.error()}; \
  lhs = std::move(tmp).value()
