// Splits template text into tokens the way jinja2's lexer does with the settings transformers
// uses (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False): template data,
// `{{ }}` / `{% %}` delimiters and the names, literals and operators inside them. Comments and
// whitespace control (`{%-`, `-%}`, `+%}`) are resolved here, so the parser only sees the text
// that will really be output.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace locus::jinja {

enum class TokenType {
  kText,           // template data between tags
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,           // identifiers and keywords alike (jinja2 has no reserved words)
  kString,         // value holds the unescaped text
  kInteger,
  kFloat,
  kOperator,  // value holds the operator text: "+", "//", "==", "(", "|", ...
  kEnd,
};

struct Token {
  TokenType type = TokenType::kEnd;
  std::string value;
  int64_t int_value = 0;
  double float_value = 0.0;
  int line = 1;
};

// Throws TemplateError(kSyntax) with the line number on malformed input (unterminated tag,
// comment or string, an unexpected character, unbalanced brackets inside a tag).
std::vector<Token> tokenize(std::string_view source);

// "end of print statement", "'name'", "'+'": how an error message names a token.
std::string describe_token(const Token& token);

}  // namespace locus::jinja
