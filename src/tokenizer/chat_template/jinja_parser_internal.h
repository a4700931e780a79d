// The Jinja parser's class, shared by jinja_parser.cc (statements) and
// jinja_parser_expressions.cc (expressions). Internal to the interpreter; use jinja_parser.h.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template/jinja_ast.h"
#include "tokenizer/chat_template/jinja_error.h"
#include "tokenizer/chat_template/jinja_lexer.h"

namespace locus::jinja {

// Nesting past this is refused rather than risking the native stack on hostile input.
constexpr int kMaxNesting = 200;

[[noreturn]] inline void fail(const std::string& message, int line) {
  throw TemplateError(TemplateErrorKind::kSyntax, message, line);
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
      if (current().type == TokenType::kEnd)
        fail("unexpected end of template, expected " + std::string(what) + ".", current().line);
      fail("expected token " + std::string(what) + ", got '" + describe_token(current()) + "'",
           current().line);
    }
    return next();
  }
  void expect_op(std::string_view op) {
    if (!is_op(current(), op)) {
      fail("expected token '" + std::string(op) + "', got '" + describe_token(current()) + "'",
           current().line);
    }
    next();
  }
  void expect_name(std::string_view name) {
    if (!is_name(current(), name)) {
      fail("expected token '" + std::string(name) + "', got '" + describe_token(current()) + "'",
           current().line);
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
  Body subparse(const std::vector<std::string>& end_tokens);

  // Body up to one of `end_tokens`; the current token is then that end name (consumed when
  // drop_needle).
  Body parse_statements(const std::vector<std::string>& end_tokens, bool drop_needle);

  // jinja2's messages for a missing end tag and an unknown tag, naming what was expected.
  [[noreturn]] void fail_eof(const std::vector<std::string>& end_tokens);
  [[noreturn]] void fail_unknown_tag(const std::string& name, int line);
  StmtPtr parse_statement();
  StmtPtr parse_if();
  StmtPtr parse_for();
  StmtPtr parse_set();
  StmtPtr parse_macro();
  std::vector<MacroParameter> parse_signature();
  StmtPtr parse_call_block();
  StmtPtr parse_filter_block();
  StmtPtr parse_with();
  StmtPtr parse_generation();
  StmtPtr parse_print();
  StmtPtr parse_loop_control();

  // ---- assignment targets ----
  AssignTarget parse_assign_target(bool with_tuple, bool name_only,
                                   const std::vector<std::string>& extra_end, bool with_namespace);
  AssignTarget parse_target_primary(bool with_namespace);
  bool is_tuple_end(const std::vector<std::string>& extra_end) const;

  // ---- expressions ----
  ExprPtr parse_tuple(bool explicit_parentheses, bool with_condexpr,
                      const std::vector<std::string>& extra_end);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  CallArgumentsAst parse_call_args();
  ExprPtr parse_call(ExprPtr callee);
  std::string parse_dotted_name();
  ExprPtr parse_filter(ExprPtr node, bool start_inline);
  ExprPtr parse_test(ExprPtr node);
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<std::string> tag_stack_;
  std::vector<std::vector<std::string>> end_token_stack_;
};

}  // namespace locus::jinja
