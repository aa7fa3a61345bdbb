// Methods callable on template values (Python's str methods, dict.get/items/keys/values and
// list.index/count; the ones that change a list or dict are absent, as in jinja2's immutable
// sandbox) and the global functions of a chat template: jinja2's range, dict and namespace,
// and transformers' raise_exception and strftime_now (local time, as datetime.now()).
#pragma once

#include <optional>
#include <string>

#include "chat_template/jinja_value.h"

namespace lockstep::jinja {

// `self.name` as a callable bound to `self`, when `self` has such a method.
[[nodiscard]] std::optional<Value> find_method(const Value& self, const std::string& name);

// The global names every template sees (the caller's variables shadow them).
[[nodiscard]] Dict builtin_globals();

}  // namespace lockstep::jinja
