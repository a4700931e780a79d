// Python str methods called from templates (`content.split('</think>')`, `name.startswith('x')`,
// `'{}'.format(x)`), with CPython's results and errors. Indexes (find, slicing bounds) count code
// points, as Python does, while the text stays UTF-8.
#include <algorithm>
#include <unordered_map>

#include "tokenizer/chat_template/jinja_arguments.h"
#include "tokenizer/chat_template/jinja_attributes.h"
#include "tokenizer/chat_template/jinja_format.h"
#include "tokenizer/chat_template/jinja_operators.h"
#include "tokenizer/chat_template/python_text.h"

namespace locus::jinja {
namespace {

using StringMethod = Value (*)(const std::string& self, const CallArguments& args);

std::optional<std::string> optional_string(const Value& v, const std::string& what) {
  if (v.is_none()) return std::nullopt;
  if (!v.is_string()) throw_type_error(what + " arg must be None or str");
  return v.as_string();
}

// The byte range of code points [start, end) after Python's slice-index adjustment.
std::pair<size_t, size_t> byte_range(const std::string& s, const Value& start, const Value& end,
                                     std::vector<size_t>* offsets_out = nullptr) {
  std::vector<size_t> offsets = text::code_point_offsets(s);
  int64_t length = static_cast<int64_t>(offsets.size()) - 1;
  auto adjust = [&](const Value& v, int64_t fallback) {
    if (v.is_none()) return fallback;
    int64_t x = require_int(v, "slice index");
    if (x < 0) x = std::max<int64_t>(0, x + length);
    return std::min(x, length);
  };
  int64_t b = adjust(start, 0);
  int64_t e = adjust(end, length);
  if (e < b) e = b;
  std::pair<size_t, size_t> range{offsets[static_cast<size_t>(b)], offsets[static_cast<size_t>(e)]};
  if (offsets_out != nullptr) *offsets_out = std::move(offsets);
  return range;
}

int64_t code_point_index(const std::vector<size_t>& offsets, size_t byte) {
  return static_cast<int64_t>(std::lower_bound(offsets.begin(), offsets.end(), byte) -
                              offsets.begin());
}

Value string_find(const std::string& self, const CallArguments& args, const char* name,
                  bool reverse, bool raise) {
  BoundArguments b(name, args, {"sub", "start", "end"});
  const std::string& sub = require_string(b.require(0, "sub"), std::string(name) + "() argument 1");
  std::vector<size_t> offsets;
  auto [begin, end] = byte_range(self, b.get(1), b.get(2), &offsets);
  std::string_view window = std::string_view(self).substr(begin, end - begin);
  size_t hit = reverse ? window.rfind(sub) : window.find(sub);
  if (hit == std::string_view::npos) {
    if (raise) throw_type_error("ValueError: substring not found");
    return Value(int64_t{-1});
  }
  return Value(code_point_index(offsets, begin + hit));
}

Value affix_test(const std::string& self, const CallArguments& args, const char* name,
                 bool suffix) {
  BoundArguments b(name, args, {"prefix", "start", "end"});
  const Value& affix = b.require(0, "prefix");
  auto [begin, end] = byte_range(self, b.get(1), b.get(2));
  std::string_view window = std::string_view(self).substr(begin, end - begin);
  auto matches = [&](const Value& candidate) {
    if (!candidate.is_string()) {
      throw_type_error(std::string(name) + " first arg must be str or a tuple of str, not " +
                       candidate.type_name());
    }
    const std::string& a = candidate.as_string();
    if (a.size() > window.size()) return false;
    return suffix ? window.substr(window.size() - a.size()) == a : window.substr(0, a.size()) == a;
  };
  if (affix.is_tuple()) {
    for (const Value& candidate : affix.as_list()) {
      if (matches(candidate)) return Value(true);
    }
    return Value(false);
  }
  return Value(matches(affix));
}

template <typename Predicate>
Value all_chars(const std::string& self, Predicate predicate) {
  std::u32string cps = text::decode(self);
  if (cps.empty()) return Value(false);
  for (char32_t c : cps) {
    if (!predicate(c)) return Value(false);
  }
  return Value(true);
}

Value case_test(const std::string& self, bool want_lower) {
  bool any_cased = false;
  for (char32_t c : text::decode(self)) {
    if (want_lower ? text::is_upper_char(c) : text::is_lower_char(c)) return Value(false);
    any_cased |= text::is_cased(c);
  }
  return Value(any_cased);
}

std::string fill_char(const Value& v, const char* name) {
  if (v.is_none()) return " ";
  if (!v.is_string() || text::length(v.as_string()) != 1) {
    throw_type_error(std::string("The fill character must be exactly one character long (") + name +
                     ")");
  }
  return v.as_string();
}

std::string repeat_text(const std::string& s, int64_t n) {
  std::string out;
  for (int64_t i = 0; i < n; ++i)
    out += s;
  return out;
}

Value justify(const std::string& self, const CallArguments& args, const char* name, char align) {
  BoundArguments b(name, args, {"width", "fillchar"});
  int64_t width = require_int(b.require(0, "width"), name);
  std::string fill = fill_char(b.get(1), name);
  int64_t margin = width - static_cast<int64_t>(text::length(self));
  if (margin <= 0) return Value(self);
  if (align == '<') return Value(self + repeat_text(fill, margin));
  if (align == '>') return Value(repeat_text(fill, margin) + self);
  int64_t left = margin / 2 + (margin & width & 1);
  return Value(repeat_text(fill, left) + self + repeat_text(fill, margin - left));
}

Value strip_method(const std::string& s, const CallArguments& a, const char* name, bool left,
                   bool right) {
  BoundArguments b(name, a, {"chars"});
  return Value(text::strip(s, optional_string(b.get(0), name), left, right));
}

Value str_strip(const std::string& s, const CallArguments& a) {
  return strip_method(s, a, "strip", true, true);
}

Value str_lstrip(const std::string& s, const CallArguments& a) {
  return strip_method(s, a, "lstrip", true, false);
}

Value str_rstrip(const std::string& s, const CallArguments& a) {
  return strip_method(s, a, "rstrip", false, true);
}

Value split_method(const std::string& s, const CallArguments& a, const char* name,
                   bool from_right) {
  BoundArguments b(name, a, {"sep", "maxsplit"});
  std::optional<std::string> sep = optional_string(b.get(0), name);
  if (sep && sep->empty()) throw_type_error("ValueError: empty separator");
  int64_t max_split = require_int(b.get(1, Value(int64_t{-1})), "maxsplit");
  std::vector<Value> parts;
  for (std::string& part : text::split(s, sep, max_split, from_right)) {
    parts.emplace_back(std::move(part));
  }
  return Value::list(std::move(parts));
}

Value str_split(const std::string& s, const CallArguments& a) {
  return split_method(s, a, "split", false);
}

Value str_rsplit(const std::string& s, const CallArguments& a) {
  return split_method(s, a, "rsplit", true);
}

Value str_splitlines(const std::string& s, const CallArguments& a) {
  BoundArguments b("splitlines", a, {"keepends"});
  std::vector<Value> lines;
  for (std::string& line : text::split_lines(s, b.get(0, Value(false)).truthy())) {
    lines.emplace_back(std::move(line));
  }
  return Value::list(std::move(lines));
}

Value str_startswith(const std::string& s, const CallArguments& a) {
  return affix_test(s, a, "startswith", false);
}

Value str_endswith(const std::string& s, const CallArguments& a) {
  return affix_test(s, a, "endswith", true);
}

template <std::string (*Convert)(std::string_view)>
Value case_method(const std::string& s, const CallArguments& a) {
  BoundArguments("case conversion", a, {});
  return Value(Convert(s));
}

Value str_replace(const std::string& s, const CallArguments& a) {
  BoundArguments b("replace", a, {"old", "new", "count"});
  return Value(text::replace(s, require_string(b.require(0, "old"), "replace() argument 1"),
                             require_string(b.require(1, "new"), "replace() argument 2"),
                             require_int(b.get(2, Value(int64_t{-1})), "count")));
}

Value str_find(const std::string& s, const CallArguments& a) {
  return string_find(s, a, "find", false, false);
}

Value str_rfind(const std::string& s, const CallArguments& a) {
  return string_find(s, a, "rfind", true, false);
}

Value str_index(const std::string& s, const CallArguments& a) {
  return string_find(s, a, "index", false, true);
}

Value str_rindex(const std::string& s, const CallArguments& a) {
  return string_find(s, a, "rindex", true, true);
}

Value str_count(const std::string& s, const CallArguments& a) {
  BoundArguments b("count", a, {"sub", "start", "end"});
  const std::string& sub = require_string(b.require(0, "sub"), "count() argument 1");
  auto [begin, end] = byte_range(s, b.get(1), b.get(2));
  std::string_view window = std::string_view(s).substr(begin, end - begin);
  if (sub.empty()) return Value(static_cast<int64_t>(text::length(window) + 1));
  int64_t n = 0;
  for (size_t p = window.find(sub); p != std::string_view::npos;
       p = window.find(sub, p + sub.size())) {
    ++n;
  }
  return Value(n);
}

Value str_join(const std::string& s, const CallArguments& a) {
  BoundArguments b("join", a, {"iterable"});
  std::string out;
  std::vector<Value> items = iterate(b.require(0, "iterable"));
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      throw_type_error("sequence item " + std::to_string(i) + ": expected str instance, " +
                       items[i].type_name() + " found");
    }
    if (i > 0) out += s;
    out += items[i].as_string();
  }
  return Value(std::move(out));
}

Value str_format(const std::string& s, const CallArguments& a) {
  return Value(brace_format(s, a));
}

bool is_alnum(char32_t c) {
  return text::is_alpha(c) || text::is_decimal(c);
}

Value str_isdigit(const std::string& s, const CallArguments&) {
  return all_chars(s, text::is_decimal);
}

Value str_isalpha(const std::string& s, const CallArguments&) {
  return all_chars(s, text::is_alpha);
}

Value str_isalnum(const std::string& s, const CallArguments&) {
  return all_chars(s, is_alnum);
}

Value str_isspace(const std::string& s, const CallArguments&) {
  return all_chars(s, text::is_space);
}

Value str_isascii(const std::string& s, const CallArguments&) {
  return Value(text::is_ascii(s));
}

Value str_islower(const std::string& s, const CallArguments&) {
  return case_test(s, true);
}

Value str_isupper(const std::string& s, const CallArguments&) {
  return case_test(s, false);
}

Value str_center(const std::string& s, const CallArguments& a) {
  return justify(s, a, "center", '^');
}

Value str_ljust(const std::string& s, const CallArguments& a) {
  return justify(s, a, "ljust", '<');
}

Value str_rjust(const std::string& s, const CallArguments& a) {
  return justify(s, a, "rjust", '>');
}

Value str_zfill(const std::string& s, const CallArguments& a) {
  BoundArguments b("zfill", a, {"width"});
  int64_t margin =
      require_int(b.require(0, "width"), "zfill") - static_cast<int64_t>(text::length(s));
  if (margin <= 0) return Value(s);
  size_t sign = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
  return Value(s.substr(0, sign) + std::string(static_cast<size_t>(margin), '0') + s.substr(sign));
}

Value partition_method(const std::string& s, const CallArguments& a, const char* name,
                       bool from_right) {
  BoundArguments b(name, a, {"sep"});
  const std::string& sep = require_string(b.require(0, "sep"), std::string(name) + "() argument");
  if (sep.empty()) throw_type_error("ValueError: empty separator");
  size_t p = from_right ? s.rfind(sep) : s.find(sep);
  if (p == std::string::npos) {
    return from_right ? Value::tuple({Value(""), Value(""), Value(s)})
                      : Value::tuple({Value(s), Value(""), Value("")});
  }
  return Value::tuple({Value(s.substr(0, p)), Value(sep), Value(s.substr(p + sep.size()))});
}

Value str_partition(const std::string& s, const CallArguments& a) {
  return partition_method(s, a, "partition", false);
}

Value str_rpartition(const std::string& s, const CallArguments& a) {
  return partition_method(s, a, "rpartition", true);
}

Value str_removeprefix(const std::string& s, const CallArguments& a) {
  BoundArguments b("removeprefix", a, {"prefix"});
  const std::string& p = require_string(b.require(0, "prefix"), "removeprefix() argument");
  return Value(s.rfind(p, 0) == 0 ? s.substr(p.size()) : s);
}

Value str_removesuffix(const std::string& s, const CallArguments& a) {
  BoundArguments b("removesuffix", a, {"suffix"});
  const std::string& p = require_string(b.require(0, "suffix"), "removesuffix() argument");
  bool has = !p.empty() && s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
  return Value(has ? s.substr(0, s.size() - p.size()) : s);
}

const std::unordered_map<std::string, StringMethod>& string_methods() {
  static const auto* methods = new std::unordered_map<std::string, StringMethod>{
      {"strip", str_strip},
      {"lstrip", str_lstrip},
      {"rstrip", str_rstrip},
      {"split", str_split},
      {"rsplit", str_rsplit},
      {"splitlines", str_splitlines},
      {"startswith", str_startswith},
      {"endswith", str_endswith},
      {"lower", case_method<text::to_lower>},
      {"casefold", case_method<text::to_lower>},
      {"upper", case_method<text::to_upper>},
      {"title", case_method<text::to_title_case>},
      {"capitalize", case_method<text::capitalize>},
      {"swapcase", case_method<text::swap_case>},
      {"replace", str_replace},
      {"find", str_find},
      {"rfind", str_rfind},
      {"index", str_index},
      {"rindex", str_rindex},
      {"count", str_count},
      {"join", str_join},
      {"format", str_format},
      {"isdigit", str_isdigit},
      {"isdecimal", str_isdigit},
      {"isnumeric", str_isdigit},
      {"isalpha", str_isalpha},
      {"isalnum", str_isalnum},
      {"isspace", str_isspace},
      {"isascii", str_isascii},
      {"islower", str_islower},
      {"isupper", str_isupper},
      {"center", str_center},
      {"ljust", str_ljust},
      {"rjust", str_rjust},
      {"zfill", str_zfill},
      {"partition", str_partition},
      {"rpartition", str_rpartition},
      {"removeprefix", str_removeprefix},
      {"removesuffix", str_removesuffix},
  };
  return *methods;
}

}  // namespace

std::optional<Value> find_string_method(const Value& object, const std::string& name) {
  auto it = string_methods().find(name);
  if (it != string_methods().end()) {
    StringMethod method = it->second;
    return Value::callable("built-in method " + name + " of str object",
                           [self = object.as_string(), method](Evaluator&, CallArguments& args) {
                             return method(self, args);
                           });
  }
  static const char* kUnsupported[] = {"encode",    "expandtabs",   "format_map",  "maketrans",
                                       "translate", "isidentifier", "isprintable", "istitle"};
  for (const char* unsupported : kUnsupported) {
    if (name == unsupported) {
      return Value::callable(
          "built-in method " + name + " of str object",
          [name](Evaluator&, CallArguments&) -> Value {
            throw_type_error("str." + name + "() is not supported in chat templates");
          });
    }
  }
  return std::nullopt;
}

}  // namespace locus::jinja
