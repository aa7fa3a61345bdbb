// Renders a parsed template. Scoping follows jinja2: each for-loop iteration, macro call and
// `with` block has its own scope (a `set` inside it is not seen after it), `if` has none, and a
// namespace() is shared by reference so `set ns.x = ...` reaches outer scopes. Statements are in
// jinja_render.cpp, expressions in jinja_eval.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "chat_template/jinja_ast.h"
#include "chat_template/render_limits.h"
#include "chat_template/jinja_value.h"

namespace lockstep::jinja {

// Renders `nodes` with `variables` (which shadow the built-in globals). Errors name the line
// and column of the failing expression or statement; a render past `limits` fails saying which.
// Reads `nodes` only; safe to call from several threads at once on the same nodes.
[[nodiscard]] Expected<std::string> render_template(const NodeList& nodes, const Dict& variables,
                                                    const RenderLimits& limits = {});

struct Scope {
  std::shared_ptr<Scope> parent;
  Dict variables;

  // The innermost variable of that name, or null.
  const Value* find(std::string_view name) const;
};
using ScopePtr = std::shared_ptr<Scope>;

// The state of one render: the steps taken, the macro call depth, and the input of a filter
// block.
class Renderer {
 public:
  enum class Flow { kNormal, kBreak, kContinue };

  explicit Renderer(const RenderLimits& limits) : limits_(limits) {}

  // Appends the output of `nodes` to `out`; `flow` reports a break or continue to the loop.
  [[nodiscard]] Status render(const NodeList& nodes, const ScopePtr& scope, std::string& out,
                              Flow& flow);
  [[nodiscard]] Expected<Value> eval(const Expr& expr, const ScopePtr& scope);

 private:
  Status render_node(const Node& node, const ScopePtr& scope, std::string& out, Flow& flow);
  Status render_for(const Node& node, const ScopePtr& scope, std::string& out);
  Status assign(const Expr& target, const Value& value, const ScopePtr& scope);
  // Applies a filter chain whose innermost base is null to `input` (filter blocks, block set).
  Expected<Value> apply_filter_chain(const Expr& chain, const Value& input, const ScopePtr& scope);
  Value make_macro(const Node& macro, const ScopePtr& scope);
  Expected<Value> call_macro(const Node& macro, const std::weak_ptr<Scope>& closure,
                             const CallArgs& args);

  Expected<Value> eval_operation(const Expr& expr, const ScopePtr& scope);
  Expected<CallArgs> eval_args(const Expr& expr, size_t first, const ScopePtr& scope);

  // Counts one step; fails past the step budget or once the render is cancelled.
  Status step();
  // Fails when `out` has grown past the output limit.
  Status check_output(const std::string& out) const;

  const RenderLimits& limits_;
  int64_t steps_ = 0;
  int macro_depth_ = 0;
  const Value* block_input_ = nullptr;  // the base of a filter chain with a null base
};

}  // namespace lockstep::jinja
