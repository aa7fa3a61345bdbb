// The filters (`value | name(args)`) and tests (`value is name(args)`) templates may use:
// jinja2's built-in ones that chat templates call, with transformers' `tojson` (ensure_ascii
// False, indent, separators and sort_keys, no HTML escaping). Fixed tables; looked up by name.
#pragma once

#include <string_view>

#include "chat_template/jinja_function_types.h"

namespace lockstep::jinja {

// Null when there is no filter or test of that name.
[[nodiscard]] FilterFunction find_filter(std::string_view name);
[[nodiscard]] TestFunction find_test(std::string_view name);

}  // namespace lockstep::jinja
