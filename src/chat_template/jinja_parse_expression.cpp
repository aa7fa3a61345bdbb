// Expression grammar of jinja2 (its parser.py precedence, lowest first): conditional
// `a if b else c`, or, and, not, comparisons (chained; in, not in), + -, ~, * / // %, **,
// unary - +. Primaries, postfix operators, filters and tests are in jinja_parse_postfix.cpp.
#include <algorithm>

#include "chat_template/jinja_parser.h"

namespace lockstep::jinja {

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
  LOCKSTEP_JINJA_ASSIGN(ExprPtr expr, parse_or());
  if (!with_condexpr) return expr;
  while (at_name("if")) {
    SourcePos pos = current().pos;
    advance();
    ExprPtr conditional = make_expr(ExprKind::kConditional, pos);
    LOCKSTEP_JINJA_ASSIGN(ExprPtr condition, parse_or());
    ExprPtr otherwise;
    if (at_name("else")) {
      advance();
      LOCKSTEP_JINJA_ASSIGN(otherwise, parse_expression());
    }
    conditional->args.push_back(std::move(expr));
    conditional->args.push_back(std::move(condition));
    conditional->args.push_back(std::move(otherwise));
    LOCKSTEP_JINJA_ASSIGN(expr, sealed(std::move(conditional)));
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
    LOCKSTEP_JINJA_ASSIGN(ExprPtr item, parse_expression(with_condexpr));
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
  LOCKSTEP_JINJA_ASSIGN(ExprPtr left, parse_and());
  while (at_name("or")) {
    SourcePos pos = current().pos;
    advance();
    LOCKSTEP_JINJA_ASSIGN(ExprPtr right, parse_and());
    LOCKSTEP_JINJA_ASSIGN(left,
                          sealed(make_pair(ExprKind::kOr, pos, std::move(left), std::move(right))));
  }
  return left;
}

Expected<ExprPtr> Parser::parse_and() {
  LOCKSTEP_JINJA_ASSIGN(ExprPtr left, parse_not());
  while (at_name("and")) {
    SourcePos pos = current().pos;
    advance();
    LOCKSTEP_JINJA_ASSIGN(ExprPtr right, parse_not());
    LOCKSTEP_JINJA_ASSIGN(
        left, sealed(make_pair(ExprKind::kAnd, pos, std::move(left), std::move(right))));
  }
  return left;
}

Expected<ExprPtr> Parser::parse_not() {
  if (!at_name("not")) return parse_compare();
  Nesting nesting(nesting_);
  if (nesting_too_deep()) return error_at(current().pos, "expression nested too deeply");
  ExprPtr negation = make_expr(ExprKind::kNot, current().pos);
  advance();
  LOCKSTEP_JINJA_ASSIGN(ExprPtr operand, parse_not());
  negation->args.push_back(std::move(operand));
  return sealed(std::move(negation));
}

Expected<ExprPtr> Parser::parse_compare() {
  SourcePos pos = current().pos;
  LOCKSTEP_JINJA_ASSIGN(ExprPtr first, parse_math1());
  ExprPtr compare = make_expr(ExprKind::kCompare, pos);
  compare->args.push_back(std::move(first));
  static constexpr std::pair<std::string_view, CompareOp> kOperators[] = {
      {"==", CompareOp::kEqual},  {"!=", CompareOp::kNotEqual},
      {"<", CompareOp::kLess},    {"<=", CompareOp::kLessEqual},
      {">", CompareOp::kGreater}, {">=", CompareOp::kGreaterEqual}};
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
    LOCKSTEP_JINJA_ASSIGN(ExprPtr operand, parse_math1());
    compare->args.push_back(std::move(operand));
  }
  if (compare->compare_ops.empty()) return std::move(compare->args[0]);
  return sealed(std::move(compare));
}

Expected<ExprPtr> Parser::parse_math1() {
  LOCKSTEP_JINJA_ASSIGN(ExprPtr left, parse_concat());
  while (at_operator("+") || at_operator("-")) {
    SourcePos pos = current().pos;
    BinaryOp op = at_operator("+") ? BinaryOp::kAdd : BinaryOp::kSubtract;
    advance();
    LOCKSTEP_JINJA_ASSIGN(ExprPtr right, parse_concat());
    ExprPtr binary = make_pair(ExprKind::kBinary, pos, std::move(left), std::move(right));
    binary->binary_op = op;
    LOCKSTEP_JINJA_ASSIGN(left, sealed(std::move(binary)));
  }
  return left;
}

Expected<ExprPtr> Parser::parse_concat() {
  LOCKSTEP_JINJA_ASSIGN(ExprPtr left, parse_math2());
  while (at_operator("~")) {
    SourcePos pos = current().pos;
    advance();
    LOCKSTEP_JINJA_ASSIGN(ExprPtr right, parse_math2());
    LOCKSTEP_JINJA_ASSIGN(
        left, sealed(make_pair(ExprKind::kConcat, pos, std::move(left), std::move(right))));
  }
  return left;
}

Expected<ExprPtr> Parser::parse_math2() {
  LOCKSTEP_JINJA_ASSIGN(ExprPtr left, parse_pow());
  static constexpr std::pair<std::string_view, BinaryOp> kOperators[] = {
      {"*", BinaryOp::kMultiply},
      {"/", BinaryOp::kDivide},
      {"//", BinaryOp::kFloorDivide},
      {"%", BinaryOp::kModulo}};
  while (true) {
    std::optional<BinaryOp> op;
    for (const auto& [text, value] : kOperators)
      if (at_operator(text)) op = value;
    if (!op) return left;
    SourcePos pos = current().pos;
    advance();
    LOCKSTEP_JINJA_ASSIGN(ExprPtr right, parse_pow());
    ExprPtr binary = make_pair(ExprKind::kBinary, pos, std::move(left), std::move(right));
    binary->binary_op = *op;
    LOCKSTEP_JINJA_ASSIGN(left, sealed(std::move(binary)));
  }
}

Expected<ExprPtr> Parser::parse_pow() {
  LOCKSTEP_JINJA_ASSIGN(ExprPtr left, parse_unary(true));
  while (at_operator("**")) {
    SourcePos pos = current().pos;
    advance();
    LOCKSTEP_JINJA_ASSIGN(ExprPtr right, parse_unary(true));
    ExprPtr binary = make_pair(ExprKind::kBinary, pos, std::move(left), std::move(right));
    binary->binary_op = BinaryOp::kPower;
    LOCKSTEP_JINJA_ASSIGN(left, sealed(std::move(binary)));
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
    LOCKSTEP_JINJA_ASSIGN(ExprPtr operand, parse_unary(false));
    node->args.push_back(std::move(operand));
    LOCKSTEP_JINJA_ASSIGN(node, sealed(std::move(node)));
  } else {
    LOCKSTEP_JINJA_ASSIGN(node, parse_primary());
  }
  LOCKSTEP_JINJA_ASSIGN(node, parse_postfix(std::move(node)));
  if (with_filter) return parse_filter_expr(std::move(node));
  return node;
}

}  // namespace lockstep::jinja
