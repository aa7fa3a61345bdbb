// Python's printf-style string formatting (`'%s: %d' % (a, b)` and jinja2's `format` filter).
#pragma once

#include <string>

#include "chat_template/jinja_value.h"

namespace lockstep::jinja {

// `format % args`: `args` is a tuple of the values, a dict for %(name)s fields, or one value.
// Supports the flags - + space # 0, width and precision (or *), and the conversions
// s r a d i u o x X e E f F g G c %. Fails as Python does on a wrong count or type.
[[nodiscard]] Expected<std::string> percent_format(const std::string& format, const Value& args);

}  // namespace lockstep::jinja
