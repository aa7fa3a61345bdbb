// Primaries (names, literals, parentheses, lists, dicts) and what may follow them: .attribute,
// [index], [a:b:c], calls, `| filter(args)` and `is [not] test(args)`.
#include <algorithm>

#include "chat_template/jinja_filters.h"
#include "chat_template/jinja_parser.h"

namespace lockstep::jinja {

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
    LOCKSTEP_JINJA_ASSIGN(ExprPtr inner, parse_tuple(true, {}, true));
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
      LOCKSTEP_JINJA_ASSIGN(ExprPtr item, parse_expression());
      literal->args.push_back(std::move(item));
      if (!is_list) {
        LOCKSTEP_TRY(expect_operator(":"));
        LOCKSTEP_JINJA_ASSIGN(ExprPtr value, parse_expression());
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
      LOCKSTEP_JINJA_ASSIGN(node, parse_subscript(std::move(node)));
    } else if (at_operator("(")) {
      ExprPtr call = make_expr(ExprKind::kCall, node->pos);
      call->args.push_back(std::move(node));
      LOCKSTEP_TRY(parse_call_args(*call));
      LOCKSTEP_JINJA_ASSIGN(node, sealed(std::move(call)));
    } else {
      return node;
    }
  }
}

Expected<ExprPtr> Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (at_operator("|")) {
      LOCKSTEP_JINJA_ASSIGN(node, parse_filters(std::move(node), false));
    } else if (at_name("is")) {
      LOCKSTEP_JINJA_ASSIGN(node, parse_test(std::move(node)));
    } else if (at_operator("(")) {
      ExprPtr call = make_expr(ExprKind::kCall, node->pos);
      call->args.push_back(std::move(node));
      LOCKSTEP_TRY(parse_call_args(*call));
      LOCKSTEP_JINJA_ASSIGN(node, sealed(std::move(call)));
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
    LOCKSTEP_JINJA_ASSIGN(attribute->name, expect_name());
    attribute->args.push_back(std::move(node));
    return sealed(std::move(attribute));
  }
  advance();  // [
  LOCKSTEP_JINJA_ASSIGN(ExprPtr index, parse_slice_or_index());
  LOCKSTEP_TRY(expect_operator("]"));
  return sealed(make_pair(ExprKind::kItem, pos, std::move(node), std::move(index)));
}

Expected<ExprPtr> Parser::parse_slice_or_index() {
  ExprPtr slice = make_expr(ExprKind::kSlice, current().pos);
  auto optional_part = [&]() -> Expected<ExprPtr> {
    if (at_operator(":") || at_operator("]")) return ExprPtr();
    return parse_expression();
  };
  LOCKSTEP_JINJA_ASSIGN(ExprPtr start, optional_part());
  if (start && !at_operator(":")) return start;  // a plain index
  slice->args.push_back(std::move(start));
  LOCKSTEP_TRY(expect_operator(":"));
  LOCKSTEP_JINJA_ASSIGN(ExprPtr stop, optional_part());
  slice->args.push_back(std::move(stop));
  ExprPtr step;
  if (at_operator(":")) {
    advance();
    LOCKSTEP_JINJA_ASSIGN(step, optional_part());
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
      LOCKSTEP_JINJA_ASSIGN(ExprPtr value, parse_expression());
      call.kwargs.emplace_back(std::move(name), std::move(value));
      continue;
    }
    if (!call.kwargs.empty())
      return error_at(current().pos, "positional argument follows keyword argument");
    LOCKSTEP_JINJA_ASSIGN(ExprPtr value, parse_expression());
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
    LOCKSTEP_JINJA_ASSIGN(filter->name, expect_name());
    if (!find_filter(filter->name)) return error_at(pos, "no filter named '" + filter->name + "'");
    filter->args.push_back(std::move(node));
    if (at_operator("(")) LOCKSTEP_TRY(parse_call_args(*filter));
    LOCKSTEP_JINJA_ASSIGN(node, sealed(std::move(filter)));
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
  LOCKSTEP_JINJA_ASSIGN(test->name, expect_name());
  if (!find_test(test->name)) return error_at(pos, "no test named '" + test->name + "'");
  test->args.push_back(std::move(node));
  if (at_operator("(")) {
    LOCKSTEP_TRY(parse_call_args(*test));
  } else if ((current().kind == TokenKind::kName && !at_name("else") && !at_name("or") &&
              !at_name("and")) ||
             current().kind == TokenKind::kString || current().kind == TokenKind::kInteger ||
             current().kind == TokenKind::kFloat || at_operator("[") || at_operator("{")) {
    if (at_name("is")) return error_at(current().pos, "cannot chain multiple tests with 'is'");
    LOCKSTEP_JINJA_ASSIGN(ExprPtr argument, parse_primary());
    LOCKSTEP_JINJA_ASSIGN(argument, parse_postfix(std::move(argument)));
    test->args.push_back(std::move(argument));
  }
  return sealed(std::move(test));
}

}  // namespace lockstep::jinja
