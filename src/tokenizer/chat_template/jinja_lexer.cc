// Tokenizer for Jinja templates; mirrors jinja2/lexer.py rule by rule (see jinja_lexer.h).
#include "tokenizer/chat_template/jinja_lexer.h"

#include <cerrno>
#include <cstdlib>

#include "tokenizer/chat_template/jinja_error.h"
#include "tokenizer/chat_template/python_text.h"

namespace locus::jinja {
namespace {

constexpr size_t kNpos = std::string::npos;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Replaces \r\n and \r by \n and drops one trailing newline, as jinja2 does before lexing.
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

[[noreturn]] void syntax_error(const std::string& message, int line) {
  throw TemplateError(TemplateErrorKind::kSyntax, message, line);
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize_newlines(source)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      size_t open = find_tag_open(pos_);
      if (open == kNpos) {
        emit_text(std::string_view(src_).substr(pos_));
        pos_ = src_.size();
        break;
      }
      char kind = src_[open + 1];
      size_t after = open + 2;
      char modifier = 0;
      if (after < src_.size() && (src_[after] == '-' || src_[after] == '+'))
        modifier = src_[after++];
      std::string_view text = std::string_view(src_).substr(pos_, open - pos_);
      size_t raw_end = kind == '%' ? match_raw_begin(after) : kNpos;
      emit_text(strip_before_tag(text, modifier, kind != '{'));
      consume(after);
      if (raw_end != kNpos) {
        lex_raw(raw_end);
      } else if (kind == '#') {
        lex_comment(after);
      } else {
        push(kind == '{' ? TokenType::kVariableBegin : TokenType::kBlockBegin, "");
        lex_tag(kind == '{');
      }
    }
    push(TokenType::kEnd, "");
    return std::move(tokens_);
  }

 private:
  size_t find_tag_open(size_t from) const {
    for (size_t i = src_.find('{', from); i != kNpos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return kNpos;
  }

  // Whitespace control for the text in front of a tag: `-` strips all trailing whitespace; for
  // block and comment tags lstrip_blocks strips spaces between the line start and the tag.
  std::string_view strip_before_tag(std::string_view text, char modifier,
                                    bool lstrip_applies) const {
    if (modifier == '-') return rstrip_python(text);
    if (!lstrip_applies || modifier == '+') return text;
    size_t line_start = text.rfind('\n');
    line_start = line_start == kNpos ? 0 : line_start + 1;
    if (line_start == 0 && !line_starting_) return text;
    std::string_view tail = text.substr(line_start);
    if (tail.empty()) return text;
    for (char32_t c : text::decode(tail)) {
      if (!text::is_space(c)) return text;
    }
    return text.substr(0, line_start);
  }

  static std::string_view rstrip_python(std::string_view text) {
    std::u32string cps = text::decode(text);
    size_t end = cps.size();
    while (end > 0 && text::is_space(cps[end - 1]))
      --end;
    return text.substr(0, text::encode(std::u32string_view(cps).substr(0, end)).size());
  }

  // The text token carries the line it starts on; consume() then moves past the original text.
  void emit_text(std::string_view kept) {
    if (!kept.empty()) push(TokenType::kText, std::string(kept));
  }

  // After `{%` and its modifier: `\s*raw\s*(-%}\s*|%})`. Returns the position after it.
  size_t match_raw_begin(size_t at) const {
    size_t p = skip_spaces(at);
    if (src_.compare(p, 3, "raw") != 0) return kNpos;
    p = skip_spaces(p + 3);
    if (src_.compare(p, 3, "-%}") == 0) return skip_spaces(p + 3);
    if (src_.compare(p, 2, "%}") == 0) return p + 2;
    return kNpos;
  }

  size_t skip_spaces(size_t p) const {
    while (p < src_.size()) {
      size_t next = p;
      char32_t c = next_code_point(next);
      if (!text::is_space(c)) break;
      p = next;
    }
    return p;
  }

  char32_t next_code_point(size_t& p) const {
    unsigned char b = static_cast<unsigned char>(src_[p]);
    if (b < 0x80) {
      ++p;
      return b;
    }
    size_t len = (b >= 0xF0) ? 4 : (b >= 0xE0) ? 3 : (b >= 0xC0) ? 2 : 1;
    std::u32string cps = text::decode(std::string_view(src_).substr(p, len));
    size_t used = cps.empty() ? 1 : text::encode(cps.substr(0, 1)).size();
    p += used;
    return cps.empty() ? 0xFFFD : cps[0];
  }

  // Advances to `to` counting newlines, and records whether the consumed text ended a line.
  void consume(size_t to) {
    for (size_t i = pos_; i < to; ++i) {
      if (src_[i] == '\n') ++line_;
    }
    if (to > pos_) line_starting_ = src_[to - 1] == '\n';
    pos_ = to;
  }

  void lex_raw(size_t body_start) {
    consume(body_start);
    // `{%(-|+|)\s*endraw\s*(+%}|-%}\s*|%}\n?)`, the earliest one.
    for (size_t open = src_.find("{%", pos_); open != kNpos; open = src_.find("{%", open + 1)) {
      size_t p = open + 2;
      char modifier = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) modifier = src_[p++];
      p = skip_spaces(p);
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p = skip_spaces(p + 6);
      size_t end;
      if (src_.compare(p, 3, "+%}") == 0) {
        end = p + 3;
      } else if (src_.compare(p, 3, "-%}") == 0) {
        end = skip_spaces(p + 3);
      } else if (src_.compare(p, 2, "%}") == 0) {
        end = p + 2 + (p + 2 < src_.size() && src_[p + 2] == '\n' ? 1 : 0);
      } else {
        continue;
      }
      std::string_view body = std::string_view(src_).substr(pos_, open - pos_);
      emit_text(strip_before_tag(body, modifier, true));
      consume(end);
      return;
    }
    if (pos_ >= src_.size()) return;  // as for comments: nothing left after the opener
    syntax_error("Missing end of raw directive", line_);
  }

  void lex_comment(size_t body_start) {
    // jinja2 quirk kept for parity: an opener with nothing after it ends the template quietly.
    if (body_start >= src_.size()) return;
    size_t close = src_.find("#}", body_start);
    if (close == kNpos) syntax_error("Missing end of comment tag", line_);
    size_t end = close + 2;
    if (close > body_start && src_[close - 1] == '-') {
      end = skip_spaces(end);
    } else if (close > body_start && src_[close - 1] == '+') {
      // no trimming
    } else if (end < src_.size() && src_[end] == '\n') {
      ++end;  // trim_blocks
    }
    consume(end);
  }

  void lex_tag(bool is_variable) {
    std::vector<char> brackets;
    while (true) {
      if (pos_ >= src_.size()) {
        syntax_error(std::string("unexpected end of template, expected '") +
                         (is_variable ? "}}" : "%}") + "'",
                     line_);
      }
      if (brackets.empty() && try_tag_end(is_variable)) return;
      size_t p = pos_;
      char32_t c = next_code_point(p);
      if (text::is_space(c)) {
        consume(p);
        continue;
      }
      char ch = src_[pos_];
      if (is_digit(ch)) {
        lex_number();
      } else if (c >= 0x80 ? text::is_identifier_start(c) : (ch == '_' || text::is_alpha(c))) {
        lex_name();
      } else if (ch == '\'' || ch == '"') {
        lex_string(ch);
      } else {
        lex_operator(brackets);
      }
      line_starting_ = false;
    }
  }

  bool try_tag_end(bool is_variable) {
    if (is_variable) {
      if (src_.compare(pos_, 3, "-}}") == 0) {
        push(TokenType::kVariableEnd, "");
        consume(skip_spaces(pos_ + 3));
        return true;
      }
      if (src_.compare(pos_, 2, "}}") == 0) {
        push(TokenType::kVariableEnd, "");
        consume(pos_ + 2);
        return true;
      }
      return false;
    }
    if (src_.compare(pos_, 3, "+%}") == 0) {
      push(TokenType::kBlockEnd, "");
      consume(pos_ + 3);
      return true;
    }
    if (src_.compare(pos_, 3, "-%}") == 0) {
      push(TokenType::kBlockEnd, "");
      consume(skip_spaces(pos_ + 3));
      return true;
    }
    if (src_.compare(pos_, 2, "%}") == 0) {
      push(TokenType::kBlockEnd, "");
      size_t end = pos_ + 2;
      if (end < src_.size() && src_[end] == '\n') ++end;  // trim_blocks
      consume(end);
      return true;
    }
    return false;
  }

  // `(\d+_)*\d+`: digits with single underscores between them. Returns the end or kNpos.
  size_t scan_digits(size_t p) const {
    if (p >= src_.size() || !is_digit(src_[p])) return kNpos;
    while (p < src_.size()) {
      if (is_digit(src_[p])) {
        ++p;
      } else if (src_[p] == '_' && p + 1 < src_.size() && is_digit(src_[p + 1])) {
        ++p;
      } else {
        break;
      }
    }
    return p;
  }

  static std::string without_underscores(std::string_view s) {
    std::string out;
    for (char c : s) {
      if (c != '_') out.push_back(c);
    }
    return out;
  }

  void lex_number() {
    // Floats first, as jinja2 orders its rules; a number right after a dot is never a float.
    bool after_dot = pos_ > 0 && src_[pos_ - 1] == '.';
    size_t int_end = scan_digits(pos_);
    if (!after_dot) {
      size_t p = int_end;
      size_t fraction_end = kNpos;
      if (p < src_.size() && src_[p] == '.') fraction_end = scan_digits(p + 1);
      size_t q = fraction_end != kNpos ? fraction_end : p;
      size_t exponent_end = kNpos;
      if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
        size_t r = q + 1;
        if (r < src_.size() && (src_[r] == '+' || src_[r] == '-')) ++r;
        exponent_end = scan_digits(r);
      }
      size_t end = exponent_end != kNpos ? exponent_end : fraction_end;
      if (end != kNpos) {
        std::string literal = without_underscores(std::string_view(src_).substr(pos_, end - pos_));
        Token token{TokenType::kFloat, literal, 0, std::strtod(literal.c_str(), nullptr), line_};
        tokens_.push_back(std::move(token));
        consume(end);
        return;
      }
    }
    int base = 10;
    size_t digits_start = pos_;
    size_t end = int_end;
    char prefix = pos_ + 1 < src_.size() ? static_cast<char>(src_[pos_ + 1] | 0x20) : 0;
    if (src_[pos_] == '0' && (prefix == 'b' || prefix == 'o' || prefix == 'x')) {
      base = prefix == 'b' ? 2 : (prefix == 'o' ? 8 : 16);
      size_t p = pos_ + 2;
      size_t q = p;
      while (q < src_.size()) {
        size_t r = (src_[q] == '_') ? q + 1 : q;
        if (r >= src_.size()) break;
        int v = hex_value(src_[r]);
        if (v < 0 || v >= base) break;
        q = r + 1;
      }
      if (q == p) {
        end = pos_ + 1;  // just "0"; the letter starts a name
        base = 10;
      } else {
        digits_start = p;
        end = q;
      }
    } else if (src_[pos_] == '0') {
      end = pos_ + 1;
      while (end < src_.size()) {
        size_t r = src_[end] == '_' ? end + 1 : end;
        if (r < src_.size() && src_[r] == '0') {
          end = r + 1;
        } else {
          break;
        }
      }
    }
    std::string digits =
        without_underscores(std::string_view(src_).substr(digits_start, end - digits_start));
    errno = 0;
    char* parse_end = nullptr;
    long long value = std::strtoll(digits.c_str(), &parse_end, base);
    if (errno == ERANGE) syntax_error("integer literal too large: " + digits, line_);
    Token token{TokenType::kInteger, std::string(std::string_view(src_).substr(pos_, end - pos_)),
                static_cast<int64_t>(value), 0.0, line_};
    tokens_.push_back(std::move(token));
    consume(end);
  }

  void lex_name() {
    size_t p = pos_;
    next_code_point(p);
    while (p < src_.size()) {
      size_t q = p;
      char32_t c = next_code_point(q);
      if (!text::is_identifier_continue(c)) break;
      p = q;
    }
    push(TokenType::kName, src_.substr(pos_, p - pos_));
    consume(p);
  }

  void lex_string(char quote) {
    int start_line = line_;
    size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote)
      p += src_[p] == '\\' ? 2 : 1;
    if (p >= src_.size()) syntax_error("unterminated string literal", start_line);
    std::string value = unescape(std::string_view(src_).substr(pos_ + 1, p - pos_ - 1), start_line);
    tokens_.push_back(Token{TokenType::kString, std::move(value), 0, 0.0, start_line});
    consume(p + 1);
  }

  // Python's unicode-escape decoding of a string literal's body.
  static std::string unescape(std::string_view body, int line) {
    std::string out;
    for (size_t i = 0; i < body.size(); ++i) {
      char c = body[i];
      if (c != '\\' || i + 1 >= body.size()) {
        out.push_back(c);
        continue;
      }
      char e = body[++i];
      switch (e) {
        case '\n':
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '\'':
          out.push_back('\'');
          break;
        case '"':
          out.push_back('"');
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case 'x':
        case 'u':
        case 'U': {
          size_t digits = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
          char32_t cp = 0;
          for (size_t k = 0; k < digits; ++k) {
            int v = i + 1 + k < body.size() ? hex_value(body[i + 1 + k]) : -1;
            if (v < 0) {
              syntax_error(std::string("truncated \\") + e + std::string(digits, 'X') + " escape",
                           line);
            }
            cp = cp * 16 + static_cast<char32_t>(v);
          }
          if (cp > 0x10FFFF) syntax_error("illegal Unicode character in string literal", line);
          text::append_utf8(out, cp);
          i += digits;
          break;
        }
        case 'N':
          syntax_error("\\N{...} escapes are not supported in string literals", line);
        default:
          if (e >= '0' && e <= '7') {
            char32_t cp = static_cast<char32_t>(e - '0');
            for (int k = 0;
                 k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k) {
              cp = cp * 8 + static_cast<char32_t>(body[++i] - '0');
            }
            text::append_utf8(out, cp);
          } else {
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    return out;
  }

  void lex_operator(std::vector<char>& brackets) {
    static const char* kTwoChar[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwoChar) {
      if (src_.compare(pos_, 2, op) == 0) {
        push(TokenType::kOperator, op);
        consume(pos_ + 2);
        return;
      }
    }
    char c = src_[pos_];
    static const std::string kSingle = "+-/*%~[](){}><=.:|,;";
    if (kSingle.find(c) == kNpos) {
      size_t p = pos_;
      next_code_point(p);
      syntax_error("unexpected char '" + src_.substr(pos_, p - pos_) + "'", line_);
    }
    if (c == '(' || c == '[' || c == '{') {
      brackets.push_back(c == '(' ? ')' : (c == '[' ? ']' : '}'));
    } else if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty()) syntax_error(std::string("unexpected '") + c + "'", line_);
      char expected = brackets.back();
      brackets.pop_back();
      if (expected != c) {
        syntax_error(std::string("unexpected '") + c + "', expected '" + expected + "'", line_);
      }
    }
    push(TokenType::kOperator, std::string(1, c));
    consume(pos_ + 1);
  }

  void push(TokenType type, std::string value) {
    tokens_.push_back(Token{type, std::move(value), 0, 0.0, line_});
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  return Lexer(source).run();
}

std::string describe_token(const Token& token) {
  switch (token.type) {
    case TokenType::kText:
      return "template data";
    case TokenType::kVariableBegin:
      return "begin of print statement";
    case TokenType::kVariableEnd:
      return "end of print statement";
    case TokenType::kBlockBegin:
      return "begin of statement block";
    case TokenType::kBlockEnd:
      return "end of statement block";
    case TokenType::kName:
      return token.value;
    case TokenType::kString:
      return "string";
    case TokenType::kInteger:
      return "integer";
    case TokenType::kFloat:
      return "float";
    case TokenType::kOperator:
      return token.value;
    case TokenType::kEnd:
      return "end of template";
  }
  return "token";
}

}  // namespace locus::jinja
