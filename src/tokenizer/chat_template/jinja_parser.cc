// Recursive-descent parser following jinja2/parser.py (see jinja_parser.h).
#include "tokenizer/chat_template/jinja_parser.h"

#include <algorithm>
#include <initializer_list>

#include "tokenizer/chat_template/jinja_error.h"
#include "tokenizer/chat_template/jinja_filters.h"
#include "tokenizer/chat_template/jinja_lexer.h"
#include "tokenizer/chat_template/jinja_tests.h"

namespace locus::jinja {
namespace {

// Nesting past this is refused rather than risking the native stack on hostile input.
constexpr int kMaxNesting = 200;

[[noreturn]] void fail(const std::string& message, int line) {
  throw TemplateError(TemplateErrorKind::kSyntax, message, line);
}

std::string quote_list(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += "'" + names[i] + "'";
  }
  return out;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse() { return subparse({}); }

 private:
  // ---- token stream ----
  const Token& current() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& token = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return token;
  }
  bool is_name(const Token& t, std::string_view name) const {
    return t.type == TokenType::kName && t.value == name;
  }
  bool is_op(const Token& t, std::string_view op) const {
    return t.type == TokenType::kOperator && t.value == op;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(current(), name)) return false;
    next();
    return true;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(current(), op)) return false;
    next();
    return true;
  }
  const Token& expect(TokenType type, std::string_view what) {
    if (current().type != type) {
      if (current().type == TokenType::kEnd) fail("unexpected end of template, expected " + std::string(what) + ".", current().line);
      fail("expected token " + std::string(what) + ", got '" + describe_token(current()) + "'", current().line);
    }
    return next();
  }
  void expect_op(std::string_view op) {
    if (!is_op(current(), op)) {
      fail("expected token '" + std::string(op) + "', got '" + describe_token(current()) + "'", current().line);
    }
    next();
  }
  void expect_name(std::string_view name) {
    if (!is_name(current(), name)) {
      fail("expected token '" + std::string(name) + "', got '" + describe_token(current()) + "'", current().line);
    }
    next();
  }

  struct DepthGuard {
    DepthGuard(int& depth, int line) : depth_(depth) {
      if (++depth_ > kMaxNesting) fail("template nested too deeply", line);
    }
    ~DepthGuard() { --depth_; }
    int& depth_;
  };

  // ---- statements ----
  Body subparse(const std::vector<std::string>& end_tokens) {
    DepthGuard guard(depth_, current().line);
    Body body;
    if (!end_tokens.empty()) end_token_stack_.push_back(end_tokens);
    while (current().type != TokenType::kEnd) {
      const Token& token = current();
      if (token.type == TokenType::kText) {
        body.push_back(std::make_unique<TextStmt>(token.value, token.line));
        next();
      } else if (token.type == TokenType::kVariableBegin) {
        next();
        ExprPtr expr = parse_tuple(false, true, {});
        expect(TokenType::kVariableEnd, "'end of print statement'");
        body.push_back(std::make_unique<OutputStmt>(std::move(expr), token.line));
      } else if (token.type == TokenType::kBlockBegin) {
        next();
        if (current().type == TokenType::kName &&
            std::find(end_tokens.begin(), end_tokens.end(), current().value) != end_tokens.end()) {
          end_token_stack_.pop_back();
          return body;
        }
        body.push_back(parse_statement());
        expect(TokenType::kBlockEnd, "'end of statement block'");
      } else {
        fail("unexpected '" + describe_token(token) + "'", token.line);
      }
    }
    if (!end_tokens.empty()) end_token_stack_.pop_back();
    return body;
  }

  // Body up to one of `end_tokens`; the current token is then that end name (consumed when
  // drop_needle).
  Body parse_statements(const std::vector<std::string>& end_tokens, bool drop_needle) {
    skip_op(":");
    expect(TokenType::kBlockEnd, "'end of statement block'");
    Body body = subparse(end_tokens);
    if (current().type == TokenType::kEnd) fail_eof(end_tokens);
    if (drop_needle) next();
    return body;
  }

  [[noreturn]] void fail_eof(const std::vector<std::string>& end_tokens) {
    std::string message = "Unexpected end of template.";
    std::vector<std::string> expected = end_tokens;
    if (expected.empty() && !end_token_stack_.empty()) expected = end_token_stack_.back();
    if (!expected.empty()) message += " Jinja was looking for the following tags: " + quote_list(expected) + ".";
    if (!tag_stack_.empty()) message += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
    fail(message, current().line);
  }

  [[noreturn]] void fail_unknown_tag(const std::string& name, int line) {
    std::string message = "Encountered unknown tag '" + name + "'.";
    if (!end_token_stack_.empty()) {
      message += " Jinja was looking for the following tags: " + quote_list(end_token_stack_.back()) + ".";
    }
    if (!tag_stack_.empty()) message += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
    fail(message, line);
  }

  StmtPtr parse_statement() {
    const Token& token = current();
    if (token.type != TokenType::kName) fail("tag name expected", token.line);
    const std::string name = token.value;
    static const std::initializer_list<std::string_view> kUnsupported = {
        "block", "extends", "include", "import", "from", "autoescape"};
    if (std::find(kUnsupported.begin(), kUnsupported.end(), name) != kUnsupported.end()) {
      fail("the '" + name + "' tag is not supported in chat templates", token.line);
    }
    tag_stack_.push_back(name);
    StmtPtr result;
    if (name == "if") result = parse_if();
    else if (name == "for") result = parse_for();
    else if (name == "set") result = parse_set();
    else if (name == "macro") result = parse_macro();
    else if (name == "call") result = parse_call_block();
    else if (name == "filter") result = parse_filter_block();
    else if (name == "with") result = parse_with();
    else if (name == "print") result = parse_print();
    else if (name == "generation") result = parse_generation();
    else if (name == "break" || name == "continue") result = parse_loop_control();
    else {
      tag_stack_.pop_back();
      fail_unknown_tag(name, token.line);
    }
    tag_stack_.pop_back();
    return result;
  }

  StmtPtr parse_if() {
    auto node = std::make_unique<IfStmt>(next().line);
    while (true) {
      ExprPtr test = parse_tuple(false, false, {});
      Body body = parse_statements({"elif", "else", "endif"}, false);
      node->branches.emplace_back(std::move(test), std::move(body));
      const Token& token = next();
      if (token.value == "elif") continue;
      if (token.value == "else") node->else_body = parse_statements({"endif"}, true);
      break;
    }
    return node;
  }

  StmtPtr parse_for() {
    auto node = std::make_unique<ForStmt>(next().line);
    node->target = parse_assign_target(true, false, {"in"}, false);
    expect_name("in");
    node->iterable = parse_tuple(false, false, {"recursive"});
    if (skip_name("if")) node->filter = parse_expression(true);
    if (is_name(current(), "recursive")) fail("recursive for loops are not supported", current().line);
    ++loop_depth_;
    node->body = parse_statements({"endfor", "else"}, false);
    --loop_depth_;
    if (next().value == "else") node->else_body = parse_statements({"endfor"}, true);
    return node;
  }

  StmtPtr parse_set() {
    int line = next().line;
    AssignTarget target = parse_assign_target(true, false, {}, true);
    if (skip_op("=")) {
      auto node = std::make_unique<SetStmt>(line);
      node->target = std::move(target);
      node->value = parse_tuple(false, true, {});
      return node;
    }
    auto node = std::make_unique<SetBlockStmt>(line);
    node->target = std::move(target);
    if (is_op(current(), "|")) node->filter = parse_filter(nullptr, false);
    node->body = parse_statements({"endset"}, true);
    return node;
  }

  StmtPtr parse_macro() {
    auto node = std::make_unique<MacroStmt>(next().line);
    node->name = expect(TokenType::kName, "name").value;
    node->parameters = parse_signature();
    int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    size_t first_token = pos_;
    node->body = parse_statements({"endmacro"}, true);
    loop_depth_ = saved_loop_depth;
    for (size_t i = first_token; i < pos_; ++i) {
      node->uses_varargs |= is_name(tokens_[i], "varargs");
      node->uses_kwargs |= is_name(tokens_[i], "kwargs");
    }
    return node;
  }

  std::vector<MacroParameter> parse_signature() {
    std::vector<MacroParameter> parameters;
    expect_op("(");
    while (!is_op(current(), ")")) {
      if (!parameters.empty()) expect_op(",");
      MacroParameter parameter;
      parameter.name = parse_assign_target(false, true, {}, false).name;
      if (skip_op("=")) {
        parameter.default_value = parse_expression(true);
      } else if (!parameters.empty() && parameters.back().default_value) {
        fail("non-default argument follows default argument", current().line);
      }
      parameters.push_back(std::move(parameter));
    }
    expect_op(")");
    return parameters;
  }

  StmtPtr parse_call_block() {
    auto node = std::make_unique<CallBlockStmt>(next().line);
    if (is_op(current(), "(")) node->caller_parameters = parse_signature();
    node->call = parse_expression(true);
    if (node->call->kind != ExprKind::kCall) fail("expected call", node->line);
    int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    node->body = parse_statements({"endcall"}, true);
    loop_depth_ = saved_loop_depth;
    return node;
  }

  StmtPtr parse_filter_block() {
    auto node = std::make_unique<FilterBlockStmt>(next().line);
    node->filter = parse_filter(nullptr, true);
    node->body = parse_statements({"endfilter"}, true);
    return node;
  }

  StmtPtr parse_with() {
    auto node = std::make_unique<ScopeStmt>(next().line);
    while (current().type != TokenType::kBlockEnd) {
      if (!node->assignments.empty()) expect_op(",");
      AssignTarget target = parse_assign_target(true, false, {}, false);
      expect_op("=");
      node->assignments.emplace_back(std::move(target), parse_expression(true));
    }
    node->body = parse_statements({"endwith"}, true);
    return node;
  }

  StmtPtr parse_generation() {
    auto node = std::make_unique<ScopeStmt>(next().line);
    node->body = parse_statements({"endgeneration"}, true);
    return node;
  }

  StmtPtr parse_print() {
    int line = next().line;
    auto list = std::make_unique<ListExpr>(false, line);
    while (current().type != TokenType::kBlockEnd) {
      if (!list->items.empty()) expect_op(",");
      list->items.push_back(parse_expression(true));
    }
    // Each expression is output in turn: a concatenation of their str() forms.
    auto concat = std::make_unique<ConcatExpr>(line);
    concat->parts = std::move(list->items);
    return std::make_unique<OutputStmt>(std::move(concat), line);
  }

  StmtPtr parse_loop_control() {
    const Token& token = next();
    if (loop_depth_ == 0) fail("'" + token.value + "' outside of a loop", token.line);
    return std::make_unique<LoopControlStmt>(token.value == "break" ? StmtKind::kBreak : StmtKind::kContinue,
                                             token.line);
  }

  // ---- assignment targets ----
  AssignTarget parse_assign_target(bool with_tuple, bool name_only,
                                   const std::vector<std::string>& extra_end, bool with_namespace) {
    if (name_only) {
      const Token& token = expect(TokenType::kName, "name");
      return AssignTarget{AssignTarget::Kind::kName, token.value, "", {}, token.line};
    }
    if (!with_tuple) return parse_target_primary(with_namespace);
    AssignTarget tuple{AssignTarget::Kind::kTuple, "", "", {}, current().line};
    bool is_tuple = false;
    while (true) {
      if (!tuple.items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      tuple.items.push_back(parse_target_primary(with_namespace));
      if (is_op(current(), ",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (tuple.items.empty()) fail("expected an assignment target, got '" + describe_token(current()) + "'", current().line);
      return std::move(tuple.items[0]);
    }
    return tuple;
  }

  AssignTarget parse_target_primary(bool with_namespace) {
    const Token& token = current();
    if (is_op(token, "(")) {
      next();
      AssignTarget inner = parse_assign_target(true, false, {}, false);
      expect_op(")");
      return inner;
    }
    if (token.type != TokenType::kName) fail("can't assign to '" + describe_token(token) + "'", token.line);
    static const std::initializer_list<std::string_view> kConstants = {"true", "false", "none", "True", "False", "None"};
    if (std::find(kConstants.begin(), kConstants.end(), token.value) != kConstants.end()) {
      fail("can't assign to 'const'", token.line);
    }
    next();
    if (with_namespace && is_op(current(), ".")) {
      next();
      const Token& attribute = expect(TokenType::kName, "name");
      return AssignTarget{AssignTarget::Kind::kNamespaceAttribute, token.value, attribute.value, {}, token.line};
    }
    return AssignTarget{AssignTarget::Kind::kName, token.value, "", {}, token.line};
  }

  bool is_tuple_end(const std::vector<std::string>& extra_end) const {
    const Token& t = current();
    if (t.type == TokenType::kVariableEnd || t.type == TokenType::kBlockEnd || is_op(t, ")")) return true;
    return t.type == TokenType::kName && std::find(extra_end.begin(), extra_end.end(), t.value) != extra_end.end();
  }

  // ---- expressions ----
  ExprPtr parse_tuple(bool explicit_parentheses, bool with_condexpr,
                      const std::vector<std::string>& extra_end) {
    int line = current().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(current(), ",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parentheses) fail("Expected an expression, got '" + describe_token(current()) + "'", current().line);
    }
    auto tuple = std::make_unique<ListExpr>(true, line);
    tuple->items = std::move(items);
    return tuple;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(depth_, current().line);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    int line = current().line;
    ExprPtr expr = parse_or();
    while (skip_name("if")) {
      auto cond = std::make_unique<ConditionalExpr>(line);
      cond->condition = parse_or();
      cond->if_true = std::move(expr);
      if (skip_name("else")) cond->if_false = parse_condexpr();
      expr = std::move(cond);
      line = current().line;
    }
    return expr;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name(current(), "or")) {
      int line = next().line;
      left = std::make_unique<BinaryExpr>(BinaryOp::kOr, std::move(left), parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name(current(), "and")) {
      int line = next().line;
      left = std::make_unique<BinaryExpr>(BinaryOp::kAnd, std::move(left), parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name(current(), "not")) {
      int line = next().line;
      DepthGuard guard(depth_, line);
      return std::make_unique<UnaryExpr>(UnaryOp::kNot, parse_not(), line);
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = current().line;
    ExprPtr first = parse_math1();
    std::unique_ptr<CompareExpr> compare;
    while (true) {
      CompareOp op;
      const Token& t = current();
      if (is_op(t, "==")) op = CompareOp::kEqual;
      else if (is_op(t, "!=")) op = CompareOp::kNotEqual;
      else if (is_op(t, "<")) op = CompareOp::kLess;
      else if (is_op(t, "<=")) op = CompareOp::kLessEqual;
      else if (is_op(t, ">")) op = CompareOp::kGreater;
      else if (is_op(t, ">=")) op = CompareOp::kGreaterEqual;
      else if (is_name(t, "in")) op = CompareOp::kIn;
      else if (is_name(t, "not") && is_name(look(), "in")) op = CompareOp::kNotIn;
      else break;
      next();
      if (op == CompareOp::kNotIn) next();
      if (!compare) compare = std::make_unique<CompareExpr>(std::move(first), line);
      compare->rest.emplace_back(op, parse_math1());
    }
    if (!compare) return first;
    return compare;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op(current(), "+") || is_op(current(), "-")) {
      const Token& t = next();
      BinaryOp op = t.value == "+" ? BinaryOp::kAdd : BinaryOp::kSubtract;
      left = std::make_unique<BinaryExpr>(op, std::move(left), parse_concat(), t.line);
    }
    return left;
  }

  ExprPtr parse_concat() {
    int line = current().line;
    ExprPtr first = parse_math2();
    if (!is_op(current(), "~")) return first;
    auto concat = std::make_unique<ConcatExpr>(line);
    concat->parts.push_back(std::move(first));
    while (skip_op("~")) concat->parts.push_back(parse_math2());
    return concat;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (true) {
      const Token& t = current();
      BinaryOp op;
      if (is_op(t, "*")) op = BinaryOp::kMultiply;
      else if (is_op(t, "/")) op = BinaryOp::kDivide;
      else if (is_op(t, "//")) op = BinaryOp::kFloorDivide;
      else if (is_op(t, "%")) op = BinaryOp::kModulo;
      else break;
      int line = next().line;
      left = std::make_unique<BinaryExpr>(op, std::move(left), parse_pow(), line);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op(current(), "**")) {
      int line = next().line;
      left = std::make_unique<BinaryExpr>(BinaryOp::kPower, std::move(left), parse_unary(true), line);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    const Token& t = current();
    DepthGuard guard(depth_, t.line);
    ExprPtr node;
    if (is_op(t, "-") || is_op(t, "+")) {
      UnaryOp op = t.value == "-" ? UnaryOp::kNegate : UnaryOp::kPlus;
      int line = next().line;
      node = std::make_unique<UnaryExpr>(op, parse_unary(false), line);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& token = current();
    if (token.type == TokenType::kName) {
      next();
      if (token.value == "true" || token.value == "True") return std::make_unique<LiteralExpr>(Value(true), token.line);
      if (token.value == "false" || token.value == "False") return std::make_unique<LiteralExpr>(Value(false), token.line);
      if (token.value == "none" || token.value == "None") return std::make_unique<LiteralExpr>(Value::none(), token.line);
      return std::make_unique<NameExpr>(token.value, token.line);
    }
    if (token.type == TokenType::kString) {
      int line = token.line;
      std::string text;
      while (current().type == TokenType::kString) text += next().value;  // adjacent literals join
      return std::make_unique<LiteralExpr>(Value(std::move(text)), line);
    }
    if (token.type == TokenType::kInteger) {
      next();
      return std::make_unique<LiteralExpr>(Value(token.int_value), token.line);
    }
    if (token.type == TokenType::kFloat) {
      next();
      return std::make_unique<LiteralExpr>(Value(token.float_value), token.line);
    }
    if (is_op(token, "(")) {
      next();
      ExprPtr inner = parse_tuple(true, true, {});
      expect_op(")");
      return inner;
    }
    if (is_op(token, "[")) return parse_list();
    if (is_op(token, "{")) return parse_dict();
    if (token.type == TokenType::kEnd) fail("unexpected end of template", token.line);
    fail("unexpected '" + describe_token(token) + "'", token.line);
  }

  ExprPtr parse_list() {
    auto list = std::make_unique<ListExpr>(false, next().line);
    while (!is_op(current(), "]")) {
      if (!list->items.empty()) expect_op(",");
      if (is_op(current(), "]")) break;
      list->items.push_back(parse_expression(true));
    }
    expect_op("]");
    return list;
  }

  ExprPtr parse_dict() {
    auto dict = std::make_unique<DictExpr>(next().line);
    while (!is_op(current(), "}")) {
      if (!dict->items.empty()) expect_op(",");
      if (is_op(current(), "}")) break;
      ExprPtr key = parse_expression(true);
      expect_op(":");
      dict->items.emplace_back(std::move(key), parse_expression(true));
    }
    expect_op("}");
    return dict;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(current(), ".") || is_op(current(), "[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op(current(), "(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op(current(), "|")) {
        node = parse_filter(std::move(node), false);
      } else if (is_name(current(), "is")) {
        node = parse_test(std::move(node));
      } else if (is_op(current(), "(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& token = next();
    if (token.value == ".") {
      const Token& attribute = next();
      if (attribute.type == TokenType::kName) {
        return std::make_unique<AttributeExpr>(std::move(node), attribute.value, token.line);
      }
      if (attribute.type != TokenType::kInteger) fail("expected name or number", attribute.line);
      return std::make_unique<ItemExpr>(std::move(node), std::make_unique<LiteralExpr>(Value(attribute.int_value), attribute.line),
                                        token.line);
    }
    std::vector<ExprPtr> indexes;
    while (!is_op(current(), "]")) {
      if (!indexes.empty()) expect_op(",");
      indexes.push_back(parse_subscribed());
    }
    expect_op("]");
    if (indexes.size() == 1) return std::make_unique<ItemExpr>(std::move(node), std::move(indexes[0]), token.line);
    auto tuple = std::make_unique<ListExpr>(true, token.line);
    tuple->items = std::move(indexes);
    return std::make_unique<ItemExpr>(std::move(node), std::move(tuple), token.line);
  }

  ExprPtr parse_subscribed() {
    int line = current().line;
    ExprPtr first;
    if (!skip_op(":")) {
      first = parse_expression(true);
      if (!skip_op(":")) return first;
    }
    auto slice = std::make_unique<SliceExpr>(line);
    slice->start = std::move(first);
    if (!is_op(current(), ":") && !is_op(current(), "]") && !is_op(current(), ",")) {
      slice->stop = parse_expression(true);
    }
    if (skip_op(":") && !is_op(current(), "]") && !is_op(current(), ",")) {
      slice->step = parse_expression(true);
    }
    return slice;
  }

  CallArgumentsAst parse_call_args() {
    int line = current().line;
    expect_op("(");
    CallArgumentsAst args;
    bool require_comma = false;
    auto ensure = [&](bool ok) {
      if (!ok) fail("invalid syntax for function call expression", line);
    };
    while (!is_op(current(), ")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(current(), ")")) break;
      }
      if (skip_op("*")) {
        ensure(!args.star_args && !args.star_kwargs);
        args.star_args = parse_expression(true);
      } else if (skip_op("**")) {
        ensure(!args.star_kwargs);
        args.star_kwargs = parse_expression(true);
      } else if (current().type == TokenType::kName && is_op(look(), "=")) {
        ensure(!args.star_kwargs);
        std::string key = next().value;
        next();
        args.keyword.emplace_back(std::move(key), parse_expression(true));
      } else {
        ensure(!args.star_args && !args.star_kwargs && args.keyword.empty());
        args.positional.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
    return args;
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto call = std::make_unique<CallExpr>(std::move(callee), current().line);
    call->arguments = parse_call_args();
    return call;
  }

  std::string parse_dotted_name() {
    std::string name = expect(TokenType::kName, "name").value;
    while (skip_op(".")) name += "." + expect(TokenType::kName, "name").value;
    return name;
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (is_op(current(), "|") || start_inline) {
      if (!start_inline) next();
      int line = current().line;
      std::string name = parse_dotted_name();
      if (find_filter(name) == nullptr) fail("No filter named '" + name + "'.", line);
      auto filter = std::make_unique<FilterExpr>(std::move(node), std::move(name), line);
      if (is_op(current(), "(")) filter->arguments = parse_call_args();
      node = std::move(filter);
      start_inline = false;
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    int line = next().line;
    bool negated = skip_name("not");
    std::string name = parse_dotted_name();
    if (find_test(name) == nullptr) fail("No test named '" + name + "'.", line);
    auto test = std::make_unique<TestExpr>(std::move(node), std::move(name), line);
    const Token& t = current();
    if (is_op(t, "(")) {
      test->arguments = parse_call_args();
    } else if ((t.type == TokenType::kName || t.type == TokenType::kString || t.type == TokenType::kInteger ||
                t.type == TokenType::kFloat || is_op(t, "[") || is_op(t, "{")) &&
               !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
      if (is_name(t, "is")) fail("You cannot chain multiple tests with is", t.line);
      test->arguments.positional.push_back(parse_postfix(parse_primary()));
    }
    if (!negated) return test;
    return std::make_unique<UnaryExpr>(UnaryOp::kNot, std::move(test), line);
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<std::string> tag_stack_;
  std::vector<std::vector<std::string>> end_token_stack_;
};

}  // namespace

Body parse_template(std::string_view source) {
  return Parser(tokenize(source)).parse();
}

}  // namespace locus::jinja
