#include "chat_template/jinja_operators.h"

#include <cmath>
#include <limits>

#include "chat_template/jinja_format.h"
#include "chat_template/jinja_methods.h"
#include "chat_template/jinja_strings.h"

namespace lockstep::jinja {
namespace {

// jinja2's object_type_repr, for "has no attribute" hints.
std::string object_description(const Value& value) {
  if (value.is_none()) return "None";
  return type_name(value) + " object";
}

Error unsupported(const char* op, const Value& a, const Value& b) {
  return Error{std::string("unsupported operand type(s) for ") + op + ": '" + type_name(a) +
               "' and '" + type_name(b) + "'"};
}

// a OP b on ints, failing on overflow (Python's ints do not overflow; ours are 64-bit).
template <class Op>
Expected<Value> checked(Op op, int64_t a, int64_t b) {
  int64_t result = 0;
  if (op(a, b, &result)) return Error{"integer overflow"};
  return Value(result);
}

// sequence * times; a result over 64 MiB of text or 4M items fails (a template bug, not a prompt).
Expected<Value> repeat(const Value& sequence, int64_t times) {
  size_t unit =
      sequence.is_string() ? sequence.as_string().size() : sequence.as_list().items.size();
  size_t limit = sequence.is_string() ? (size_t{1} << 26) : (size_t{1} << 22);
  if (times > 0 && unit > 0 && static_cast<size_t>(times) > limit / unit)
    return Error{"sequence repetition too large"};
  if (sequence.is_string()) {
    std::string out;
    if (times > 0) out.reserve(unit * static_cast<size_t>(times));
    for (int64_t i = 0; i < times; ++i) out += sequence.as_string();
    return Value(std::move(out));
  }
  List out{{}, sequence.as_list().is_tuple};
  for (int64_t i = 0; i < times; ++i)
    out.items.insert(out.items.end(), sequence.as_list().items.begin(),
                     sequence.as_list().items.end());
  return Value(std::move(out));
}

Expected<Value> arithmetic(BinaryOp op, const Value& a, const Value& b) {
  bool both_int = !a.is_float() && !b.is_float();
  int64_t x = both_int ? a.as_int() : 0, y = both_int ? b.as_int() : 0;
  double p = a.as_double(), q = b.as_double();
  auto add = [](int64_t l, int64_t r, int64_t* out) { return __builtin_add_overflow(l, r, out); };
  auto subtract = [](int64_t l, int64_t r, int64_t* out) {
    return __builtin_sub_overflow(l, r, out);
  };
  auto multiply = [](int64_t l, int64_t r, int64_t* out) {
    return __builtin_mul_overflow(l, r, out);
  };
  switch (op) {
    case BinaryOp::kAdd: return both_int ? checked(add, x, y) : Value(p + q);
    case BinaryOp::kSubtract: return both_int ? checked(subtract, x, y) : Value(p - q);
    case BinaryOp::kMultiply: return both_int ? checked(multiply, x, y) : Value(p * q);
    case BinaryOp::kDivide:
      if (q == 0.0) return Error{"division by zero"};
      return Value(both_int ? static_cast<double>(x) / static_cast<double>(y) : p / q);
    case BinaryOp::kFloorDivide:
    case BinaryOp::kModulo: {
      if (both_int ? y == 0 : q == 0.0)
        return Error{both_int ? "integer division or modulo by zero" : "float division by zero"};
      if (both_int) {
        if (y == -1) {  // x / -1 traps on the one quotient past int64 (-2^63 / -1)
          if (x == std::numeric_limits<int64_t>::min() && op == BinaryOp::kFloorDivide) return Error{"integer overflow"};
          return Value(op == BinaryOp::kFloorDivide ? -x : int64_t{0});
        }
        int64_t quotient = x / y, remainder = x % y;
        if (remainder != 0 && ((remainder < 0) != (y < 0))) --quotient, remainder += y;
        return Value(op == BinaryOp::kFloorDivide ? quotient : remainder);
      }
      // Python's float_divmod.
      double remainder = std::fmod(p, q);
      double quotient = (p - remainder) / q;
      if (remainder != 0.0) {
        if ((q < 0) != (remainder < 0)) remainder += q, quotient -= 1.0;
      } else {
        remainder = std::copysign(0.0, q);
      }
      if (op == BinaryOp::kModulo) return Value(remainder);
      if (quotient == 0.0) return Value(std::copysign(0.0, p / q));
      double floored = std::floor(quotient);
      return Value(quotient - floored > 0.5 ? floored + 1.0 : floored);
    }
    case BinaryOp::kPower:
      if (both_int && y >= 0) {  // by squaring: 1 ** (2^62) takes 62 steps, not 2^62
        int64_t power = 1, base = x;
        for (int64_t left = y; left > 0; left >>= 1) {
          if ((left & 1) && __builtin_mul_overflow(power, base, &power)) return Error{"integer overflow"};
          if (left > 1 && __builtin_mul_overflow(base, base, &base)) return Error{"integer overflow"};
        }
        return Value(power);
      }
      if (p == 0.0 && q < 0.0) return Error{"0.0 cannot be raised to a negative power"};
      if (p < 0.0 && q != std::floor(q)) return Error{"complex results are not supported"};
      if (std::isinf(std::pow(p, q)) && std::isfinite(p) && std::isfinite(q))
        return Error{"numerical result out of range"};
      return Value(std::pow(p, q));
  }
  return Error{"unknown operator"};
}

const char* op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "+";
    case BinaryOp::kSubtract: return "-";
    case BinaryOp::kMultiply: return "*";
    case BinaryOp::kDivide: return "/";
    case BinaryOp::kFloorDivide: return "//";
    case BinaryOp::kModulo: return "%";
    case BinaryOp::kPower: return "**";
  }
  return "?";
}

// Python's index for a sequence of `size`; nullopt when out of range.
std::optional<size_t> sequence_index(int64_t index, size_t size) {
  if (index < 0) index += static_cast<int64_t>(size);
  if (index < 0 || index >= static_cast<int64_t>(size)) return std::nullopt;
  return static_cast<size_t>(index);
}

Expected<std::optional<int64_t>> slice_part(const Value& part) {
  if (part.is_none() || part.is_undefined()) return std::optional<int64_t>();
  if (part.is_int() || part.is_bool()) return std::optional<int64_t>(part.as_int());
  return Error{"slice indices must be integers or None"};
}

}  // namespace

Expected<Value> binary_op(BinaryOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) return undefined_error(a);
  if (op == BinaryOp::kModulo && a.is_string()) {  // Python formats with an Undefined too
    LOCKSTEP_JINJA_ASSIGN(std::string formatted, percent_format(a.as_string(), b));
    return Value(std::move(formatted));
  }
  if (b.is_undefined()) return undefined_error(b);
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == BinaryOp::kAdd && a.is_string() && b.is_string()) {
    limit_text(a.as_string().size() + b.as_string().size());
    return Value(a.as_string() + b.as_string());
  }
  if (op == BinaryOp::kAdd && a.is_list() && b.is_list() &&
      a.as_list().is_tuple == b.as_list().is_tuple) {
    if (a.as_list().items.size() + b.as_list().items.size() > (size_t{1} << 22))
      return Error{"list concatenation too large"};
    List joined = a.as_list();
    joined.items.insert(joined.items.end(), b.as_list().items.begin(), b.as_list().items.end());
    return Value(std::move(joined));
  }
  if (op == BinaryOp::kMultiply) {
    bool a_repeats = (a.is_string() || a.is_list()) && (b.is_int() || b.is_bool());
    bool b_repeats = (b.is_string() || b.is_list()) && (a.is_int() || a.is_bool());
    if (a_repeats) return repeat(a, b.as_int());
    if (b_repeats) return repeat(b, a.as_int());
  }
  return unsupported(op_symbol(op), a, b);
}

Expected<Value> negate(const Value& a) {
  if (a.is_undefined()) return undefined_error(a);
  if (a.is_float()) return Value(-a.as_double());
  if (a.is_number()) {
    if (a.as_int() == std::numeric_limits<int64_t>::min()) return Error{"integer overflow"};
    return Value(-a.as_int());
  }
  return Error{"bad operand type for unary -: '" + type_name(a) + "'"};
}

Expected<Value> positive(const Value& a) {
  if (a.is_undefined()) return undefined_error(a);
  if (a.is_float()) return a;
  if (a.is_number()) return Value(a.as_int());
  return Error{"bad operand type for unary +: '" + type_name(a) + "'"};
}

Expected<bool> compare_op(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::kEqual: return equals(a, b);
    case CompareOp::kNotEqual: return !equals(a, b);
    case CompareOp::kIn: return contains(b, a);
    case CompareOp::kNotIn: {
      LOCKSTEP_JINJA_ASSIGN(bool found, contains(b, a));
      return !found;
    }
    default: break;
  }
  LOCKSTEP_JINJA_ASSIGN(int order, compare(a, b));
  switch (op) {
    case CompareOp::kLess: return order < 0;
    case CompareOp::kLessEqual: return order <= 0;
    case CompareOp::kGreater: return order > 0;
    default: return order >= 0;
  }
}

Expected<bool> contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kString:
      if (!item.is_string())
        return Error{"'in <string>' requires string as left operand, not " + type_name(item)};
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& element : container.as_list().items)
        if (equals(element, item)) return true;
      return false;
    case Value::Kind::kDict:
      if ((item.is_list() && !item.as_list().is_tuple) || item.is_dict() || item.is_namespace())
        return Error{"unhashable type: '" + type_name(item) + "'"};
      return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
    default: return Error{"argument of type '" + type_name(container) + "' is not iterable"};
  }
}

Expected<Value> get_item(const Value& value, const Value& key) {
  if (value.is_undefined()) return undefined_error(value);
  bool integer_key = key.is_int() || key.is_bool();
  if (value.is_list() && integer_key) {
    const auto& items = value.as_list().items;
    if (auto index = sequence_index(key.as_int(), items.size())) return items[*index];
  } else if (value.is_string() && integer_key) {
    std::u32string cps = utf8_decode(value.as_string());
    if (auto index = sequence_index(key.as_int(), cps.size()))
      return Value(utf8_encode(std::u32string_view(cps).substr(*index, 1)));
  } else if (value.is_dict() && key.is_string()) {
    if (const Value* found = value.as_dict().find(key.as_string())) return *found;
  }
  if (key.is_string()) {  // jinja2 falls back to an attribute
    if (auto method = find_method(value, key.as_string())) return *method;
    if (value.is_namespace()) {
      if (const Value* found = value.namespace_attributes().find(key.as_string())) return *found;
    }
    return Value(Undefined{"'" + object_description(value) + "' has no attribute '" +
                           key.as_string() + "'"});
  }
  return Value(Undefined{"'" + object_description(value) + "' has no element " + repr(key)});
}

Expected<Value> get_attribute(const Value& value, const std::string& name) {
  if (value.is_undefined()) return undefined_error(value);
  if (auto method = find_method(value, name)) return *method;
  if (value.is_dict()) {
    if (const Value* found = value.as_dict().find(name)) return *found;
  } else if (value.is_namespace()) {
    if (const Value* found = value.namespace_attributes().find(name)) return *found;
  }
  return Value(Undefined{"'" + object_description(value) + "' has no attribute '" + name + "'"});
}

Expected<Value> slice(const Value& value, const Value& start_value, const Value& stop_value,
                      const Value& step_value) {
  if (value.is_undefined()) return undefined_error(value);
  if (!value.is_string() && !value.is_list())
    return Error{"'" + type_name(value) + "' object is not subscriptable"};
  LOCKSTEP_JINJA_ASSIGN(std::optional<int64_t> start, slice_part(start_value));
  LOCKSTEP_JINJA_ASSIGN(std::optional<int64_t> stop, slice_part(stop_value));
  LOCKSTEP_JINJA_ASSIGN(std::optional<int64_t> step_part, slice_part(step_value));
  int64_t step = step_part.value_or(1);
  if (step == 0) return Error{"slice step cannot be zero"};
  std::u32string cps = value.is_string() ? utf8_decode(value.as_string()) : std::u32string();
  int64_t size =
      static_cast<int64_t>(value.is_string() ? cps.size() : value.as_list().items.size());
  auto adjust = [&](std::optional<int64_t> index, int64_t when_absent) {
    if (!index) return when_absent;
    int64_t i = *index;
    if (i < 0) {
      i += size;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= size) {
      i = step < 0 ? size - 1 : size;
    }
    return i;
  };
  int64_t first = adjust(start, step < 0 ? size - 1 : 0);
  int64_t last = adjust(stop, step < 0 ? -1 : size);
  std::vector<size_t> picked;
  for (int64_t i = first; step > 0 ? i < last : i > last; i += step)
    picked.push_back(static_cast<size_t>(i));
  if (value.is_string()) {
    std::string out;
    for (size_t i : picked) utf8_append(out, cps[i]);
    return Value(std::move(out));
  }
  List out{{}, value.as_list().is_tuple};
  for (size_t i : picked) out.items.push_back(value.as_list().items[i]);
  return Value(std::move(out));
}

}  // namespace lockstep::jinja
