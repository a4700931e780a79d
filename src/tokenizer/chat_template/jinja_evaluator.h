// Renders a parsed template: runs statements, evaluates expressions and keeps the scopes, with
// jinja2's semantics under transformers' ImmutableSandboxedEnvironment. One Evaluator serves one
// render call on one thread; it never outlives the template it renders.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/chat_template/jinja_ast.h"
#include "tokenizer/chat_template/jinja_value.h"

namespace locus::jinja {

// Bounds that keep a hostile or broken template from taking the server down. Real chat
// templates stay orders of magnitude below them.
struct RenderLimits {
  size_t max_output_bytes = size_t{64} << 20;
  uint64_t max_steps = 10'000'000;  // loop iterations plus macro calls
  int max_call_depth = 200;         // nested macro calls
};

// Variables of one scope; lookups fall through to the enclosing scope. For-loop iterations and
// macro calls get their own scope, `if` does not (as in jinja2).
class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent) : parent_(std::move(parent)) {}
  const Value* find(const std::string& name) const;
  void set(const std::string& name, Value value) { variables_[name] = std::move(value); }
  // Drops all variables: breaks the reference cycle between a scope and the macros defined in it.
  void clear() { variables_.clear(); }

 private:
  std::shared_ptr<Scope> parent_;
  std::unordered_map<std::string, Value> variables_;
};

class Evaluator {
 public:
  // `globals`: the render variables (messages, tools, ...). `now` is what strftime_now() formats.
  Evaluator(const DictValue& globals, const RenderLimits& limits, std::time_t now);
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Throws TemplateError; current_line() then tells where it happened.
  std::string render(const Body& body);
  int current_line() const { return line_; }
  std::time_t now() const { return now_; }

  // Services for filters, tests and methods.
  Value call(const Value& callee, CallArguments& args);
  Value apply_filter(const std::string& name, const Value& input, CallArguments& args);
  bool apply_test(const std::string& name, const Value& input, CallArguments& args);
  // Counts one unit of work (a loop iteration, a macro call) against RenderLimits::max_steps.
  void count_step();
  size_t max_output_bytes() const { return limits_.max_output_bytes; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec_body(const Body& body, std::string& out);
  Flow exec(const Stmt& stmt, std::string& out);
  void exec_if(const IfStmt& stmt, std::string& out, Flow& flow);
  void exec_for(const ForStmt& stmt, std::string& out);
  void exec_call_block(const CallBlockStmt& stmt, std::string& out);
  void exec_scope(const ScopeStmt& stmt, std::string& out);
  void append(std::string& out, std::string_view text) const;
  // Renders `body` into a string in a fresh child scope of `parent`.
  std::string render_in_scope(const Body& body, std::shared_ptr<Scope> parent);

  Value eval(const Expr& expr);
  Value eval_name(const NameExpr& expr);
  Value eval_call(const CallExpr& expr);
  Value eval_filter(const FilterExpr& expr, const Value* block_input);
  Value eval_item(const ItemExpr& expr);
  Value eval_compare(const CompareExpr& expr);
  CallArguments eval_arguments(const CallArgumentsAst& args);

  void assign(const AssignTarget& target, const Value& value);
  Value make_macro(const MacroStmt& stmt);
  Value make_caller(const CallBlockStmt& stmt);
  Value call_macro(const std::string& name, const std::vector<MacroParameter>& parameters,
                   const Body& body, bool uses_varargs, bool uses_kwargs,
                   const std::shared_ptr<Scope>& closure, CallArguments& args);

  const DictValue& globals_;
  RenderLimits limits_;
  std::time_t now_;
  std::shared_ptr<Scope> scope_;
  std::unordered_map<std::string, Value> builtins_;
  std::vector<std::shared_ptr<Scope>> closures_;  // scopes captured by macros, cleared at the end
  int line_ = 0;
  int call_depth_ = 0;
  uint64_t steps_ = 0;
};

}  // namespace locus::jinja
