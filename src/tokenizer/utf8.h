// UTF-8 decoding and the few Unicode character properties the tokenizer needs. Every property
// comes from utf8proc, so no character tables are maintained in locus. Functions that take a
// std::string_view assume well-formed UTF-8 unless their name says otherwise: the Tokenizer makes
// its input well-formed once, at its boundary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace locus::tokenizer::utf8 {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Byte length of the sequence that starts with `lead` (well-formed text only).
inline size_t sequence_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// Decodes the character at s[i] and advances i past it (well-formed text only).
inline char32_t decode(std::string_view s, size_t& i) {
  auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  auto cont = [&](size_t k) {
    return static_cast<char32_t>(static_cast<unsigned char>(s[i + k]) & 0x3F);
  };
  char32_t c;
  if (b0 < 0xE0) {
    c = (static_cast<char32_t>(b0 & 0x1F) << 6) | cont(1);
    i += 2;
  } else if (b0 < 0xF0) {
    c = (static_cast<char32_t>(b0 & 0x0F) << 12) | (cont(1) << 6) | cont(2);
    i += 3;
  } else {
    c = (static_cast<char32_t>(b0 & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
    i += 4;
  }
  return c;
}

// The first character of a non-empty well-formed string.
inline char32_t first_char(std::string_view s) {
  size_t i = 0;
  return decode(s, i);
}

// Start of the last character of a non-empty well-formed string.
inline size_t last_char_start(std::string_view s) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80)
    --i;
  return i;
}

void append(std::string& out, char32_t c);
std::string encode(char32_t c);

// True when `s` is well-formed UTF-8 (no surrogates, no overlong forms, nothing above U+10FFFF).
bool is_valid(std::string_view s);

// `s` with every maximal ill-formed subsequence replaced by one U+FFFD: the Unicode "substitution
// of maximal subparts" practice that Rust's String::from_utf8_lossy, Python's errors="replace"
// and the WHATWG TextDecoder all follow, so ids for invalid input agree with theirs.
std::string to_valid(std::string_view s);

// Unicode White_Space, as Rust's char::is_whitespace: Zs, Zl, Zp plus U+0009..U+000D and U+0085.
bool is_whitespace(char32_t c);

// A word character as the Rust regex crate's \w sees it (Alphabetic, marks, decimal digits,
// connector punctuation, joiners), used by added tokens' single_word. Alphabetic is approximated
// by L + Nl + M since utf8proc has no Alphabetic property; the difference (Other_Alphabetic
// symbols such as circled letters) does not occur next to added tokens in practice.
bool is_word_char(char32_t c);

// Rust's char::is_numeric: general categories Nd, Nl, No.
bool is_numeric(char32_t c);

// General category M (Mn, Mc, Me), as unicode-normalization's is_combining_mark.
bool is_combining_mark(char32_t c);

// Appends the full lowercase mapping of `c`, as Rust's char::to_lowercase (no context rules: a
// final sigma stays σ, which is what HF tokenizers' Lowercase normalizer does).
void append_lowercase(std::string& out, char32_t c);

// Byte offset where the run of trailing whitespace of `s` begins (s.size() when there is none).
size_t trailing_whitespace_start(std::string_view s);
// Byte offset where the run of leading whitespace of `s` ends (0 when there is none).
size_t leading_whitespace_end(std::string_view s);

}  // namespace locus::tokenizer::utf8
