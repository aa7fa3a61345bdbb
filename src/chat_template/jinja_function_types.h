// The shapes of filters and tests, and of the lookups that find them by name (jinja_filters.h
// owns the tables; the higher-order filters in jinja_list_filters.h are handed the lookups).
#pragma once

#include <string_view>

#include "chat_template/jinja_value.h"

namespace lockstep::jinja {

// Filters and tests get the value and the call's other arguments. Errors carry no position;
// the renderer adds the place of the call.
using FilterFunction = Expected<Value> (*)(const Value& input, const CallArgs& args);
using TestFunction = Expected<bool> (*)(const Value& input, const CallArgs& args);

// Null when there is no filter or test of that name.
using FilterLookup = FilterFunction (*)(std::string_view name);
using TestLookup = TestFunction (*)(std::string_view name);

}  // namespace lockstep::jinja
