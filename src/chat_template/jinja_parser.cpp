#include "chat_template/jinja_parser.h"

#include <algorithm>

namespace lockstep::jinja {
namespace {

NodePtr make_node(NodeKind kind, SourcePos pos) {
  auto node = std::make_unique<Node>();
  node->kind = kind;
  node->pos = pos;
  return node;
}

std::string describe(const Token& token) {
  switch (token.kind) {
    case TokenKind::kEnd: return "end of template";
    case TokenKind::kText: return "text";
    case TokenKind::kBlockEnd: return "'%}'";
    case TokenKind::kVariableEnd: return "'}}'";
    case TokenKind::kString: return "string";
    default: return "'" + token.text + "'";
  }
}

// "'a' or 'b'".
std::string describe_tags(std::initializer_list<std::string_view> tags) {
  std::string text;
  for (std::string_view tag : tags) text += (text.empty() ? "'" : " or '") + std::string(tag) + "'";
  return text;
}

}  // namespace

Expected<NodeList> parse_template(std::string_view source) {
  LOCKSTEP_JINJA_ASSIGN(std::vector<Token> tokens, tokenize(source));
  return Parser(std::move(tokens)).parse_all();
}

Expected<NodeList> Parser::parse_all() { return parse_body({}, "", SourcePos{}, nullptr); }

const Token& Parser::peek(size_t ahead) const {
  return tokens_[std::min(at_ + ahead, tokens_.size() - 1)];
}

bool Parser::at_name(std::string_view name) const {
  return current().kind == TokenKind::kName && current().text == name;
}

bool Parser::at_operator(std::string_view op) const {
  return current().kind == TokenKind::kOperator && current().text == op;
}

Error Parser::unexpected(const std::string& expected) const {
  return error_at(current().pos, "expected " + expected + ", got " + describe(current()));
}

Status Parser::expect_operator(std::string_view op) {
  if (!at_operator(op)) return unexpected("'" + std::string(op) + "'");
  advance();
  return Status();
}

Expected<std::string> Parser::expect_name() {
  if (current().kind != TokenKind::kName) return unexpected("a name");
  std::string name = current().text;
  advance();
  return name;
}

Status Parser::expect_block_end(const std::string& tag) {
  if (current().kind != TokenKind::kBlockEnd) return unexpected("end of '" + tag + "' tag ('%}')");
  advance();
  return Status();
}

Expected<NodeList> Parser::parse_body(Names end_tags, const std::string& open_tag,
                                      SourcePos open_pos, std::string* found_end) {
  Nesting nesting(nesting_);
  if (nesting_too_deep()) return error_at(open_pos, "blocks nested too deeply");
  NodeList body;
  while (true) {
    const Token& token = current();
    switch (token.kind) {
      case TokenKind::kEnd: {
        if (end_tags.size() == 0) return body;
        return error_at(
            open_pos, "unclosed '" + open_tag + "' tag (expected " + describe_tags(end_tags) + ")");
      }
      case TokenKind::kText: {
        NodePtr node = make_node(NodeKind::kText, token.pos);
        node->text = token.text;
        body.push_back(std::move(node));
        advance();
        break;
      }
      case TokenKind::kVariableBegin: {
        NodePtr node = make_node(NodeKind::kOutput, token.pos);
        advance();
        LOCKSTEP_JINJA_ASSIGN(node->expr, parse_tuple(true, {}, false));
        if (current().kind != TokenKind::kVariableEnd) return unexpected("'}}'");
        advance();
        body.push_back(std::move(node));
        break;
      }
      case TokenKind::kBlockBegin: {
        const Token& name = peek(1);
        if (name.kind == TokenKind::kName &&
            std::find(end_tags.begin(), end_tags.end(), name.text) != end_tags.end()) {
          *found_end = name.text;
          advance();
          advance();
          return body;
        }
        static constexpr std::string_view kClosingTags[] = {
            "elif",     "else",    "endif",     "endfor",        "endset",
            "endmacro", "endwith", "endfilter", "endgeneration", "endraw"};
        if (name.kind == TokenKind::kName &&
            std::find(std::begin(kClosingTags), std::end(kClosingTags), name.text) !=
                std::end(kClosingTags)) {
          if (end_tags.size() == 0)
            return error_at(name.pos, "unexpected '" + name.text + "': no block is open");
          return error_at(name.pos, "unexpected '" + name.text + "': the '" + open_tag +
                                        "' tag at line " + std::to_string(open_pos.line) +
                                        ", column " + std::to_string(open_pos.column) + " needs " +
                                        describe_tags(end_tags) + " first");
        }
        advance();
        LOCKSTEP_JINJA_ASSIGN(NodePtr node, parse_statement());
        body.push_back(std::move(node));
        break;
      }
      default: return unexpected("text or a tag");
    }
  }
}

Expected<NodePtr> Parser::parse_statement() {
  SourcePos pos = current().pos;
  if (current().kind != TokenKind::kName) return unexpected("a tag name");
  std::string tag = current().text;
  advance();
  if (tag == "if") return parse_if(pos);
  if (tag == "for") return parse_for(pos);
  if (tag == "set") return parse_set(pos);
  if (tag == "macro") return parse_macro(pos);
  if (tag == "with") return parse_with(pos);
  if (tag == "filter") return parse_filter_block(pos);
  if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) return error_at(pos, "'" + tag + "' outside of a loop");
    LOCKSTEP_TRY(expect_block_end(tag));
    return make_node(tag == "break" ? NodeKind::kBreak : NodeKind::kContinue, pos);
  }
  if (tag == "generation") {  // transformers' AssistantTracker: renders its body as is
    LOCKSTEP_TRY(expect_block_end(tag));
    NodePtr node = make_node(NodeKind::kBody, pos);
    std::string end;
    LOCKSTEP_JINJA_ASSIGN(node->body, parse_body({"endgeneration"}, tag, pos, &end));
    LOCKSTEP_TRY(expect_block_end(end));
    return node;
  }
  return error_at(pos, "unknown tag '" + tag + "'");
}

Expected<NodePtr> Parser::parse_if(SourcePos pos) {
  NodePtr node = make_node(NodeKind::kIf, pos);
  std::string end = "if";
  while (true) {
    ExprPtr condition;
    if (end != "else") {
      LOCKSTEP_JINJA_ASSIGN(condition, parse_tuple(false, {}, false));
    }
    LOCKSTEP_TRY(expect_block_end(end));
    std::string next_end;
    NodeList body;
    if (end == "else") {
      LOCKSTEP_JINJA_ASSIGN(body, parse_body({"endif"}, "if", pos, &next_end));
    } else {
      LOCKSTEP_JINJA_ASSIGN(body, parse_body({"elif", "else", "endif"}, "if", pos, &next_end));
    }
    node->branches.emplace_back(std::move(condition), std::move(body));
    end = next_end;
    if (end == "endif") break;
  }
  LOCKSTEP_TRY(expect_block_end("endif"));
  return node;
}

Expected<NodePtr> Parser::parse_for(SourcePos pos) {
  NodePtr node = make_node(NodeKind::kFor, pos);
  LOCKSTEP_JINJA_ASSIGN(node->target, parse_assign_target(false));
  if (!at_name("in")) return unexpected("'in'");
  advance();
  LOCKSTEP_JINJA_ASSIGN(node->expr, parse_tuple(false, {"recursive"}, false));
  if (at_name("if")) {
    advance();
    LOCKSTEP_JINJA_ASSIGN(node->condition, parse_expression());
  }
  if (at_name("recursive")) return error_at(current().pos, "recursive loops are not supported");
  LOCKSTEP_TRY(expect_block_end("for"));
  std::string end;
  ++loop_depth_;
  auto body = parse_body({"endfor", "else"}, "for", pos, &end);
  --loop_depth_;
  if (!body.ok()) return body.error();
  node->body = std::move(body).value();
  if (end == "else") {
    LOCKSTEP_TRY(expect_block_end("else"));
    LOCKSTEP_JINJA_ASSIGN(node->else_body, parse_body({"endfor"}, "for", pos, &end));
  }
  LOCKSTEP_TRY(expect_block_end("endfor"));
  return node;
}

Expected<NodePtr> Parser::parse_set(SourcePos pos) {
  LOCKSTEP_JINJA_ASSIGN(ExprPtr target, parse_assign_target(true));
  if (at_operator("=")) {
    advance();
    NodePtr node = make_node(NodeKind::kSet, pos);
    node->target = std::move(target);
    LOCKSTEP_JINJA_ASSIGN(node->expr, parse_tuple(true, {}, false));
    LOCKSTEP_TRY(expect_block_end("set"));
    return node;
  }
  NodePtr node = make_node(NodeKind::kSetBlock, pos);
  node->target = std::move(target);
  if (at_operator("|")) {
    LOCKSTEP_JINJA_ASSIGN(node->expr, parse_filters(nullptr, false));
  }
  LOCKSTEP_TRY(expect_block_end("set"));
  std::string end;
  int saved_depth = std::exchange(loop_depth_, 0);
  auto body = parse_body({"endset"}, "set", pos, &end);
  loop_depth_ = saved_depth;
  if (!body.ok()) return body.error();
  node->body = std::move(body).value();
  LOCKSTEP_TRY(expect_block_end("endset"));
  return node;
}

Expected<NodePtr> Parser::parse_macro(SourcePos pos) {
  NodePtr node = make_node(NodeKind::kMacro, pos);
  LOCKSTEP_JINJA_ASSIGN(node->text, expect_name());
  LOCKSTEP_TRY(expect_operator("("));
  while (!at_operator(")")) {
    if (!node->params.empty()) LOCKSTEP_TRY(expect_operator(","));
    if (at_operator(")")) break;
    Parameter param;
    LOCKSTEP_JINJA_ASSIGN(param.name, expect_name());
    if (at_operator("=")) {
      advance();
      LOCKSTEP_JINJA_ASSIGN(param.default_value, parse_expression());
    } else if (!node->params.empty() && node->params.back().default_value) {
      return error_at(current().pos, "non-default argument follows default argument");
    }
    node->params.push_back(std::move(param));
  }
  advance();
  LOCKSTEP_TRY(expect_block_end("macro"));
  std::string end;
  int saved_depth = std::exchange(loop_depth_, 0);
  auto body = parse_body({"endmacro"}, "macro", pos, &end);
  loop_depth_ = saved_depth;
  if (!body.ok()) return body.error();
  node->body = std::move(body).value();
  LOCKSTEP_TRY(expect_block_end("endmacro"));
  return node;
}

Expected<NodePtr> Parser::parse_with(SourcePos pos) {
  NodePtr node = make_node(NodeKind::kWith, pos);
  while (current().kind != TokenKind::kBlockEnd) {
    if (!node->params.empty()) LOCKSTEP_TRY(expect_operator(","));
    Parameter param;
    LOCKSTEP_JINJA_ASSIGN(param.name, expect_name());
    LOCKSTEP_TRY(expect_operator("="));
    LOCKSTEP_JINJA_ASSIGN(param.default_value, parse_expression());
    node->params.push_back(std::move(param));
  }
  LOCKSTEP_TRY(expect_block_end("with"));
  std::string end;
  LOCKSTEP_JINJA_ASSIGN(node->body, parse_body({"endwith"}, "with", pos, &end));
  LOCKSTEP_TRY(expect_block_end("endwith"));
  return node;
}

Expected<NodePtr> Parser::parse_filter_block(SourcePos pos) {
  NodePtr node = make_node(NodeKind::kFilterBlock, pos);
  LOCKSTEP_JINJA_ASSIGN(node->expr, parse_filters(nullptr, true));
  LOCKSTEP_TRY(expect_block_end("filter"));
  std::string end;
  LOCKSTEP_JINJA_ASSIGN(node->body, parse_body({"endfilter"}, "filter", pos, &end));
  LOCKSTEP_TRY(expect_block_end("endfilter"));
  return node;
}

Expected<ExprPtr> Parser::parse_assign_target(bool with_namespace) {
  auto name_expr = [](const Token& token) {
    ExprPtr expr = make_expr(ExprKind::kName, token.pos);
    expr->name = token.text;
    return expr;
  };
  if (with_namespace && current().kind == TokenKind::kName &&
      peek(1).kind == TokenKind::kOperator && peek(1).text == ".") {
    ExprPtr attribute = make_expr(ExprKind::kAttribute, current().pos);
    attribute->args.push_back(name_expr(current()));
    advance();
    advance();
    LOCKSTEP_JINJA_ASSIGN(attribute->name, expect_name());
    return attribute;
  }
  ExprPtr tuple = make_expr(ExprKind::kTuple, current().pos);
  bool parenthesized = at_operator("(");
  if (parenthesized) advance();
  while (true) {
    if (current().kind != TokenKind::kName || current().text == "in")
      return unexpected("a variable name");
    tuple->args.push_back(name_expr(current()));
    advance();
    if (!at_operator(",")) break;
    advance();
    if (at_name("in") || at_operator("=") || at_operator(")")) break;  // trailing comma
  }
  if (parenthesized) LOCKSTEP_TRY(expect_operator(")"));
  if (tuple->args.size() == 1 && !parenthesized) return std::move(tuple->args[0]);
  return tuple;
}

}  // namespace lockstep::jinja
