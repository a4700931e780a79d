// Expression parsing with jinja2's grammar and operator precedence (jinja2/parser.py): conditional,
// or/and/not, comparisons, + - ~ * / // % **, unary, primaries, postfix access and calls, filters
// and tests. Filter and test names are checked here, as jinja2 checks them when compiling.
#include "tokenizer/chat_template/jinja_filters.h"
#include "tokenizer/chat_template/jinja_parser_internal.h"
#include "tokenizer/chat_template/jinja_tests.h"

namespace locus::jinja {

bool Parser::is_tuple_end(const std::vector<std::string>& extra_end) const {
  const Token& t = current();
  if (t.type == TokenType::kVariableEnd || t.type == TokenType::kBlockEnd || is_op(t, ")"))
    return true;
  return t.type == TokenType::kName &&
         std::find(extra_end.begin(), extra_end.end(), t.value) != extra_end.end();
}

ExprPtr Parser::parse_tuple(bool explicit_parentheses, bool with_condexpr,
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
    if (!explicit_parentheses)
      fail("Expected an expression, got '" + describe_token(current()) + "'", current().line);
  }
  auto tuple = std::make_unique<ListExpr>(true, line);
  tuple->items = std::move(items);
  return tuple;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  DepthGuard guard(depth_, current().line);
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
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

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name(current(), "or")) {
    int line = next().line;
    left = std::make_unique<BinaryExpr>(BinaryOp::kOr, std::move(left), parse_and(), line);
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name(current(), "and")) {
    int line = next().line;
    left = std::make_unique<BinaryExpr>(BinaryOp::kAnd, std::move(left), parse_not(), line);
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (is_name(current(), "not")) {
    int line = next().line;
    DepthGuard guard(depth_, line);
    return std::make_unique<UnaryExpr>(UnaryOp::kNot, parse_not(), line);
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  int line = current().line;
  ExprPtr first = parse_math1();
  std::unique_ptr<CompareExpr> compare;
  while (true) {
    CompareOp op;
    const Token& t = current();
    if (is_op(t, "=="))
      op = CompareOp::kEqual;
    else if (is_op(t, "!="))
      op = CompareOp::kNotEqual;
    else if (is_op(t, "<"))
      op = CompareOp::kLess;
    else if (is_op(t, "<="))
      op = CompareOp::kLessEqual;
    else if (is_op(t, ">"))
      op = CompareOp::kGreater;
    else if (is_op(t, ">="))
      op = CompareOp::kGreaterEqual;
    else if (is_name(t, "in"))
      op = CompareOp::kIn;
    else if (is_name(t, "not") && is_name(look(), "in"))
      op = CompareOp::kNotIn;
    else
      break;
    next();
    if (op == CompareOp::kNotIn) next();
    if (!compare) compare = std::make_unique<CompareExpr>(std::move(first), line);
    compare->rest.emplace_back(op, parse_math1());
  }
  if (!compare) return first;
  return compare;
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_op(current(), "+") || is_op(current(), "-")) {
    const Token& t = next();
    BinaryOp op = t.value == "+" ? BinaryOp::kAdd : BinaryOp::kSubtract;
    left = std::make_unique<BinaryExpr>(op, std::move(left), parse_concat(), t.line);
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  int line = current().line;
  ExprPtr first = parse_math2();
  if (!is_op(current(), "~")) return first;
  auto concat = std::make_unique<ConcatExpr>(line);
  concat->parts.push_back(std::move(first));
  while (skip_op("~"))
    concat->parts.push_back(parse_math2());
  return concat;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (true) {
    const Token& t = current();
    BinaryOp op;
    if (is_op(t, "*"))
      op = BinaryOp::kMultiply;
    else if (is_op(t, "/"))
      op = BinaryOp::kDivide;
    else if (is_op(t, "//"))
      op = BinaryOp::kFloorDivide;
    else if (is_op(t, "%"))
      op = BinaryOp::kModulo;
    else
      break;
    int line = next().line;
    left = std::make_unique<BinaryExpr>(op, std::move(left), parse_pow(), line);
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (is_op(current(), "**")) {
    int line = next().line;
    left = std::make_unique<BinaryExpr>(BinaryOp::kPower, std::move(left), parse_unary(true), line);
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
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

ExprPtr Parser::parse_primary() {
  const Token& token = current();
  if (token.type == TokenType::kName) {
    next();
    if (token.value == "true" || token.value == "True")
      return std::make_unique<LiteralExpr>(Value(true), token.line);
    if (token.value == "false" || token.value == "False")
      return std::make_unique<LiteralExpr>(Value(false), token.line);
    if (token.value == "none" || token.value == "None")
      return std::make_unique<LiteralExpr>(Value::none(), token.line);
    return std::make_unique<NameExpr>(token.value, token.line);
  }
  if (token.type == TokenType::kString) {
    int line = token.line;
    std::string text;
    while (current().type == TokenType::kString)
      text += next().value;  // adjacent literals join
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

ExprPtr Parser::parse_list() {
  auto list = std::make_unique<ListExpr>(false, next().line);
  while (!is_op(current(), "]")) {
    if (!list->items.empty()) expect_op(",");
    if (is_op(current(), "]")) break;
    list->items.push_back(parse_expression(true));
  }
  expect_op("]");
  return list;
}

ExprPtr Parser::parse_dict() {
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

ExprPtr Parser::parse_postfix(ExprPtr node) {
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

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
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

ExprPtr Parser::parse_subscript(ExprPtr node) {
  const Token& token = next();
  if (token.value == ".") {
    const Token& attribute = next();
    if (attribute.type == TokenType::kName) {
      return std::make_unique<AttributeExpr>(std::move(node), attribute.value, token.line);
    }
    if (attribute.type != TokenType::kInteger) fail("expected name or number", attribute.line);
    return std::make_unique<ItemExpr>(
        std::move(node), std::make_unique<LiteralExpr>(Value(attribute.int_value), attribute.line),
        token.line);
  }
  std::vector<ExprPtr> indexes;
  while (!is_op(current(), "]")) {
    if (!indexes.empty()) expect_op(",");
    indexes.push_back(parse_subscribed());
  }
  expect_op("]");
  if (indexes.size() == 1)
    return std::make_unique<ItemExpr>(std::move(node), std::move(indexes[0]), token.line);
  auto tuple = std::make_unique<ListExpr>(true, token.line);
  tuple->items = std::move(indexes);
  return std::make_unique<ItemExpr>(std::move(node), std::move(tuple), token.line);
}

ExprPtr Parser::parse_subscribed() {
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

CallArgumentsAst Parser::parse_call_args() {
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

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto call = std::make_unique<CallExpr>(std::move(callee), current().line);
  call->arguments = parse_call_args();
  return call;
}

std::string Parser::parse_dotted_name() {
  std::string name = expect(TokenType::kName, "name").value;
  while (skip_op("."))
    name += "." + expect(TokenType::kName, "name").value;
  return name;
}

ExprPtr Parser::parse_filter(ExprPtr node, bool start_inline) {
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

ExprPtr Parser::parse_test(ExprPtr node) {
  int line = next().line;
  bool negated = skip_name("not");
  std::string name = parse_dotted_name();
  if (find_test(name) == nullptr) fail("No test named '" + name + "'.", line);
  auto test = std::make_unique<TestExpr>(std::move(node), std::move(name), line);
  const Token& t = current();
  if (is_op(t, "(")) {
    test->arguments = parse_call_args();
  } else if ((t.type == TokenType::kName || t.type == TokenType::kString ||
              t.type == TokenType::kInteger || t.type == TokenType::kFloat || is_op(t, "[") ||
              is_op(t, "{")) &&
             !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
    if (is_name(t, "is")) fail("You cannot chain multiple tests with is", t.line);
    test->arguments.positional.push_back(parse_postfix(parse_primary()));
  }
  if (!negated) return test;
  return std::make_unique<UnaryExpr>(UnaryOp::kNot, std::move(test), line);
}

}  // namespace locus::jinja
