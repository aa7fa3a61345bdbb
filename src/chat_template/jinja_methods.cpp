#include "chat_template/jinja_methods.h"

#include <ctime>
#include <string_view>
#include <utility>

#include "chat_template/jinja_case.h"
#include "chat_template/jinja_strings.h"

namespace lockstep::jinja {
namespace {

using Method = Expected<Value> (*)(const Value& self, const CallArgs& args);

Expected<std::optional<std::string>> optional_string(const Value& value, const char* what) {
  if (value.is_none()) return std::optional<std::string>();
  if (!value.is_string()) return Error{std::string(what) + " must be None or a string"};
  return std::optional<std::string>(value.as_string());
}

Expected<int64_t> integer_argument(const Value& value, const char* what) {
  if (!value.is_int() && !value.is_bool()) return Error{std::string(what) + " must be an integer"};
  return value.as_int();
}

Value string_list(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (std::string& part : parts) items.emplace_back(std::move(part));
  return Value::list(std::move(items));
}

// startswith / endswith: a string or a tuple of strings.
Expected<Value> affix_test(const Value& self, const CallArgs& args, bool prefix) {
  static const Param kParams[] = {{"affix", std::nullopt}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args(prefix ? "startswith" : "endswith", args, kParams));
  std::vector<Value> candidates = bound[0].is_list() ? bound[0].as_list().items : bound;
  const std::string& text = self.as_string();
  for (const Value& candidate : candidates) {
    if (!candidate.is_string()) return Error{"startswith/endswith arguments must be strings"};
    const std::string& affix = candidate.as_string();
    if (affix.size() > text.size()) continue;
    if (prefix ? text.compare(0, affix.size(), affix) == 0
               : text.compare(text.size() - affix.size(), affix.size(), affix) == 0)
      return Value(true);
  }
  return Value(false);
}

Expected<Value> strip_method(const Value& self, const CallArgs& args, bool left, bool right) {
  static const Param kParams[] = {{"chars", Value(None{})}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("strip", args, kParams));
  LOCKSTEP_JINJA_ASSIGN(auto chars, optional_string(bound[0], "strip arg"));
  return Value(python_strip(self.as_string(), chars, left, right));
}

Expected<Value> split_method(const Value& self, const CallArgs& args, bool from_right) {
  static const Param kParams[] = {{"sep", Value(None{})}, {"maxsplit", Value(-1)}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("split", args, kParams));
  LOCKSTEP_JINJA_ASSIGN(auto sep, optional_string(bound[0], "split separator"));
  LOCKSTEP_JINJA_ASSIGN(int64_t maxsplit, integer_argument(bound[1], "maxsplit"));
  if (sep && sep->empty()) return Error{"empty separator"};
  return string_list(from_right ? python_rsplit(self.as_string(), sep, maxsplit)
                                : python_split(self.as_string(), sep, maxsplit));
}

Expected<Value> find_method_impl(const Value& self, const CallArgs& args, bool from_right,
                                 bool must_find) {
  static const Param kParams[] = {{"sub", std::nullopt}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("find", args, kParams));
  if (!bound[0].is_string()) return Error{"find argument must be a string"};
  const std::string& text = self.as_string();
  size_t at = from_right ? text.rfind(bound[0].as_string()) : text.find(bound[0].as_string());
  if (at == std::string::npos) {
    if (must_find) return Error{"substring not found"};
    return Value(-1);
  }
  return Value(code_point_count(std::string_view(text).substr(0, at)));
}

template <std::string (*Transform)(std::string_view)>
Expected<Value> transform_method(const Value& self, const CallArgs& args) {
  LOCKSTEP_TRY(expect_no_args("string method", args));
  return Value(Transform(self.as_string()));
}

template <CharClass Class>
Expected<Value> class_method(const Value& self, const CallArgs& args) {
  LOCKSTEP_TRY(expect_no_args("string method", args));
  return Value(python_is(self.as_string(), Class));
}

Expected<Value> replace_method(const Value& self, const CallArgs& args) {
  static const Param kParams[] = {
      {"old", std::nullopt}, {"new", std::nullopt}, {"count", Value(-1)}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("replace", args, kParams));
  if (!bound[0].is_string() || !bound[1].is_string())
    return Error{"replace arguments must be strings"};
  LOCKSTEP_JINJA_ASSIGN(int64_t count, integer_argument(bound[2], "replace count"));
  return Value(python_replace(self.as_string(), bound[0].as_string(), bound[1].as_string(), count));
}

Expected<Value> count_method(const Value& self, const CallArgs& args) {
  static const Param kParams[] = {{"x", std::nullopt}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("count", args, kParams));
  int64_t count = 0;
  if (self.is_list()) {
    for (const Value& item : self.as_list().items) count += equals(item, bound[0]) ? 1 : 0;
    return Value(count);
  }
  if (!bound[0].is_string()) return Error{"count argument must be a string"};
  const std::string& text = self.as_string();
  const std::string& sub = bound[0].as_string();
  if (sub.empty()) return Value(static_cast<int64_t>(code_point_count(text)) + 1);
  for (size_t at = text.find(sub); at != std::string::npos; at = text.find(sub, at + sub.size()))
    ++count;
  return Value(count);
}

Expected<Value> join_method(const Value& self, const CallArgs& args) {
  static const Param kParams[] = {{"iterable", std::nullopt}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("join", args, kParams));
  LOCKSTEP_JINJA_ASSIGN(auto items, iterate(bound[0]));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string())
      return Error{"sequence item " + std::to_string(i) + ": expected str instance, " +
                   type_name(items[i]) + " found"};
    if (i) out += self.as_string();
    limit_text(out.size() + items[i].as_string().size());
    out += items[i].as_string();
  }
  return Value(std::move(out));
}

Expected<Value> affix_removal(const Value& self, const CallArgs& args, bool prefix) {
  static const Param kParams[] = {{"affix", std::nullopt}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("removeprefix", args, kParams));
  if (!bound[0].is_string()) return Error{"removeprefix/removesuffix argument must be a string"};
  const std::string& text = self.as_string();
  const std::string& affix = bound[0].as_string();
  if (affix.empty() || affix.size() > text.size()) return self;
  if (prefix && text.compare(0, affix.size(), affix) == 0) return Value(text.substr(affix.size()));
  if (!prefix && text.compare(text.size() - affix.size(), affix.size(), affix) == 0)
    return Value(text.substr(0, text.size() - affix.size()));
  return self;
}

Expected<Value> splitlines_method(const Value& self, const CallArgs& args) {
  static const Param kParams[] = {{"keepends", Value(false)}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("splitlines", args, kParams));
  return string_list(python_splitlines(self.as_string(), truthy(bound[0])));
}

constexpr std::pair<std::string_view, Method> kStringMethods[] = {
    {"startswith", [](const Value& s, const CallArgs& a) { return affix_test(s, a, true); }},
    {"endswith", [](const Value& s, const CallArgs& a) { return affix_test(s, a, false); }},
    {"strip", [](const Value& s, const CallArgs& a) { return strip_method(s, a, true, true); }},
    {"lstrip", [](const Value& s, const CallArgs& a) { return strip_method(s, a, true, false); }},
    {"rstrip", [](const Value& s, const CallArgs& a) { return strip_method(s, a, false, true); }},
    {"split", [](const Value& s, const CallArgs& a) { return split_method(s, a, false); }},
    {"rsplit", [](const Value& s, const CallArgs& a) { return split_method(s, a, true); }},
    {"find",
     [](const Value& s, const CallArgs& a) { return find_method_impl(s, a, false, false); }},
    {"rfind",
     [](const Value& s, const CallArgs& a) { return find_method_impl(s, a, true, false); }},
    {"index",
     [](const Value& s, const CallArgs& a) { return find_method_impl(s, a, false, true); }},
    {"rindex",
     [](const Value& s, const CallArgs& a) { return find_method_impl(s, a, true, true); }},
    {"removeprefix", [](const Value& s, const CallArgs& a) { return affix_removal(s, a, true); }},
    {"removesuffix", [](const Value& s, const CallArgs& a) { return affix_removal(s, a, false); }},
    {"upper", transform_method<python_upper>},
    {"lower", transform_method<python_lower>},
    {"title", transform_method<python_title>},
    {"capitalize", transform_method<python_capitalize>},
    {"isalpha", class_method<CharClass::kAlpha>},
    {"isdigit", class_method<CharClass::kDigit>},
    {"isalnum", class_method<CharClass::kAlnum>},
    {"isupper", class_method<CharClass::kUpper>},
    {"islower", class_method<CharClass::kLower>},
    {"isspace", class_method<CharClass::kSpace>},
    {"replace", replace_method},
    {"count", count_method},
    {"join", join_method},
    {"splitlines", splitlines_method},
};

Expected<Value> dict_get(const Value& self, const CallArgs& args) {
  static const Param kParams[] = {{"key", std::nullopt}, {"default", Value(None{})}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("get", args, kParams));
  if (!bound[0].is_string()) return bound[1];
  const Value* found = self.as_dict().find(bound[0].as_string());
  return found ? *found : bound[1];
}

// items() / keys() / values(): 0, 1, 2.
template <int Part>
Expected<Value> dict_view(const Value& self, const CallArgs& args) {
  LOCKSTEP_TRY(expect_no_args("dict method", args));
  std::vector<Value> items;
  for (const auto& [key, value] : self.as_dict().entries) {
    if (Part == 0) items.push_back(Value::tuple({Value(key), value}));
    if (Part == 1) items.emplace_back(key);
    if (Part == 2) items.push_back(value);
  }
  return Value::list(std::move(items));
}

constexpr std::pair<std::string_view, Method> kDictMethods[] = {
    {"get", dict_get}, {"items", dict_view<0>}, {"keys", dict_view<1>}, {"values", dict_view<2>}};

Expected<Value> list_index(const Value& self, const CallArgs& args) {
  static const Param kParams[] = {{"x", std::nullopt}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("index", args, kParams));
  const auto& items = self.as_list().items;
  for (size_t i = 0; i < items.size(); ++i)
    if (equals(items[i], bound[0])) return Value(i);
  return Error{repr(bound[0]) + " is not in list"};
}

constexpr std::pair<std::string_view, Method> kListMethods[] = {{"index", list_index},
                                                                {"count", count_method}};

template <size_t N>
Method lookup(const std::pair<std::string_view, Method> (&table)[N], std::string_view name) {
  for (const auto& [method_name, method] : table)
    if (method_name == name) return method;
  return nullptr;
}

Expected<Value> range_function(const CallArgs& args) {
  if (!args.keywords.empty() || args.positional.empty() || args.positional.size() > 3)
    return Error{"range() takes 1 to 3 positional arguments"};
  std::vector<int64_t> bounds;
  for (const Value& value : args.positional) {
    LOCKSTEP_JINJA_ASSIGN(int64_t bound, integer_argument(value, "range argument"));
    bounds.push_back(bound);
  }
  int64_t start = bounds.size() == 1 ? 0 : bounds[0];
  int64_t stop = bounds.size() == 1 ? bounds[0] : bounds[1];
  int64_t step = bounds.size() == 3 ? bounds[2] : 1;
  if (step == 0) return Error{"range() arg 3 must not be zero"};
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (items.size() >= 100000) return Error{"range too big (jinja2's sandbox allows 100000)"};
    items.emplace_back(i);
  }
  return Value::list(std::move(items));
}

Expected<Value> namespace_function(const CallArgs& args) {
  if (args.positional.size() > 1) return Error{"namespace() takes at most one positional argument"};
  auto attributes = std::make_shared<Dict>();
  if (!args.positional.empty()) {
    if (!args.positional[0].is_dict()) return Error{"namespace() argument must be a dict"};
    *attributes = args.positional[0].as_dict();
  }
  for (const auto& [name, value] : args.keywords) attributes->set(name, value);
  return Value(Namespace{std::move(attributes)});
}

Expected<Value> dict_function(const CallArgs& args) {
  if (!args.positional.empty()) return Error{"dict() takes keyword arguments only"};
  Dict dict;
  for (const auto& [name, value] : args.keywords) dict.set(name, value);
  return Value(std::move(dict));
}

Expected<Value> raise_exception_function(const CallArgs& args) {
  static const Param kParams[] = {{"message", std::nullopt}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("raise_exception", args, kParams));
  return Error{to_str(bound[0])};
}

Expected<Value> strftime_now_function(const CallArgs& args) {
  static const Param kParams[] = {{"format", std::nullopt}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("strftime_now", args, kParams));
  if (!bound[0].is_string()) return Error{"strftime_now() format must be a string"};
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buffer[512];
  size_t written = std::strftime(buffer, sizeof buffer, bound[0].as_string().c_str(), &local);
  return Value(std::string(buffer, written));
}

}  // namespace

std::optional<Value> find_method(const Value& self, const std::string& name) {
  Method method = self.is_string() ? lookup(kStringMethods, name)
                  : self.is_dict() ? lookup(kDictMethods, name)
                  : self.is_list() ? lookup(kListMethods, name)
                                   : nullptr;
  if (!method) return std::nullopt;
  return Value(Callable{name, [self, method](const CallArgs& args) { return method(self, args); }});
}

Dict builtin_globals() {
  Dict globals;
  globals.set("range", Callable{"range", range_function});
  globals.set("namespace", Callable{"namespace", namespace_function});
  globals.set("dict", Callable{"dict", dict_function});
  globals.set("raise_exception", Callable{"raise_exception", raise_exception_function});
  globals.set("strftime_now", Callable{"strftime_now", strftime_now_function});
  return globals;
}

}  // namespace lockstep::jinja
