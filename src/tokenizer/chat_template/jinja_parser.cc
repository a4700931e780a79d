// Recursive-descent parser following jinja2/parser.py: the template body and its statements.
// Expressions are in jinja_parser_expressions.cc (see jinja_parser.h).
#include "tokenizer/chat_template/jinja_parser.h"

#include <initializer_list>

#include "tokenizer/chat_template/jinja_parser_internal.h"

namespace locus::jinja {
namespace {

std::string quote_list(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += " or ";
    out += "'" + names[i] + "'";
  }
  return out;
}

}  // namespace

void Parser::fail_eof(const std::vector<std::string>& end_tokens) {
  std::string message = "Unexpected end of template.";
  std::vector<std::string> expected = end_tokens;
  if (expected.empty() && !end_token_stack_.empty()) expected = end_token_stack_.back();
  if (!expected.empty())
    message += " Jinja was looking for the following tags: " + quote_list(expected) + ".";
  if (!tag_stack_.empty())
    message += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
  fail(message, current().line);
}

void Parser::fail_unknown_tag(const std::string& name, int line) {
  std::string message = "Encountered unknown tag '" + name + "'.";
  if (!end_token_stack_.empty()) {
    bool expected_elsewhere = false;
    for (const auto& names : end_token_stack_) {
      expected_elsewhere |= std::find(names.begin(), names.end(), name) != names.end();
    }
    message += expected_elsewhere ? " You probably made a nesting mistake. Jinja is expecting "
                                    "this tag, but currently looking for " +
                                        quote_list(end_token_stack_.back()) + "."
                                  : " Jinja was looking for the following tags: " +
                                        quote_list(end_token_stack_.back()) + ".";
  }
  if (!tag_stack_.empty())
    message += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
  fail(message, line);
}

Body Parser::subparse(const std::vector<std::string>& end_tokens) {
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

Body Parser::parse_statements(const std::vector<std::string>& end_tokens, bool drop_needle) {
  skip_op(":");
  expect(TokenType::kBlockEnd, "'end of statement block'");
  Body body = subparse(end_tokens);
  if (current().type == TokenType::kEnd) fail_eof(end_tokens);
  if (drop_needle) next();
  return body;
}

StmtPtr Parser::parse_statement() {
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
  if (name == "if")
    result = parse_if();
  else if (name == "for")
    result = parse_for();
  else if (name == "set")
    result = parse_set();
  else if (name == "macro")
    result = parse_macro();
  else if (name == "call")
    result = parse_call_block();
  else if (name == "filter")
    result = parse_filter_block();
  else if (name == "with")
    result = parse_with();
  else if (name == "print")
    result = parse_print();
  else if (name == "generation")
    result = parse_generation();
  else if (name == "break" || name == "continue")
    result = parse_loop_control();
  else {
    tag_stack_.pop_back();
    fail_unknown_tag(name, token.line);
  }
  tag_stack_.pop_back();
  return result;
}

StmtPtr Parser::parse_if() {
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

StmtPtr Parser::parse_for() {
  auto node = std::make_unique<ForStmt>(next().line);
  node->target = parse_assign_target(true, false, {"in"}, false);
  expect_name("in");
  node->iterable = parse_tuple(false, false, {"recursive"});
  if (skip_name("if")) node->filter = parse_expression(true);
  if (is_name(current(), "recursive"))
    fail("recursive for loops are not supported", current().line);
  ++loop_depth_;
  node->body = parse_statements({"endfor", "else"}, false);
  --loop_depth_;
  if (next().value == "else") node->else_body = parse_statements({"endfor"}, true);
  return node;
}

StmtPtr Parser::parse_set() {
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

StmtPtr Parser::parse_macro() {
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

std::vector<MacroParameter> Parser::parse_signature() {
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

StmtPtr Parser::parse_call_block() {
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

StmtPtr Parser::parse_filter_block() {
  auto node = std::make_unique<FilterBlockStmt>(next().line);
  node->filter = parse_filter(nullptr, true);
  node->body = parse_statements({"endfilter"}, true);
  return node;
}

StmtPtr Parser::parse_with() {
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

StmtPtr Parser::parse_generation() {
  auto node = std::make_unique<ScopeStmt>(next().line);
  node->body = parse_statements({"endgeneration"}, true);
  return node;
}

StmtPtr Parser::parse_print() {
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

StmtPtr Parser::parse_loop_control() {
  const Token& token = next();
  if (loop_depth_ == 0) fail("'" + token.value + "' outside of a loop", token.line);
  return std::make_unique<LoopControlStmt>(
      token.value == "break" ? StmtKind::kBreak : StmtKind::kContinue, token.line);
}

AssignTarget Parser::parse_assign_target(bool with_tuple, bool name_only,
                                         const std::vector<std::string>& extra_end,
                                         bool with_namespace) {
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
    if (tuple.items.empty())
      fail("expected an assignment target, got '" + describe_token(current()) + "'",
           current().line);
    return std::move(tuple.items[0]);
  }
  return tuple;
}

AssignTarget Parser::parse_target_primary(bool with_namespace) {
  const Token& token = current();
  if (is_op(token, "(")) {
    next();
    AssignTarget inner = parse_assign_target(true, false, {}, false);
    expect_op(")");
    return inner;
  }
  if (token.type != TokenType::kName)
    fail("can't assign to '" + describe_token(token) + "'", token.line);
  static const std::initializer_list<std::string_view> kConstants = {"true", "false", "none",
                                                                     "True", "False", "None"};
  if (std::find(kConstants.begin(), kConstants.end(), token.value) != kConstants.end()) {
    fail("can't assign to 'const'", token.line);
  }
  next();
  if (with_namespace && is_op(current(), ".")) {
    next();
    const Token& attribute = expect(TokenType::kName, "name");
    return AssignTarget{
        AssignTarget::Kind::kNamespaceAttribute, token.value, attribute.value, {}, token.line};
  }
  return AssignTarget{AssignTarget::Kind::kName, token.value, "", {}, token.line};
}

Body parse_template(std::string_view source) {
  return Parser(tokenize(source)).parse();
}

}  // namespace locus::jinja
