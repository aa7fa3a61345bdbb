// Expression evaluation of the renderer (see jinja_render.h).
#include "chat_template/jinja_filters.h"
#include "chat_template/jinja_operators.h"
#include "chat_template/jinja_render.h"
#include "chat_template/jinja_strings.h"

namespace lockstep::jinja {
namespace {

// Puts the place of `expr` on an error that has none yet.
template <class T>
Expected<T> located(const Expr& expr, Expected<T> result) {
  if (result.ok()) return result;
  return error_at(expr.pos, result.error().message);
}

}  // namespace

Expected<Value> Renderer::eval(const Expr& expr, const ScopePtr& scope) {
  LOCKSTEP_TRY(step());
  switch (expr.kind) {
    case ExprKind::kConstant: return expr.constant;
    case ExprKind::kName: {
      const Value* found = scope->find(expr.name);
      if (found) return *found;
      return Value(Undefined{"'" + expr.name + "' is undefined"});
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      items.reserve(expr.args.size());
      for (const ExprPtr& arg : expr.args) {
        LOCKSTEP_JINJA_ASSIGN(Value item, eval(*arg, scope));
        items.push_back(std::move(item));
      }
      return expr.kind == ExprKind::kList ? Value::list(std::move(items))
                                          : Value::tuple(std::move(items));
    }
    case ExprKind::kDict: {
      Dict dict;
      for (size_t i = 0; i + 1 < expr.args.size(); i += 2) {
        LOCKSTEP_JINJA_ASSIGN(Value key, eval(*expr.args[i], scope));
        LOCKSTEP_JINJA_ASSIGN(Value value, eval(*expr.args[i + 1], scope));
        if (!key.is_string())
          return error_at(expr.args[i]->pos, "dict keys must be strings, not " + type_name(key));
        dict.set(key.as_string(), std::move(value));
      }
      return Value(std::move(dict));
    }
    case ExprKind::kAnd:
    case ExprKind::kOr: {
      LOCKSTEP_JINJA_ASSIGN(Value left, eval(*expr.args[0], scope));
      if (truthy(left) == (expr.kind == ExprKind::kOr)) return left;
      return eval(*expr.args[1], scope);
    }
    case ExprKind::kNot: {
      LOCKSTEP_JINJA_ASSIGN(Value operand, eval(*expr.args[0], scope));
      return Value(!truthy(operand));
    }
    case ExprKind::kConditional: {
      LOCKSTEP_JINJA_ASSIGN(Value condition, eval(*expr.args[1], scope));
      if (truthy(condition)) return eval(*expr.args[0], scope);
      if (expr.args[2]) return eval(*expr.args[2], scope);
      return Value(
          Undefined{"the inline if-expression evaluated to false and no else section "
                    "was defined"});
    }
    case ExprKind::kConcat: {
      LOCKSTEP_JINJA_ASSIGN(Value left, eval(*expr.args[0], scope));
      LOCKSTEP_JINJA_ASSIGN(Value right, eval(*expr.args[1], scope));
      std::string left_text = to_str(left), right_text = to_str(right);
      limit_text(left_text.size() + right_text.size());
      return Value(left_text + right_text);
    }
    case ExprKind::kCompare: {
      LOCKSTEP_JINJA_ASSIGN(Value left, eval(*expr.args[0], scope));
      for (size_t i = 0; i < expr.compare_ops.size(); ++i) {
        LOCKSTEP_JINJA_ASSIGN(Value right, eval(*expr.args[i + 1], scope));
        LOCKSTEP_JINJA_ASSIGN(bool holds,
                              located(expr, compare_op(expr.compare_ops[i], left, right)));
        if (!holds) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    default: return eval_operation(expr, scope);
  }
}

// Expressions that call into operators, filters, tests and callables: their errors carry the
// place of the expression.
Expected<Value> Renderer::eval_operation(const Expr& expr, const ScopePtr& scope) {
  switch (expr.kind) {
    case ExprKind::kAttribute: {
      LOCKSTEP_JINJA_ASSIGN(Value base, eval(*expr.args[0], scope));
      return located(expr, get_attribute(base, expr.name));
    }
    case ExprKind::kItem: {
      LOCKSTEP_JINJA_ASSIGN(Value base, eval(*expr.args[0], scope));
      const Expr& index = *expr.args[1];
      if (index.kind != ExprKind::kSlice) {
        LOCKSTEP_JINJA_ASSIGN(Value key, eval(index, scope));
        return located(expr, get_item(base, key));
      }
      Value parts[3] = {Value(None{}), Value(None{}), Value(None{})};
      for (size_t i = 0; i < 3; ++i) {
        if (!index.args[i]) continue;
        LOCKSTEP_JINJA_ASSIGN(parts[i], eval(*index.args[i], scope));
      }
      return located(expr, slice(base, parts[0], parts[1], parts[2]));
    }
    case ExprKind::kNegate:
    case ExprKind::kPositive: {
      LOCKSTEP_JINJA_ASSIGN(Value operand, eval(*expr.args[0], scope));
      return located(expr, expr.kind == ExprKind::kNegate ? negate(operand) : positive(operand));
    }
    case ExprKind::kBinary: {
      LOCKSTEP_JINJA_ASSIGN(Value left, eval(*expr.args[0], scope));
      LOCKSTEP_JINJA_ASSIGN(Value right, eval(*expr.args[1], scope));
      return located(expr, binary_op(expr.binary_op, left, right));
    }
    case ExprKind::kCall: {
      LOCKSTEP_JINJA_ASSIGN(Value callee, eval(*expr.args[0], scope));
      LOCKSTEP_JINJA_ASSIGN(CallArgs args, eval_args(expr, 1, scope));
      if (callee.is_undefined()) return error_at(expr.pos, undefined_error(callee).message);
      if (!callee.is_callable())
        return error_at(expr.pos, "'" + type_name(callee) + "' object is not callable");
      return located(expr, callee.as_callable().call(args));
    }
    case ExprKind::kFilter: {
      Value input;
      if (expr.args[0]) {
        LOCKSTEP_JINJA_ASSIGN(input, eval(*expr.args[0], scope));
      } else if (block_input_) {
        input = *block_input_;
      }
      LOCKSTEP_JINJA_ASSIGN(CallArgs args, eval_args(expr, 1, scope));
      return located(expr, find_filter(expr.name)(input, args));
    }
    case ExprKind::kTest: {
      LOCKSTEP_JINJA_ASSIGN(Value input, eval(*expr.args[0], scope));
      LOCKSTEP_JINJA_ASSIGN(CallArgs args, eval_args(expr, 1, scope));
      LOCKSTEP_JINJA_ASSIGN(bool passed, located(expr, find_test(expr.name)(input, args)));
      return Value(passed != expr.negated);
    }
    default: return error_at(expr.pos, "cannot evaluate this expression here");
  }
}

Expected<CallArgs> Renderer::eval_args(const Expr& expr, size_t first, const ScopePtr& scope) {
  CallArgs args;
  for (size_t i = first; i < expr.args.size(); ++i) {
    LOCKSTEP_JINJA_ASSIGN(Value value, eval(*expr.args[i], scope));
    args.positional.push_back(std::move(value));
  }
  for (const auto& [name, arg] : expr.kwargs) {
    LOCKSTEP_JINJA_ASSIGN(Value value, eval(*arg, scope));
    args.keywords.emplace_back(name, std::move(value));
  }
  return args;
}

}  // namespace lockstep::jinja
