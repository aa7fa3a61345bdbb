#include "chat_template/jinja_render.h"

#include <new>

#include "chat_template/jinja_methods.h"
#include "chat_template/jinja_strings.h"

namespace lockstep::jinja {
namespace {

constexpr int kMaxMacroDepth = 200;

ScopePtr child_scope(const ScopePtr& parent) {
  auto scope = std::make_shared<Scope>();
  scope->parent = parent;
  return scope;
}

// jinja2's `loop` object for item `index` of `items`.
Value loop_object(const std::vector<Value>& items, size_t index) {
  size_t n = items.size();
  Dict loop;
  loop.entries.reserve(13);
  loop.set("index", Value(index + 1));
  loop.set("index0", Value(index));
  loop.set("revindex", Value(n - index));
  loop.set("revindex0", Value(n - index - 1));
  loop.set("first", Value(index == 0));
  loop.set("last", Value(index + 1 == n));
  loop.set("length", Value(n));
  loop.set("depth", Value(1));
  loop.set("depth0", Value(0));
  loop.set("previtem",
           index > 0 ? items[index - 1] : Value(Undefined{"there is no previous item"}));
  loop.set("nextitem",
           index + 1 < n ? items[index + 1] : Value(Undefined{"there is no next item"}));
  loop.set("cycle", Callable{"loop.cycle", [index](const CallArgs& args) -> Expected<Value> {
                               if (args.positional.empty())
                                 return Error{"no items for cycling given"};
                               return args.positional[index % args.positional.size()];
                             }});
  return Value(std::move(loop));
}

}  // namespace

const Value* Scope::find(std::string_view name) const {
  for (const Scope* scope = this; scope; scope = scope->parent.get())
    if (const Value* found = scope->variables.find(name)) return found;
  return nullptr;
}

Expected<std::string> render_template(const NodeList& nodes, const Dict& variables,
                                      const RenderLimits& limits) {
  auto globals = std::make_shared<Scope>();
  globals->variables = builtin_globals();
  ScopePtr root = child_scope(globals);
  root->variables = variables;
  Renderer renderer(limits);
  std::string out;
  Renderer::Flow flow = Renderer::Flow::kNormal;
  reset_value_walks();
  try {
    LOCKSTEP_TRY(renderer.render(nodes, root, out, flow));
  } catch (const ValueTooLarge&) {
    return Error{"the chat template walked a value nested deeper than " + std::to_string(kMaxWalkDepth) +
                 " levels, or of more than " + std::to_string(kMaxWalkVisits) + " items"};
  } catch (const TextTooLarge&) {
    return Error{"the chat template built a string over " + std::to_string(kMaxTextBytes >> 20) + " MiB"};
  } catch (const std::bad_alloc&) {
    return Error{"the chat template ran out of memory"};
  }
  return out;
}

Status Renderer::step() {
  ++steps_;
  if (steps_ > limits_.max_steps)
    return Error{"the chat template took more than " + std::to_string(limits_.max_steps) +
                 " steps (a loop that does not end, or loops nested too deep)"};
  if ((steps_ & 4095) == 0 && limits_.cancelled && limits_.cancelled())
    return Error{"the chat template render was cancelled"};
  return Status();
}

Status Renderer::check_output(const std::string& out) const {
  if (out.size() <= limits_.max_output_bytes) return Status();
  return Error{"the chat template wrote more than " + std::to_string(limits_.max_output_bytes) + " bytes"};
}

Status Renderer::render(const NodeList& nodes, const ScopePtr& scope, std::string& out,
                        Flow& flow) {
  for (const NodePtr& node : nodes) {
    LOCKSTEP_TRY(render_node(*node, scope, out, flow));
    if (flow != Flow::kNormal) break;
  }
  return Status();
}

Status Renderer::render_node(const Node& node, const ScopePtr& scope, std::string& out,
                             Flow& flow) {
  LOCKSTEP_TRY(step());
  switch (node.kind) {
    case NodeKind::kText: out += node.text; return check_output(out);
    case NodeKind::kOutput: {
      LOCKSTEP_JINJA_ASSIGN(Value value, eval(*node.expr, scope));
      out += to_str(value);
      return check_output(out);
    }
    case NodeKind::kIf:
      for (const auto& [condition, body] : node.branches) {
        bool taken = !condition;
        if (condition) {
          LOCKSTEP_JINJA_ASSIGN(Value value, eval(*condition, scope));
          taken = truthy(value);
        }
        if (taken) return render(body, scope, out, flow);
      }
      return Status();
    case NodeKind::kFor: return render_for(node, scope, out);
    case NodeKind::kSet: {
      LOCKSTEP_JINJA_ASSIGN(Value value, eval(*node.expr, scope));
      return assign(*node.target, value, scope);
    }
    case NodeKind::kSetBlock:
    case NodeKind::kFilterBlock: {
      std::string captured;
      Flow inner = Flow::kNormal;
      LOCKSTEP_TRY(render(node.body, node.kind == NodeKind::kSetBlock ? child_scope(scope) : scope,
                          captured, inner));
      Value value(std::move(captured));
      if (node.expr) {
        LOCKSTEP_JINJA_ASSIGN(value, apply_filter_chain(*node.expr, value, scope));
      }
      if (node.kind == NodeKind::kSetBlock) return assign(*node.target, value, scope);
      out += to_str(value);
      return check_output(out);
    }
    case NodeKind::kMacro:
      scope->variables.set(node.text, make_macro(node, scope));
      return Status();
    case NodeKind::kWith: {
      ScopePtr inner = child_scope(scope);
      for (const Parameter& param : node.params) {
        LOCKSTEP_JINJA_ASSIGN(Value value, eval(*param.default_value, scope));
        inner->variables.set(param.name, std::move(value));
      }
      return render(node.body, inner, out, flow);
    }
    case NodeKind::kBreak: flow = Flow::kBreak; return Status();
    case NodeKind::kContinue: flow = Flow::kContinue; return Status();
    case NodeKind::kBody: return render(node.body, scope, out, flow);
  }
  return Status();
}

Status Renderer::render_for(const Node& node, const ScopePtr& scope, std::string& out) {
  LOCKSTEP_JINJA_ASSIGN(Value iterable, eval(*node.expr, scope));
  auto listed = iterate(iterable);
  if (!listed.ok()) return error_at(node.expr->pos, listed.error().message);
  std::vector<Value> items = std::move(listed).value();
  if (node.condition) {  // `for x in xs if cond`: the loop sees only the kept items
    std::vector<Value> kept;
    for (const Value& item : items) {
      LOCKSTEP_TRY(step());
      ScopePtr probe = child_scope(scope);
      LOCKSTEP_TRY(assign(*node.target, item, probe));
      LOCKSTEP_JINJA_ASSIGN(Value keep, eval(*node.condition, probe));
      if (truthy(keep)) kept.push_back(item);
    }
    items = std::move(kept);
  }
  Flow flow = Flow::kNormal;
  if (items.empty()) return render(node.else_body, scope, out, flow);
  for (size_t i = 0; i < items.size(); ++i) {
    LOCKSTEP_TRY(step());
    ScopePtr iteration = child_scope(scope);
    iteration->variables.set("loop", loop_object(items, i));
    LOCKSTEP_TRY(assign(*node.target, items[i], iteration));
    flow = Flow::kNormal;
    LOCKSTEP_TRY(render(node.body, iteration, out, flow));
    if (flow == Flow::kBreak) break;
  }
  return Status();
}

Status Renderer::assign(const Expr& target, const Value& value, const ScopePtr& scope) {
  if (target.kind == ExprKind::kName) {
    scope->variables.set(target.name, value);
    return Status();
  }
  if (target.kind == ExprKind::kAttribute) {  // set ns.attribute = value
    const Value* ns = scope->find(target.args[0]->name);
    if (!ns || !ns->is_namespace())
      return error_at(target.pos, "cannot assign attribute on non-namespace object");
    ns->namespace_attributes().set(target.name, value);
    return Status();
  }
  auto items = iterate(value);
  if (!items.ok()) return error_at(target.pos, "cannot unpack: " + items.error().message);
  size_t expected = target.args.size();
  if (items->size() != expected)
    return error_at(target.pos, (items->size() > expected ? "too many" : "not enough") +
                                    std::string(" values to unpack (expected ") +
                                    std::to_string(expected) + ", got " +
                                    std::to_string(items->size()) + ")");
  for (size_t i = 0; i < expected; ++i) LOCKSTEP_TRY(assign(*target.args[i], (*items)[i], scope));
  return Status();
}

Expected<Value> Renderer::apply_filter_chain(const Expr& chain, const Value& input,
                                             const ScopePtr& scope) {
  const Value* saved = block_input_;
  block_input_ = &input;
  Expected<Value> result = eval(chain, scope);
  block_input_ = saved;
  return result;
}

Value Renderer::make_macro(const Node& macro, const ScopePtr& scope) {
  // A weak reference: the scope holds the macro, so a strong one would never be freed.
  std::weak_ptr<Scope> closure = scope;
  return Value(Callable{macro.text, [this, &macro, closure](const CallArgs& args) {
                          return call_macro(macro, closure, args);
                        }});
}

Expected<Value> Renderer::call_macro(const Node& macro, const std::weak_ptr<Scope>& closure,
                                     const CallArgs& args) {
  ScopePtr defining = closure.lock();
  if (!defining) return Error{"macro '" + macro.text + "' called after its scope ended"};
  if (macro_depth_ >= kMaxMacroDepth)
    return Error{"macro '" + macro.text + "' nested too deeply (recursion?)"};
  ScopePtr scope = child_scope(defining);
  std::vector<Value> varargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < macro.params.size())
      scope->variables.set(macro.params[i].name, args.positional[i]);
    else
      varargs.push_back(args.positional[i]);
  }
  Dict kwargs;
  for (const auto& [name, value] : args.keywords) {
    bool is_param = false;
    for (size_t i = 0; i < macro.params.size(); ++i) {
      if (macro.params[i].name != name) continue;
      if (i < args.positional.size())
        return Error{"macro '" + macro.text + "' got multiple values for argument '" + name + "'"};
      is_param = true;
    }
    if (is_param)
      scope->variables.set(name, value);
    else
      kwargs.set(name, value);
  }
  for (size_t i = args.positional.size(); i < macro.params.size(); ++i) {
    const Parameter& param = macro.params[i];
    if (scope->variables.find(param.name)) continue;
    Value fallback(Undefined{"parameter '" + param.name + "' was not provided"});
    if (param.default_value) {
      LOCKSTEP_JINJA_ASSIGN(fallback, eval(*param.default_value, scope));
    }
    scope->variables.set(param.name, std::move(fallback));
  }
  scope->variables.set("varargs", Value::tuple(std::move(varargs)));
  scope->variables.set("kwargs", Value(std::move(kwargs)));
  std::string out;
  Flow flow = Flow::kNormal;
  ++macro_depth_;
  Status rendered = render(macro.body, scope, out, flow);
  --macro_depth_;
  if (!rendered.ok()) return rendered.error();
  return Value(std::move(out));
}

}  // namespace lockstep::jinja
