// Python operator semantics (see jinja_operators.h).
#include "tokenizer/chat_template/jinja_operators.h"

#include <cmath>
#include <cstdio>

#include "tokenizer/chat_template/jinja_error.h"
#include "tokenizer/chat_template/python_text.h"

namespace locus::jinja {
namespace {

// Repetition ("ab" * n, [x] * n) past this many bytes/items is refused instead of exhausting
// memory.
constexpr int64_t kMaxRepeat = int64_t{64} << 20;

bool is_int_like(const Value& v) {
  return v.is_int() || v.is_bool();
}

std::string op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSubtract:
      return "-";
    case BinaryOp::kMultiply:
      return "*";
    case BinaryOp::kDivide:
      return "/";
    case BinaryOp::kFloorDivide:
      return "//";
    case BinaryOp::kModulo:
      return "%";
    case BinaryOp::kPower:
      return "** or pow()";
    default:
      return "?";
  }
}

[[noreturn]] void unsupported(BinaryOp op, const Value& a, const Value& b) {
  throw_type_error("unsupported operand type(s) for " + op_symbol(op) + ": '" + a.type_name() +
                   "' and '" + b.type_name() + "'");
}

Value checked_int(bool overflow, int64_t result) {
  if (overflow) throw_type_error("integer result out of range (locus keeps integers in 64 bits)");
  return Value(result);
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t floor_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

double float_mod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0.0 && ((r < 0) != (b < 0))) r += b;
  if (r == 0.0) r = std::copysign(0.0, b);
  return r;
}

// CPython's float_floor_div (via float_divmod).
double float_floor_div(double x, double y) {
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0.0 && ((y < 0) != (mod < 0))) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, x / y);
  double floored = std::floor(div);
  if (div - floored > 0.5) floored += 1.0;
  return floored;
}

Value repeat(const Value& sequence, int64_t count) {
  if (count < 0) count = 0;
  if (sequence.is_string()) {
    const std::string& s = sequence.as_string();
    if (!s.empty() && count > kMaxRepeat / static_cast<int64_t>(s.size())) {
      throw TemplateError(TemplateErrorKind::kLimit, "string repetition result too large");
    }
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i)
      out += s;
    return Value(std::move(out));
  }
  const auto& items = sequence.as_list();
  if (!items.empty() && count > kMaxRepeat / static_cast<int64_t>(items.size())) {
    throw TemplateError(TemplateErrorKind::kLimit, "list repetition result too large");
  }
  std::vector<Value> out;
  for (int64_t i = 0; i < count; ++i)
    out.insert(out.end(), items.begin(), items.end());
  return sequence.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

Value add(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (is_int_like(a) && is_int_like(b)) {
      int64_t r = 0;
      bool overflow = __builtin_add_overflow(a.to_int(), b.to_int(), &r);
      return checked_int(overflow, r);
    }
    return Value(a.to_double() + b.to_double());
  }
  if (a.is_string()) {
    if (!b.is_string())
      throw_type_error("can only concatenate str (not \"" + b.type_name() + "\") to str");
    return Value(a.as_string() + b.as_string());
  }
  if (a.is_list()) {
    if (!b.is_list() || a.is_tuple() != b.is_tuple()) {
      throw_type_error("can only concatenate " + a.type_name() + " (not \"" + b.type_name() +
                       "\") to " + a.type_name());
    }
    std::vector<Value> items = a.as_list();
    items.insert(items.end(), b.as_list().begin(), b.as_list().end());
    return a.is_tuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
  }
  unsupported(BinaryOp::kAdd, a, b);
}

Value multiply(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (is_int_like(a) && is_int_like(b)) {
      int64_t r = 0;
      bool overflow = __builtin_mul_overflow(a.to_int(), b.to_int(), &r);
      return checked_int(overflow, r);
    }
    return Value(a.to_double() * b.to_double());
  }
  if ((a.is_string() || a.is_list()) && is_int_like(b)) return repeat(a, b.to_int());
  if ((b.is_string() || b.is_list()) && is_int_like(a)) return repeat(b, a.to_int());
  if (a.is_string() || a.is_list() || b.is_string() || b.is_list()) {
    const Value& other = (a.is_string() || a.is_list()) ? b : a;
    throw_type_error("can't multiply sequence by non-int of type '" + other.type_name() + "'");
  }
  unsupported(BinaryOp::kMultiply, a, b);
}

Value power(const Value& a, const Value& b) {
  if (is_int_like(a) && is_int_like(b) && b.to_int() >= 0) {
    int64_t base = a.to_int();
    int64_t exponent = b.to_int();
    int64_t result = 1;
    bool overflow = false;
    while (exponent > 0 && !overflow) {
      if (exponent & 1) overflow |= __builtin_mul_overflow(result, base, &result);
      exponent >>= 1;
      if (exponent > 0) overflow |= __builtin_mul_overflow(base, base, &base);
    }
    return checked_int(overflow, result);
  }
  if (a.to_double() == 0.0 && b.to_double() < 0) {
    throw_type_error("ZeroDivisionError: 0.0 cannot be raised to a negative power");
  }
  return Value(std::pow(a.to_double(), b.to_double()));
}

Value arithmetic(BinaryOp op, const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) unsupported(op, a, b);
  bool ints = is_int_like(a) && is_int_like(b);
  switch (op) {
    case BinaryOp::kSubtract: {
      if (!ints) return Value(a.to_double() - b.to_double());
      int64_t r = 0;
      bool overflow = __builtin_sub_overflow(a.to_int(), b.to_int(), &r);
      return checked_int(overflow, r);
    }
    case BinaryOp::kDivide:
      if (b.to_double() == 0.0)
        throw_type_error(ints ? "ZeroDivisionError: division by zero"
                              : "ZeroDivisionError: float division by zero");
      return Value(a.to_double() / b.to_double());
    case BinaryOp::kFloorDivide:
      if (b.to_double() == 0.0) {
        throw_type_error(ints ? "ZeroDivisionError: integer division or modulo by zero"
                              : "ZeroDivisionError: float floor division by zero");
      }
      if (ints) {
        if (a.to_int() == INT64_MIN && b.to_int() == -1) checked_int(true, 0);
        return Value(floor_div(a.to_int(), b.to_int()));
      }
      return Value(float_floor_div(a.to_double(), b.to_double()));
    case BinaryOp::kModulo:
      if (b.to_double() == 0.0) {
        throw_type_error(ints ? "ZeroDivisionError: integer modulo by zero"
                              : "ZeroDivisionError: float modulo");
      }
      if (ints) {
        if (b.to_int() == -1) return Value(int64_t{0});
        return Value(floor_mod(a.to_int(), b.to_int()));
      }
      return Value(float_mod(a.to_double(), b.to_double()));
    case BinaryOp::kPower:
      return power(a, b);
    default:
      unsupported(op, a, b);
  }
}

// Three-way comparison for ordering; throws TypeError for unorderable pairs.
int order(const Value& a, const Value& b, const char* symbol) {
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (is_int_like(a) && is_int_like(b))
      return a.to_int() < b.to_int() ? -1 : (a.to_int() > b.to_int() ? 1 : 0);
    double x = a.to_double();
    double y = b.to_double();
    if (std::isnan(x) || std::isnan(y)) return 2;  // every ordering comparison is false
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.as_list();
    const auto& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (python_equals(x[i], y[i])) continue;
      return order(x[i], y[i], symbol);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  throw_type_error(std::string("'") + symbol + "' not supported between instances of '" +
                   a.type_name() + "' and '" + b.type_name() + "'");
}

}  // namespace

[[noreturn]] void raise_undefined(const Value& undefined) {
  const UndefinedValue& u = undefined.as_undefined();
  if (u.is_unsafe) throw TemplateError(TemplateErrorKind::kSecurity, u.hint);
  throw_undefined_error(u.hint.empty() ? "value is undefined" : u.hint);
}

Value binary_operation(BinaryOp op, const Value& left, const Value& right) {
  if (left.is_undefined()) raise_undefined(left);
  if (right.is_undefined()) raise_undefined(right);
  switch (op) {
    case BinaryOp::kAdd:
      return add(left, right);
    case BinaryOp::kMultiply:
      return multiply(left, right);
    case BinaryOp::kModulo:
      if (left.is_string()) return Value(percent_format(left.as_string(), right));
      return arithmetic(op, left, right);
    default:
      return arithmetic(op, left, right);
  }
}

Value negate(const Value& value) {
  if (value.is_undefined()) raise_undefined(value);
  if (is_int_like(value)) {
    if (value.to_int() == INT64_MIN) checked_int(true, 0);
    return Value(-value.to_int());
  }
  if (value.is_float()) return Value(-value.as_float());
  throw_type_error("bad operand type for unary -: '" + value.type_name() + "'");
}

Value unary_plus(const Value& value) {
  if (value.is_undefined()) raise_undefined(value);
  if (is_int_like(value)) return Value(value.to_int());
  if (value.is_float()) return value;
  throw_type_error("bad operand type for unary +: '" + value.type_name() + "'");
}

bool python_less(const Value& a, const Value& b) {
  return order(a, b, "<") == -1;
}

bool compare(CompareOp op, const Value& left, const Value& right) {
  switch (op) {
    case CompareOp::kEqual:
      return python_equals(left, right);
    case CompareOp::kNotEqual:
      return !python_equals(left, right);
    case CompareOp::kLess:
      return order(left, right, "<") == -1;
    case CompareOp::kLessEqual: {
      int c = order(left, right, "<=");
      return c == -1 || c == 0;
    }
    case CompareOp::kGreater:
      return order(left, right, ">") == 1;
    case CompareOp::kGreaterEqual: {
      int c = order(left, right, ">=");
      return c == 1 || c == 0;
    }
    case CompareOp::kIn:
      return contains(right, left);
    case CompareOp::kNotIn:
      return !contains(right, left);
  }
  return false;
}

void check_hashable(const Value& key) {
  if (key.is_list() && key.is_tuple()) {
    for (const Value& item : key.as_list())
      check_hashable(item);
    return;
  }
  if (key.is_list() || key.is_dict() || key.is_object())
    throw_type_error("unhashable type: '" + key.type_name() + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case ValueKind::kString:
      if (!item.is_string()) {
        if (item.is_undefined()) raise_undefined(item);
        throw_type_error("'in <string>' requires string as left operand, not " + item.type_name());
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case ValueKind::kList:
      for (const Value& v : container.as_list()) {
        if (python_equals(v, item)) return true;
      }
      return false;
    case ValueKind::kDict:
      check_hashable(item);
      return container.as_dict().find(item) != nullptr;
    case ValueKind::kIterator: {
      IteratorValue& it = container.as_iterator();
      for (size_t i = it.position; i < it.items.size(); ++i) {
        if (python_equals(it.items[i], item)) {
          if (!it.is_view) it.position = i + 1;
          return true;
        }
      }
      if (!it.is_view) it.position = it.items.size();
      return false;
    }
    case ValueKind::kUndefined:
      if (container.as_undefined().is_unsafe) raise_undefined(container);
      return false;
    default:
      throw_type_error("argument of type '" + container.type_name() + "' is not iterable");
  }
}

size_t python_len(const Value& value) {
  switch (value.kind()) {
    case ValueKind::kString:
      return text::length(value.as_string());
    case ValueKind::kList:
      return value.as_list().size();
    case ValueKind::kDict:
      return value.as_dict().size();
    case ValueKind::kUndefined:
      return 0;
    case ValueKind::kIterator:
      if (value.as_iterator().is_view) return value.as_iterator().items.size();
      break;
    default:
      break;
  }
  throw_type_error("object of type '" + value.type_name() + "' has no len()");
}

std::vector<Value> string_characters(const std::string& s) {
  std::vector<Value> out;
  std::vector<size_t> offsets = text::code_point_offsets(s);
  out.reserve(offsets.size());
  for (size_t i = 0; i + 1 < offsets.size(); ++i)
    out.emplace_back(s.substr(offsets[i], offsets[i + 1] - offsets[i]));
  return out;
}

std::vector<Value> iterate(const Value& value) {
  switch (value.kind()) {
    case ValueKind::kList:
      return value.as_list();
    case ValueKind::kString:
      return string_characters(value.as_string());
    case ValueKind::kDict: {
      std::vector<Value> keys;
      keys.reserve(value.as_dict().size());
      for (const auto& entry : value.as_dict().entries())
        keys.push_back(entry.first);
      return keys;
    }
    case ValueKind::kIterator: {
      IteratorValue& it = value.as_iterator();
      std::vector<Value> rest(it.items.begin() + static_cast<std::ptrdiff_t>(it.position),
                              it.items.end());
      if (!it.is_view) it.position = it.items.size();
      return rest;
    }
    case ValueKind::kUndefined:
      if (value.as_undefined().is_unsafe) raise_undefined(value);
      return {};
    default:
      throw_type_error("'" + value.type_name() + "' object is not iterable");
  }
}

Value slice_value(const Value& object, const Value& start, const Value& stop, const Value& step) {
  auto bound = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    if (!v.is_int() && !v.is_bool()) {
      throw_type_error(
          std::string("slice indices must be integers or None or have an __index__ method (") +
          what + ")");
    }
    return v.to_int();
  };
  std::optional<int64_t> step_value = bound(step, "step");
  int64_t s = step_value.value_or(1);
  if (s == 0) throw_type_error("slice step cannot be zero");
  std::vector<size_t> offsets;
  int64_t length;
  if (object.is_string()) {
    offsets = text::code_point_offsets(object.as_string());
    length = static_cast<int64_t>(offsets.size()) - 1;
  } else {
    length = static_cast<int64_t>(object.as_list().size());
  }
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> v, int64_t default_value) {
    if (!v) return default_value;
    int64_t x = *v;
    if (x < 0) {
      x += length;
      if (x < 0) x = s < 0 ? -1 : 0;
    } else if (x >= length) {
      x = s < 0 ? length - 1 : length;
    }
    return x;
  };
  int64_t begin = adjust(bound(start, "start"), s < 0 ? length - 1 : 0);
  int64_t end = adjust(bound(stop, "stop"), s < 0 ? -1 : length);
  std::vector<int64_t> indexes;
  for (int64_t i = begin; s > 0 ? i < end : i > end; i += s)
    indexes.push_back(i);
  if (object.is_string()) {
    const std::string& str = object.as_string();
    std::string out;
    for (int64_t i : indexes) {
      size_t k = static_cast<size_t>(i);
      out.append(str, offsets[k], offsets[k + 1] - offsets[k]);
    }
    return Value(std::move(out));
  }
  std::vector<Value> items;
  for (int64_t i : indexes)
    items.push_back(object.as_list()[static_cast<size_t>(i)]);
  return object.is_tuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
}

}  // namespace locus::jinja
