// Text, number and JSON filters plus the filter registry (see jinja_filters.h). Sequence filters
// live in jinja_filters_sequence.cc.
#include "tokenizer/chat_template/jinja_filters.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "tokenizer/chat_template/jinja_arguments.h"
#include "tokenizer/chat_template/jinja_attributes.h"
#include "tokenizer/chat_template/jinja_filters_internal.h"
#include "tokenizer/chat_template/jinja_json.h"
#include "tokenizer/chat_template/jinja_operators.h"
#include "tokenizer/chat_template/python_text.h"

namespace locus::jinja {
namespace {

// Python's float(str): surrounding whitespace, underscores between digits, inf/nan words.
std::optional<double> parse_python_float(const std::string& raw) {
  std::string s = text::strip(raw, std::nullopt, true, true);
  std::string cleaned;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      bool between_digits = i > 0 && i + 1 < s.size() &&
                            std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
                            std::isdigit(static_cast<unsigned char>(s[i + 1]));
      if (!between_digits) return std::nullopt;
      continue;
    }
    if (s[i] == 'x' || s[i] == 'X' || s[i] == '(')
      return std::nullopt;  // no hex floats, no nan(...)
    cleaned.push_back(s[i]);
  }
  if (cleaned.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  double value = std::strtod(cleaned.c_str(), &end);
  if (end != cleaned.c_str() + cleaned.size()) return std::nullopt;
  return value;
}

// Python's int(str, base) for base 10 and the prefixed bases; nullopt where Python raises.
std::optional<int64_t> parse_python_int(const std::string& raw, int64_t base) {
  std::string s = text::strip(raw, std::nullopt, true, true);
  bool negative = false;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  auto has_prefix = [&](char p) {
    return i + 1 < s.size() && s[i] == '0' && (s[i + 1] | 0x20) == p;
  };
  if (base == 0) {
    base = has_prefix('x') ? 16 : has_prefix('o') ? 8 : has_prefix('b') ? 2 : 10;
    if (base != 10) i += 2;
  } else if ((base == 16 && has_prefix('x')) || (base == 8 && has_prefix('o')) ||
             (base == 2 && has_prefix('b'))) {
    i += 2;
  }
  if (base < 2 || base > 36 || i >= s.size()) return std::nullopt;
  uint64_t value = 0;
  bool any_digit = false;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c == '_' && any_digit && i + 1 < s.size() && s[i + 1] != '_') continue;
    int digit = std::isdigit(static_cast<unsigned char>(c))   ? c - '0'
                : std::isalpha(static_cast<unsigned char>(c)) ? (c | 0x20) - 'a' + 10
                                                              : 99;
    if (digit >= base) return std::nullopt;
    if (value > (UINT64_MAX - static_cast<uint64_t>(digit)) / static_cast<uint64_t>(base))
      return std::nullopt;
    value = value * static_cast<uint64_t>(base) + static_cast<uint64_t>(digit);
    any_digit = true;
  }
  if (!any_digit || value > static_cast<uint64_t>(INT64_MAX) + (negative ? 1 : 0))
    return std::nullopt;
  return negative ? static_cast<int64_t>(0 - value) : static_cast<int64_t>(value);
}

std::optional<int64_t> float_to_int(double d) {
  if (std::isnan(d) || std::isinf(d) || d >= 9223372036854775808.0 || d < -9223372036854775808.0)
    return std::nullopt;
  return static_cast<int64_t>(std::trunc(d));
}

Value filter_int(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments b("int", a, {"default", "base"});
  Value fallback = b.get(0, Value(int64_t{0}));
  if (v.is_undefined()) raise_undefined(v);
  if (v.is_int() || v.is_bool()) return Value(v.to_int());
  if (v.is_float()) {
    if (std::isinf(v.as_float()))
      throw_type_error("OverflowError: cannot convert float infinity to integer");
    if (auto i = float_to_int(v.as_float())) return Value(*i);
    return fallback;
  }
  if (v.is_string()) {
    if (auto i = parse_python_int(v.as_string(), require_int(b.get(1, Value(int64_t{10})), "base")))
      return Value(*i);
    if (auto d = parse_python_float(v.as_string())) {
      if (auto i = float_to_int(*d)) return Value(*i);
    }
  }
  return fallback;
}

Value filter_float(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments b("float", a, {"default"});
  if (v.is_undefined()) raise_undefined(v);
  if (v.is_number()) return Value(v.to_double());
  if (v.is_string()) {
    if (auto d = parse_python_float(v.as_string())) return Value(*d);
  }
  return b.get(0, Value(0.0));
}

Value filter_abs(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments("abs", a, {});
  if (v.is_int() || v.is_bool()) {
    if (v.to_int() == INT64_MIN) throw_type_error("integer result out of range");
    return Value(v.to_int() < 0 ? -v.to_int() : v.to_int());
  }
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  throw_type_error("bad operand type for abs(): '" + v.type_name() + "'");
}

Value filter_round(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments b("round", a, {"precision", "method"});
  int64_t precision = require_int(b.get(0, Value(int64_t{0})), "precision");
  std::string method = b.get(1, Value("common")).str();
  if (method != "common" && method != "ceil" && method != "floor") {
    throw_type_error("method must be common, ceil or floor");
  }
  if (!v.is_number())
    throw_type_error("type " + v.type_name() + " doesn't define __round__ method");
  if (method == "common" && (v.is_int() || v.is_bool())) return Value(v.to_int());
  double x = v.to_double();
  if (method != "common") {
    double scale = std::pow(10.0, static_cast<double>(precision));
    double r = method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale);
    return Value(r / scale);
  }
  if (std::isnan(x) || std::isinf(x)) return Value(x);
  if (precision > 300) return Value(x);
  if (precision < 0) {
    double scale = std::pow(10.0, static_cast<double>(-precision));
    return Value(std::nearbyint(x / scale) * scale);
  }
  // The exact binary value rounded half-to-even at `precision` digits, as Python's round does.
  char buffer[512];
  std::snprintf(buffer, sizeof(buffer), "%.*f", static_cast<int>(precision), x);
  return Value(std::strtod(buffer, nullptr));
}

Value filter_string(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments("string", a, {});
  return Value(soft_str(v));
}

Value filter_safe(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments("safe", a, {});
  return Value(soft_str(v));
}

Value filter_escape(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments("escape", a, {});
  std::string out;
  for (char c : soft_str(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return Value(std::move(out));
}

Value filter_lower(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments("lower", a, {});
  return Value(text::to_lower(soft_str(v)));
}

Value filter_upper(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments("upper", a, {});
  return Value(text::to_upper(soft_str(v)));
}

Value filter_capitalize(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments("capitalize", a, {});
  return Value(text::capitalize(soft_str(v)));
}

// jinja2's title: words start after whitespace, '-', '(', '{', '[' or '<'; each word is
// item[0].upper() + item[1:].lower().
Value filter_title(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments("title", a, {});
  std::u32string cps = text::decode(soft_str(v));
  auto is_separator = [](char32_t c) {
    return text::is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
  };
  std::string out;
  bool word_start = true;
  for (char32_t c : cps) {
    std::string one = text::encode(std::u32string(1, c));
    if (is_separator(c)) {
      out += one;
      word_start = true;
    } else {
      out += word_start ? text::to_upper(one) : text::to_lower(one);
      word_start = false;
    }
  }
  return Value(std::move(out));
}

Value filter_trim(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments b("trim", a, {"chars"});
  Value chars = b.get(0);
  std::optional<std::string> set;
  if (!chars.is_none()) set = require_string(chars, "trim chars");
  return Value(text::strip(soft_str(v), set, true, true));
}

Value filter_replace(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments b("replace", a, {"old", "new", "count"});
  Value count = b.get(2);
  return Value(text::replace(soft_str(v), soft_str(b.require(0, "old")),
                             soft_str(b.require(1, "new")),
                             count.is_none() ? -1 : require_int(count, "count")));
}

Value filter_center(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments b("center", a, {"width"});
  int64_t width = require_int(b.get(0, Value(int64_t{80})), "width");
  std::string s = soft_str(v);
  int64_t margin = width - static_cast<int64_t>(text::length(s));
  if (margin <= 0) return Value(s);
  int64_t left = margin / 2 + (margin & width & 1);
  return Value(std::string(static_cast<size_t>(left), ' ') + s +
               std::string(static_cast<size_t>(margin - left), ' '));
}

Value filter_indent(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments b("indent", a, {"width", "first", "blank"});
  if (v.is_undefined()) raise_undefined(v);
  // jinja2 does `s += "\n"` first, which only a str survives.
  if (!v.is_string()) {
    throw_type_error("unsupported operand type(s) for +=: '" + v.type_name() + "' and 'str'");
  }
  Value width = b.get(0, Value(int64_t{4}));
  std::string indention =
      width.is_string()
          ? width.as_string()
          : std::string(static_cast<size_t>(std::max<int64_t>(0, require_int(width, "width"))),
                        ' ');
  std::string s =
      soft_str(v) + "\n";  // jinja2 appends a newline so splitlines keeps a trailing empty line
  std::vector<std::string> lines = text::split_lines(s, false);
  std::string out;
  if (b.get(2, Value(false)).truthy()) {
    for (size_t i = 0; i < lines.size(); ++i)
      out += (i > 0 ? "\n" + indention : "") + lines[i];
  } else {
    out = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i)
      out += "\n" + (lines[i].empty() ? "" : indention + lines[i]);
  }
  if (b.get(1, Value(false)).truthy()) out = indention + out;
  return Value(std::move(out));
}

Value filter_wordcount(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments("wordcount", a, {});
  int64_t words = 0;
  bool in_word = false;
  for (char32_t c : text::decode(soft_str(v))) {
    bool word_char = text::is_identifier_continue(c);
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value(words);
}

Value filter_format(Evaluator&, const Value& v, CallArguments& a) {
  if (!a.positional.empty() && !a.keyword.empty()) {
    throw_type_error("can't handle positional and keyword arguments at the same time");
  }
  if (!a.keyword.empty()) {
    DictValue mapping;
    for (const auto& [key, value] : a.keyword)
      mapping.set(Value(key), value);
    return Value(percent_format(soft_str(v), Value::dict(std::move(mapping))));
  }
  return Value(percent_format(soft_str(v), Value::tuple(a.positional)));
}

// Unlike `x.name`, attr() never falls back to item lookup.
Value filter_attr(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments b("attr", a, {"name"});
  if (v.is_undefined()) raise_undefined(v);
  std::string name = soft_str(b.require(0, "name"));
  if (std::optional<Value> attribute = python_attribute(v, name)) return *attribute;
  return Value::undefined(text::repr(object_type_repr(v)) + " has no attribute " +
                          text::repr(name));
}

Value filter_default(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments b("default", a, {"default_value", "boolean"});
  bool boolean = b.get(1, Value(false)).truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return b.get(0, Value(""));
  return v;
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False), replacing jinja2's HTML-safe tojson.
Value filter_tojson(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments b("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions options;
  options.ensure_ascii = b.get(0, Value(false)).truthy();
  Value indent = b.get(1);
  if (indent.is_string()) {
    options.indent = indent.as_string();
  } else if (!indent.is_none()) {
    int64_t n = require_int(indent, "indent");
    options.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, n)), ' ');
  }
  if (options.indent) options.item_separator = ",";
  Value separators = b.get(2);
  if (!separators.is_none()) {
    std::vector<Value> parts = iterate(separators);
    if (parts.size() != 2) throw_type_error("ValueError: separators must be a pair of strings");
    options.item_separator = require_string(parts[0], "item separator");
    options.key_separator = require_string(parts[1], "key separator");
  }
  options.sort_keys = b.get(3, Value(false)).truthy();
  return Value(dump_json(v, options));
}

}  // namespace

Value get_attribute_path(const Value& item, const Value& attribute) {
  if (attribute.is_none()) return item;
  if (!attribute.is_string()) return get_item(item, attribute);
  Value current = item;
  for (const std::string& part : text::split(attribute.as_string(), std::string("."), -1, false)) {
    bool is_index = !part.empty() && text::is_ascii(part) &&
                    std::all_of(part.begin(), part.end(),
                                [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    current =
        get_item(current, is_index ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
  }
  return current;
}

Value ignore_case(const Value& value) {
  return value.is_string() ? Value(text::to_lower(value.as_string())) : value;
}

void register_text_filters(FilterTable& table) {
  table.insert({
      {"int", filter_int},       {"float", filter_float},   {"abs", filter_abs},
      {"round", filter_round},   {"string", filter_string}, {"safe", filter_safe},
      {"escape", filter_escape}, {"e", filter_escape},      {"forceescape", filter_escape},
      {"lower", filter_lower},   {"upper", filter_upper},   {"capitalize", filter_capitalize},
      {"title", filter_title},   {"trim", filter_trim},     {"replace", filter_replace},
      {"center", filter_center}, {"indent", filter_indent}, {"wordcount", filter_wordcount},
      {"format", filter_format}, {"attr", filter_attr},     {"default", filter_default},
      {"d", filter_default},     {"tojson", filter_tojson},
  });
}

const FilterFunction* find_filter(std::string_view name) {
  static const FilterTable* table = [] {
    auto* t = new FilterTable();
    register_text_filters(*t);
    register_sequence_filters(*t);
    return t;
  }();
  auto it = table->find(name);
  return it == table->end() ? nullptr : &it->second;
}

}  // namespace locus::jinja
