// Template interpreter (see jinja_interpreter.h): executes statements into an output string and
// evaluates expressions to Values.
#include "chat/jinja_interpreter.h"

#include <algorithm>
#include <unordered_map>

#include "chat/jinja_filters.h"
#include "chat/jinja_globals.h"
#include "chat/jinja_operators.h"

namespace jet::jinja {
namespace {

// Macro recursion deeper than this is an error rather than a stack overflow.
constexpr int kMaxCallDepth = 64;
// Expression trees the parser builds in loops (a + b + ..., x.a.a..., v|f|f...) nest as deep as they
// are long; evaluating them recurses, so a cap keeps a long chain from overflowing the stack.
constexpr int kMaxEvalDepth = 1000;

class Scope {
 public:
  explicit Scope(const Scope* parent) : parent_(parent) {}

  const Value* find(const std::string& name) const {
    for (const Scope* scope = this; scope != nullptr; scope = scope->parent_) {
      if (const auto found = scope->variables_.find(name); found != scope->variables_.end()) return &found->second;
    }
    return nullptr;
  }

  void set(const std::string& name, Value value) { variables_[name] = std::move(value); }

 private:
  const Scope* parent_;
  std::unordered_map<std::string, Value> variables_;
};

// Runs `action`, turning an EvalError into a jet::Error that names the template position.
template <typename Action>
auto at_position(const SourcePos& pos, Action action) {
  try {
    return action();
  } catch (const EvalError& error) {
    throw Error(located_message(pos, error.what()));
  }
}

class Interpreter {
 public:
  explicit Interpreter(const Dict& context) : globals_(nullptr), root_(&globals_) {
    const Dict builtins = builtin_globals();
    for (const auto& [name, value] : builtins.entries()) globals_.set(name, value);
    for (const auto& [name, value] : context.entries()) root_.set(name, value);
  }

  std::string render(const ast::Body& body) {
    std::string out;
    exec_body(body, root_, out);
    return out;
  }

 private:
  // How a statement ended: normally, or by {% break %} / {% continue %} inside a loop body.
  enum class Flow { kNormal, kBreak, kContinue };

  class DepthGuard {
   public:
    explicit DepthGuard(int& depth) : depth_(++depth) {}
    ~DepthGuard() { --depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    int& depth_;
  };

  // ---- statements ----

  Flow exec_body(const ast::Body& body, Scope& scope, std::string& out) {
    for (const ast::Stmt& stmt : body) {
      const Flow flow = std::visit([&](const auto& node) { return exec(node, stmt.pos, scope, out); }, stmt.node);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow exec(const ast::Text& node, const SourcePos&, Scope&, std::string& out) {
    out += node.text;
    return Flow::kNormal;
  }

  Flow exec(const ast::Output& node, const SourcePos&, Scope& scope, std::string& out) {
    out += to_display_string(eval(*node.expr, scope));
    return Flow::kNormal;
  }

  Flow exec(const ast::If& node, const SourcePos&, Scope& scope, std::string& out) {
    for (const auto& [condition, body] : node.branches) {
      if (eval(*condition, scope).truthy()) return exec_body(body, scope, out);
    }
    return exec_body(node.otherwise, scope, out);
  }

  Flow exec(const ast::For& node, const SourcePos& pos, Scope& scope, std::string& out) {
    const Value iterable = eval(*node.iterable, scope);
    List items = at_position(node.iterable->pos, [&] { return iterate(iterable); });
    if (node.condition) {
      // The loop filter sees the loop variables but not `loop`; loop.index counts kept items only.
      List kept;
      for (Value& item : items) {
        Scope probe(&scope);
        bind_targets(probe, node.targets, item, pos);
        if (eval(*node.condition, probe).truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec_body(node.otherwise, scope, out);
    for (size_t i = 0; i < items.size(); ++i) {
      Scope iteration(&scope);
      bind_targets(iteration, node.targets, items[i], pos);
      iteration.set("loop", loop_variable(items, i));
      if (exec_body(node.body, iteration, out) == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  static Value loop_variable(const List& items, size_t i) {
    const auto n = static_cast<int64_t>(items.size());
    const auto index = static_cast<int64_t>(i);
    Value cycle = Value::function([i](const Arguments& args) {
      if (args.positional.empty()) throw EvalError("loop.cycle() needs at least one value");
      return args.positional[i % args.positional.size()];
    });
    // depth counts recursive-loop levels in Jinja, so it is 1 for every loop here.
    return Value::dict(Dict({
        {"index0", Value::integer(index)},
        {"index", Value::integer(index + 1)},
        {"revindex0", Value::integer(n - index - 1)},
        {"revindex", Value::integer(n - index)},
        {"first", Value::boolean(i == 0)},
        {"last", Value::boolean(index == n - 1)},
        {"length", Value::integer(n)},
        {"depth0", Value::integer(0)},
        {"depth", Value::integer(1)},
        {"previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item")},
        {"nextitem", index + 1 < n ? items[i + 1] : Value::undefined("there is no next item")},
        {"cycle", std::move(cycle)},
    }));
  }

  // Assigns `value` to one name, or unpacks it over several (`for key, value in d.items()`).
  void bind_targets(Scope& scope, const std::vector<std::string>& targets, const Value& value, const SourcePos& pos) {
    if (targets.size() == 1) {
      scope.set(targets.front(), value);
      return;
    }
    const List parts = at_position(pos, [&] { return iterate(value); });
    if (parts.size() != targets.size()) {
      throw Error(located_message(
          pos, parts.size() < targets.size()
                   ? str("not enough values to unpack (expected ", targets.size(), ", got ", parts.size(), ")")
                   : str("too many values to unpack (expected ", targets.size(), ")")));
    }
    for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], parts[i]);
  }

  Flow exec(const ast::Set& node, const SourcePos& pos, Scope& scope, std::string&) {
    Value value;
    if (node.value) {
      value = eval(*node.value, scope);
    } else {
      std::string captured;
      exec_body(node.body, scope, captured);
      value = Value::string(std::move(captured));
    }
    if (node.namespace_name.empty()) {
      bind_targets(scope, node.targets, value, pos);
      return Flow::kNormal;
    }
    const Value* target = scope.find(node.namespace_name);
    if (target == nullptr || target->kind() != Value::Kind::kNamespace) {
      throw Error(
          located_message(pos, "cannot assign attribute on non-namespace object '" + node.namespace_name + "'"));
    }
    target->namespace_dict().set(node.targets.front(), std::move(value));
    return Flow::kNormal;
  }

  Flow exec(const ast::Macro& node, const SourcePos&, Scope& scope, std::string&) {
    scope.set(node.name, Value::function([this, &node](const Arguments& args) { return call_macro(node, args); }));
    return Flow::kNormal;
  }

  Flow exec(const ast::LoopControl& node, const SourcePos&, Scope&, std::string&) {
    return node.is_break ? Flow::kBreak : Flow::kContinue;
  }

  Flow exec(const ast::Generation& node, const SourcePos&, Scope& scope, std::string& out) {
    Scope inner(&scope);
    return exec_body(node.body, inner, out);
  }

  // Macros see the template's top-level variables and their own parameters.
  Value call_macro(const ast::Macro& macro, const Arguments& args) {
    const DepthGuard depth(call_depth_);
    if (call_depth_ > kMaxCallDepth) throw EvalError(str("macro calls nested deeper than ", kMaxCallDepth));
    if (args.positional.size() > macro.params.size()) {
      throw EvalError(str("macro '", macro.name, "' takes not more than ", macro.params.size(), " argument(s)"));
    }
    Scope scope(&root_);
    for (const auto& keyword : args.keywords) {
      const bool known = std::any_of(macro.params.begin(), macro.params.end(),
                                     [&](const ast::MacroParam& param) { return param.name == keyword.first; });
      if (!known) {
        throw EvalError(str("macro '", macro.name, "' got an unexpected keyword argument '", keyword.first, "'"));
      }
    }
    for (size_t i = 0; i < macro.params.size(); ++i) {
      const ast::MacroParam& param = macro.params[i];
      const auto keyword = std::find_if(args.keywords.begin(), args.keywords.end(),
                                        [&](const auto& entry) { return entry.first == param.name; });
      if (i < args.positional.size()) {
        scope.set(param.name, args.positional[i]);
      } else if (keyword != args.keywords.end()) {
        scope.set(param.name, keyword->second);
      } else if (param.default_value) {
        scope.set(param.name, eval(*param.default_value, scope));
      } else {
        scope.set(param.name, Value::undefined("parameter '" + param.name + "' was not provided"));
      }
    }
    std::string out;
    exec_body(macro.body, scope, out);
    return Value::string(std::move(out));
  }

  // ---- expressions ----

  Value eval(const ast::Expr& expr, Scope& scope) {
    const DepthGuard depth(eval_depth_);
    if (eval_depth_ > kMaxEvalDepth) throw EvalError(str("an expression nests deeper than ", kMaxEvalDepth));
    return at_position(expr.pos,
                       [&] { return std::visit([&](const auto& node) { return eval_node(node, scope); }, expr.node); });
  }

  Value eval_optional(const ast::ExprPtr& expr, Scope& scope) { return expr ? eval(*expr, scope) : Value(); }

  Arguments eval_args(const ast::CallArgs& args, Scope& scope) {
    Arguments values;
    for (const ast::ExprPtr& arg : args.positional) values.positional.push_back(eval(*arg, scope));
    for (const auto& [key, arg] : args.keywords) values.keywords.emplace_back(key, eval(*arg, scope));
    return values;
  }

  Value eval_node(const ast::Literal& node, Scope&) { return node.value; }

  Value eval_node(const ast::Name& node, Scope& scope) {
    const Value* found = scope.find(node.name);
    return found != nullptr ? *found : Value::undefined("'" + node.name + "' is undefined");
  }

  Value eval_node(const ast::ListLiteral& node, Scope& scope) {
    List items;
    for (const ast::ExprPtr& item : node.items) items.push_back(eval(*item, scope));
    return Value::list(std::move(items));
  }

  Value eval_node(const ast::DictLiteral& node, Scope& scope) {
    Dict dict;
    for (const auto& [key_expr, value_expr] : node.items) {
      const Value key = eval(*key_expr, scope);
      if (!key.is_string()) throw EvalError("dict keys must be strings, got " + key.type_name());
      dict.set(key.as_string(), eval(*value_expr, scope));
    }
    return Value::dict(std::move(dict));
  }

  Value eval_node(const ast::GetAttr& node, Scope& scope) {
    return get_attribute(eval(*node.object, scope), node.attribute);
  }

  Value eval_node(const ast::GetItem& node, Scope& scope) {
    const Value object = eval(*node.object, scope);
    return get_item(object, eval(*node.index, scope));
  }

  Value eval_node(const ast::Slice& node, Scope& scope) {
    const Value object = eval(*node.object, scope);
    return slice(object, eval_optional(node.start, scope), eval_optional(node.stop, scope),
                 eval_optional(node.step, scope));
  }

  Value eval_node(const ast::Call& node, Scope& scope) {
    const Value callee = eval(*node.callee, scope);
    const Arguments args = eval_args(node.args, scope);
    if (callee.kind() == Value::Kind::kFunction) return callee.as_function()(args);
    if (callee.is_undefined()) callee.fail_undefined();
    throw EvalError("'" + callee.type_name() + "' object is not callable");
  }

  Value eval_node(const ast::Filter& node, Scope& scope) {
    const Value subject = eval(*node.subject, scope);
    return apply_filter(node.name, subject, eval_args(node.args, scope));
  }

  Value eval_node(const ast::Test& node, Scope& scope) {
    const Value subject = eval(*node.subject, scope);
    return Value::boolean(apply_test(node.name, subject, eval_args(node.args, scope)) != node.negated);
  }

  Value eval_node(const ast::Unary& node, Scope& scope) {
    const Value operand = eval(*node.operand, scope);
    switch (node.op) {
      case ast::UnaryOp::kNot:
        return Value::boolean(!operand.truthy());
      case ast::UnaryOp::kNegate:
        return negate(operand);
      case ast::UnaryOp::kPlus:
        return unary_plus(operand);
    }
    return operand;
  }

  // `and` / `or` return one of their operands and skip the right one when the left decides, as in Python.
  Value eval_node(const ast::Binary& node, Scope& scope) {
    Value left = eval(*node.left, scope);
    if (node.op == ast::BinaryOp::kAnd) return left.truthy() ? eval(*node.right, scope) : left;
    if (node.op == ast::BinaryOp::kOr) return left.truthy() ? left : eval(*node.right, scope);
    return binary_operation(node.op, left, eval(*node.right, scope));
  }

  Value eval_node(const ast::Compare& node, Scope& scope) {
    Value left = eval(*node.first, scope);
    for (const auto& [op, right_expr] : node.rest) {
      Value right = eval(*right_expr, scope);
      if (!compare(op, left, right)) return Value::boolean(false);
      left = std::move(right);
    }
    return Value::boolean(true);
  }

  Value eval_node(const ast::Conditional& node, Scope& scope) {
    if (eval(*node.condition, scope).truthy()) return eval(*node.then, scope);
    if (node.otherwise) return eval(*node.otherwise, scope);
    return Value::undefined("the inline if-expression evaluated to false and has no else");
  }

  Scope globals_;
  Scope root_;
  int call_depth_ = 0;
  int eval_depth_ = 0;
};

}  // namespace

std::string render_template(const ast::Body& body, const Dict& context) { return Interpreter(context).render(body); }

}  // namespace jet::jinja
