// printf-style and str.format formatting with Python's rules (see jinja_format.h).
#include "tokenizer/chat_template/jinja_format.h"

#include <cmath>
#include <cstdio>

#include "tokenizer/chat_template/jinja_error.h"
#include "tokenizer/chat_template/jinja_operators.h"
#include "tokenizer/chat_template/python_text.h"

namespace locus::jinja {
namespace {

// The printf specs below are assembled from a template's `%` format, one conversion at a time,
// after the conversion character and its argument type were checked.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"

std::string c_format(const std::string& spec, double value) {
  char buffer[512];
  int n = std::snprintf(buffer, sizeof(buffer), spec.c_str(), value);
  if (n < 0) return "";
  if (static_cast<size_t>(n) < sizeof(buffer)) return std::string(buffer, static_cast<size_t>(n));
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), spec.c_str(), value);
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string c_format_int(const std::string& spec, long long value) {
  char buffer[128];
  int n = std::snprintf(buffer, sizeof(buffer), spec.c_str(), value);
  return n < 0 ? ""
               : std::string(buffer, static_cast<size_t>(std::min<int>(n, sizeof(buffer) - 1)));
}

#pragma GCC diagnostic pop

std::string pad(const std::string& s, size_t width, char align, char32_t fill) {
  size_t len = text::length(s);
  if (len >= width) return s;
  size_t total = width - len;
  std::string fill_text;
  text::append_utf8(fill_text, fill);
  auto repeat = [&](size_t n) {
    std::string out;
    for (size_t i = 0; i < n; ++i)
      out += fill_text;
    return out;
  };
  if (align == '<') return s + repeat(total);
  if (align == '^') return repeat(total / 2) + s + repeat(total - total / 2);
  if (align == '=') {
    size_t sign = (!s.empty() && (s[0] == '-' || s[0] == '+' || s[0] == ' ')) ? 1 : 0;
    return s.substr(0, sign) + repeat(total) + s.substr(sign);
  }
  return repeat(total) + s;
}

int64_t require_integer(const Value& v, char type) {
  if (v.is_int() || v.is_bool()) return v.to_int();
  throw_type_error(std::string("%") + type + " format: an integer is required, not " +
                   v.type_name());
}

double require_real(const Value& v, char type) {
  if (v.is_number()) return v.to_double();
  throw_type_error(std::string("%") + type + " format: a real number is required, not " +
                   v.type_name());
}

std::string float_text(double v, const std::string& c_spec) {
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (std::isnan(v)) return "nan";
  return c_format(c_spec, v);
}

}  // namespace

std::string percent_format(const std::string& format, const Value& args) {
  std::vector<Value> positional;
  const DictValue* mapping = nullptr;
  bool single = false;
  if (args.is_tuple()) {
    positional = args.as_list();
  } else {
    if (args.is_dict()) mapping = &args.as_dict();
    positional.push_back(args);
    single = true;
  }
  size_t next_arg = 0;
  auto take = [&]() -> const Value& {
    if (next_arg >= positional.size()) throw_type_error("not enough arguments for format string");
    return positional[next_arg++];
  };
  std::string out;
  bool used_mapping = false;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out.push_back(format[i]);
      continue;
    }
    if (++i >= format.size()) throw_type_error("incomplete format");
    const Value* value = nullptr;
    Value keyed;
    if (format[i] == '(') {
      size_t close = format.find(')', i);
      if (close == std::string::npos) throw_type_error("incomplete format key");
      if (mapping == nullptr) throw_type_error("format requires a mapping");
      const Value* found = mapping->find(std::string_view(format).substr(i + 1, close - i - 1));
      if (found == nullptr)
        throw_type_error("KeyError: '" + format.substr(i + 1, close - i - 1) + "'");
      keyed = *found;
      value = &keyed;
      used_mapping = true;
      i = close + 1;
    }
    std::string flags;
    while (i < format.size() && std::string("-+ #0").find(format[i]) != std::string::npos)
      flags.push_back(format[i++]);
    std::string width;
    if (i < format.size() && format[i] == '*') {
      width = std::to_string(require_integer(take(), '*'));
      ++i;
    }
    while (i < format.size() && std::isdigit(static_cast<unsigned char>(format[i])))
      width.push_back(format[i++]);
    std::string precision;
    bool has_precision = false;
    if (i < format.size() && format[i] == '.') {
      has_precision = true;
      ++i;
      if (i < format.size() && format[i] == '*') {
        precision = std::to_string(require_integer(take(), '*'));
        ++i;
      }
      while (i < format.size() && std::isdigit(static_cast<unsigned char>(format[i])))
        precision.push_back(format[i++]);
    }
    while (i < format.size() && (format[i] == 'h' || format[i] == 'l' || format[i] == 'L'))
      ++i;
    if (i >= format.size()) throw_type_error("incomplete format");
    char type = format[i];
    if (type == '%') {
      out.push_back('%');
      continue;
    }
    if (value == nullptr) value = &take();
    std::string spec = "%" + flags + width + (has_precision ? "." + precision : "");
    switch (type) {
      case 's':
      case 'r':
      case 'a': {
        std::string s = type == 's' ? value->str() : value->repr();
        if (has_precision) {
          size_t keep = precision.empty() ? 0 : std::stoul(precision);
          std::vector<size_t> offsets = text::code_point_offsets(s);
          if (keep + 1 < offsets.size()) s = s.substr(0, offsets[keep]);
        }
        size_t w = width.empty() ? 0 : std::stoul(width);
        out += pad(s, w, flags.find('-') != std::string::npos ? '<' : '>', ' ');
        break;
      }
      case 'd':
      case 'i':
      case 'u': {
        double real = require_real(*value, type);
        int64_t v = value->is_float() ? static_cast<int64_t>(std::trunc(real)) : value->to_int();
        out += c_format_int(spec + "lld", static_cast<long long>(v));
        break;
      }
      case 'o':
      case 'x':
      case 'X': {
        int64_t v = require_integer(*value, type);
        std::string digits =
            c_format_int(std::string("%ll") + type, static_cast<long long>(v < 0 ? -v : v));
        if (flags.find('#') != std::string::npos)
          digits = (type == 'o' ? "0o" : (type == 'x' ? "0x" : "0X")) + digits;
        if (v < 0) digits = "-" + digits;
        size_t w = width.empty() ? 0 : std::stoul(width);
        bool zero = flags.find('0') != std::string::npos && flags.find('-') == std::string::npos;
        out += pad(digits, w, flags.find('-') != std::string::npos ? '<' : (zero ? '=' : '>'),
                   zero ? '0' : ' ');
        break;
      }
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G':
        out += float_text(require_real(*value, type), spec + type);
        break;
      case 'c': {
        std::string c;
        if (value->is_string() && text::length(value->as_string()) == 1) {
          c = value->as_string();
        } else {
          text::append_utf8(c, static_cast<char32_t>(require_integer(*value, 'c')));
        }
        out += c;
        break;
      }
      default:
        throw_type_error(std::string("unsupported format character '") + type + "'");
    }
  }
  if (!single && next_arg < positional.size())
    throw_type_error("not all arguments converted during string formatting");
  // CPython only complains about an unused single argument that is not mapping-like (a dict or
  // a list both pass its PyMapping_Check).
  bool mapping_like = args.is_dict() || (args.is_list() && !args.is_tuple());
  if (single && !used_mapping && !mapping_like && next_arg == 0) {
    throw_type_error("not all arguments converted during string formatting");
  }
  return out;
}

std::string format_with_spec(const Value& value, const std::string& spec) {
  if (spec.empty()) return value.str();
  std::u32string s = text::decode(spec);
  size_t i = 0;
  char32_t fill = ' ';
  char align = 0;
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (s.size() >= 2 && is_align(s[1])) {
    fill = s[0];
    align = static_cast<char>(s[1]);
    i = 2;
  } else if (!s.empty() && is_align(s[0])) {
    align = static_cast<char>(s[0]);
    i = 1;
  }
  char sign = '-';
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) sign = static_cast<char>(s[i++]);
  bool alternate = false;
  if (i < s.size() && s[i] == '#') {
    alternate = true;
    ++i;
  }
  if (i < s.size() && s[i] == '0') {
    if (align == 0) {
      fill = '0';
      align = '=';
    }
    ++i;
  }
  size_t width = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9')
    width = width * 10 + (s[i++] - '0');
  bool grouping = false;
  if (i < s.size() && s[i] == ',') {
    grouping = true;
    ++i;
  }
  int precision = -1;
  if (i < s.size() && s[i] == '.') {
    precision = 0;
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9')
      precision = precision * 10 + static_cast<int>(s[i++] - '0');
  }
  char type = i < s.size() ? static_cast<char>(s[i++]) : 0;
  if (i != s.size()) throw_type_error("Invalid format specifier '" + spec + "'");
  std::string body;
  if (value.is_string() || type == 's') {
    if (!value.is_string())
      throw_type_error("Unknown format code 's' for object of type '" + value.type_name() + "'");
    body = value.as_string();
    if (precision >= 0) {
      std::vector<size_t> offsets = text::code_point_offsets(body);
      if (static_cast<size_t>(precision) + 1 < offsets.size())
        body = body.substr(0, offsets[static_cast<size_t>(precision)]);
    }
    return pad(body, width, align == 0 ? '<' : align, fill);
  }
  if (!value.is_number())
    throw_type_error("unsupported format string passed to " + value.type_name() + ".__format__");
  bool integral = (value.is_int() || value.is_bool()) &&
                  (type == 0 || type == 'd' || type == 'x' || type == 'X' || type == 'o' ||
                   type == 'b' || type == 'n' || type == 'c');
  if (integral) {
    int64_t v = value.to_int();
    uint64_t magnitude = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
    int base = (type == 'x' || type == 'X') ? 16 : (type == 'o' ? 8 : (type == 'b' ? 2 : 10));
    std::string digits;
    do {
      digits.insert(digits.begin(), "0123456789abcdef"[magnitude % static_cast<uint64_t>(base)]);
      magnitude /= static_cast<uint64_t>(base);
    } while (magnitude > 0);
    if (type == 'X') digits = text::to_upper(digits);
    if (grouping && base == 10) {
      for (int k = static_cast<int>(digits.size()) - 3; k > 0; k -= 3)
        digits.insert(static_cast<size_t>(k), ",");
    }
    if (alternate && base != 10)
      digits = std::string("0") +
               (type == 'o' ? "o" : (type == 'b' ? "b" : (type == 'X' ? "X" : "x"))) + digits;
    body = (v < 0 ? "-" : (sign == '+' ? "+" : (sign == ' ' ? " " : ""))) + digits;
  } else {
    double v = value.to_double();
    std::string sign_text = std::signbit(v) ? "-" : (sign == '+' ? "+" : (sign == ' ' ? " " : ""));
    double magnitude = std::fabs(v);
    if (type == 0 && precision < 0) {
      body = sign_text + text::float_repr(magnitude);
    } else {
      char c_type = type == 0 ? 'g' : (type == '%' ? 'f' : type);
      if (c_type != 'e' && c_type != 'E' && c_type != 'f' && c_type != 'F' && c_type != 'g' &&
          c_type != 'G') {
        throw_type_error(std::string("Unknown format code '") + type + "' for object of type '" +
                         value.type_name() + "'");
      }
      double shown = type == '%' ? magnitude * 100 : magnitude;
      body = sign_text +
             float_text(shown, "%." + std::to_string(precision < 0 ? 6 : precision) + c_type) +
             (type == '%' ? "%" : "");
    }
  }
  return pad(body, width, align == 0 ? '>' : align, fill);
}

std::string brace_format(const std::string& format, const CallArguments& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      throw_type_error("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    size_t close = format.find('}', i);
    if (close == std::string::npos) throw_type_error("Single '{' encountered in format string");
    std::string field = format.substr(i + 1, close - i - 1);
    i = close;
    std::string spec;
    size_t colon = field.find(':');
    if (colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    char conversion = 0;
    size_t bang = field.find('!');
    if (bang != std::string::npos) {
      conversion = bang + 1 < field.size() ? field[bang + 1] : 0;
      field = field.substr(0, bang);
    }
    const Value* value = nullptr;
    if (field.empty() || std::isdigit(static_cast<unsigned char>(field[0]))) {
      size_t index = field.empty() ? auto_index++ : std::stoul(field);
      if (index >= args.positional.size())
        throw_type_error("IndexError: Replacement index " + std::to_string(index) +
                         " out of range for positional args tuple");
      value = &args.positional[index];
    } else {
      for (const auto& [name, v] : args.keyword) {
        if (name == field) value = &v;
      }
      if (value == nullptr) throw_type_error("KeyError: '" + field + "'");
    }
    Value shown = *value;
    if (conversion == 'r' || conversion == 'a') shown = Value(value->repr());
    if (conversion == 's') shown = Value(value->str());
    out += format_with_spec(shown, spec);
  }
  return out;
}

}  // namespace locus::jinja
