// The Unicode layer under the tokenizer: UTF-8 repair by maximal subparts, the Oniguruma →
// PCRE2 pattern rewrites and onig's match iteration, and the normalizers' fast path (copying
// "inert" characters instead of running utf8proc), checked exhaustively against utf8proc.
#include <gtest/gtest.h>

#include <utf8proc.h>

#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/normalizers.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace locus::tokenizer {
namespace {

const std::string kFFFD = "\xEF\xBF\xBD";

TEST(Utf8, ValidityFollowsTheStandard) {
  EXPECT_TRUE(utf8::is_valid(""));
  EXPECT_TRUE(utf8::is_valid("plain ascii, long enough to take the 8-byte path"));
  EXPECT_TRUE(utf8::is_valid("\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80"));
  EXPECT_TRUE(utf8::is_valid("\xF4\x8F\xBF\xBF"));   // U+10FFFF
  EXPECT_FALSE(utf8::is_valid("\xC0\xAF"));          // overlong
  EXPECT_FALSE(utf8::is_valid("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(utf8::is_valid("\xF4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(utf8::is_valid("\xE4\xB8"));          // truncated
  EXPECT_FALSE(utf8::is_valid("abc\x80"));
}

TEST(Utf8, RepairReplacesMaximalSubparts) {
  // The examples of Unicode §3.9 (U+FFFD substitution of maximal subparts).
  EXPECT_EQ(utf8::to_valid("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + kFFFD + kFFFD + kFFFD + "b" + kFFFD + "c" + kFFFD + kFFFD + "d");
  EXPECT_EQ(utf8::to_valid("\xED\xA0\x80"), kFFFD + kFFFD + kFFFD);
  EXPECT_EQ(utf8::to_valid("\xE4\xB8"), kFFFD);
  EXPECT_EQ(utf8::to_valid("\xE4\xB8\x41"), kFFFD + "A");
  EXPECT_EQ(utf8::to_valid("\xF0\x9F\x98"), kFFFD);
  EXPECT_EQ(utf8::to_valid("\xC0\xAF"), kFFFD + kFFFD);
  EXPECT_EQ(utf8::to_valid("ok \xC3\xA9"), "ok \xC3\xA9");
}

TEST(Utf8, CharacterClasses) {
  EXPECT_TRUE(utf8::is_whitespace(U'\u3000'));
  EXPECT_TRUE(utf8::is_whitespace(U'\u0085'));
  EXPECT_TRUE(utf8::is_whitespace(U'\u2028'));
  EXPECT_FALSE(utf8::is_whitespace(U'\u180E'));  // Cf since Unicode 6.3
  EXPECT_FALSE(utf8::is_whitespace(U'\u200B'));
  EXPECT_TRUE(utf8::is_numeric(U'\u0663'));  // Arabic-Indic three (Nd)
  EXPECT_TRUE(utf8::is_numeric(U'\u00BD'));  // ½ (No)
  EXPECT_TRUE(utf8::is_numeric(U'\u216B'));  // Ⅻ (Nl)
  EXPECT_FALSE(utf8::is_numeric(U'x'));
  std::string lower;
  for (char32_t c : {U'A', U'\u0130', U'\u03A3', U'\u00C9'})
    utf8::append_lowercase(lower, c);
  EXPECT_EQ(lower, "ai\xCC\x87\xCF\x83\xC3\xA9");  // İ → i + U+0307, Σ → σ (no final-sigma rule)
}

std::vector<std::pair<size_t, size_t>> matches(const Regex& regex, std::string_view text) {
  std::vector<std::pair<size_t, size_t>> out;
  EXPECT_TRUE(
      regex.for_each_match(text, [&](size_t s, size_t e) { out.emplace_back(s, e); }).is_ok());
  return out;
}

TEST(Regex, ShorthandsTakeOnigurumasUnicodeMeaning) {
  auto space = Regex::compile("\\s");
  ASSERT_TRUE(space.has_value());
  EXPECT_TRUE(matches(*space, "\xE1\xA0\x8E").empty());   // U+180E is not \s in Oniguruma
  EXPECT_EQ(matches(*space, "\xE3\x80\x80").size(), 1u);  // U+3000 is
  auto word = Regex::compile("\\w+");
  ASSERT_TRUE(word.has_value());
  // Oniguruma's \w includes marks and excludes No (²).
  EXPECT_EQ(matches(*word, "e\xCC\x81x\xC2\xB2"), (std::vector<std::pair<size_t, size_t>>{{0, 4}}));
  auto hex = Regex::compile("\\h+");
  ASSERT_TRUE(hex.has_value());
  EXPECT_EQ(matches(*hex, "xx 0aF9 "), (std::vector<std::pair<size_t, size_t>>{{3, 7}}));
  auto in_class = Regex::compile("[^\\s\\p{L}]+");
  ASSERT_TRUE(in_class.has_value());
  EXPECT_EQ(in_class->translated_pattern(), "[^\\t\\n\\x{0B}\\f\\r\\x{85}\\p{Z}\\p{L}]+");
}

TEST(Regex, CaseInsensitiveGroupsFoldLikeOniguruma) {
  auto contractions = Regex::compile("(?i:'s|'t)");
  ASSERT_TRUE(contractions.has_value());
  EXPECT_EQ(matches(*contractions, "IT'S").size(), 1u);
  // Unicode simple case folding: ſ (U+017F) folds to s, as in Oniguruma and HF tokenizers.
  EXPECT_EQ(matches(*contractions, "'\xC5\xBF").size(), 1u);
}

TEST(Regex, EmptyMatchesFollowOnigIteration) {
  // find_iter: an empty match right after the previous match is skipped.
  auto star = Regex::compile("a*");
  ASSERT_TRUE(star.has_value());
  EXPECT_EQ(matches(*star, "baab"),
            (std::vector<std::pair<size_t, size_t>>{{0, 0}, {1, 3}, {4, 4}}));
  auto empty = Regex::literal("");
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(matches(*empty, "\xC3\xA9z").size(), 3u);  // before é, before z, at the end
}

TEST(Regex, LongRunsDoNotExhaustTheJitStack) {
  auto pattern = Regex::compile("\\s+(?!\\S)|\\s+|\\p{L}+");
  ASSERT_TRUE(pattern.has_value());
  std::string text(1 << 20, ' ');
  text += "word";
  EXPECT_EQ(matches(*pattern, text).size(), 3u);
}

TEST(Regex, UnsupportedSyntaxIsNamed) {
  auto nested = Regex::compile("[a-z&&[^aeiou]]");
  ASSERT_FALSE(nested.has_value());
  EXPECT_NE(nested.error().message().find("&&"), std::string::npos) << nested.error().message();
  auto broken = Regex::compile("(unclosed");
  ASSERT_FALSE(broken.has_value());
  EXPECT_NE(broken.error().message().find("(unclosed"), std::string::npos);
}

std::string utf8proc_reference(const std::string& text, int options) {
  utf8proc_uint8_t* result = nullptr;
  auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                        static_cast<utf8proc_ssize_t>(text.size()), &result,
                        static_cast<utf8proc_option_t>(options));
  EXPECT_GE(n, 0);
  std::string out(reinterpret_cast<char*>(result), static_cast<size_t>(n));
  std::free(result);
  return out;
}

std::unique_ptr<Normalizer> make(const std::string& type) {
  auto normalizer = parse_normalizer(Json{{"type", type}}, "normalizer");
  EXPECT_TRUE(normalizer.has_value());
  return std::move(*normalizer);
}

std::string run(const Normalizer& normalizer, std::string text) {
  bool moved = false;
  EXPECT_TRUE(normalizer.normalize(text, moved).is_ok());
  return text;
}

struct Form {
  const char* name;
  int options;
};
const Form kForms[] = {{"NFC", UTF8PROC_STABLE | UTF8PROC_COMPOSE},
                       {"NFD", UTF8PROC_STABLE | UTF8PROC_DECOMPOSE},
                       {"NFKC", UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT},
                       {"NFKD", UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT}};

// Every code point, alone and after a base letter, and before every canonical combining partner:
// the fast path must equal utf8proc on the whole string.
TEST(UnicodeNormalizers, FastPathEqualsUtf8procOnEveryCodePoint) {
  for (const Form& form : kForms) {
    auto normalizer = make(form.name);
    size_t checked = 0;
    for (char32_t c = 0x80; c < 0x110000; ++c) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      // Plane 4-13 are unassigned; sample them sparsely.
      if (c >= 0x40000 && c < 0xE0000 && (c & 0xFFF) != 0) continue;
      std::string text = "a" + utf8::encode(c) + "\xCC\x81" + "b" + utf8::encode(c);
      ASSERT_EQ(run(*normalizer, text), utf8proc_reference(text, form.options))
          << form.name << " U+" << std::hex << static_cast<uint32_t>(c);
      ++checked;
    }
    EXPECT_GT(checked, 200000u);
  }
}

// Every composition pair (a character's canonical decomposition, split into its first character
// and the rest) must survive being cut anywhere by the fast path.
TEST(UnicodeNormalizers, FastPathKeepsEveryCompositionPair) {
  auto nfc = make("NFC");
  size_t pairs = 0;
  for (char32_t c = 0x80; c < 0x30000; ++c) {
    utf8proc_int32_t buffer[8];
    int boundclass = 0;
    auto n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), buffer, 8,
                                     UTF8PROC_DECOMPOSE, &boundclass);
    if (n < 2 || n > 8) continue;
    std::string text = "x ";
    for (int i = 0; i < n; ++i)
      text += utf8::encode(static_cast<char32_t>(buffer[i]));
    text += " y";
    ASSERT_EQ(run(*nfc, text), utf8proc_reference(text, kForms[0].options))
        << "U+" << std::hex << static_cast<uint32_t>(c);
    ++pairs;
  }
  EXPECT_GT(pairs, 1000u);
  // Hangul: L + V + T composes algorithmically.
  EXPECT_EQ(run(*nfc, "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");
  EXPECT_EQ(run(*nfc, "\xEA\xB0\x80\xE1\x86\xA8"), "\xEA\xB0\x81");
}

TEST(UnicodeNormalizers, RandomMixturesEqualUtf8proc) {
  const std::vector<std::string> pieces = {"a",
                                           "e",
                                           " ",
                                           "\xCC\x81",
                                           "\xCC\x88",
                                           "\xCC\xA3",
                                           "\xC3\xA9",
                                           "\xE4\xB8\xAD",
                                           "\xE3\x81\x8B",
                                           "\xE3\x82\x99",
                                           "\xE1\x84\x80",
                                           "\xE1\x85\xA1",
                                           "\xE1\x86\xA8",
                                           "\xEA\xB0\x80",
                                           "\xEF\xAC\x81",
                                           "\xE2\x84\xAB",
                                           "\xE0\xAD\x87",
                                           "\xE0\xAC\xBE",
                                           "\xF0\x9F\x98\x80",
                                           "\xEF\xBC\xA1",
                                           "\xD9\x8E"};
  std::mt19937 rng(7);
  for (const Form& form : kForms) {
    auto normalizer = make(form.name);
    for (int trial = 0; trial < 3000; ++trial) {
      std::string text;
      int length = 1 + static_cast<int>(rng() % 12);
      for (int i = 0; i < length; ++i)
        text += pieces[rng() % pieces.size()];
      ASSERT_EQ(run(*normalizer, text), utf8proc_reference(text, form.options))
          << form.name << " " << text;
    }
  }
}

}  // namespace
}  // namespace locus::tokenizer
