// Expression grammar of jinja2 (its parser.py precedence, lowest first): conditional
// `a if b else c`, or, and, not, comparisons (chained; in, not in), + -, ~, * / // %, **,
// unary - +, then postfix (.attr, [index], [a:b:c], calls) and filters / tests (`|f`, `is t`).
#include <algorithm>

#include "text/jinja_filters.h"
#include "text/jinja_parser.h"

namespace lockstep::jinja {
namespace {

ExprPtr make_expr(ExprKind kind, SourcePos pos) {
  auto expr = std::make_unique<Expr>();
  expr->kind = kind;
  expr->pos = pos;
  return expr;
}

ExprPtr make_pair(ExprKind kind, SourcePos pos, ExprPtr left, ExprPtr right) {
  ExprPtr expr = make_expr(kind, pos);
  expr->args.push_back(std::move(left));
  expr->args.push_back(std::move(right));
  return expr;
}

ExprPtr make_constant(Value value, SourcePos pos) {
  ExprPtr expr = make_expr(ExprKind::kConstant, pos);
  expr->constant = std::move(value);
  return expr;
}

}  // namespace

Expected<ExprPtr> Parser::sealed(ExprPtr expr) const {
  int height = 0;
  for (const ExprPtr& arg : expr->args)
    if (arg) height = std::max(height, arg->height);
  for (const auto& kwarg : expr->kwargs) height = std::max(height, kwarg.second->height);
  expr->height = height + 1;
  if (expr->height > kMaxNesting) return error_at(expr->pos, "expression nested too deeply");
  return expr;
}

Expected<ExprPtr> Parser::parse_expression(bool with_condexpr) {
  LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr expr, parse_or());
  if (!with_condexpr) return expr;
  while (at_name("if")) {
    SourcePos pos = current().pos;
    advance();
    ExprPtr conditional = make_expr(ExprKind::kConditional, pos);
    LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr condition, parse_or());
    ExprPtr otherwise;
    if (at_name("else")) {
      advance();
      LOCKSTEP_ASSIGN_OR_RETURN(otherwise, parse_expression());
    }
    conditional->args.push_back(std::move(expr));
    conditional->args.push_back(std::move(condition));
    conditional->args.push_back(std::move(otherwise));
    LOCKSTEP_ASSIGN_OR_RETURN(expr, sealed(std::move(conditional)));
  }
  return expr;
}

Expected<ExprPtr> Parser::parse_tuple(bool with_condexpr, Names extra_end_names,
                                      bool explicit_parens) {
  ExprPtr tuple = make_expr(ExprKind::kTuple, current().pos);
  bool is_tuple = false;
  while (true) {
    if (!tuple->args.empty()) LOCKSTEP_TRY(expect_operator(","));
    bool at_end = current().kind == TokenKind::kVariableEnd ||
                  current().kind == TokenKind::kBlockEnd || at_operator(")") ||
                  (current().kind == TokenKind::kName &&
                   std::find(extra_end_names.begin(), extra_end_names.end(), current().text) !=
                       extra_end_names.end());
    if (at_end) break;
    LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr item, parse_expression(with_condexpr));
    tuple->args.push_back(std::move(item));
    if (!at_operator(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!tuple->args.empty()) return std::move(tuple->args[0]);
    if (!explicit_parens) return unexpected("an expression");
  }
  return sealed(std::move(tuple));
}

Expected<ExprPtr> Parser::parse_or() {
  LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr left, parse_and());
  while (at_name("or")) {
    SourcePos pos = current().pos;
    advance();
    LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr right, parse_and());
    LOCKSTEP_ASSIGN_OR_RETURN(left, sealed(make_pair(ExprKind::kOr, pos, std::move(left), std::move(right))));
  }
  return left;
}

Expected<ExprPtr> Parser::parse_and() {
  LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr left, parse_not());
  while (at_name("and")) {
    SourcePos pos = current().pos;
    advance();
    LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr right, parse_not());
    LOCKSTEP_ASSIGN_OR_RETURN(left, sealed(make_pair(ExprKind::kAnd, pos, std::move(left), std::move(right))));
  }
  return left;
}

Expected<ExprPtr> Parser::parse_not() {
  if (!at_name("not")) return parse_compare();
  Nesting nesting(nesting_);
  if (nesting_too_deep()) return error_at(current().pos, "expression nested too deeply");
  ExprPtr negation = make_expr(ExprKind::kNot, current().pos);
  advance();
  LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr operand, parse_not());
  negation->args.push_back(std::move(operand));
  return sealed(std::move(negation));
}

Expected<ExprPtr> Parser::parse_compare() {
  SourcePos pos = current().pos;
  LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr first, parse_math1());
  ExprPtr compare = make_expr(ExprKind::kCompare, pos);
  compare->args.push_back(std::move(first));
  static constexpr std::pair<std::string_view, CompareOp> kOperators[] = {
      {"==", CompareOp::kEqual}, {"!=", CompareOp::kNotEqual}, {"<", CompareOp::kLess},
      {"<=", CompareOp::kLessEqual}, {">", CompareOp::kGreater}, {">=", CompareOp::kGreaterEqual}};
  while (true) {
    std::optional<CompareOp> op;
    for (const auto& [text, value] : kOperators)
      if (at_operator(text)) op = value;
    if (op) {
      advance();
    } else if (at_name("in")) {
      op = CompareOp::kIn;
      advance();
    } else if (at_name("not") && peek(1).kind == TokenKind::kName && peek(1).text == "in") {
      op = CompareOp::kNotIn;
      advance();
      advance();
    } else {
      break;
    }
    compare->compare_ops.push_back(*op);
    LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr operand, parse_math1());
    compare->args.push_back(std::move(operand));
  }
  if (compare->compare_ops.empty()) return std::move(compare->args[0]);
  return sealed(std::move(compare));
}

Expected<ExprPtr> Parser::parse_math1() {
  LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr left, parse_concat());
  while (at_operator("+") || at_operator("-")) {
    SourcePos pos = current().pos;
    BinaryOp op = at_operator("+") ? BinaryOp::kAdd : BinaryOp::kSubtract;
    advance();
    LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr right, parse_concat());
    ExprPtr binary = make_pair(ExprKind::kBinary, pos, std::move(left), std::move(right));
    binary->binary_op = op;
    LOCKSTEP_ASSIGN_OR_RETURN(left, sealed(std::move(binary)));
  }
  return left;
}

Expected<ExprPtr> Parser::parse_concat() {
  LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr left, parse_math2());
  while (at_operator("~")) {
    SourcePos pos = current().pos;
    advance();
    LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr right, parse_math2());
    LOCKSTEP_ASSIGN_OR_RETURN(left, sealed(make_pair(ExprKind::kConcat, pos, std::move(left), std::move(right))));
  }
  return left;
}

Expected<ExprPtr> Parser::parse_math2() {
  LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr left, parse_pow());
  static constexpr std::pair<std::string_view, BinaryOp> kOperators[] = {
      {"*", BinaryOp::kMultiply}, {"/", BinaryOp::kDivide}, {"//", BinaryOp::kFloorDivide},
      {"%", BinaryOp::kModulo}};
  while (true) {
    std::optional<BinaryOp> op;
    for (const auto& [text, value] : kOperators)
      if (at_operator(text)) op = value;
    if (!op) return left;
    SourcePos pos = current().pos;
    advance();
    LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr right, parse_pow());
    ExprPtr binary = make_pair(ExprKind::kBinary, pos, std::move(left), std::move(right));
    binary->binary_op = *op;
    LOCKSTEP_ASSIGN_OR_RETURN(left, sealed(std::move(binary)));
  }
}

Expected<ExprPtr> Parser::parse_pow() {
  LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr left, parse_unary(true));
  while (at_operator("**")) {
    SourcePos pos = current().pos;
    advance();
    LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr right, parse_unary(true));
    ExprPtr binary = make_pair(ExprKind::kBinary, pos, std::move(left), std::move(right));
    binary->binary_op = BinaryOp::kPower;
    LOCKSTEP_ASSIGN_OR_RETURN(left, sealed(std::move(binary)));
  }
  return left;
}

Expected<ExprPtr> Parser::parse_unary(bool with_filter) {
  Nesting nesting(nesting_);
  if (nesting_too_deep()) return error_at(current().pos, "expression nested too deeply");
  ExprPtr node;
  if (at_operator("-") || at_operator("+")) {
    node = make_expr(at_operator("-") ? ExprKind::kNegate : ExprKind::kPositive, current().pos);
    advance();
    LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr operand, parse_unary(false));
    node->args.push_back(std::move(operand));
    LOCKSTEP_ASSIGN_OR_RETURN(node, sealed(std::move(node)));
  } else {
    LOCKSTEP_ASSIGN_OR_RETURN(node, parse_primary());
  }
  LOCKSTEP_ASSIGN_OR_RETURN(node, parse_postfix(std::move(node)));
  if (with_filter) return parse_filter_expr(std::move(node));
  return node;
}

Expected<ExprPtr> Parser::parse_primary() {
  const Token& token = current();
  SourcePos pos = token.pos;
  switch (token.kind) {
    case TokenKind::kName: {
      std::string name = token.text;
      advance();
      if (name == "true" || name == "True") return make_constant(true, pos);
      if (name == "false" || name == "False") return make_constant(false, pos);
      if (name == "none" || name == "None") return make_constant(None{}, pos);
      ExprPtr expr = make_expr(ExprKind::kName, pos);
      expr->name = std::move(name);
      return expr;
    }
    case TokenKind::kString: {
      std::string text;
      while (current().kind == TokenKind::kString) {  // adjacent literals are joined
        text += current().text;
        advance();
      }
      return make_constant(std::move(text), pos);
    }
    case TokenKind::kInteger: advance(); return make_constant(tokens_[at_ - 1].integer, pos);
    case TokenKind::kFloat: advance(); return make_constant(tokens_[at_ - 1].number, pos);
    default: break;
  }
  if (at_operator("(")) {
    advance();
    LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr inner, parse_tuple(true, {}, true));
    LOCKSTEP_TRY(expect_operator(")"));
    return inner;
  }
  if (at_operator("[") || at_operator("{")) {
    bool is_list = at_operator("[");
    ExprPtr literal = make_expr(is_list ? ExprKind::kList : ExprKind::kDict, pos);
    advance();
    std::string close = is_list ? "]" : "}";
    while (!at_operator(close)) {
      if (!literal->args.empty()) {
        LOCKSTEP_TRY(expect_operator(","));
        if (at_operator(close)) break;
      }
      LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
      literal->args.push_back(std::move(item));
      if (!is_list) {
        LOCKSTEP_TRY(expect_operator(":"));
        LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
        literal->args.push_back(std::move(value));
      }
    }
    advance();
    return sealed(std::move(literal));
  }
  return unexpected("an expression");
}

Expected<ExprPtr> Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (at_operator(".") || at_operator("[")) {
      LOCKSTEP_ASSIGN_OR_RETURN(node, parse_subscript(std::move(node)));
    } else if (at_operator("(")) {
      ExprPtr call = make_expr(ExprKind::kCall, node->pos);
      call->args.push_back(std::move(node));
      LOCKSTEP_TRY(parse_call_args(*call));
      LOCKSTEP_ASSIGN_OR_RETURN(node, sealed(std::move(call)));
    } else {
      return node;
    }
  }
}

Expected<ExprPtr> Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (at_operator("|")) {
      LOCKSTEP_ASSIGN_OR_RETURN(node, parse_filters(std::move(node), false));
    } else if (at_name("is")) {
      LOCKSTEP_ASSIGN_OR_RETURN(node, parse_test(std::move(node)));
    } else if (at_operator("(")) {
      ExprPtr call = make_expr(ExprKind::kCall, node->pos);
      call->args.push_back(std::move(node));
      LOCKSTEP_TRY(parse_call_args(*call));
      LOCKSTEP_ASSIGN_OR_RETURN(node, sealed(std::move(call)));
    } else {
      return node;
    }
  }
}

Expected<ExprPtr> Parser::parse_subscript(ExprPtr node) {
  SourcePos pos = current().pos;
  if (at_operator(".")) {
    advance();
    if (current().kind == TokenKind::kInteger) {  // `items.0` is items[0]
      ExprPtr index = make_constant(current().integer, current().pos);
      advance();
      return sealed(make_pair(ExprKind::kItem, pos, std::move(node), std::move(index)));
    }
    ExprPtr attribute = make_expr(ExprKind::kAttribute, pos);
    LOCKSTEP_ASSIGN_OR_RETURN(attribute->name, expect_name());
    attribute->args.push_back(std::move(node));
    return sealed(std::move(attribute));
  }
  advance();  // [
  LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr index, parse_slice_or_index());
  LOCKSTEP_TRY(expect_operator("]"));
  return sealed(make_pair(ExprKind::kItem, pos, std::move(node), std::move(index)));
}

Expected<ExprPtr> Parser::parse_slice_or_index() {
  ExprPtr slice = make_expr(ExprKind::kSlice, current().pos);
  auto optional_part = [&]() -> Expected<ExprPtr> {
    if (at_operator(":") || at_operator("]")) return ExprPtr();
    return parse_expression();
  };
  LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr start, optional_part());
  if (start && !at_operator(":")) return start;  // a plain index
  slice->args.push_back(std::move(start));
  LOCKSTEP_TRY(expect_operator(":"));
  LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr stop, optional_part());
  slice->args.push_back(std::move(stop));
  ExprPtr step;
  if (at_operator(":")) {
    advance();
    LOCKSTEP_ASSIGN_OR_RETURN(step, optional_part());
  }
  slice->args.push_back(std::move(step));
  return sealed(std::move(slice));
}

Status Parser::parse_call_args(Expr& call) {
  LOCKSTEP_TRY(expect_operator("("));
  bool first = true;
  while (!at_operator(")")) {
    if (!first) {
      LOCKSTEP_TRY(expect_operator(","));
      if (at_operator(")")) break;
    }
    first = false;
    if (current().kind == TokenKind::kName && peek(1).kind == TokenKind::kOperator &&
        peek(1).text == "=") {
      std::string name = current().text;
      advance();
      advance();
      LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
      call.kwargs.emplace_back(std::move(name), std::move(value));
      continue;
    }
    if (!call.kwargs.empty())
      return error_at(current().pos, "positional argument follows keyword argument");
    LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
    call.args.push_back(std::move(value));
  }
  advance();
  return Status();
}

Expected<ExprPtr> Parser::parse_filters(ExprPtr node, bool start_inline) {
  while (at_operator("|") || start_inline) {
    if (!start_inline) advance();
    start_inline = false;
    SourcePos pos = current().pos;
    ExprPtr filter = make_expr(ExprKind::kFilter, pos);
    LOCKSTEP_ASSIGN_OR_RETURN(filter->name, expect_name());
    if (!find_filter(filter->name)) return error_at(pos, "no filter named '" + filter->name + "'");
    filter->args.push_back(std::move(node));
    if (at_operator("(")) LOCKSTEP_TRY(parse_call_args(*filter));
    LOCKSTEP_ASSIGN_OR_RETURN(node, sealed(std::move(filter)));
  }
  return node;
}

Expected<ExprPtr> Parser::parse_test(ExprPtr node) {
  advance();  // is
  ExprPtr test = make_expr(ExprKind::kTest, current().pos);
  if (at_name("not")) {
    test->negated = true;
    advance();
  }
  SourcePos pos = current().pos;
  LOCKSTEP_ASSIGN_OR_RETURN(test->name, expect_name());
  if (!find_test(test->name)) return error_at(pos, "no test named '" + test->name + "'");
  test->args.push_back(std::move(node));
  if (at_operator("(")) {
    LOCKSTEP_TRY(parse_call_args(*test));
  } else if ((current().kind == TokenKind::kName && !at_name("else") && !at_name("or") &&
              !at_name("and")) ||
             current().kind == TokenKind::kString || current().kind == TokenKind::kInteger ||
             current().kind == TokenKind::kFloat || at_operator("[") || at_operator("{")) {
    if (at_name("is")) return error_at(current().pos, "cannot chain multiple tests with 'is'");
    LOCKSTEP_ASSIGN_OR_RETURN(ExprPtr argument, parse_primary());
    LOCKSTEP_ASSIGN_OR_RETURN(argument, parse_postfix(std::move(argument)));
    test->args.push_back(std::move(argument));
  }
  return sealed(std::move(test));
}

}  // namespace lockstep::jinja
