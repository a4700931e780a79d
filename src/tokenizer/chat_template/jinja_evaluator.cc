// Statement execution and expression evaluation (see jinja_evaluator.h).
#include "tokenizer/chat_template/jinja_evaluator.h"

#include "tokenizer/chat_template/jinja_attributes.h"
#include "tokenizer/chat_template/jinja_builtins.h"
#include "tokenizer/chat_template/jinja_error.h"
#include "tokenizer/chat_template/jinja_filters.h"
#include "tokenizer/chat_template/jinja_operators.h"
#include "tokenizer/chat_template/jinja_tests.h"
#include "tokenizer/chat_template/python_text.h"

namespace locus::jinja {
namespace {

// Restores the evaluator's scope when a nested scope ends, also on exceptions.
class ScopeSwap {
 public:
  ScopeSwap(std::shared_ptr<Scope>& slot, std::shared_ptr<Scope> next) : slot_(slot), saved_(slot) {
    slot_ = std::move(next);
  }
  ~ScopeSwap() { slot_ = std::move(saved_); }
  ScopeSwap(const ScopeSwap&) = delete;
  ScopeSwap& operator=(const ScopeSwap&) = delete;

 private:
  std::shared_ptr<Scope>& slot_;
  std::shared_ptr<Scope> saved_;
};

Value make_loop_object(const std::vector<Value>& items, size_t index) {
  auto loop = std::make_shared<ObjectValue>();
  loop->type_name = "LoopContext";
  auto length = static_cast<int64_t>(items.size());
  auto i = static_cast<int64_t>(index);
  DictValue& a = loop->attributes;
  a.insert_new(Value("index"), Value(i + 1));
  a.insert_new(Value("index0"), Value(i));
  a.insert_new(Value("revindex"), Value(length - i));
  a.insert_new(Value("revindex0"), Value(length - i - 1));
  a.insert_new(Value("first"), Value(i == 0));
  a.insert_new(Value("last"), Value(i == length - 1));
  a.insert_new(Value("length"), Value(length));
  a.insert_new(Value("depth"), Value(int64_t{1}));
  a.insert_new(Value("depth0"), Value(int64_t{0}));
  a.insert_new(Value("previtem"),
               index > 0 ? items[index - 1] : Value::undefined("there is no previous item"));
  a.insert_new(Value("nextitem"), index + 1 < items.size()
                                      ? items[index + 1]
                                      : Value::undefined("there is no next item"));
  a.insert_new(Value("cycle"), Value::callable("loop.cycle", [i](Evaluator&, CallArguments& args) {
                 if (args.positional.empty()) throw_type_error("no items for cycling given");
                 return args.positional[static_cast<size_t>(i) % args.positional.size()];
               }));
  return Value::object(std::move(loop));
}

}  // namespace

const Value* Scope::find(const std::string& name) const {
  for (const Scope* scope = this; scope != nullptr; scope = scope->parent_.get()) {
    auto it = scope->variables_.find(name);
    if (it != scope->variables_.end()) return &it->second;
  }
  return nullptr;
}

Evaluator::Evaluator(const DictValue& globals, const RenderLimits& limits, std::time_t now)
    : globals_(globals),
      limits_(limits),
      now_(now),
      scope_(std::make_shared<Scope>(nullptr)),
      builtins_(make_builtins()) {}

Evaluator::~Evaluator() {
  for (const std::shared_ptr<Scope>& scope : closures_)
    scope->clear();
  scope_->clear();
}

std::string Evaluator::render(const Body& body) {
  std::string out;
  exec_body(body, out);
  return out;
}

void Evaluator::count_step() {
  if (++steps_ > limits_.max_steps) {
    throw TemplateError(TemplateErrorKind::kLimit, "template exceeded " +
                                                       std::to_string(limits_.max_steps) +
                                                       " loop iterations and macro calls");
  }
}

void Evaluator::append(std::string& out, std::string_view text) const {
  if (out.size() + text.size() > limits_.max_output_bytes) {
    throw TemplateError(
        TemplateErrorKind::kLimit,
        "template output exceeded " + std::to_string(limits_.max_output_bytes) + " bytes");
  }
  out.append(text);
}

// ---- statements ----

Evaluator::Flow Evaluator::exec_body(const Body& body, std::string& out) {
  for (const StmtPtr& stmt : body) {
    Flow flow = exec(*stmt, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec(const Stmt& stmt, std::string& out) {
  line_ = stmt.line;
  switch (stmt.kind) {
    case StmtKind::kText:
      append(out, static_cast<const TextStmt&>(stmt).text);
      return Flow::kNormal;
    case StmtKind::kOutput: {
      Value value = eval(*static_cast<const OutputStmt&>(stmt).expr);
      if (!value.is_undefined()) append(out, value.str());
      return Flow::kNormal;
    }
    case StmtKind::kIf: {
      Flow flow = Flow::kNormal;
      exec_if(static_cast<const IfStmt&>(stmt), out, flow);
      return flow;
    }
    case StmtKind::kFor:
      exec_for(static_cast<const ForStmt&>(stmt), out);
      return Flow::kNormal;
    case StmtKind::kSet: {
      const auto& set = static_cast<const SetStmt&>(stmt);
      assign(set.target, eval(*set.value));
      return Flow::kNormal;
    }
    case StmtKind::kSetBlock: {
      const auto& set = static_cast<const SetBlockStmt&>(stmt);
      Value captured(render_in_scope(set.body, scope_));
      assign(set.target, set.filter
                             ? eval_filter(static_cast<const FilterExpr&>(*set.filter), &captured)
                             : captured);
      return Flow::kNormal;
    }
    case StmtKind::kMacro: {
      const auto& macro = static_cast<const MacroStmt&>(stmt);
      scope_->set(macro.name, make_macro(macro));
      return Flow::kNormal;
    }
    case StmtKind::kCallBlock:
      exec_call_block(static_cast<const CallBlockStmt&>(stmt), out);
      return Flow::kNormal;
    case StmtKind::kFilterBlock: {
      const auto& block = static_cast<const FilterBlockStmt&>(stmt);
      Value captured(render_in_scope(block.body, scope_));
      append(out, eval_filter(static_cast<const FilterExpr&>(*block.filter), &captured).str());
      return Flow::kNormal;
    }
    case StmtKind::kScope:
      exec_scope(static_cast<const ScopeStmt&>(stmt), out);
      return Flow::kNormal;
    case StmtKind::kBreak:
      return Flow::kBreak;
    case StmtKind::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

void Evaluator::exec_if(const IfStmt& stmt, std::string& out, Flow& flow) {
  for (const auto& [condition, body] : stmt.branches) {
    if (eval(*condition).truthy()) {
      flow = exec_body(body, out);
      return;
    }
  }
  flow = exec_body(stmt.else_body, out);
}

void Evaluator::exec_for(const ForStmt& stmt, std::string& out) {
  std::vector<Value> items = iterate(eval(*stmt.iterable));
  if (stmt.filter) {
    // `for x in xs if cond`: the condition sees the loop target but not `loop`.
    std::vector<Value> kept;
    for (const Value& item : items) {
      count_step();
      ScopeSwap swap(scope_, std::make_shared<Scope>(scope_));
      assign(stmt.target, item);
      if (eval(*stmt.filter).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    count_step();
    ScopeSwap swap(scope_, std::make_shared<Scope>(scope_));
    assign(stmt.target, items[i]);
    scope_->set("loop", make_loop_object(items, i));
    if (exec_body(stmt.body, out) == Flow::kBreak) break;
  }
  if (items.empty()) {
    ScopeSwap swap(scope_, std::make_shared<Scope>(scope_));
    exec_body(stmt.else_body, out);
  }
}

void Evaluator::exec_call_block(const CallBlockStmt& stmt, std::string& out) {
  const auto& call = static_cast<const CallExpr&>(*stmt.call);
  Value callee = eval(*call.callee);
  CallArguments args = eval_arguments(call.arguments);
  args.keyword.emplace_back("caller", make_caller(stmt));
  line_ = stmt.line;
  Value result = this->call(callee, args);
  if (!result.is_undefined()) append(out, result.str());
}

void Evaluator::exec_scope(const ScopeStmt& stmt, std::string& out) {
  std::vector<Value> values;
  for (const auto& assignment : stmt.assignments)
    values.push_back(eval(*assignment.second));
  ScopeSwap swap(scope_, std::make_shared<Scope>(scope_));
  for (size_t i = 0; i < values.size(); ++i)
    assign(stmt.assignments[i].first, values[i]);
  exec_body(stmt.body, out);
}

std::string Evaluator::render_in_scope(const Body& body, std::shared_ptr<Scope> parent) {
  ScopeSwap swap(scope_, std::make_shared<Scope>(std::move(parent)));
  std::string out;
  exec_body(body, out);
  return out;
}

void Evaluator::assign(const AssignTarget& target, const Value& value) {
  switch (target.kind) {
    case AssignTarget::Kind::kName:
      scope_->set(target.name, value);
      return;
    case AssignTarget::Kind::kTuple: {
      std::vector<Value> items = iterate(value);
      if (items.size() < target.items.size()) {
        throw_type_error("ValueError: not enough values to unpack (expected " +
                         std::to_string(target.items.size()) + ", got " +
                         std::to_string(items.size()) + ")");
      }
      if (items.size() > target.items.size()) {
        throw_type_error("ValueError: too many values to unpack (expected " +
                         std::to_string(target.items.size()) + ")");
      }
      for (size_t i = 0; i < items.size(); ++i)
        assign(target.items[i], items[i]);
      return;
    }
    case AssignTarget::Kind::kNamespaceAttribute: {
      const Value* ns = scope_->find(target.name);
      if (ns == nullptr) ns = globals_.find(target.name);
      if (ns == nullptr || !ns->is_object() || !ns->as_object().is_namespace) {
        throw_type_error("cannot assign attribute on non-namespace object");
      }
      ns->as_object().attributes.set(Value(target.attribute), value);
      return;
    }
  }
}

// ---- macros ----

Value Evaluator::make_macro(const MacroStmt& stmt) {
  std::shared_ptr<Scope> closure = scope_;
  closures_.push_back(closure);
  const MacroStmt* macro = &stmt;
  return Value::callable(
      "Macro '" + stmt.name + "'", [macro, closure](Evaluator& ev, CallArguments& args) {
        return ev.call_macro(macro->name, macro->parameters, macro->body, macro->uses_varargs,
                             macro->uses_kwargs, closure, args);
      });
}

Value Evaluator::make_caller(const CallBlockStmt& stmt) {
  std::shared_ptr<Scope> closure = scope_;
  closures_.push_back(closure);
  const CallBlockStmt* block = &stmt;
  return Value::callable("Macro 'caller'", [block, closure](Evaluator& ev, CallArguments& args) {
    return ev.call_macro("caller", block->caller_parameters, block->body, false, false, closure,
                         args);
  });
}

Value Evaluator::call_macro(const std::string& name, const std::vector<MacroParameter>& parameters,
                            const Body& body, bool uses_varargs, bool uses_kwargs,
                            const std::shared_ptr<Scope>& closure, CallArguments& args) {
  count_step();
  if (call_depth_ >= limits_.max_call_depth) {
    throw TemplateError(TemplateErrorKind::kLimit,
                        "macro calls nested deeper than " + std::to_string(limits_.max_call_depth));
  }
  if (args.positional.size() > parameters.size() && !uses_varargs) {
    throw_type_error("macro '" + name + "' takes not more than " +
                     std::to_string(parameters.size()) + " argument(s)");
  }
  auto scope = std::make_shared<Scope>(closure);
  std::vector<bool> bound(parameters.size(), false);
  for (size_t i = 0; i < parameters.size() && i < args.positional.size(); ++i) {
    scope->set(parameters[i].name, args.positional[i]);
    bound[i] = true;
  }
  std::vector<Value> extra_positional;
  for (size_t i = parameters.size(); i < args.positional.size(); ++i)
    extra_positional.push_back(args.positional[i]);
  DictValue extra_keyword;
  bool has_caller = false;
  for (auto& [key, value] : args.keyword) {
    size_t index = parameters.size();
    for (size_t i = 0; i < parameters.size(); ++i) {
      if (parameters[i].name == key) index = i;
    }
    if (index < parameters.size()) {
      if (bound[index])
        throw_type_error("macro '" + name + "' got multiple values for argument '" + key + "'");
      scope->set(key, value);
      bound[index] = true;
    } else if (key == "caller") {
      scope->set("caller", value);
      has_caller = true;
    } else if (uses_kwargs) {
      extra_keyword.set(Value(key), value);
    } else {
      throw_type_error("macro '" + name + "' takes no keyword argument '" + key + "'");
    }
  }
  scope->set("varargs", Value::tuple(std::move(extra_positional)));
  scope->set("kwargs", Value::dict(std::move(extra_keyword)));
  if (!has_caller) scope->set("caller", Value::undefined("No caller defined"));
  ++call_depth_;
  struct DepthRestore {
    int& depth;
    ~DepthRestore() { --depth; }
  } restore{call_depth_};
  ScopeSwap swap(scope_, scope);
  // Defaults are evaluated at call time inside the macro, so they may refer to earlier parameters.
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (bound[i]) continue;
    scope->set(parameters[i].name,
               parameters[i].default_value
                   ? eval(*parameters[i].default_value)
                   : Value::undefined("parameter '" + parameters[i].name + "' was not provided"));
  }
  std::string out;
  exec_body(body, out);
  return Value(std::move(out));
}

// ---- expressions ----

Value Evaluator::call(const Value& callee, CallArguments& args) {
  if (callee.is_callable()) return callee.as_callable().function(*this, args);
  if (callee.is_undefined()) raise_undefined(callee);
  throw_type_error("'" + callee.type_name() + "' object is not callable");
}

Value Evaluator::apply_filter(const std::string& name, const Value& input, CallArguments& args) {
  const FilterFunction* filter = find_filter(name);
  if (filter == nullptr) throw_type_error("No filter named '" + name + "'.");
  return (*filter)(*this, input, args);
}

bool Evaluator::apply_test(const std::string& name, const Value& input, CallArguments& args) {
  const TestFunction* test = find_test(name);
  if (test == nullptr) throw_type_error("No test named '" + name + "'.");
  return (*test)(*this, input, args);
}

CallArguments Evaluator::eval_arguments(const CallArgumentsAst& ast) {
  CallArguments args;
  for (const ExprPtr& e : ast.positional)
    args.positional.push_back(eval(*e));
  if (ast.star_args) {
    for (Value& v : iterate(eval(*ast.star_args)))
      args.positional.push_back(std::move(v));
  }
  for (const auto& [key, e] : ast.keyword)
    args.keyword.emplace_back(key, eval(*e));
  if (ast.star_kwargs) {
    Value mapping = eval(*ast.star_kwargs);
    if (!mapping.is_dict())
      throw_type_error("argument after ** must be a mapping, not " + mapping.type_name());
    for (const auto& [key, value] : mapping.as_dict().entries()) {
      if (!key.is_string()) throw_type_error("keywords must be strings");
      args.keyword.emplace_back(key.as_string(), value);
    }
  }
  return args;
}

Value Evaluator::eval(const Expr& expr) {
  line_ = expr.line;
  switch (expr.kind) {
    case ExprKind::kLiteral:
      return static_cast<const LiteralExpr&>(expr).value;
    case ExprKind::kName:
      return eval_name(static_cast<const NameExpr&>(expr));
    case ExprKind::kList: {
      const auto& list = static_cast<const ListExpr&>(expr);
      std::vector<Value> items;
      items.reserve(list.items.size());
      for (const ExprPtr& item : list.items)
        items.push_back(eval(*item));
      return list.is_tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    }
    case ExprKind::kDict: {
      DictValue dict;
      for (const auto& [key_expr, value_expr] : static_cast<const DictExpr&>(expr).items) {
        Value key = eval(*key_expr);
        check_hashable(key);
        dict.set(std::move(key), eval(*value_expr));
      }
      return Value::dict(std::move(dict));
    }
    case ExprKind::kAttribute: {
      const auto& attribute = static_cast<const AttributeExpr&>(expr);
      Value object = eval(*attribute.object);
      line_ = expr.line;
      return get_attribute(object, attribute.name);
    }
    case ExprKind::kItem:
      return eval_item(static_cast<const ItemExpr&>(expr));
    case ExprKind::kSlice:
      throw_type_error("a slice is only valid inside []");
    case ExprKind::kCall:
      return eval_call(static_cast<const CallExpr&>(expr));
    case ExprKind::kFilter:
      return eval_filter(static_cast<const FilterExpr&>(expr), nullptr);
    case ExprKind::kTest: {
      const auto& test = static_cast<const TestExpr&>(expr);
      Value operand = eval(*test.operand);
      CallArguments args = eval_arguments(test.arguments);
      line_ = expr.line;
      return Value(apply_test(test.name, operand, args));
    }
    case ExprKind::kUnary: {
      const auto& unary = static_cast<const UnaryExpr&>(expr);
      Value operand = eval(*unary.operand);
      line_ = expr.line;
      if (unary.op == UnaryOp::kNot) return Value(!operand.truthy());
      return unary.op == UnaryOp::kNegate ? negate(operand) : unary_plus(operand);
    }
    case ExprKind::kBinary: {
      const auto& binary = static_cast<const BinaryExpr&>(expr);
      Value left = eval(*binary.left);
      if (binary.op == BinaryOp::kAnd) return left.truthy() ? eval(*binary.right) : left;
      if (binary.op == BinaryOp::kOr) return left.truthy() ? left : eval(*binary.right);
      Value right = eval(*binary.right);
      line_ = expr.line;
      return binary_operation(binary.op, left, right);
    }
    case ExprKind::kConcat: {
      std::string out;
      for (const ExprPtr& part : static_cast<const ConcatExpr&>(expr).parts) {
        Value v = eval(*part);
        append(out, v.str());
      }
      return Value(std::move(out));
    }
    case ExprKind::kCompare:
      return eval_compare(static_cast<const CompareExpr&>(expr));
    case ExprKind::kConditional: {
      const auto& conditional = static_cast<const ConditionalExpr&>(expr);
      if (eval(*conditional.condition).truthy()) return eval(*conditional.if_true);
      if (conditional.if_false) return eval(*conditional.if_false);
      return Value::undefined("the inline if-expression on line " + std::to_string(expr.line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  return Value::undefined();
}

Value Evaluator::eval_name(const NameExpr& expr) {
  if (const Value* v = scope_->find(expr.name)) return *v;
  if (const Value* v = globals_.find(expr.name)) return *v;
  auto it = builtins_.find(expr.name);
  if (it != builtins_.end()) return it->second;
  return Value::undefined(text::repr(expr.name) + " is undefined");
}

Value Evaluator::eval_call(const CallExpr& expr) {
  Value callee = eval(*expr.callee);
  CallArguments args = eval_arguments(expr.arguments);
  line_ = expr.line;
  return call(callee, args);
}

Value Evaluator::eval_filter(const FilterExpr& expr, const Value* block_input) {
  Value input = expr.operand
                    ? (expr.operand->kind == ExprKind::kFilter
                           ? eval_filter(static_cast<const FilterExpr&>(*expr.operand), block_input)
                           : eval(*expr.operand))
                    : (block_input != nullptr ? *block_input : Value(""));
  CallArguments args = eval_arguments(expr.arguments);
  line_ = expr.line;
  return apply_filter(expr.name, input, args);
}

Value Evaluator::eval_item(const ItemExpr& expr) {
  Value object = eval(*expr.object);
  if (expr.index->kind == ExprKind::kSlice) {
    const auto& slice = static_cast<const SliceExpr&>(*expr.index);
    Value start = slice.start ? eval(*slice.start) : Value::none();
    Value stop = slice.stop ? eval(*slice.stop) : Value::none();
    Value step = slice.step ? eval(*slice.step) : Value::none();
    line_ = expr.line;
    if (object.is_undefined()) raise_undefined(object);
    // jinja2 compiles slices to a plain Python subscription, so errors are Python's own.
    if (object.is_dict()) throw_type_error("unhashable type: 'slice'");
    if (!object.is_string() && !object.is_list()) {
      throw_type_error("'" + object.type_name() + "' object is not subscriptable");
    }
    return slice_value(object, start, stop, step);
  }
  Value key = eval(*expr.index);
  line_ = expr.line;
  return get_item(object, key);
}

Value Evaluator::eval_compare(const CompareExpr& expr) {
  Value left = eval(*expr.first);
  for (const auto& [op, right_expr] : expr.rest) {
    Value right = eval(*right_expr);
    line_ = expr.line;
    if (!compare(op, left, right)) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

}  // namespace locus::jinja
