// Tool calls in a chat reply: the markup each template family asks its model to write, parsed
// out of the reply's content as it arrives, and the grammar that makes a model write a call
// (tool_choice "required" or a named function).
//
//   hermes      Qwen3, Qwen2.5, Hermes: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
//   xml         Nemotron 3, Qwen3-Coder: <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n
//               </parameter>\n</function>\n</tool_call>, each VALUE typed by the tool's schema
//   llama_json  Llama 3.1+: the whole reply is {"name": ..., "parameters": {...}}, perhaps after
//               <|python_tag|>
// The format is read from the chat template's text (tool_format_of).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "grammar/grammar.h"

namespace lockstep {

enum class ToolFormat { none, hermes, xml, llama_json };

// The format a chat template renders tool calls in; none when it renders no tools.
ToolFormat tool_format_of(const std::string& chat_template);

struct ToolCall {
  std::string id;         // "call_" and 16 hex digits, from the request's seed, choice and call
  std::string name;
  std::string arguments;  // a JSON object, as text
};

// A reply's content, split into text and calls as it arrives. Text that could still be the start
// of a call's markup is held back, so markup never reaches `content`; so is a reply's leading
// whitespace until other text comes (a reply of calls alone has no content, streamed or whole).
class ToolCallParser {
 public:
  // tools: the request's tools (for the xml format's value types); id_seed: where ids come from;
  // forced: a grammar makes the reply calls alone (tool_choice "required" or named), so no text
  // of it is content, even where max_tokens cut a call short.
  ToolCallParser(ToolFormat format, nlohmann::ordered_json tools, uint64_t id_seed, bool forced = false);

  // Adds content; returns the text now safe to send as content.
  std::string push(const std::string& content);
  // At the end of the reply: the text still held back. A call left open that parses is a call;
  // one that does not (a reply cut short in a call) is dropped.
  std::string finish();
  // The calls completed since the last take().
  std::vector<ToolCall> take();
  size_t count() const { return made_; }

 private:
  // The body of one call's markup as a call; false when it is not one.
  bool parse_call(const std::string& body);
  bool parse_json_call(const std::string& text, const char* arguments_key);
  bool parse_xml_call(const std::string& body);
  void add(const std::string& name, const std::string& arguments);
  std::string scan(const std::string& content);
  std::string scan_end();
  // Text the scan let through, as content: held while the reply so far is whitespace.
  std::string release(std::string text);

  ToolFormat format_;
  nlohmann::ordered_json tools_;
  uint64_t id_seed_;
  bool forced_;
  std::string pending_;
  std::string spaces_;      // the reply's leading whitespace, held
  bool spoken_ = false;     // content other than whitespace has been let through
  bool inside_ = false;     // hermes, xml: within <tool_call>
  bool deciding_ = true;    // llama_json: the reply may yet be a call
  std::vector<ToolCall> ready_;
  size_t made_ = 0;
};

// The grammar of a reply that calls a tool: any of `tools` (or only the one named `only`), one
// call or (parallel) one or more. Refuses a tool whose parameters the grammar cannot keep.
[[nodiscard]] Expected<std::shared_ptr<Grammar>> tool_call_grammar(ToolFormat format, const nlohmann::ordered_json& tools,
                                                                   const std::string& only, bool parallel);

}  // namespace lockstep
