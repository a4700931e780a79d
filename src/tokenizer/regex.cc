// PCRE2 behind the Oniguruma patterns of tokenizer.json; see regex.h.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <fmt/format.h>
#include <pcre2.h>

#include "core/logging.h"
#include "tokenizer/utf8.h"

namespace locus::tokenizer {
namespace {

// Oniguruma's \s is White_Space: U+0009..U+000D, U+0085 and Z*. PCRE2's UCP \s adds U+180E
// (it follows \h, which predates Unicode 6.3 moving U+180E to Cf).
constexpr std::string_view kSpaceClassBody = "\\t\\n\\x{0B}\\f\\r\\x{85}\\p{Z}";
// Oniguruma's \w is Letter | Mark | Decimal_Number | Connector_Punctuation; PCRE2 10.42's UCP \w
// is L | N | underscore (it misses marks and wrongly includes No/Nl).
constexpr std::string_view kWordClassBody = "\\p{L}\\p{M}\\p{Nd}\\p{Pc}";
// Oniguruma's \h is a hexadecimal digit (PCRE2's \h is horizontal space).
constexpr std::string_view kHexClassBody = "0-9A-Fa-f";

struct MatchResources {
  pcre2_match_data* match_data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  MatchResources() {
    match_data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    // Backtracking into groups on long inputs (a megabyte-long "word") can outgrow PCRE2's
    // default 32 KiB JIT stack; let it grow (address space is reserved, memory used on demand).
    jit_stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~MatchResources() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(match_data);
  }
  MatchResources(const MatchResources&) = delete;
  MatchResources& operator=(const MatchResources&) = delete;
};

// One set per thread: a match never spans threads, and this keeps matching allocation-free.
MatchResources& thread_match_resources() {
  thread_local MatchResources resources;
  return resources;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  int n = pcre2_get_error_message(code, buffer, sizeof(buffer));
  if (n < 0) return fmt::format("PCRE2 error {}", code);
  return std::string(reinterpret_cast<const char*>(buffer), static_cast<size_t>(n));
}

}  // namespace

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

Expected<std::string> translate_oniguruma_pattern(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 16);
  bool in_class = false;
  size_t class_start = 0;  // index of the first character after '[' or '[^'
  size_t i = 0;
  while (i < pattern.size()) {
    char c = pattern[i];
    if (c == '\\') {
      if (i + 1 >= pattern.size()) {
        return parse_error(fmt::format("regex '{}': pattern ends with a backslash", pattern));
      }
      char e = pattern[i + 1];
      std::string_view body;
      bool negated = false;
      switch (e) {
        case 's':
          body = kSpaceClassBody;
          break;
        case 'S':
          body = kSpaceClassBody;
          negated = true;
          break;
        case 'w':
          body = kWordClassBody;
          break;
        case 'W':
          body = kWordClassBody;
          negated = true;
          break;
        case 'h':
          body = kHexClassBody;
          break;
        case 'H':
          body = kHexClassBody;
          negated = true;
          break;
        default:
          break;
      }
      if (body.empty()) {
        // Any other escape means the same in both engines; copy it whole (it may be UTF-8).
        size_t length = 1 + utf8::sequence_length(static_cast<unsigned char>(e));
        out.append(pattern.substr(i, length));
        i += length;
        continue;
      }
      if (!in_class) {
        out += negated ? "[^" : "[";
        out += body;
        out += ']';
      } else if (!negated) {
        out += body;
      } else if (e == 'S') {
        // Inside a class PCRE2 cannot subtract; its \S differs from Oniguruma's only by U+180E.
        out += "\\S\\x{180E}";
      } else {
        // No exact PCRE2 spelling of a negated Unicode shorthand inside a class.
        log::warn("regex '{}': \\{} inside a character class uses PCRE2's definition", pattern, e);
        out += '\\';
        out += e;
      }
      i += 2;
      continue;
    }
    if (in_class) {
      if (c == '[') {
        if (i + 1 < pattern.size() && pattern[i + 1] == ':') {
          size_t close = pattern.find(":]", i + 2);
          if (close == std::string_view::npos) {
            return parse_error(fmt::format("regex '{}': unterminated POSIX class", pattern));
          }
          out.append(pattern.substr(i, close + 2 - i));
          i = close + 2;
          continue;
        }
        return unsupported(fmt::format(
            "regex '{}': nested character classes (Oniguruma set operations) are not supported",
            pattern));
      }
      if (c == '&' && i + 1 < pattern.size() && pattern[i + 1] == '&') {
        return unsupported(
            fmt::format("regex '{}': character class intersection '&&' is not supported", pattern));
      }
      if (c == ']' && i != class_start) in_class = false;
      out += c;
      ++i;
      continue;
    }
    if (c == '[') {
      in_class = true;
      out += c;
      ++i;
      if (i < pattern.size() && pattern[i] == '^') {
        out += '^';
        ++i;
      }
      class_start = i;
      continue;
    }
    out += c;
    ++i;
  }
  if (in_class) {
    return parse_error(fmt::format("regex '{}': unterminated character class", pattern));
  }
  return out;
}

Expected<Regex> Regex::compile(std::string_view pattern) {
  LOCUS_ASSIGN_OR_RETURN(std::string translated, translate_oniguruma_pattern(pattern));
  pcre2_compile_context* context = pcre2_compile_context_create(nullptr);
  // Oniguruma's Ruby syntax: ^ and $ are line anchors and '.' stops only at \n.
  pcre2_set_newline(context, PCRE2_NEWLINE_LF);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &error_code, &error_offset, context);
  pcre2_compile_context_free(context);
  if (code == nullptr) {
    return parse_error(fmt::format("regex '{}': {} at offset {}", pattern,
                                   pcre2_message(error_code), error_offset));
  }
  auto holder = std::make_shared<Code>();
  holder->code = code;
  holder->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  if (!holder->jit) log::warn("regex '{}': PCRE2 JIT unavailable, matching interpreted", pattern);
  Regex regex;
  regex.code_ = std::move(holder);
  regex.pattern_ = std::string(pattern);
  regex.translated_ = std::move(translated);
  return regex;
}

Expected<Regex> Regex::literal(std::string_view literal) {
  // Escaping every ASCII non-alphanumeric makes the text literal; non-ASCII needs no escape.
  std::string escaped;
  for (char c : literal) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) {
      if (c == '\n') {
        escaped += "\\n";
        continue;
      }
      escaped += '\\';
    }
    escaped += c;
  }
  auto regex = compile(escaped);
  if (regex) regex->pattern_ = std::string(literal);
  return regex;
}

Status Regex::for_each_match(std::string_view text,
                             FunctionRef<void(size_t, size_t)> on_match) const {
  auto& resources = thread_match_resources();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t search_from = 0;
  bool has_previous = false;
  size_t previous_end = 0;
  while (search_from <= text.size()) {
    int rc = code_->jit ? pcre2_jit_match(code_->code, subject, text.size(), search_from, 0,
                                          resources.match_data, resources.context)
                        : pcre2_match(code_->code, subject, text.size(), search_from,
                                      PCRE2_NO_UTF_CHECK, resources.match_data, resources.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    // rc == 0 only says the one-pair ovector could not hold the capture groups; the whole match
    // (pair 0) is still there.
    if (rc < 0) {
      return resource_exhausted(
          fmt::format("regex '{}': matching failed: {}", pattern_, pcre2_message(rc)));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(resources.match_data);
    size_t start = ovector[0], end = ovector[1];
    if (start == end && has_previous && previous_end == end) {
      if (search_from >= text.size()) break;
      search_from += utf8::sequence_length(static_cast<unsigned char>(text[search_from]));
      continue;
    }
    on_match(start, end);
    has_previous = true;
    previous_end = end;
    // After an empty match the next search starts at the same place, and the rule above steps
    // over the empty match found there again.
    search_from = end;
  }
  return Status::ok();
}

}  // namespace locus::tokenizer
