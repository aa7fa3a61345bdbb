// The syntax tree of a parsed template: expressions (Expr) and statements (Node). Built once by
// the parser, then only read (by any number of renders at once).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat_template/jinja_lexer.h"
#include "chat_template/jinja_value.h"

namespace lockstep::jinja {

enum class ExprKind {
  kConstant,     // constant
  kName,         // name
  kList,         // args: items
  kTuple,        // args: items
  kDict,         // args: key, value, key, value, ...
  kAttribute,    // args[0].name
  kItem,         // args[0][args[1]]
  kSlice,        // args: start, stop, step (each may be null); only as the index of kItem
  kCall,         // args[0](args[1:], kwargs)
  kFilter,       // args[0] | name(args[1:], kwargs); args[0] is null in a filter block
  kTest,         // args[0] is [not] name(args[1:], kwargs)
  kNot,          // not args[0]
  kNegate,       // -args[0]
  kPositive,     // +args[0]
  kBinary,       // args[0] binary_op args[1]
  kConcat,       // args[0] ~ args[1]
  kCompare,      // args[0] compare_ops[0] args[1] compare_ops[1] args[2] ...
  kAnd,          // args[0] and args[1]
  kOr,           // args[0] or args[1]
  kConditional,  // args[0] if args[1] else args[2] (args[2] null: undefined)
};

enum class BinaryOp { kAdd, kSubtract, kMultiply, kDivide, kFloorDivide, kModulo, kPower };
enum class CompareOp { kEqual, kNotEqual, kLess, kLessEqual, kGreater, kGreaterEqual, kIn, kNotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind;
  SourcePos pos;
  Value constant;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  BinaryOp binary_op = BinaryOp::kAdd;
  std::vector<CompareOp> compare_ops;
  bool negated = false;  // kTest: `is not`
  int height = 1;        // of this tree; bounded by the parser so that rendering stays shallow
};

enum class NodeKind {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // branches; a null condition is the else branch
  kFor,          // for target in expr [if condition]: body [else: else_body]
  kSet,          // set target = expr
  kSetBlock,     // set target [| filter]: body; `expr` is the filter chain or null
  kMacro,        // macro name(params): body
  kFilterBlock,  // filter expr: body (the filter chain has a null innermost base)
  kWith,         // with params: body
  kBreak,
  kContinue,
  kBody,  // body rendered as is ({% generation %})
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using NodeList = std::vector<NodePtr>;

// A macro parameter or `with` assignment: name and default (null: required).
struct Parameter {
  std::string name;
  ExprPtr default_value;
};

struct Node {
  NodeKind kind;
  SourcePos pos;
  std::string text;  // kText: the text; kMacro: the macro name
  ExprPtr expr;
  ExprPtr target;     // kFor, kSet, kSetBlock: a name, a tuple of names or namespace.attribute
  ExprPtr condition;  // kFor: the loop filter
  std::vector<std::pair<ExprPtr, NodeList>> branches;  // kIf
  NodeList body;
  NodeList else_body;
  std::vector<Parameter> params;  // kMacro, kWith
};

inline ExprPtr make_expr(ExprKind kind, SourcePos pos) {
  auto expr = std::make_unique<Expr>();
  expr->kind = kind;
  expr->pos = pos;
  return expr;
}

inline ExprPtr make_pair(ExprKind kind, SourcePos pos, ExprPtr left, ExprPtr right) {
  ExprPtr expr = make_expr(kind, pos);
  expr->args.push_back(std::move(left));
  expr->args.push_back(std::move(right));
  return expr;
}

inline ExprPtr make_constant(Value value, SourcePos pos) {
  ExprPtr expr = make_expr(ExprKind::kConstant, pos);
  expr->constant = std::move(value);
  return expr;
}

}  // namespace lockstep::jinja
