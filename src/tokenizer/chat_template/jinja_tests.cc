// Jinja tests with jinja2/tests.py semantics (see jinja_tests.h).
#include "tokenizer/chat_template/jinja_tests.h"

#include <unordered_map>

#include "tokenizer/chat_template/jinja_arguments.h"
#include "tokenizer/chat_template/jinja_filters.h"
#include "tokenizer/chat_template/jinja_operators.h"
#include "tokenizer/chat_template/python_text.h"

namespace locus::jinja {
namespace {

Value only_argument(const char* name, const CallArguments& args) {
  BoundArguments bound(name, args, {"other"});
  return bound.require(0, "other");
}

bool no_arguments(const char* name, const CallArguments& args) {
  BoundArguments(name, args, {});
  return true;
}

bool compare_test(CompareOp op, const char* name, const Value& v, const CallArguments& args) {
  return compare(op, v, only_argument(name, args));
}

bool test_defined(Evaluator&, const Value& v, CallArguments& a) {
  return no_arguments("defined", a) && !v.is_undefined();
}
bool test_undefined(Evaluator&, const Value& v, CallArguments& a) {
  return no_arguments("undefined", a) && v.is_undefined();
}
bool test_none(Evaluator&, const Value& v, CallArguments& a) {
  return no_arguments("none", a) && v.is_none();
}
bool test_boolean(Evaluator&, const Value& v, CallArguments& a) {
  return no_arguments("boolean", a) && v.is_bool();
}
bool test_true(Evaluator&, const Value& v, CallArguments& a) {
  return no_arguments("true", a) && v.is_bool() && v.as_bool();
}
bool test_false(Evaluator&, const Value& v, CallArguments& a) {
  return no_arguments("false", a) && v.is_bool() && !v.as_bool();
}
bool test_integer(Evaluator&, const Value& v, CallArguments& a) {
  return no_arguments("integer", a) && v.is_int();
}
bool test_float(Evaluator&, const Value& v, CallArguments& a) {
  return no_arguments("float", a) && v.is_float();
}
bool test_number(Evaluator&, const Value& v, CallArguments& a) {
  return no_arguments("number", a) && v.is_number();
}
bool test_string(Evaluator&, const Value& v, CallArguments& a) {
  return no_arguments("string", a) && v.is_string();
}
bool test_mapping(Evaluator&, const Value& v, CallArguments& a) {
  return no_arguments("mapping", a) && v.is_dict();
}
bool test_callable(Evaluator&, const Value& v, CallArguments& a) {
  return no_arguments("callable", a) && v.is_callable();
}
// Only markup-safe strings are "escaped"; autoescaping is off in chat templates, so none are.
bool test_escaped(Evaluator&, const Value&, CallArguments& a) {
  no_arguments("escaped", a);
  return false;
}

// iter(value) succeeds: strings, containers, iterators, and jinja2's Undefined.
bool test_iterable(Evaluator&, const Value& v, CallArguments& a) {
  no_arguments("iterable", a);
  switch (v.kind()) {
    case ValueKind::kString:
    case ValueKind::kList:
    case ValueKind::kDict:
    case ValueKind::kIterator:
    case ValueKind::kUndefined:
      return true;
    default:
      return false;
  }
}

// len(value) and value.__getitem__ both exist; jinja2's Undefined has both.
bool test_sequence(Evaluator&, const Value& v, CallArguments& a) {
  no_arguments("sequence", a);
  return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
}

// value % 2 == 1 / == 0, with Python's % (floats included: 0.5 is neither odd nor even).
bool remainder_is(const Value& v, int64_t expected) {
  return python_equals(binary_operation(BinaryOp::kModulo, v, Value(int64_t{2})), Value(expected));
}

bool test_odd(Evaluator&, const Value& v, CallArguments& a) {
  return no_arguments("odd", a) && remainder_is(v, 1);
}

bool test_even(Evaluator&, const Value& v, CallArguments& a) {
  return no_arguments("even", a) && remainder_is(v, 0);
}

bool test_divisibleby(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments b("divisibleby", a, {"num"});
  Value r = binary_operation(BinaryOp::kModulo, v, b.require(0, "num"));
  return !r.truthy();
}

bool test_lower(Evaluator&, const Value& v, CallArguments& a) {
  no_arguments("lower", a);
  bool any_cased = false;
  for (char32_t c : text::decode(v.str())) {
    if (text::is_upper_char(c)) return false;
    any_cased |= text::is_cased(c);
  }
  return any_cased;
}

bool test_upper(Evaluator&, const Value& v, CallArguments& a) {
  no_arguments("upper", a);
  bool any_cased = false;
  for (char32_t c : text::decode(v.str())) {
    if (text::is_lower_char(c)) return false;
    any_cased |= text::is_cased(c);
  }
  return any_cased;
}

bool test_in(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments b("in", a, {"seq"});
  return contains(b.require(0, "seq"), v);
}

bool test_sameas(Evaluator&, const Value& v, CallArguments& a) {
  return v.is_same(only_argument("sameas", a));
}
bool test_eq(Evaluator&, const Value& v, CallArguments& a) {
  return compare_test(CompareOp::kEqual, "eq", v, a);
}
bool test_ne(Evaluator&, const Value& v, CallArguments& a) {
  return compare_test(CompareOp::kNotEqual, "ne", v, a);
}
bool test_lt(Evaluator&, const Value& v, CallArguments& a) {
  return compare_test(CompareOp::kLess, "lt", v, a);
}
bool test_le(Evaluator&, const Value& v, CallArguments& a) {
  return compare_test(CompareOp::kLessEqual, "le", v, a);
}
bool test_gt(Evaluator&, const Value& v, CallArguments& a) {
  return compare_test(CompareOp::kGreater, "gt", v, a);
}
bool test_ge(Evaluator&, const Value& v, CallArguments& a) {
  return compare_test(CompareOp::kGreaterEqual, "ge", v, a);
}

bool test_filter(Evaluator&, const Value& v, CallArguments& a) {
  return no_arguments("filter", a) && v.is_string() && find_filter(v.as_string()) != nullptr;
}

bool test_test(Evaluator&, const Value& v, CallArguments& a) {
  return no_arguments("test", a) && v.is_string() && find_test(v.as_string()) != nullptr;
}

const std::unordered_map<std::string_view, TestFunction>& tests() {
  static const auto* table = new std::unordered_map<std::string_view, TestFunction>{
      {"defined", test_defined},
      {"undefined", test_undefined},
      {"none", test_none},
      {"boolean", test_boolean},
      {"true", test_true},
      {"false", test_false},
      {"integer", test_integer},
      {"float", test_float},
      {"number", test_number},
      {"string", test_string},
      {"mapping", test_mapping},
      {"iterable", test_iterable},
      {"sequence", test_sequence},
      {"callable", test_callable},
      {"escaped", test_escaped},
      {"odd", test_odd},
      {"even", test_even},
      {"divisibleby", test_divisibleby},
      {"lower", test_lower},
      {"upper", test_upper},
      {"in", test_in},
      {"sameas", test_sameas},
      {"eq", test_eq},
      {"equalto", test_eq},
      {"==", test_eq},
      {"ne", test_ne},
      {"!=", test_ne},
      {"lt", test_lt},
      {"lessthan", test_lt},
      {"<", test_lt},
      {"le", test_le},
      {"<=", test_le},
      {"gt", test_gt},
      {"greaterthan", test_gt},
      {">", test_gt},
      {"ge", test_ge},
      {">=", test_ge},
      {"filter", test_filter},
      {"test", test_test},
  };
  return *table;
}

}  // namespace

const TestFunction* find_test(std::string_view name) {
  auto it = tests().find(name);
  return it == tests().end() ? nullptr : &it->second;
}

}  // namespace locus::jinja
