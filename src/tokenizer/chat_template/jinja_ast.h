// The syntax tree of a parsed template: expressions (what `{{ }}` and tag arguments compute) and
// statements (text, output, if/for/set/macro/call/filter blocks). Nodes own their children and
// carry the template line they came from, for error messages. Built once by the parser and only
// read afterwards, so one parsed template can be rendered from many threads at once.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/chat_template/jinja_value.h"

namespace locus::jinja {

enum class ExprKind {
  kLiteral,
  kName,
  kList,  // list or tuple display
  kDict,
  kAttribute,  // x.name
  kItem,       // x[index], x[start:stop:step]
  kSlice,      // only as the index of kItem
  kCall,
  kFilter,
  kTest,
  kUnary,
  kBinary,
  kConcat,  // a ~ b ~ c
  kCompare,
  kConditional,  // a if b else c
};

struct Expr {
  Expr(ExprKind k, int l) : kind(k), line(l) {}
  virtual ~Expr() = default;
  ExprKind kind;
  int line;
};
using ExprPtr = std::unique_ptr<Expr>;

struct CallArgumentsAst {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star_args;    // *args
  ExprPtr star_kwargs;  // **kwargs
};

struct LiteralExpr : Expr {
  LiteralExpr(Value v, int l) : Expr(ExprKind::kLiteral, l), value(std::move(v)) {}
  Value value;
};

struct NameExpr : Expr {
  NameExpr(std::string n, int l) : Expr(ExprKind::kName, l), name(std::move(n)) {}
  std::string name;
};

struct ListExpr : Expr {
  ListExpr(bool tuple, int l) : Expr(ExprKind::kList, l), is_tuple(tuple) {}
  std::vector<ExprPtr> items;
  bool is_tuple;
};

struct DictExpr : Expr {
  explicit DictExpr(int l) : Expr(ExprKind::kDict, l) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

struct AttributeExpr : Expr {
  AttributeExpr(ExprPtr o, std::string n, int l)
      : Expr(ExprKind::kAttribute, l), object(std::move(o)), name(std::move(n)) {}
  ExprPtr object;
  std::string name;
};

struct ItemExpr : Expr {
  ItemExpr(ExprPtr o, ExprPtr i, int l)
      : Expr(ExprKind::kItem, l), object(std::move(o)), index(std::move(i)) {}
  ExprPtr object;
  ExprPtr index;
};

struct SliceExpr : Expr {
  explicit SliceExpr(int l) : Expr(ExprKind::kSlice, l) {}
  ExprPtr start, stop, step;  // each may be null
};

struct CallExpr : Expr {
  CallExpr(ExprPtr c, int l) : Expr(ExprKind::kCall, l), callee(std::move(c)) {}
  ExprPtr callee;
  CallArgumentsAst arguments;
};

// `operand | name(args)`. In `{% filter %}` blocks and `{% set x | f %}` the innermost operand is
// null and stands for the rendered block body.
struct FilterExpr : Expr {
  FilterExpr(ExprPtr o, std::string n, int l)
      : Expr(ExprKind::kFilter, l), operand(std::move(o)), name(std::move(n)) {}
  ExprPtr operand;
  std::string name;
  CallArgumentsAst arguments;
};

// `operand is name(args)`; `is not` parses as kUnary not around this.
struct TestExpr : Expr {
  TestExpr(ExprPtr o, std::string n, int l)
      : Expr(ExprKind::kTest, l), operand(std::move(o)), name(std::move(n)) {}
  ExprPtr operand;
  std::string name;
  CallArgumentsAst arguments;
};

enum class UnaryOp { kNot, kNegate, kPlus };

struct UnaryExpr : Expr {
  UnaryExpr(UnaryOp o, ExprPtr e, int l)
      : Expr(ExprKind::kUnary, l), op(o), operand(std::move(e)) {}
  UnaryOp op;
  ExprPtr operand;
};

enum class BinaryOp {
  kAdd,
  kSubtract,
  kMultiply,
  kDivide,
  kFloorDivide,
  kModulo,
  kPower,
  kAnd,
  kOr
};

struct BinaryExpr : Expr {
  BinaryExpr(BinaryOp o, ExprPtr a, ExprPtr b, int l)
      : Expr(ExprKind::kBinary, l), op(o), left(std::move(a)), right(std::move(b)) {}
  BinaryOp op;
  ExprPtr left, right;
};

struct ConcatExpr : Expr {
  explicit ConcatExpr(int l) : Expr(ExprKind::kConcat, l) {}
  std::vector<ExprPtr> parts;
};

enum class CompareOp { kEqual, kNotEqual, kLess, kLessEqual, kGreater, kGreaterEqual, kIn, kNotIn };

// Chained comparisons as in Python: a < b < c.
struct CompareExpr : Expr {
  CompareExpr(ExprPtr f, int l) : Expr(ExprKind::kCompare, l), first(std::move(f)) {}
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};

struct ConditionalExpr : Expr {
  explicit ConditionalExpr(int l) : Expr(ExprKind::kConditional, l) {}
  ExprPtr condition, if_true, if_false;  // if_false may be null: yields undefined
};

// ---- Statements ----

enum class StmtKind {
  kText,
  kOutput,  // {{ expr }}
  kIf,
  kFor,
  kSet,       // {% set target = expr %}
  kSetBlock,  // {% set target %}...{% endset %}
  kMacro,
  kCallBlock,  // {% call macro(...) %}...{% endcall %}
  kFilterBlock,
  kScope,  // a body run in its own scope: {% generation %}, {% with %}
  kBreak,
  kContinue,
};

struct Stmt {
  Stmt(StmtKind k, int l) : kind(k), line(l) {}
  virtual ~Stmt() = default;
  StmtKind kind;
  int line;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// Where `set` and `for` store values: a name, a tuple of targets, or `ns.attr`.
struct AssignTarget {
  enum class Kind { kName, kTuple, kNamespaceAttribute };
  Kind kind = Kind::kName;
  std::string name;                 // kName, and the namespace variable of kNamespaceAttribute
  std::string attribute;            // kNamespaceAttribute
  std::vector<AssignTarget> items;  // kTuple
  int line = 0;
};

struct TextStmt : Stmt {
  TextStmt(std::string t, int l) : Stmt(StmtKind::kText, l), text(std::move(t)) {}
  std::string text;
};

struct OutputStmt : Stmt {
  OutputStmt(ExprPtr e, int l) : Stmt(StmtKind::kOutput, l), expr(std::move(e)) {}
  ExprPtr expr;
};

struct IfStmt : Stmt {
  explicit IfStmt(int l) : Stmt(StmtKind::kIf, l) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, then each elif
  Body else_body;
};

struct ForStmt : Stmt {
  explicit ForStmt(int l) : Stmt(StmtKind::kFor, l) {}
  AssignTarget target;
  ExprPtr iterable;
  ExprPtr filter;  // `for x in xs if cond`; may be null
  Body body;
  Body else_body;  // runs when no item was iterated
};

struct SetStmt : Stmt {
  explicit SetStmt(int l) : Stmt(StmtKind::kSet, l) {}
  AssignTarget target;
  ExprPtr value;
};

struct SetBlockStmt : Stmt {
  explicit SetBlockStmt(int l) : Stmt(StmtKind::kSetBlock, l) {}
  AssignTarget target;
  ExprPtr filter;  // optional filter chain applied to the rendered body
  Body body;
};

struct MacroParameter {
  std::string name;
  ExprPtr default_value;  // null: required (missing arguments are undefined, as in jinja2)
};

struct MacroStmt : Stmt {
  explicit MacroStmt(int l) : Stmt(StmtKind::kMacro, l) {}
  std::string name;
  std::vector<MacroParameter> parameters;
  Body body;
  // jinja2 accepts extra positional/keyword arguments only when the body names varargs/kwargs.
  bool uses_varargs = false;
  bool uses_kwargs = false;
};

struct CallBlockStmt : Stmt {
  explicit CallBlockStmt(int l) : Stmt(StmtKind::kCallBlock, l) {}
  std::vector<MacroParameter> caller_parameters;  // {% call(x) m() %}
  ExprPtr call;                                   // a CallExpr
  Body body;
};

struct FilterBlockStmt : Stmt {
  explicit FilterBlockStmt(int l) : Stmt(StmtKind::kFilterBlock, l) {}
  ExprPtr filter;  // chain whose innermost operand is null
  Body body;
};

struct ScopeStmt : Stmt {
  explicit ScopeStmt(int l) : Stmt(StmtKind::kScope, l) {}
  std::vector<std::pair<AssignTarget, ExprPtr>> assignments;  // {% with a = 1 %}
  Body body;
};

struct LoopControlStmt : Stmt {
  LoopControlStmt(StmtKind k, int l) : Stmt(k, l) {}
};

}  // namespace locus::jinja
