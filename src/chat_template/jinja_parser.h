// Parses template tokens into a syntax tree with jinja2's grammar and operator precedence
// (filters bind tighter than arithmetic; `not` looser than comparisons; ** is left-assoc).
// Statements: if/elif/else, for (with `if` filter and else), set (also namespace attributes
// and block set), macro, filter, with, break/continue, generation; raw is handled by the lexer.
// Unknown filters and tests are errors here, as jinja2 reports them when compiling.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "chat_template/jinja_ast.h"
#include "chat_template/jinja_lexer.h"

namespace lockstep::jinja {

// The statements of a whole template. Errors name the line and column.
[[nodiscard]] Expected<NodeList> parse_template(std::string_view source);

// The parser's state; statements are in jinja_parser.cpp, expressions in
// jinja_parse_expression.cpp and jinja_parse_postfix.cpp. Use parse_template.
class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  [[nodiscard]] Expected<NodeList> parse_all();

 private:
  using Names = std::initializer_list<std::string_view>;

  // Statements up to a block tag named in `end_tags` (whose name is consumed and stored in
  // `found_end`), or to the end of the template when `end_tags` is empty. `open_tag` and
  // `open_pos` name the block for the error when the end is not found.
  Expected<NodeList> parse_body(Names end_tags, const std::string& open_tag, SourcePos open_pos,
                                std::string* found_end);
  Expected<NodePtr> parse_statement();
  Expected<NodePtr> parse_if(SourcePos pos);
  Expected<NodePtr> parse_for(SourcePos pos);
  Expected<NodePtr> parse_set(SourcePos pos);
  Expected<NodePtr> parse_macro(SourcePos pos);
  Expected<NodePtr> parse_with(SourcePos pos);
  Expected<NodePtr> parse_filter_block(SourcePos pos);
  // A target of for/set: a name, a namespace attribute (when allowed) or a tuple of names.
  Expected<ExprPtr> parse_assign_target(bool with_namespace);

  // Expressions.
  Expected<ExprPtr> parse_expression(bool with_condexpr = true);
  Expected<ExprPtr> parse_tuple(bool with_condexpr, Names extra_end_names, bool explicit_parens);
  Expected<ExprPtr> parse_or();
  Expected<ExprPtr> parse_and();
  Expected<ExprPtr> parse_not();
  Expected<ExprPtr> parse_compare();
  Expected<ExprPtr> parse_math1();
  Expected<ExprPtr> parse_concat();
  Expected<ExprPtr> parse_math2();
  Expected<ExprPtr> parse_pow();
  Expected<ExprPtr> parse_unary(bool with_filter);
  Expected<ExprPtr> parse_primary();
  Expected<ExprPtr> parse_postfix(ExprPtr node);
  Expected<ExprPtr> parse_filter_expr(ExprPtr node);
  Expected<ExprPtr> parse_subscript(ExprPtr node);
  Expected<ExprPtr> parse_slice_or_index();
  Expected<ExprPtr> parse_filters(ExprPtr node, bool start_inline);
  Expected<ExprPtr> parse_test(ExprPtr node);
  // Sets the height of `expr` from its children; fails when the tree is too deep to render.
  Expected<ExprPtr> sealed(ExprPtr expr) const;
  // Arguments after `(` up to `)` into `call` (args after any already there, and kwargs).
  Status parse_call_args(Expr& call);

  const Token& current() const { return tokens_[at_]; }
  const Token& peek(size_t ahead) const;
  void advance() {
    if (at_ + 1 < tokens_.size()) ++at_;
  }
  bool at_name(std::string_view name) const;
  bool at_operator(std::string_view op) const;
  Status expect_operator(std::string_view op);
  Expected<std::string> expect_name();
  Status expect_block_end(const std::string& tag);
  Error unexpected(const std::string& expected) const;
  // One more level of nesting while alive. Deeper than kMaxNesting fails (nesting_too_deep).
  struct Nesting {
    explicit Nesting(int& depth) : depth_(depth) { ++depth_; }
    ~Nesting() { --depth_; }
    int& depth_;
  };
  static constexpr int kMaxNesting = 200;
  bool nesting_too_deep() const { return nesting_ > kMaxNesting; }

  std::vector<Token> tokens_;
  size_t at_ = 0;
  int loop_depth_ = 0;  // for break/continue
  int nesting_ = 0;     // of blocks and expressions, bounded so that parsing and rendering
                        // cannot run out of stack
};

}  // namespace lockstep::jinja
