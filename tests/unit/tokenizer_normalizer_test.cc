// Normalizers of tokenizer.json, each checked on the cases HF tokenizers' own tests and docs
// use, plus the "start moved" signal Metaspace's prepend_scheme "first" relies on.
#include <gtest/gtest.h>

#include <string>

#include "tokenizer/normalizers.h"

namespace locus::tokenizer {
namespace {

struct Result {
  std::string text;
  bool start_moved = false;
};

Result normalize(const Json& config, std::string text) {
  auto normalizer = parse_normalizer(config, "normalizer");
  EXPECT_TRUE(normalizer.has_value()) << normalizer.error().message();
  Result result;
  EXPECT_TRUE((*normalizer)->normalize(text, result.start_moved).is_ok());
  result.text = std::move(text);
  return result;
}

TEST(Normalizers, UnicodeForms) {
  // "é" decomposed, "ﬁ" ligature, "Å" as the Angstrom sign.
  const std::string text = "e\xCC\x81 \xEF\xAC\x81 \xE2\x84\xAB";
  EXPECT_EQ(normalize({{"type", "NFC"}}, text).text, "\xC3\xA9 \xEF\xAC\x81 \xC3\x85");
  EXPECT_EQ(normalize({{"type", "NFD"}}, text).text, "e\xCC\x81 \xEF\xAC\x81 A\xCC\x8A");
  EXPECT_EQ(normalize({{"type", "NFKC"}}, text).text, "\xC3\xA9 fi \xC3\x85");
  EXPECT_EQ(normalize({{"type", "NFKD"}}, text).text, "e\xCC\x81 fi A\xCC\x8A");
  EXPECT_EQ(normalize({{"type", "NFKC"}}, "\xEF\xBC\xA1\xEF\xBC\x91").text, "A1");  // fullwidth
}

TEST(Normalizers, Lowercase) {
  EXPECT_EQ(normalize({{"type", "Lowercase"}}, "HeLLo ÀÉÎ ΣΑΣ İ").text,
            "hello àéî σασ i\xCC\x87");  // per character, as Rust's char::to_lowercase
}

TEST(Normalizers, StripAccentsRemovesMarks) {
  auto result = normalize({{"type", "StripAccents"}},
                          "\xCC\x81"
                          "e\xCC\x81t\xC3\xA9");
  EXPECT_EQ(result.text, "et\xC3\xA9");  // only separate marks go (NFD first to strip all)
  EXPECT_TRUE(result.start_moved);
}

TEST(Normalizers, PrependOnlyToNonEmptyText) {
  Json prepend = {{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}};
  EXPECT_EQ(normalize(prepend, "hi").text, "\xE2\x96\x81hi");
  EXPECT_EQ(normalize(prepend, "").text, "");
  EXPECT_FALSE(normalize(prepend, "hi").start_moved);
}

TEST(Normalizers, StripLeftRight) {
  auto both = normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}},
                        " \t\xE3\x80\x80 hi \n");
  EXPECT_EQ(both.text, "hi");
  EXPECT_TRUE(both.start_moved);
  auto right =
      normalize({{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}}, "  hi  ");
  EXPECT_EQ(right.text, "  hi");
  EXPECT_FALSE(right.start_moved);
}

TEST(Normalizers, ReplaceStringAndRegex) {
  Json spaces = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}};
  EXPECT_EQ(normalize(spaces, " a  b ").text,
            "\xE2\x96\x81"
            "a\xE2\x96\x81\xE2\x96\x81"
            "b\xE2\x96\x81");
  Json runs = {{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}};
  EXPECT_EQ(normalize(runs, "a \t\n b").text, "a b");
  Json drop = {{"type", "Replace"}, {"pattern", {{"Regex", "^x"}}}, {"content", ""}};
  auto dropped = normalize(drop, "xy");
  EXPECT_EQ(dropped.text, "y");
  EXPECT_TRUE(dropped.start_moved);
}

TEST(Normalizers, SequenceAppliesInOrder) {
  // Llama 2's legacy normalizer.
  Json llama = {
      {"type", "Sequence"},
      {"normalizers",
       {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
        {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}}}};
  EXPECT_EQ(normalize(llama, "Hey friend").text,
            "\xE2\x96\x81Hey\xE2\x96\x81"
            "friend");
  Json empty = {{"type", "Sequence"}, {"normalizers", Json::array()}};
  EXPECT_EQ(normalize(empty, "same").text, "same");
}

TEST(Normalizers, UnknownTypeIsNamed) {
  auto result = parse_normalizer(Json{{"type", "BertNormalizer"}}, "normalizer");
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(result.error().message().find("'BertNormalizer'"), std::string::npos);
  auto nested = parse_normalizer(
      Json{{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Precompiled"}}}}},
      "normalizer");
  ASSERT_FALSE(nested.has_value());
  EXPECT_NE(nested.error().message().find("normalizer.normalizers[1]"), std::string::npos)
      << nested.error().message();
}

}  // namespace
}  // namespace locus::tokenizer
