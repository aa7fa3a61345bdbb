#include "chat_template/jinja_format.h"
#include "chat_template/jinja_strings.h"

#include <cmath>
#include <cstdio>

#include "chat_template/jinja_strings.h"

namespace lockstep::jinja {
namespace {

struct Spec {
  bool left = false, plus = false, space = false, alternate = false, zero = false;
  int width = 0;
  int precision = -1;  // none
};

std::string pad(const std::string& body, const std::string& prefix, const Spec& spec) {
  size_t length = code_point_count(prefix) + code_point_count(body);
  size_t width = static_cast<size_t>(spec.width);
  limit_text(width);
  if (length >= width) return prefix + body;
  std::string fill(width - length, spec.zero && !spec.left ? '0' : ' ');
  if (spec.left) return prefix + body + std::string(width - length, ' ');
  return spec.zero ? prefix + fill + body : fill + prefix + body;
}

Expected<std::string> format_integer(const Value& arg, char type, const Spec& spec) {
  if (!arg.is_number()) {
    return Error{std::string("%") + type + " format: " +
                 (type == 'd' || type == 'i' || type == 'u' ? "a real number" : "an integer") +
                 " is required, not " + type_name(arg)};
  }
  if (arg.is_float() && type != 'd' && type != 'i' && type != 'u')
    return Error{std::string("%") + type + " format: an integer is required, not float"};
  if (arg.is_float() && !std::isfinite(arg.as_double()))
    return Error{"cannot convert float infinity or NaN to integer"};
  int64_t value = arg.is_float() ? static_cast<int64_t>(arg.as_double()) : arg.as_int();
  uint64_t magnitude = value < 0 ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  char digits[32];
  const char* pattern = type == 'o' ? "%llo" : type == 'x' ? "%llx" : type == 'X' ? "%llX" : "%llu";
  std::snprintf(digits, sizeof digits, pattern, static_cast<unsigned long long>(magnitude));
  std::string body = digits;
  if (spec.precision > 0) limit_text(size_t(spec.precision));
  if (spec.precision > 0 && body.size() < static_cast<size_t>(spec.precision))
    body.insert(0, static_cast<size_t>(spec.precision) - body.size(), '0');
  std::string prefix = value < 0 ? "-" : spec.plus ? "+" : spec.space ? " " : "";
  if (spec.alternate && type == 'o') prefix += "0o";
  if (spec.alternate && (type == 'x' || type == 'X')) prefix += type == 'x' ? "0x" : "0X";
  return pad(body, prefix, spec);
}

Expected<std::string> format_float(const Value& arg, char type, const Spec& spec) {
  if (!arg.is_number())
    return Error{std::string("%") + type + " format: a real number is required, not " +
                 type_name(arg)};
  std::string pattern = "%";
  if (spec.left) pattern += '-';
  if (spec.plus) pattern += '+';
  if (spec.space) pattern += ' ';
  if (spec.alternate) pattern += '#';
  if (spec.zero) pattern += '0';
  pattern +=
      std::to_string(spec.width) + "." + std::to_string(spec.precision < 0 ? 6 : spec.precision);
  pattern += type;
  char text[512];
  std::snprintf(text, sizeof text, pattern.c_str(), arg.as_double());
  return std::string(text);
}

Expected<std::string> format_one(const Value& arg, char type, const Spec& spec) {
  switch (type) {
    case 's':
    case 'r':
    case 'a': {
      std::string text = type == 's' ? to_str(arg) : repr(arg);
      if (spec.precision >= 0) {
        std::u32string cps = utf8_decode(text);
        if (cps.size() > static_cast<size_t>(spec.precision)) cps.resize(spec.precision);
        text = utf8_encode(cps);
      }
      Spec no_zero = spec;
      no_zero.zero = false;
      return pad(text, "", no_zero);
    }
    case 'd':
    case 'i':
    case 'u':
    case 'o':
    case 'x':
    case 'X': return format_integer(arg, type, spec);
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G': return format_float(arg, type, spec);
    case 'c': {
      std::string text;
      if (arg.is_int() && arg.as_int() >= 0 && arg.as_int() <= 0x10ffff) {
        utf8_append(text, static_cast<char32_t>(arg.as_int()));
      } else if (arg.is_string() && code_point_count(arg.as_string()) == 1) {
        text = arg.as_string();
      } else {
        return Error{"%c requires an int or a unicode character"};
      }
      Spec no_zero = spec;
      no_zero.zero = false;
      return pad(text, "", no_zero);
    }
    default: return Error{std::string("unsupported format character '") + type + "'"};
  }
}

}  // namespace

Expected<std::string> percent_format(const std::string& format, const Value& args) {
  bool is_tuple = args.is_list() && args.as_list().is_tuple;
  std::vector<Value> positional = is_tuple ? args.as_list().items : std::vector<Value>{args};
  const Dict* mapping = args.is_dict() ? &args.as_dict() : nullptr;
  size_t next = 0;
  std::string out;
  auto next_arg = [&]() -> Expected<Value> {
    if (next >= positional.size()) return Error{"not enough arguments for format string"};
    return positional[next++];
  };
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) return Error{"incomplete format"};
    std::optional<Value> named;
    if (format[i] == '(') {
      if (!mapping) return Error{"format requires a mapping"};
      size_t close = format.find(')', i);
      if (close == std::string::npos) return Error{"incomplete format key"};
      std::string key = format.substr(i + 1, close - i - 1);
      const Value* found = mapping->find(key);
      if (!found) return Error{"KeyError: " + python_string_repr(key)};
      named = *found;
      i = close + 1;
    }
    Spec spec;
    for (; i < format.size(); ++i) {
      char flag = format[i];
      if (flag == '-')
        spec.left = true;
      else if (flag == '+')
        spec.plus = true;
      else if (flag == ' ')
        spec.space = true;
      else if (flag == '#')
        spec.alternate = true;
      else if (flag == '0')
        spec.zero = true;
      else
        break;
    }
    // A width or precision: digits, or '*' for the next argument. Past the text limit it fails
    // (limit_text), before any int could overflow.
    auto number = [&](int& target) -> Status {
      if (i < format.size() && format[i] == '*') {
        ++i;
        LOCKSTEP_JINJA_ASSIGN(Value count, next_arg());
        if (!count.is_int()) return Error{"* wants int"};
        const int64_t value = count.as_int();
        limit_text(size_t(value < 0 ? -(value + 1) : value));
        target = static_cast<int>(value);
        return Status();
      }
      int64_t value = 0;
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
        value = value * 10 + (format[i++] - '0');
        limit_text(size_t(value));
      }
      target = static_cast<int>(value);
      return Status();
    };
    LOCKSTEP_TRY(number(spec.width));
    if (spec.width < 0) spec.left = true, spec.width = -spec.width;
    if (i < format.size() && format[i] == '.') {
      ++i;
      LOCKSTEP_TRY(number(spec.precision));
    }
    while (i < format.size() && (format[i] == 'h' || format[i] == 'l' || format[i] == 'L')) ++i;
    if (i >= format.size()) return Error{"incomplete format"};
    char type = format[i];
    if (type == '%') {
      out += '%';
      continue;
    }
    Value arg;
    if (named) {
      arg = *named;
    } else {
      LOCKSTEP_JINJA_ASSIGN(arg, next_arg());
    }
    LOCKSTEP_JINJA_ASSIGN(std::string piece, format_one(arg, type, spec));
    out += piece;
  }
  // As Python: an argument with __getitem__ (a list, a dict, an Undefined) may go unused.
  bool subscriptable = args.is_dict() || args.is_undefined() || (args.is_list() && !is_tuple);
  if (!subscriptable && next < positional.size())
    return Error{"not all arguments converted during string formatting"};
  return out;
}

}  // namespace lockstep::jinja
