// jinja2's built-in filters (its filters.py), with transformers' tojson.
#include "chat_template/jinja_filters.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <limits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "chat_template/jinja_case.h"
#include "chat_template/jinja_format.h"
#include "chat_template/jinja_list_filters.h"
#include "chat_template/jinja_operators.h"
#include "chat_template/jinja_strings.h"

namespace lockstep::jinja {
namespace {

// `count` spaces (none for a negative count), within the text limit.
std::string spaces(int64_t count) {
  size_t n = size_t(std::max<int64_t>(count, 0));
  limit_text(n);
  return std::string(n, ' ');
}

Expected<Value> filter_tojson(const Value& value, const CallArgs& args) {
  static const Param kParams[] = {{"ensure_ascii", Value(false)},
                                  {"indent", Value(None{})},
                                  {"separators", Value(None{})},
                                  {"sort_keys", Value(false)}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("tojson", args, kParams));
  JsonStyle style;
  style.ensure_ascii = truthy(bound[0]);
  if (bound[1].is_string())
    style.indent = bound[1].as_string();
  else if (bound[1].is_int())
    style.indent = spaces(bound[1].as_int());
  else if (!bound[1].is_none())
    return Error{"tojson indent must be None, an integer or a string"};
  if (!bound[2].is_none()) {
    if (!bound[2].is_list() || bound[2].as_list().items.size() != 2 ||
        !bound[2].as_list().items[0].is_string() || !bound[2].as_list().items[1].is_string())
      return Error{"tojson separators must be a pair of strings"};
    style.separators = {bound[2].as_list().items[0].as_string(),
                        bound[2].as_list().items[1].as_string()};
  }
  style.sort_keys = truthy(bound[3]);
  LOCKSTEP_JINJA_ASSIGN(std::string text, to_json_text(value, style));
  return Value(std::move(text));
}

// Python's float(str); nullopt when the text is not a number.
std::optional<double> parse_float(const std::string& text) {
  std::string trimmed = python_strip(text, std::nullopt, true, true);
  std::erase(trimmed, '_');
  if (trimmed.empty()) return std::nullopt;
  char* end = nullptr;
  double parsed = std::strtod(trimmed.c_str(), &end);
  if (end != trimmed.c_str() + trimmed.size()) return std::nullopt;
  return parsed;
}

Expected<Value> filter_int(const Value& value, const CallArgs& args) {
  static const Param kParams[] = {{"default", Value(0)}, {"base", Value(10)}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("int", args, kParams));
  if (value.is_undefined()) return undefined_error(value);
  if (value.is_int() || value.is_bool()) return Value(value.as_int());
  // Python's int() of a float too large for int64 has no int64 value: an error, not a wrap.
  const auto whole = [](double x) -> Expected<Value> {
    if (!(x >= -0x1p63 && x < 0x1p63)) return Error{"integer overflow"};
    return Value(static_cast<int64_t>(x));
  };
  if (value.is_float()) {
    if (!std::isfinite(value.as_double())) return bound[0];
    return whole(value.as_double());
  }
  if (!value.is_string()) return bound[0];
  std::string text = python_strip(value.as_string(), std::nullopt, true, true);
  std::erase(text, '_');
  int base = bound[1].is_int() ? static_cast<int>(bound[1].as_int()) : 10;
  char* end = nullptr;
  errno = 0;
  long long parsed = text.empty() ? 0 : std::strtoll(text.c_str(), &end, base);
  if (!text.empty() && errno == 0 && end == text.c_str() + text.size()) return Value(parsed);
  std::optional<double> as_float = parse_float(value.as_string());
  if (as_float && std::isfinite(*as_float)) return whole(*as_float);
  return bound[0];
}

Expected<Value> filter_float(const Value& value, const CallArgs& args) {
  static const Param kParams[] = {{"default", Value(0.0)}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("float", args, kParams));
  if (value.is_undefined()) return undefined_error(value);
  if (value.is_number()) return Value(value.as_double());
  if (value.is_string())
    if (std::optional<double> parsed = parse_float(value.as_string())) return Value(*parsed);
  return bound[0];
}

Expected<Value> filter_round(const Value& value, const CallArgs& args) {
  static const Param kParams[] = {{"precision", Value(0)}, {"method", Value("common")}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("round", args, kParams));
  if (value.is_undefined()) return undefined_error(value);
  if (!value.is_number()) return Error{"round needs a number"};
  if (!bound[0].is_int()) return Error{"round precision must be an integer"};
  std::string method = to_str(bound[1]);
  int64_t precision = bound[0].as_int();
  if (method == "common") {  // Python's round(value, precision): ties to even
    if (!value.is_float()) {
      if (precision >= 0) return Value(value.as_int());
      int64_t unit = 1;
      for (int64_t i = 0; i < -precision && unit <= INT64_MAX / 10; ++i) unit *= 10;
      int64_t quotient = value.as_int() / unit, remainder = value.as_int() % unit;
      if (remainder < 0) --quotient, remainder += unit;
      if (2 * remainder > unit || (2 * remainder == unit && quotient % 2 != 0)) ++quotient;
      return Value(quotient * unit);
    }
    char text[512];  // printf rounds the exact binary value, ties to even, as Python does
    if (precision >= 0) {
      std::snprintf(text, sizeof text, "%.*f", static_cast<int>(std::min<int64_t>(precision, 300)),
                    value.as_double());
      return Value(std::strtod(text, nullptr));
    }
    double unit = std::pow(10.0, static_cast<double>(-precision));
    std::snprintf(text, sizeof text, "%.0f", value.as_double() / unit);
    return Value(std::strtod(text, nullptr) * unit);
  }
  if (method != "ceil" && method != "floor")
    return Error{"round method must be 'common', 'ceil' or 'floor'"};
  double scale = std::pow(10.0, static_cast<double>(precision));
  double scaled = value.as_double() * scale;
  return Value((method == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale);
}

Expected<Value> filter_indent(const Value& value, const CallArgs& args) {
  static const Param kParams[] = {
      {"width", Value(4)}, {"first", Value(false)}, {"blank", Value(false)}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("indent", args, kParams));
  std::string indentation = bound[0].is_string() ? bound[0].as_string()
                            : bound[0].is_int()
                                ? spaces(bound[0].as_int())
                                : std::string();
  if (value.is_undefined()) return undefined_error(value);
  if (!value.is_string())
    return Error{"unsupported operand type(s) for +=: '" + type_name(value) + "' and 'str'"};
  std::vector<std::string> lines = python_splitlines(value.as_string() + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\n";
    limit_text(out.size() + indentation.size() + lines[i].size());
    bool indent_line = i > 0 && (truthy(bound[2]) || !lines[i].empty());
    out += (indent_line ? indentation : "") + lines[i];
  }
  if (truthy(bound[1])) out = indentation + out;
  return Value(std::move(out));
}

Expected<Value> filter_center(const Value& value, const CallArgs& args) {
  static const Param kParams[] = {{"width", Value(80)}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("center", args, kParams));
  if (!bound[0].is_int()) return Error{"center width must be an integer"};
  std::string text = to_str(value);
  int64_t width = bound[0].as_int();
  int64_t margin = width - static_cast<int64_t>(code_point_count(text));
  if (margin <= 0) return Value(std::move(text));
  limit_text(size_t(width));
  int64_t left = margin / 2 + (margin & width & 1);  // as Python's str.center
  return Value(std::string(left, ' ') + text + std::string(margin - left, ' '));
}

// format(*args) or format(**kwargs): `value % args`.
Expected<Value> filter_format(const Value& value, const CallArgs& args) {
  if (!args.positional.empty() && !args.keywords.empty())
    return Error{"format can't handle positional and keyword arguments at the same time"};
  Value format_args = Value::tuple(args.positional);
  if (!args.keywords.empty()) {
    Dict named;
    for (const auto& [name, argument] : args.keywords) named.set(name, argument);
    format_args = Value(std::move(named));
  }
  LOCKSTEP_JINJA_ASSIGN(std::string text, percent_format(to_str(value), format_args));
  return Value(std::move(text));
}

Expected<Value> filter_replace(const Value& value, const CallArgs& args) {
  static const Param kParams[] = {{"old", std::nullopt},
                                  {"new", std::nullopt},
                                  {"center", filter_center},
                                  {"count", Value(None{})}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("replace", args, kParams));
  int64_t count = bound[2].is_none() ? -1 : bound[2].is_int() ? bound[2].as_int() : -1;
  return Value(python_replace(to_str(value), to_str(bound[0]), to_str(bound[1]), count));
}

Expected<Value> filter_trim(const Value& value, const CallArgs& args) {
  static const Param kParams[] = {{"chars", Value(None{})}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("trim", args, kParams));
  std::optional<std::string> chars;
  if (!bound[0].is_none()) chars = to_str(bound[0]);
  return Value(python_strip(to_str(value), chars, true, true));
}

Expected<Value> filter_default(const Value& value, const CallArgs& args) {
  static const Param kParams[] = {{"default_value", Value("")}, {"boolean", Value(false)}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("default", args, kParams));
  bool use_default = value.is_undefined() || (truthy(bound[1]) && !truthy(value));
  return use_default ? bound[0] : value;
}

template <std::string (*Transform)(std::string_view)>
Expected<Value> string_filter(const Value& value, const CallArgs& args) {
  LOCKSTEP_TRY(expect_no_args("filter", args));
  return Value(Transform(to_str(value)));
}

std::string identity(std::string_view text) { return std::string(text); }

std::string html_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Expected<Value> filter_abs(const Value& value, const CallArgs& args) {
  LOCKSTEP_TRY(expect_no_args("filter", args));
  if (value.is_float()) return Value(std::fabs(value.as_double()));
  if (value.is_number()) {
    if (value.as_int() == std::numeric_limits<int64_t>::min()) return Error{"integer overflow"};
    return Value(std::llabs(value.as_int()));
  }
  return Error{"bad operand type for abs(): '" + type_name(value) + "'"};
}

Expected<Value> filter_attr(const Value& value, const CallArgs& args) {
  static const Param kParams[] = {{"name", std::nullopt}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("attr", args, kParams));
  return get_attribute(value, to_str(bound[0]));
}

Expected<Value> filter_wordcount(const Value& value, const CallArgs& args) {
  LOCKSTEP_TRY(expect_no_args("filter", args));
  int64_t words = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(to_str(value))) {
    std::string one;
    utf8_append(one, c);
    bool word_char = c == '_' || python_is(one, CharClass::kAlnum);
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value(words);
}

constexpr std::pair<std::string_view, FilterFunction> kFilters[] = {
    {"abs", filter_abs},
    {"attr", filter_attr},
    {"batch", filter_batch},
    {"capitalize", string_filter<python_capitalize>},
    {"center", filter_center},
    {"count", filter_length},
    {"d", filter_default},
    {"default", filter_default},
    {"dictsort", filter_dictsort},
    {"e", string_filter<html_escape>},
    {"escape", string_filter<html_escape>},
    {"first", filter_first},
    {"float", filter_float},
    {"format", filter_format},
    {"indent", filter_indent},
    {"int", filter_int},
    {"items", filter_items},
    {"join", filter_join},
    {"last", filter_last},
    {"length", filter_length},
    {"list", filter_list},
    {"lower", string_filter<python_lower>},
    {"map", [](const Value& v, const CallArgs& a) { return filter_map(v, a, find_filter); }},
    {"max", filter_max},
    {"min", filter_min},
    {"reject", [](const Value& v, const CallArgs& a) { return filter_reject(v, a, find_test); }},
    {"rejectattr", [](const Value& v, const CallArgs& a) { return filter_rejectattr(v, a, find_test); }},
    {"replace", filter_replace},
    {"reverse", filter_reverse},
    {"round", filter_round},
    {"safe", string_filter<identity>},
    {"select", [](const Value& v, const CallArgs& a) { return filter_select(v, a, find_test); }},
    {"selectattr", [](const Value& v, const CallArgs& a) { return filter_selectattr(v, a, find_test); }},
    {"sort", filter_sort},
    {"string", string_filter<identity>},
    {"sum", filter_sum},
    {"title", string_filter<jinja_title>},
    {"tojson", filter_tojson},
    {"trim", filter_trim},
    {"unique", filter_unique},
    {"upper", string_filter<python_upper>},
    {"wordcount", filter_wordcount},
};

}  // namespace

FilterFunction find_filter(std::string_view name) {
  for (const auto& [filter_name, filter] : kFilters)
    if (filter_name == name) return filter;
  return nullptr;
}

}  // namespace lockstep::jinja
