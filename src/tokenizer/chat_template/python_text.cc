// Python str semantics over UTF-8 (see python_text.h).
#include "tokenizer/chat_template/python_text.h"

#include <charconv>
#include <cmath>
#include <cstdint>

#include <utf8proc.h>

namespace locus::jinja::text {
namespace {

constexpr char32_t kEscapedByteBase = 0xDC80;

utf8proc_category_t category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

bool is_escaped_byte(char32_t c) {
  return c >= kEscapedByteBase && c <= kEscapedByteBase + 0x7F;
}

// Length of the valid UTF-8 sequence at s[i], 0 when it is not valid.
size_t valid_sequence_length(std::string_view s, size_t i, char32_t* out) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char b0 = byte(i);
  if (b0 < 0x80) {
    *out = b0;
    return 1;
  }
  size_t n;
  char32_t cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    cp = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    unsigned char b = byte(i + k);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are invalid, as in CPython's decoder.
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  *out = cp;
  return n;
}

std::u32string strip_set(const std::optional<std::string>& chars) {
  return chars ? decode(*chars) : std::u32string();
}

}  // namespace

std::u32string decode(std::string_view utf8) {
  std::u32string out;
  out.reserve(utf8.size());
  for (size_t i = 0; i < utf8.size();) {
    char32_t cp = 0;
    size_t n = valid_sequence_length(utf8, i, &cp);
    if (n == 0) {
      out.push_back(kEscapedByteBase + (static_cast<unsigned char>(utf8[i]) & 0x7F));
      i += 1;
    } else {
      out.push_back(cp);
      i += n;
    }
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (is_escaped_byte(cp)) {
    out.push_back(static_cast<char>(0x80 | (cp - kEscapedByteBase)));
  } else if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string encode(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t cp : code_points)
    append_utf8(out, cp);
  return out;
}

bool is_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

size_t length(std::string_view s) {
  if (is_ascii(s)) return s.size();
  return decode(s).size();
}

std::vector<size_t> code_point_offsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    offsets.push_back(i);
    char32_t cp = 0;
    size_t n = valid_sequence_length(s, i, &cp);
    i += n == 0 ? 1 : n;
  }
  offsets.push_back(s.size());
  return offsets;
}

bool is_space(char32_t c) {
  switch (c) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool is_alpha(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  if (is_escaped_byte(c)) return false;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return true;
    default:
      return false;
  }
}

bool is_decimal(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return !is_escaped_byte(c) && category(c) == UTF8PROC_CATEGORY_ND;
}

bool is_cased(char32_t c) {
  if (c < 0x80) return is_alpha(c);
  if (is_escaped_byte(c)) return false;
  auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

bool is_lower_char(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z';
  return !is_escaped_byte(c) && category(c) == UTF8PROC_CATEGORY_LL;
}

bool is_upper_char(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z';
  if (is_escaped_byte(c)) return false;
  auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT;
}

bool is_printable(char32_t c) {
  if (c < 0x80) return c >= 0x20 && c < 0x7F;
  if (is_escaped_byte(c)) return false;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

bool is_identifier_start(char32_t c) {
  if (c < 0x80) return c == '_' || is_alpha(c);
  return is_alpha(c) || (!is_escaped_byte(c) && category(c) == UTF8PROC_CATEGORY_NL);
}

bool is_identifier_continue(char32_t c) {
  if (c < 0x80) return c == '_' || is_alpha(c) || is_decimal(c);
  if (is_identifier_start(c)) return true;
  if (is_escaped_byte(c)) return false;
  auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC ||
         cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_PC;
}

namespace {

char32_t lower_char(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (is_escaped_byte(c)) return c;
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}

char32_t upper_char(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (is_escaped_byte(c)) return c;
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
}

char32_t title_char(char32_t c) {
  if (c < 0x80) return upper_char(c);
  if (is_escaped_byte(c)) return c;
  return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c)));
}

template <typename F>
std::string map_chars(std::string_view s, F f) {
  std::u32string cps = decode(s);
  for (char32_t& c : cps)
    c = f(c);
  return encode(cps);
}

}  // namespace

std::string to_lower(std::string_view s) {
  return map_chars(s, lower_char);
}

std::string to_upper(std::string_view s) {
  return map_chars(s, upper_char);
}

std::string swap_case(std::string_view s) {
  return map_chars(s, [](char32_t c) {
    if (is_upper_char(c)) return lower_char(c);
    if (is_lower_char(c)) return upper_char(c);
    return c;
  });
}

std::string to_title_case(std::string_view s) {
  std::u32string cps = decode(s);
  bool previous_is_cased = false;
  for (char32_t& c : cps) {
    char32_t original = c;
    c = previous_is_cased ? lower_char(c) : title_char(c);
    previous_is_cased = is_cased(original);
  }
  return encode(cps);
}

std::string capitalize(std::string_view s) {
  std::u32string cps = decode(s);
  for (size_t i = 0; i < cps.size(); ++i)
    cps[i] = i == 0 ? title_char(cps[i]) : lower_char(cps[i]);
  return encode(cps);
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  std::u32string cps = decode(s);
  std::u32string set = strip_set(chars);
  auto strippable = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : is_space(c);
  };
  size_t begin = 0;
  size_t end = cps.size();
  if (left) {
    while (begin < end && strippable(cps[begin]))
      ++begin;
  }
  if (right) {
    while (end > begin && strippable(cps[end - 1]))
      --end;
  }
  return encode(std::u32string_view(cps).substr(begin, end - begin));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& separator,
                               long long max_split, bool from_right) {
  std::vector<std::string> parts;
  if (separator) {
    const std::string& sep = *separator;
    if (!from_right) {
      size_t pos = 0;
      while (max_split < 0 || static_cast<long long>(parts.size()) < max_split) {
        size_t hit = s.find(sep, pos);
        if (hit == std::string_view::npos) break;
        parts.emplace_back(s.substr(pos, hit - pos));
        pos = hit + sep.size();
      }
      parts.emplace_back(s.substr(pos));
      return parts;
    }
    size_t end = s.size();
    while (max_split < 0 || static_cast<long long>(parts.size()) < max_split) {
      if (end < sep.size()) break;
      size_t hit = s.rfind(sep, end - sep.size());
      if (hit == std::string_view::npos) break;
      parts.emplace_back(s.substr(hit + sep.size(), end - hit - sep.size()));
      end = hit;
    }
    parts.emplace_back(s.substr(0, end));
    return {parts.rbegin(), parts.rend()};
  }
  // Whitespace splitting: runs of whitespace separate, empty strings never appear.
  std::u32string cps = decode(s);
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < cps.size() && is_space(cps[i]))
        ++i;
      if (i == cps.size()) break;
      if (max_split >= 0 && static_cast<long long>(parts.size()) == max_split) {
        parts.push_back(encode(std::u32string_view(cps).substr(i)));
        break;
      }
      size_t start = i;
      while (i < cps.size() && !is_space(cps[i]))
        ++i;
      parts.push_back(encode(std::u32string_view(cps).substr(start, i - start)));
    }
    return parts;
  }
  size_t i = cps.size();
  while (true) {
    while (i > 0 && is_space(cps[i - 1]))
      --i;
    if (i == 0) break;
    if (max_split >= 0 && static_cast<long long>(parts.size()) == max_split) {
      parts.push_back(encode(std::u32string_view(cps).substr(0, i)));
      break;
    }
    size_t end = i;
    while (i > 0 && !is_space(cps[i - 1]))
      --i;
    parts.push_back(encode(std::u32string_view(cps).substr(i, end - i)));
  }
  return {parts.rbegin(), parts.rend()};
}

std::vector<std::string> split_lines(std::string_view s, bool keep_ends) {
  std::u32string cps = decode(s);
  std::vector<std::string> lines;
  size_t start = 0;
  size_t i = 0;
  while (i < cps.size()) {
    char32_t c = cps[i];
    bool is_break = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
                    c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!is_break) {
      ++i;
      continue;
    }
    size_t break_len = (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ? 2 : 1;
    size_t end = keep_ends ? i + break_len : i;
    lines.push_back(encode(std::u32string_view(cps).substr(start, end - start)));
    i += break_len;
    start = i;
  }
  if (start < cps.size()) lines.push_back(encode(std::u32string_view(cps).substr(start)));
  return lines;
}

std::string replace(std::string_view s, std::string_view old_text, std::string_view new_text,
                    long long count) {
  std::string out;
  if (old_text.empty()) {
    // Python inserts `new` before every code point and at the end.
    std::vector<size_t> offsets = code_point_offsets(s);
    long long done = 0;
    for (size_t k = 0; k + 1 < offsets.size(); ++k) {
      if (count < 0 || done < count) {
        out += new_text;
        ++done;
      }
      out += s.substr(offsets[k], offsets[k + 1] - offsets[k]);
    }
    if (count < 0 || done < count) out += new_text;
    return out;
  }
  size_t pos = 0;
  long long done = 0;
  while (count < 0 || done < count) {
    size_t hit = s.find(old_text, pos);
    if (hit == std::string_view::npos) break;
    out += s.substr(pos, hit - pos);
    out += new_text;
    pos = hit + old_text.size();
    ++done;
  }
  out += s.substr(pos);
  return out;
}

std::string repr(std::string_view s) {
  std::u32string cps = decode(s);
  bool has_single = false;
  bool has_double = false;
  for (char32_t c : cps) {
    has_single |= c == '\'';
    has_double |= c == '"';
  }
  char32_t quote = (has_single && !has_double) ? '"' : '\'';
  std::string out;
  out.push_back(static_cast<char>(quote));
  static const char* kHex = "0123456789abcdef";
  for (char32_t c : cps) {
    if (c == quote || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      out.push_back(kHex[(c >> 4) & 0xF]);
      out.push_back(kHex[c & 0xF]);
    } else if (c < 0x7F || is_printable(c)) {
      append_utf8(out, c);
    } else {
      // Python shows a surrogate-escaped byte as the lone surrogate \udcXX.
      int digits = c <= 0xFF ? 2 : (c <= 0xFFFF ? 4 : 8);
      out += digits == 2 ? "\\x" : (digits == 4 ? "\\u" : "\\U");
      for (int k = digits - 1; k >= 0; --k)
        out.push_back(kHex[(c >> (4 * k)) & 0xF]);
    }
  }
  out.push_back(static_cast<char>(quote));
  return out;
}

std::string float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buffer[64];
  // Shortest round-trip digits in scientific form: "-1.2345e+06".
  auto result =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  std::string_view sci(buffer, static_cast<size_t>(result.ptr - buffer));
  std::string out;
  if (!sci.empty() && sci[0] == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits.push_back(c);
  }
  int exponent = std::stoi(std::string(sci.substr(e_pos + 1)));
  while (digits.size() > 1 && digits.back() == '0')
    digits.pop_back();
  if (exponent < -4 || exponent >= 16) {
    out.push_back(digits[0]);
    if (digits.size() > 1) {
      out.push_back('.');
      out += digits.substr(1);
    }
    out.push_back('e');
    out.push_back(exponent < 0 ? '-' : '+');
    int magnitude = exponent < 0 ? -exponent : exponent;
    if (magnitude < 10) out.push_back('0');
    out += std::to_string(magnitude);
    return out;
  }
  if (exponent >= 0) {
    size_t int_len = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= int_len) {
      out += digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
    return out;
  }
  out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  return out;
}

}  // namespace locus::jinja::text
