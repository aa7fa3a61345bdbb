#include "chat_template/jinja_value.h"

#include <algorithm>
#include <cmath>

#include "chat_template/jinja_strings.h"

namespace lockstep::jinja {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [name, value] : entries)
    if (name == key) return &value;
  return nullptr;
}

void Dict::set(std::string key, Value value) {
  for (auto& [name, existing] : entries) {
    if (name == key) {
      existing = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

int64_t Value::as_int() const { return is_bool() ? (as_bool() ? 1 : 0) : std::get<int64_t>(data_); }

double Value::as_double() const {
  return is_float() ? std::get<double>(data_) : static_cast<double>(as_int());
}

bool Value::same_object(const Value& other) const {
  if (kind() != other.kind()) return false;
  switch (kind()) {
    case Kind::kList: return &as_list() == &other.as_list();
    case Kind::kDict: return &as_dict() == &other.as_dict();
    case Kind::kNamespace: return &namespace_attributes() == &other.namespace_attributes();
    case Kind::kCallable: return &as_callable() == &other.as_callable();
    default: return equals(*this, other);
  }
}

std::string type_name(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "NoneType";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kList: return value.as_list().is_tuple ? "tuple" : "list";
    case Value::Kind::kDict: return "dict";
    case Value::Kind::kNamespace: return "Namespace";
    case Value::Kind::kCallable: return "function";
  }
  return "object";
}

Error undefined_error(const Value& value) {
  const std::string& hint = value.undefined_hint();
  return Error{hint.empty() ? "undefined value" : hint};
}

bool truthy(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return false;
    case Value::Kind::kBool: return value.as_bool();
    case Value::Kind::kInt: return value.as_int() != 0;
    case Value::Kind::kFloat: return value.as_double() != 0.0;
    case Value::Kind::kString: return !value.as_string().empty();
    case Value::Kind::kList: return !value.as_list().items.empty();
    case Value::Kind::kDict: return !value.as_dict().entries.empty();
    case Value::Kind::kNamespace:
    case Value::Kind::kCallable: return true;
  }
  return false;
}

std::string to_str(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kString: return value.as_string();
    default: return repr(value);
  }
}

namespace {

thread_local int walk_depth = 0;
thread_local int64_t walk_visits = 0;

// One level of a walk of a value, for as long as it lives (kMaxWalkDepth, kMaxWalkVisits).
class WalkStep {
 public:
  WalkStep() {
    if (walk_depth >= kMaxWalkDepth || ++walk_visits > kMaxWalkVisits) throw ValueTooLarge();
    ++walk_depth;
  }
  ~WalkStep() { --walk_depth; }
  WalkStep(const WalkStep&) = delete;
  WalkStep& operator=(const WalkStep&) = delete;
};

}  // namespace

void reset_value_walks() {
  walk_depth = 0;
  walk_visits = 0;
}

std::string repr(const Value& value) {
  WalkStep step;
  switch (value.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return value.as_bool() ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(value.as_int());
    case Value::Kind::kFloat: return python_float_repr(value.as_double());
    case Value::Kind::kString: return python_string_repr(value.as_string());
    case Value::Kind::kList: {
      const List& list = value.as_list();
      std::string out = list.is_tuple ? "(" : "[";
      for (size_t i = 0; i < list.items.size(); ++i) {
        out += (i ? ", " : "") + repr(list.items[i]);
        limit_text(out.size());  // a list holding itself twice, n deep, is 2^n items of text
      }
      if (list.is_tuple && list.items.size() == 1) out += ",";
      return out + (list.is_tuple ? ")" : "]");
    }
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      const Dict& dict = value.is_dict() ? value.as_dict() : value.namespace_attributes();
      std::string out = value.is_dict() ? "{" : "<Namespace {";
      bool first = true;
      for (const auto& [key, item] : dict.entries) {
        out += (first ? "" : ", ") + python_string_repr(key) + ": " + repr(item);
        limit_text(out.size());
        first = false;
      }
      return out + (value.is_dict() ? "}" : "}>");
    }
    case Value::Kind::kCallable: return "<function " + value.as_callable().name + ">";
  }
  return "";
}

bool equals(const Value& a, const Value& b) {
  WalkStep step;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (&x == &y) return true;  // one list held twice: no walk through it (it may be 2^n items)
      if (x.is_tuple != y.is_tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i)
        if (!equals(x.items[i], y.items[i])) return false;
      return true;
    }
    case Value::Kind::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (&x == &y) return true;
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [key, item] : x.entries) {
        const Value* other = y.find(key);
        if (!other || !equals(item, *other)) return false;
      }
      return true;
    }
    default: return a.same_object(b);
  }
}

Expected<int> compare(const Value& a, const Value& b) {
  WalkStep step;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {  // UTF-8 byte order is code point order
    int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.as_list().is_tuple == b.as_list().is_tuple) {
    const auto& x = a.as_list().items;
    const auto& y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  return Error{"comparison not supported between instances of '" + type_name(a) + "' and '" +
               type_name(b) + "'"};
}

Expected<int64_t> length(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return int64_t{0};
    case Value::Kind::kString: return static_cast<int64_t>(code_point_count(value.as_string()));
    case Value::Kind::kList: return static_cast<int64_t>(value.as_list().items.size());
    case Value::Kind::kDict: return static_cast<int64_t>(value.as_dict().entries.size());
    default: return Error{"object of type '" + type_name(value) + "' has no len()"};
  }
}

Expected<std::vector<Value>> iterate(const Value& value) {
  std::vector<Value> items;
  switch (value.kind()) {
    case Value::Kind::kUndefined: return items;
    case Value::Kind::kList: return value.as_list().items;
    case Value::Kind::kDict:
      for (const auto& entry : value.as_dict().entries) items.emplace_back(entry.first);
      return items;
    case Value::Kind::kString:
      for (char32_t c : utf8_decode(value.as_string())) {
        std::string one;
        utf8_append(one, c);
        items.emplace_back(std::move(one));
      }
      return items;
    default: return Error{"'" + type_name(value) + "' object is not iterable"};
  }
}

namespace {

template <class Json>
Value convert_json(const Json& json) {
  switch (json.type()) {
    case nlohmann::json::value_t::null: return None{};
    case nlohmann::json::value_t::boolean: return json.template get<bool>();
    case nlohmann::json::value_t::number_integer: return json.template get<int64_t>();
    case nlohmann::json::value_t::number_unsigned:
      return static_cast<int64_t>(json.template get<uint64_t>());
    case nlohmann::json::value_t::number_float: return json.template get<double>();
    case nlohmann::json::value_t::string: return json.template get<std::string>();
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(convert_json(item));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Dict dict;
      dict.entries.reserve(json.size());
      for (auto it = json.begin(); it != json.end(); ++it)
        dict.entries.emplace_back(it.key(), convert_json(it.value()));
      return dict;
    }
    default: return None{};  // binary and discarded values do not come from JSON text
  }
}

Status write_json(const Value& value, const JsonStyle& style, int depth, std::string& out) {
  WalkStep step;
  std::string item_separator =
      style.separators ? style.separators->first : (style.indent ? "," : ", ");
  std::string key_separator = style.separators ? style.separators->second : ": ";
  auto newline = [&](int level) {
    if (!style.indent) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += *style.indent;
  };
  switch (value.kind()) {
    case Value::Kind::kNone: out += "null"; return Status();
    case Value::Kind::kBool: out += value.as_bool() ? "true" : "false"; return Status();
    case Value::Kind::kInt: out += std::to_string(value.as_int()); return Status();
    case Value::Kind::kFloat: {
      double d = value.as_double();
      out += std::isnan(d)   ? "NaN"
             : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity")
                             : python_float_repr(d);
      return Status();
    }
    case Value::Kind::kString:
      out += json_quote(value.as_string(), style.ensure_ascii);
      return Status();
    case Value::Kind::kList: {
      const auto& items = value.as_list().items;
      if (items.empty()) {
        out += "[]";
        return Status();
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_separator;
        newline(depth + 1);
        LOCKSTEP_TRY(write_json(items[i], style, depth + 1, out));
        limit_text(out.size());  // while it is written, not once it is whole
      }
      newline(depth);
      out += ']';
      return Status();
    }
    case Value::Kind::kDict: {
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& entry : value.as_dict().entries) entries.push_back(&entry);
      if (style.sort_keys)
        std::stable_sort(entries.begin(), entries.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      if (entries.empty()) {
        out += "{}";
        return Status();
      }
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += item_separator;
        newline(depth + 1);
        out += json_quote(entries[i]->first, style.ensure_ascii) + key_separator;
        LOCKSTEP_TRY(write_json(entries[i]->second, style, depth + 1, out));
        limit_text(out.size());
      }
      newline(depth);
      out += '}';
      return Status();
    }
    default: return Error{"Object of type " + type_name(value) + " is not JSON serializable"};
  }
}

}  // namespace

Value from_json(const nlohmann::json& json) { return convert_json(json); }
Value from_json(const nlohmann::ordered_json& json) { return convert_json(json); }

Expected<std::string> to_json_text(const Value& value, const JsonStyle& style) {
  std::string out;
  LOCKSTEP_TRY(write_json(value, style, 0, out));
  return out;
}

Expected<std::vector<Value>> bind_args(const std::string& function, const CallArgs& args,
                                       std::span<const Param> params) {
  if (args.positional.size() > params.size())
    return Error{function + "() takes at most " + std::to_string(params.size()) + " argument(s) (" +
                 std::to_string(args.positional.size()) + " given)"};
  std::vector<std::optional<Value>> bound(params.size());
  for (size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
  for (const auto& [name, value] : args.keywords) {
    // An init-capture: clang before 16 cannot capture a structured binding (the fuzz build).
    auto param = std::find_if(params.begin(), params.end(),
                              [&name = name](const Param& p) { return p.name == name; });
    if (param == params.end())
      return Error{function + "() got an unexpected keyword argument '" + name + "'"};
    size_t index = static_cast<size_t>(param - params.begin());
    if (bound[index]) return Error{function + "() got multiple values for argument '" + name + "'"};
    bound[index] = value;
  }
  std::vector<Value> values;
  values.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (!bound[i] && !params[i].default_value)
      return Error{function + "() missing required argument '" + params[i].name + "'"};
    values.push_back(bound[i] ? *bound[i] : *params[i].default_value);
  }
  return values;
}

Status expect_no_args(const std::string& function, const CallArgs& args) {
  if (!args.positional.empty() || !args.keywords.empty())
    return Error{function + "() takes no arguments"};
  return Status();
}

}  // namespace lockstep::jinja
