// The tool fields of a chat request: tools, tool_choice and parallel_tool_calls, checked, given
// to the chat template (as transformers passes them), and, for tool_choice "required" or a named
// function, made a grammar so the model writes a call.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/openai_request.h"

namespace lockstep {

// Before the template renders: reads the fields (`text`: the raw body, read again so the tools
// keep their order) into `out` and kwargs["tools"].
[[nodiscard]] std::optional<RequestError> read_tools(const std::string& text, const nlohmann::json& body,
                                                    const RequestContext& context, nlohmann::ordered_json& kwargs,
                                                    CompletionRequest& out);

// After: tool_choice "required" or a named function becomes out.generate.grammar.
[[nodiscard]] std::optional<RequestError> require_tool_call(const nlohmann::json& body, const RequestContext& context,
                                                           CompletionRequest& out);

}  // namespace lockstep
