// Nothing is accepted and ignored: every field of a completion request is one lockstep acts on,
// or the request is refused with a 400 whose `param` names it. A few fields lockstep does not
// implement yet are accepted at their neutral value only, which asks for nothing (best_of 1,
// no tools).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace lockstep {

struct FieldProblem {
  std::string field;
  std::string message;
};

// The first field of `body` (a JSON object) that the endpoint (chat or completions) does not take.
std::optional<FieldProblem> unsupported_field(const nlohmann::json& body, bool chat);

}  // namespace lockstep
