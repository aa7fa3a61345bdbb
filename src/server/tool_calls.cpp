#include "server/tool_calls.h"

#include <algorithm>
#include <cstdio>

#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"

namespace lockstep {
namespace {

using ordered = nlohmann::ordered_json;

constexpr const char* kSpaces = " \t\r\n";
constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>", kPythonTag = "<|python_tag|>";

// How much of the end of `text` could be the start of `marker`.
size_t partial_suffix(const std::string& text, std::string_view marker) {
  for (size_t keep = std::min(text.size(), marker.size() - 1); keep > 0; --keep)
    if (text.compare(text.size() - keep, keep, marker.substr(0, keep)) == 0) return keep;
  return 0;
}

std::string trim(const std::string& text) {
  const size_t first = text.find_first_not_of(kSpaces);
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(kSpaces) - first + 1);
}

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The schema of a tool's parameters (its function.parameters), or null.
const ordered* parameters_of(const ordered& tools, const std::string& name) {
  for (const ordered& tool : tools) {
    const ordered& function = tool["function"];
    if (function.value("name", "") == name) return function.contains("parameters") ? &function["parameters"] : nullptr;
  }
  return nullptr;
}

// An xml VALUE as the JSON its parameter's type asks for: strings stay text; others parse as
// JSON when they can.
ordered typed_value(const std::string& value, const ordered* schema) {
  std::string type;
  if (schema && schema->is_object() && schema->contains("type") && (*schema)["type"].is_string()) type = (*schema)["type"];
  if (type == "string") return value;
  ordered parsed = ordered::parse(value, nullptr, false);
  if (parsed.is_discarded()) return value;
  if (type == "integer" && !parsed.is_number_integer()) return value;
  if (type == "number" && !parsed.is_number()) return value;
  if (type == "boolean" && !parsed.is_boolean()) return value;
  return parsed;
}

}  // namespace

ToolFormat tool_format_of(const std::string& chat_template) {
  if (chat_template.find("<function=") != std::string::npos) return ToolFormat::xml;
  if (chat_template.find("<tool_call>") != std::string::npos) return ToolFormat::hermes;
  if (chat_template.find("tools") != std::string::npos && chat_template.find("\"parameters\"") != std::string::npos)
    return ToolFormat::llama_json;
  return ToolFormat::none;
}

ToolCallParser::ToolCallParser(ToolFormat format, ordered tools, uint64_t id_seed, bool forced)
    : format_(format), tools_(std::move(tools)), id_seed_(id_seed), forced_(forced) {}

void ToolCallParser::add(const std::string& name, const std::string& arguments) {
  char id[32];
  std::snprintf(id, sizeof id, "call_%016llx", static_cast<unsigned long long>(mix(id_seed_ ^ mix(made_))));
  ready_.push_back({id, name, arguments});
  ++made_;
}

std::vector<ToolCall> ToolCallParser::take() {
  std::vector<ToolCall> out;
  out.swap(ready_);
  return out;
}

bool ToolCallParser::parse_json_call(const std::string& text, const char* arguments_key) {
  ordered call = ordered::parse(trim(text), nullptr, false);
  if (call.is_discarded() || !call.is_object() || !call.contains("name") || !call["name"].is_string()) return false;
  // A reply that is any JSON with a "name" is no call: it must name one of the tools and carry
  // its arguments.
  const std::string name = call["name"];
  bool known = false;
  for (const ordered& tool : tools_) known = known || tool["function"].value("name", "") == name;
  if (!known) return false;
  ordered arguments;
  for (const char* key : {arguments_key, "arguments", "parameters"}) {
    if (!call.contains(key)) continue;
    arguments = call[key];
    break;
  }
  if (arguments.is_null()) return false;
  if (arguments.is_string()) arguments = ordered::parse(arguments.get<std::string>(), nullptr, false);
  if (!arguments.is_object()) return false;
  add(call["name"], arguments.dump());
  return true;
}

bool ToolCallParser::parse_xml_call(const std::string& body) {
  const std::string open = "<function=";
  const size_t start = body.find(open);
  if (start == std::string::npos) return false;
  const size_t name_end = body.find('>', start);
  if (name_end == std::string::npos) return false;
  const std::string name = trim(body.substr(start + open.size(), name_end - start - open.size()));
  const ordered* schema = parameters_of(tools_, name);
  ordered arguments = ordered::object();
  // A VALUE between its <parameter=P> line and the </parameter> after it, without the newlines
  // around it.
  auto value_between = [&](size_t key_end, size_t value_end) {
    std::string value = body.substr(key_end + 1, value_end - key_end - 1);
    if (!value.empty() && value.front() == '\n') value.erase(0, 1);
    if (!value.empty() && value.back() == '\n') value.pop_back();
    return value;
  };
  for (size_t at = body.find("<parameter=", name_end); at != std::string::npos; at = body.find("<parameter=", at)) {
    const size_t key_end = body.find('>', at);
    size_t value_end = key_end == std::string::npos ? key_end : body.find("</parameter>", key_end);
    if (value_end == std::string::npos) return false;
    const std::string key = trim(body.substr(at + 11, key_end - at - 11));
    const ordered* property = schema && schema->contains("properties") && (*schema)["properties"].contains(key)
                                  ? &(*schema)["properties"][key]
                                  : nullptr;
    // A value typed as JSON may hold "</parameter>" inside one of its strings: it ends at the
    // first </parameter> after which it parses as its type.
    ordered typed = typed_value(value_between(key_end, value_end), property);
    if (property && typed.is_string() && property->value("type", ordered()) != "string")
      for (size_t later = body.find("</parameter>", value_end + 1); later != std::string::npos;
           later = body.find("</parameter>", later + 1)) {
        ordered longer = typed_value(value_between(key_end, later), property);
        if (longer.is_string()) continue;
        typed = std::move(longer), value_end = later;
        break;
      }
    arguments[key] = std::move(typed);
    at = value_end;
  }
  add(name, arguments.dump());
  return true;
}

bool ToolCallParser::parse_call(const std::string& body) {
  return format_ == ToolFormat::xml ? parse_xml_call(body) : parse_json_call(body, "arguments");
}

std::string ToolCallParser::push(const std::string& content) { return release(scan(content)); }

std::string ToolCallParser::finish() {
  std::string out = release(scan_end());
  if (!spoken_ && made_ == 0 && !forced_) out += spaces_;  // a reply of whitespace alone keeps it
  spaces_.clear();
  return out;
}

std::string ToolCallParser::release(std::string text) {
  if (forced_) return {};
  if (spoken_) return text;
  spaces_ += text;
  if (spaces_.find_first_not_of(kSpaces) == std::string::npos) return {};
  spoken_ = true;
  text.swap(spaces_);
  spaces_.clear();
  return text;
}

std::string ToolCallParser::scan(const std::string& content) {
  pending_ += content;
  std::string out;
  if (format_ == ToolFormat::llama_json) {
    if (deciding_) {
      // Only spaces so far, a '{', or (the start of) <|python_tag|>.
      const std::string start = trim(pending_);
      const bool maybe = start.empty() || start[0] == '{' ||
                         kPythonTag.substr(0, start.size()) == std::string_view(start).substr(0, kPythonTag.size());
      if (maybe) return out;  // held until the end: the whole reply may be a call
      deciding_ = false;
    }
    out.swap(pending_);
    return out;
  }
  for (;;) {
    if (!inside_) {
      const size_t open = pending_.find(kOpen);
      if (open == std::string::npos) {
        const size_t keep = partial_suffix(pending_, kOpen);
        out += pending_.substr(0, pending_.size() - keep);
        pending_.erase(0, pending_.size() - keep);
        return out;
      }
      out += pending_.substr(0, open);
      pending_.erase(0, open + kOpen.size());
      inside_ = true;
    }
    const size_t close = pending_.find(kClose);
    if (close == std::string::npos) return out;
    const std::string body = pending_.substr(0, close);
    if (!parse_call(body)) out += std::string(kOpen) + body + std::string(kClose);  // not a call after all
    pending_.erase(0, close + kClose.size());
    inside_ = false;
  }
}

std::string ToolCallParser::scan_end() {
  std::string out;
  out.swap(pending_);
  if (format_ == ToolFormat::llama_json) {
    if (!deciding_) return out;
    std::string text = trim(out);
    if (text.rfind(kPythonTag, 0) == 0) text.erase(0, kPythonTag.size());
    return parse_json_call(text, "parameters") ? std::string() : out;
  }
  if (!inside_) return out;
  inside_ = false;
  // An unclosed call at the end (its closing tag cut, perhaps in part): a call if its body is
  // whole (hermes: its JSON parses; xml: up to its </function>, since a call cut after its name
  // would parse), else markup cut short.
  out.resize(out.size() - partial_suffix(out, kClose));
  if (format_ != ToolFormat::xml || out.find("</function>") != std::string::npos) (void)parse_call(out);
  return {};
}

namespace {

// An xml VALUE of a string parameter: text without '<' (which would start the closing tag), or
// one of its enum / const values; min/maxLength count characters. Other keywords are refused.
Expected<int32_t> xml_text(Grammar& g, const ordered& property, const std::string& where) {
  static const std::vector<std::string> kTaken = {"type", "enum", "const", "minLength", "maxLength", "title",
                                                  "description", "default", "examples"};
  for (const auto& [key, value] : property.items())
    if (std::find(kTaken.begin(), kTaken.end(), key) == kTaken.end())
      return make_error(where + ": \"" + key + "\" is not supported for a string parameter in this model's call format");
  if (property.contains("enum") || property.contains("const")) {
    const ordered values = property.contains("const") ? ordered::array({property["const"]}) : property["enum"];
    std::vector<int32_t> literals;
    for (const ordered& value : values) {
      if (!value.is_string() || value.get<std::string>().find('<') != std::string::npos)
        return make_error(where + ": enum values must be strings without '<' in this model's call format");
      const std::string& text = value.get_ref<const std::string&>();
      literals.push_back(text.empty() ? g.empty() : g.literal(text));  // literal("") matches nothing
    }
    return g.choice(literals);
  }
  ByteSet text_bytes = ByteSet().add_range(0x20, 0x7e).add('\n').add('\t');
  text_bytes.words['<' >> 6] &= ~(uint64_t(1) << ('<' & 63));
  const int32_t character = g.choice({g.bytes(text_bytes), add_utf8_char(g)});
  const int64_t min = property.value("minLength", int64_t(0)), max = property.value("maxLength", int64_t(-1));
  if (min < 0 || min > 1024 || max > 2048 || (max >= 0 && max < min))
    return make_error(where + ": minLength and maxLength must be within 0..1024 and 0..2048");
  return g.repeat(character, int32_t(min), int32_t(max));
}

// <tool_call>\n<function=NAME>\n, then <parameter=P>\nVALUE\n</parameter>\n for each property
// in order (strings as text, other types as JSON), then </function>\n</tool_call>.
Expected<int32_t> xml_call(Grammar& g, const std::string& name, const ordered& schema, const std::string& where) {
  std::vector<int32_t> parts = {g.literal("<tool_call>\n<function=" + name + ">\n")};
  std::vector<std::string> required;
  if (schema.contains("required") && schema["required"].is_array())
    for (const ordered& r : schema["required"])
      if (r.is_string()) required.push_back(r);
  if (schema.contains("properties") && schema["properties"].is_object()) {
    for (const auto& [key, property] : schema["properties"].items()) {
      const std::string at = where + ".properties." + key;
      if (key.empty() || key.find_first_of("<>\n") != std::string::npos)
        return make_error(at + ": a parameter name with '<', '>' or a newline cannot be written in this model's call format");
      const bool text = property.is_object() && property.value("type", ordered()) == "string";
      Expected<int32_t> value = text ? xml_text(g, property, at) : add_json_schema(g, property, schema);
      if (!value) return make_error(text ? value.error().message : at + ": " + value.error().message);
      const int32_t one = g.sequence({g.literal("<parameter=" + key + ">\n"), *value, g.literal("\n</parameter>\n")});
      const bool needed = std::find(required.begin(), required.end(), key) != required.end();
      parts.push_back(needed ? one : g.repeat(one, 0, 1));
    }
  }
  parts.push_back(g.literal("</function>\n</tool_call>"));
  return g.sequence(parts);
}

}  // namespace

Expected<std::shared_ptr<Grammar>> tool_call_grammar(ToolFormat format, const ordered& tools, const std::string& only,
                                                     bool parallel) {
  auto grammar = std::make_shared<Grammar>();
  Grammar& g = *grammar;
  std::vector<int32_t> calls;
  for (size_t i = 0; i < tools.size(); ++i) {
    const ordered& function = tools[i]["function"];
    const std::string name = function["name"];
    if (!only.empty() && name != only) continue;
    const std::string where = "tools[" + std::to_string(i) + "].function.parameters";
    // Arguments are an object: a schema that names no type is taken as one.
    ordered schema = function.contains("parameters") ? function["parameters"] : ordered::object();
    if (!schema.contains("type")) schema["type"] = "object";
    if (schema["type"] != "object") return make_error(where + ": a tool's parameters must be an object schema");
    Expected<int32_t> call = 0;
    if (format == ToolFormat::xml) {
      call = xml_call(g, name, schema, where);
    } else {
      Expected<int32_t> arguments = add_json_schema(g, schema);
      if (!arguments) return make_error(where + ": " + arguments.error().message);
      const std::string quoted = nlohmann::json(name).dump();
      call = format == ToolFormat::llama_json
                 ? g.sequence({g.literal("{\"name\": " + quoted + ", \"parameters\": "), *arguments, g.literal("}")})
                 : g.sequence({g.literal("<tool_call>\n{\"name\": " + quoted + ", \"arguments\": "), *arguments,
                               g.literal("}\n</tool_call>")});
    }
    if (!call) return call.error();
    calls.push_back(*call);
  }
  if (calls.empty()) return make_error("no tool named \"" + only + "\"");
  const int32_t call = g.choice(calls);
  if (parallel && format != ToolFormat::llama_json)
    g.set_root(g.sequence({call, g.repeat(g.sequence({g.literal("\n"), call}), 0, -1)}));
  else
    g.set_root(call);
  if (std::string problem = grammar_problem(g); !problem.empty()) return make_error("tools: " + problem);
  return grammar;
}

}  // namespace lockstep
