#include "grammar/json_schema.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace lockstep {
namespace {

using json = nlohmann::ordered_json;

const std::set<std::string> kAnnotations = {"title",    "description", "default",    "examples",  "$schema",
                                            "$id",      "$comment",    "deprecated", "readOnly",  "writeOnly",
                                            "$defs",    "definitions"};
const std::set<std::string> kKeywords = {"type",     "enum",     "const",    "anyOf",     "$ref",
                                         "properties", "required", "additionalProperties", "items",
                                         "minItems", "maxItems", "minLength", "maxLength"};
constexpr int32_t kMaxBoundedRepeat = 1024;

class SchemaCompiler {
 public:
  SchemaCompiler(Grammar& grammar, const json& root) : g_(grammar), root_(root) {}

  Expected<int32_t> compile(const json& schema, const std::string& path);
  int32_t any_value();
  int32_t any_object();

 private:
  Expected<int32_t> typed(const json& schema, const std::string& type, const std::string& path);
  Expected<int32_t> object(const json& schema, const std::string& path);
  Expected<int32_t> array(const json& schema, const std::string& path);
  Expected<int32_t> string(const json& schema, const std::string& path);
  Expected<int32_t> reference(const std::string& ref, const std::string& path);
  Expected<int32_t> members_from(const std::vector<int32_t>& members, const std::vector<bool>& required);
  // A count keyword: absent -> fallback; else a non-negative integer.
  Expected<int32_t> count(const json& schema, const char* key, int32_t fallback, const std::string& path);
  // A min/max pair of counts (minLength/maxLength, minItems/maxItems): max -1 when absent; within
  // kMaxBoundedRepeat, since each bounded step is a rule.
  Expected<std::pair<int32_t, int32_t>> bounds(const json& schema, const std::string& min_key,
                                               const std::string& max_key, const std::string& path);

  int32_t separator(char c);  // c, then at most one space
  int32_t json_string(int32_t min_chars, int32_t max_chars);
  int32_t number(bool integer);
  int32_t list(int32_t item, int32_t min, int32_t max, char open, char close);

  Grammar& g_;
  const json& root_;
  std::map<std::string, int32_t> references_;  // compiled $refs, by target
  int32_t any_value_ = -1, any_object_ = -1, string_char_ = -1, comma_ = -1, colon_ = -1;
  std::map<std::pair<int32_t, int32_t>, int32_t> strings_;
};

Error problem(const std::string& path, const std::string& message) { return make_error(path + ": " + message); }

// Whether `value` is of `type` (a type name or a list of them).
bool has_type(const json& value, const json& type) {
  if (type.is_array()) {
    for (const json& each : type)
      if (has_type(value, each)) return true;
    return false;
  }
  if (!type.is_string()) return false;
  const std::string name = type.get<std::string>();
  return (name == "object" && value.is_object()) || (name == "array" && value.is_array()) ||
         (name == "string" && value.is_string()) || (name == "integer" && value.is_number_integer()) ||
         (name == "number" && value.is_number()) || (name == "boolean" && value.is_boolean()) ||
         (name == "null" && value.is_null());
}

int32_t SchemaCompiler::separator(char c) {
  int32_t& rule = c == ',' ? comma_ : colon_;
  if (rule < 0) rule = g_.sequence({g_.literal(std::string(1, c)), g_.repeat(g_.literal(" "), 0, 1)});
  return rule;
}

int32_t SchemaCompiler::json_string(int32_t min_chars, int32_t max_chars) {
  if (string_char_ < 0) {
    ByteSet plain;
    plain.add_range(0x20, 0x7f);
    plain.words[0x22 >> 6] &= ~(uint64_t(1) << (0x22 & 63));
    plain.words[0x5c >> 6] &= ~(uint64_t(1) << (0x5c & 63));
    ByteSet hex = ByteSet().add_range('0', '9').add_range('a', 'f').add_range('A', 'F');
    ByteSet not_d = ByteSet().add_range('0', '9').add_range('a', 'c').add_range('e', 'f').add_range('A', 'C').add_range('E', 'F');
    const int32_t hex1 = g_.bytes(hex);
    // \uXXXX without surrogates (a lone one would not parse): characters past U+FFFF come as UTF-8.
    const int32_t unicode = g_.choice({g_.sequence({g_.bytes(not_d), hex1, hex1, hex1}),
                                       g_.sequence({g_.bytes(ByteSet().add('d').add('D')),
                                                    g_.bytes(ByteSet().add_range('0', '7')), hex1, hex1})});
    const int32_t escape = g_.sequence(
        {g_.literal("\\"), g_.choice({g_.bytes(ByteSet().add('"').add('\\').add('/').add('b').add('f').add('n').add('r').add('t')),
                                      g_.sequence({g_.literal("u"), unicode})})});
    const int32_t utf8 = add_utf8_char(g_);
    string_char_ = g_.choice({g_.bytes(plain), escape, utf8});
  }
  auto [at, added] = strings_.try_emplace({min_chars, max_chars}, 0);
  if (added) {
    const int32_t quote = g_.literal("\"");
    at->second = g_.sequence({quote, g_.repeat(string_char_, min_chars, max_chars), quote});
  }
  return at->second;
}

int32_t SchemaCompiler::number(bool integer) {
  const int32_t digit = g_.bytes(ByteSet().add_range('0', '9'));
  const int32_t whole = g_.sequence({g_.repeat(g_.literal("-"), 0, 1),
                                     g_.choice({g_.literal("0"), g_.sequence({g_.bytes(ByteSet().add_range('1', '9')),
                                                                              g_.repeat(digit, 0, 15)})})});
  if (integer) return whole;
  const int32_t fraction = g_.sequence({g_.literal("."), g_.repeat(digit, 1, 16)});
  const int32_t exponent = g_.sequence({g_.bytes(ByteSet().add('e').add('E')),
                                        g_.repeat(g_.bytes(ByteSet().add('+').add('-')), 0, 1), g_.repeat(digit, 1, 2)});
  return g_.sequence({whole, g_.repeat(fraction, 0, 1), g_.repeat(exponent, 0, 1)});
}

int32_t SchemaCompiler::list(int32_t item, int32_t min, int32_t max, char open, char close) {
  const int32_t opening = g_.literal(std::string(1, open)), closing = g_.literal(std::string(1, close));
  if (max == 0) return g_.sequence({opening, closing});
  const int32_t more = g_.sequence({separator(','), item});
  const int32_t items = g_.sequence({item, g_.repeat(more, min > 0 ? min - 1 : 0, max < 0 ? -1 : max - 1)});
  return g_.sequence({opening, min > 0 ? items : g_.repeat(items, 0, 1), closing});
}

int32_t SchemaCompiler::any_value() {
  if (any_value_ >= 0) return any_value_;
  any_value_ = g_.declare();
  const int32_t member = g_.sequence({json_string(0, -1), separator(':'), any_value_});
  any_object_ = list(member, 0, -1, '{', '}');
  g_.add_alternative(any_value_, {any_object_});
  g_.add_alternative(any_value_, {list(any_value_, 0, -1, '[', ']')});
  g_.add_alternative(any_value_, {json_string(0, -1)});
  g_.add_alternative(any_value_, {number(false)});
  for (const char* word : {"true", "false", "null"}) g_.add_alternative(any_value_, {g_.literal(word)});
  return any_value_;
}

int32_t SchemaCompiler::any_object() {
  any_value();
  return any_object_;
}

Expected<int32_t> SchemaCompiler::count(const json& schema, const char* key, int32_t fallback, const std::string& path) {
  if (!schema.contains(key)) return fallback;
  const json& value = schema[key];
  if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > (int64_t(1) << 30))
    return problem(path + "." + key, "must be a non-negative integer");
  return int32_t(value.get<int64_t>());
}

Expected<int32_t> SchemaCompiler::compile(const json& schema, const std::string& path) {
  if (schema.is_boolean()) {
    if (!schema.get<bool>()) return problem(path, "the schema false accepts nothing");
    return any_value();
  }
  if (!schema.is_object()) return problem(path, "a schema must be an object or a boolean");
  for (const auto& [key, value] : schema.items())
    if (!kAnnotations.count(key) && !kKeywords.count(key))
      return problem(path, "the keyword \"" + key + "\" is not supported in structured output");
  if (schema.contains("$ref")) {
    if (schema.size() > 1)
      for (const auto& [key, value] : schema.items())
        if (kKeywords.count(key) && key != "$ref") return problem(path, "\"$ref\" beside \"" + key + "\" is not supported");
    if (!schema["$ref"].is_string()) return problem(path + ".$ref", "must be a string");
    return reference(schema["$ref"].get<std::string>(), path);
  }
  // Beside const, enum and anyOf: annotations, and for const and enum a `type` every value has.
  for (const char* keyword : {"const", "enum", "anyOf"}) {
    if (!schema.contains(keyword)) continue;
    for (const auto& [key, value] : schema.items()) {
      const bool typed_values = key == "type" && std::string(keyword) != "anyOf";
      if (kKeywords.count(key) && key != keyword && !typed_values)
        return problem(path, "\"" + key + "\" beside \"" + keyword + "\" is not supported");
    }
    if (schema.contains("type")) {
      const json values = std::string(keyword) == "const" ? json::array({schema["const"]}) : schema[keyword];
      if (!values.is_array()) return problem(path + "." + keyword, "must be an array");
      for (const json& value : values)
        if (!has_type(value, schema["type"]))
          return problem(path + "." + keyword, value.dump() + " is not of the schema's type " + schema["type"].dump());
    }
  }
  if (schema.contains("const")) return g_.literal(schema["const"].dump());
  if (schema.contains("enum")) {
    const json& values = schema["enum"];
    if (!values.is_array() || values.empty()) return problem(path + ".enum", "must be a non-empty array");
    if (values.size() > 4096) return problem(path + ".enum", "more than 4096 values are not supported");
    std::vector<int32_t> literals;
    for (const json& value : values) literals.push_back(g_.literal(value.dump()));
    return g_.choice(literals);
  }
  if (schema.contains("anyOf")) {
    const json& options = schema["anyOf"];
    if (!options.is_array() || options.empty()) return problem(path + ".anyOf", "must be a non-empty array");
    std::vector<int32_t> rules;
    for (size_t i = 0; i < options.size(); ++i) {
      Expected<int32_t> option = compile(options[i], path + ".anyOf[" + std::to_string(i) + "]");
      if (!option) return option.error();
      rules.push_back(*option);
    }
    return g_.choice(rules);
  }
  std::vector<std::string> types;
  if (schema.contains("type")) {
    const json& type = schema["type"];
    if (type.is_string()) {
      types.push_back(type.get<std::string>());
    } else if (type.is_array() && !type.empty()) {
      for (const json& each : type) {
        if (!each.is_string()) return problem(path + ".type", "must be a string or an array of strings");
        types.push_back(each.get<std::string>());
      }
    } else {
      return problem(path + ".type", "must be a string or an array of strings");
    }
  } else if (schema.contains("properties") || schema.contains("additionalProperties") || schema.contains("required")) {
    types.push_back("object");
  } else if (schema.contains("items") || schema.contains("minItems") || schema.contains("maxItems")) {
    types.push_back("array");
  } else if (schema.contains("minLength") || schema.contains("maxLength")) {
    types.push_back("string");
  } else {
    return any_value();
  }
  std::vector<int32_t> rules;
  for (const std::string& type : types) {
    Expected<int32_t> rule = typed(schema, type, path);
    if (!rule) return rule.error();
    rules.push_back(*rule);
  }
  return rules.size() == 1 ? rules[0] : g_.choice(rules);
}

Expected<int32_t> SchemaCompiler::typed(const json& schema, const std::string& type, const std::string& path) {
  if (type == "object") return object(schema, path);
  if (type == "array") return array(schema, path);
  if (type == "string") return string(schema, path);
  if (type == "number" || type == "integer") return number(type == "integer");
  if (type == "boolean") return g_.choice({g_.literal("true"), g_.literal("false")});
  if (type == "null") return g_.literal("null");
  return problem(path + ".type", "unknown type \"" + type + "\"");
}

Expected<std::pair<int32_t, int32_t>> SchemaCompiler::bounds(const json& schema, const std::string& min_key,
                                                             const std::string& max_key, const std::string& path) {
  Expected<int32_t> min = count(schema, min_key.c_str(), 0, path);
  if (!min) return min.error();
  Expected<int32_t> max = count(schema, max_key.c_str(), -1, path);
  if (!max) return max.error();
  if (*max >= 0 && *max < *min) return problem(path, max_key + " is below " + min_key);
  if (*min > kMaxBoundedRepeat || (*max >= 0 && *max - *min > kMaxBoundedRepeat))
    return problem(path, min_key + " and " + max_key + " over " + std::to_string(kMaxBoundedRepeat) + " are not supported");
  return std::pair{*min, *max};
}

Expected<int32_t> SchemaCompiler::string(const json& schema, const std::string& path) {
  auto length = bounds(schema, "minLength", "maxLength", path);
  if (!length) return length.error();
  return json_string(length->first, length->second);
}

Expected<int32_t> SchemaCompiler::array(const json& schema, const std::string& path) {
  int32_t item = 0;
  if (schema.contains("items")) {
    Expected<int32_t> compiled = compile(schema["items"], path + ".items");
    if (!compiled) return compiled.error();
    item = *compiled;
  } else {
    item = any_value();
  }
  auto items = bounds(schema, "minItems", "maxItems", path);
  if (!items) return items.error();
  return list(item, items->first, items->second, '[', ']');
}

Expected<int32_t> SchemaCompiler::object(const json& schema, const std::string& path) {
  std::set<std::string> required;
  if (schema.contains("required")) {
    const json& names = schema["required"];
    if (!names.is_array()) return problem(path + ".required", "must be an array of strings");
    for (const json& name : names) {
      if (!name.is_string()) return problem(path + ".required", "must be an array of strings");
      required.insert(name.get<std::string>());
    }
  }
  int32_t additional = -1;  // -1: no other members
  if (schema.contains("additionalProperties")) {
    const json& extra = schema["additionalProperties"];
    if (!(extra.is_boolean() && !extra.get<bool>())) {
      Expected<int32_t> compiled = compile(extra, path + ".additionalProperties");
      if (!compiled) return compiled.error();
      additional = *compiled;
    }
  } else if (!schema.contains("properties")) {
    additional = any_value();
  }
  if (!schema.contains("properties")) {
    if (!required.empty()) return problem(path + ".required", "names \"" + *required.begin() + "\", which is not in properties");
    if (additional < 0) return g_.literal("{}");
    return list(g_.sequence({json_string(0, -1), separator(':'), additional}), 0, -1, '{', '}');
  }
  const json& properties = schema["properties"];
  if (!properties.is_object()) return problem(path + ".properties", "must be an object");
  for (const std::string& name : required)
    if (!properties.contains(name)) return problem(path + ".required", "names \"" + name + "\", which is not in properties");
  std::vector<int32_t> members;
  std::vector<bool> needed;
  for (const auto& [name, property] : properties.items()) {
    Expected<int32_t> value = compile(property, path + ".properties." + name);
    if (!value) return value.error();
    members.push_back(g_.sequence({g_.literal(json(name).dump()), separator(':'), *value}));
    needed.push_back(required.count(name) > 0);
  }
  Expected<int32_t> inside = members_from(members, needed);
  if (!inside) return inside.error();
  return g_.sequence({g_.literal("{"), *inside, g_.literal("}")});
}

Expected<int32_t> SchemaCompiler::members_from(const std::vector<int32_t>& members, const std::vector<bool>& required) {
  // after[i]: members i.. when one was written already (each then starts with a comma);
  // first[i]: members i.. when none was. Optional members may each be left out.
  const size_t n = members.size();
  std::vector<int32_t> after(n + 1), first(n + 1);
  after[n] = g_.empty();
  first[n] = g_.empty();
  for (size_t k = n; k-- > 0;) {
    const int32_t with_comma = g_.sequence({separator(','), members[k], after[k + 1]});
    const int32_t opening = g_.sequence({members[k], after[k + 1]});
    after[k] = required[k] ? with_comma : g_.choice({with_comma, after[k + 1]});
    first[k] = required[k] ? opening : g_.choice({opening, first[k + 1]});
  }
  return first[0];
}

Expected<int32_t> SchemaCompiler::reference(const std::string& ref, const std::string& path) {
  if (auto found = references_.find(ref); found != references_.end()) return found->second;
  const json* target = nullptr;
  if (ref == "#") {
    target = &root_;
  } else {
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string start(prefix);
      if (ref.compare(0, start.size(), start) != 0) continue;
      const std::string section = start.substr(2, start.size() - 3), name = ref.substr(start.size());
      if (root_.contains(section) && root_[section].is_object() && root_[section].contains(name))
        target = &root_[section][name];
    }
  }
  if (!target) return problem(path + ".$ref", "\"" + ref + "\" is not \"#\" or a schema under #/$defs or #/definitions");
  const int32_t rule = g_.declare();  // declared first: the target may refer to itself
  references_.emplace(ref, rule);
  Expected<int32_t> compiled = compile(*target, ref);
  if (!compiled) return compiled.error();
  g_.add_alternative(rule, {*compiled});
  return rule;
}

}  // namespace

Expected<int32_t> add_json_schema(Grammar& grammar, const nlohmann::ordered_json& schema) {
  return add_json_schema(grammar, schema, schema);
}

Expected<int32_t> add_json_schema(Grammar& grammar, const nlohmann::ordered_json& schema,
                                  const nlohmann::ordered_json& root_schema) {
  SchemaCompiler compiler(grammar, root_schema);
  Expected<int32_t> root = compiler.compile(schema, "schema");
  if (root.ok() && grammar.oversized())
    return make_error("schema: too large a schema (its grammar passes " + std::to_string(kMaxGrammarElements) +
                      " elements)");
  return root;
}

const json kNoSchema;

int32_t add_utf8_char(Grammar& g) {
  const int32_t tail = g.bytes(ByteSet().add_range(0x80, 0xbf));
  auto lead = [&](uint8_t first, uint8_t last) { return g.bytes(ByteSet().add_range(first, last)); };
  return g.choice({
      g.sequence({lead(0xc2, 0xdf), tail}),
      g.sequence({lead(0xe0, 0xe0), lead(0xa0, 0xbf), tail}),
      g.sequence({lead(0xe1, 0xec), tail, tail}),
      g.sequence({lead(0xed, 0xed), lead(0x80, 0x9f), tail}),
      g.sequence({lead(0xee, 0xef), tail, tail}),
      g.sequence({lead(0xf0, 0xf0), lead(0x90, 0xbf), tail, tail}),
      g.sequence({lead(0xf1, 0xf3), tail, tail, tail}),
      g.sequence({lead(0xf4, 0xf4), lead(0x80, 0x8f), tail, tail}),
  });
}

int32_t add_json_value(Grammar& grammar) {
  SchemaCompiler compiler(grammar, kNoSchema);
  return compiler.any_value();
}

int32_t add_json_object(Grammar& grammar) {
  SchemaCompiler compiler(grammar, kNoSchema);
  return compiler.any_object();
}

}  // namespace lockstep
