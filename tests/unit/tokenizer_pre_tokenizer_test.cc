// Pre-tokenizers of tokenizer.json: Split with every behavior (with and without invert),
// ByteLevel, Digits, Metaspace and Sequence, on the examples of HF tokenizers' own tests.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/pre_tokenizers.h"

namespace locus::tokenizer {
namespace {

using Pieces = std::vector<std::string>;

// Pieces as HF would show them: byte-level pieces mapped to their characters.
Pieces pre_tokenize(const Json& config, std::string_view text, bool at_original_start = true) {
  auto pre_tokenizer = parse_pre_tokenizer(config, "pre_tokenizer");
  EXPECT_TRUE(pre_tokenizer.has_value()) << pre_tokenizer.error().message();
  Pieces pieces;
  auto status =
      (*pre_tokenizer)
          ->pre_tokenize(PreToken{text, at_original_start, false}, [&](const PreToken& piece) {
            EXPECT_FALSE(piece.text.empty());
            std::string shown;
            if (piece.byte_level) {
              append_byte_level_chars(shown, piece.text);
            } else {
              shown = std::string(piece.text);
            }
            pieces.push_back(shown);
          });
  EXPECT_TRUE(status.is_ok()) << status.message();
  return pieces;
}

Json split(const std::string& regex, const std::string& behavior, bool invert = false) {
  return {{"type", "Split"},
          {"pattern", {{"Regex", regex}}},
          {"behavior", behavior},
          {"invert", invert}};
}

TEST(PreTokenizers, SplitBehaviors) {
  // HF's pre_tokenizers/split.rs tests: "How are you doing?" split on whitespace.
  const std::string text = "How are you doing?";
  EXPECT_EQ(pre_tokenize(split("\\s+", "Removed"), text), (Pieces{"How", "are", "you", "doing?"}));
  EXPECT_EQ(pre_tokenize(split("\\s+", "Isolated"), text),
            (Pieces{"How", " ", "are", " ", "you", " ", "doing?"}));
  EXPECT_EQ(pre_tokenize(split("\\s+", "MergedWithPrevious"), text),
            (Pieces{"How ", "are ", "you ", "doing?"}));
  EXPECT_EQ(pre_tokenize(split("\\s+", "MergedWithNext"), text),
            (Pieces{"How", " are", " you", " doing?"}));
  EXPECT_EQ(pre_tokenize(split("\\s+", "Contiguous"), "How  are"), (Pieces{"How", "  ", "are"}));
  // Contiguous joins neighbouring matches of a one-character pattern.
  EXPECT_EQ(pre_tokenize(split("-", "Contiguous"), "Hey--friend"), (Pieces{"Hey", "--", "friend"}));
  EXPECT_EQ(pre_tokenize(split("-", "Isolated"), "Hey--friend"),
            (Pieces{"Hey", "-", "-", "friend"}));
}

TEST(PreTokenizers, SplitInvert) {
  // invert: the pattern describes the pieces to keep.
  EXPECT_EQ(pre_tokenize(split("\\w+", "Removed", true), "Hey, friend!"),
            (Pieces{"Hey", "friend"}));
  EXPECT_EQ(pre_tokenize(split("\\w+", "Isolated", true), "Hey, friend!"),
            (Pieces{"Hey", ", ", "friend", "!"}));
  EXPECT_EQ(pre_tokenize(split("\\s", "MergedWithPrevious", true), "a b"), (Pieces{"a", " b"}));
}

TEST(PreTokenizers, SplitStringPattern) {
  Json config = {{"type", "Split"}, {"pattern", {{"String", "."}}}, {"behavior", "Removed"}};
  EXPECT_EQ(pre_tokenize(config, "a.b..c"), (Pieces{"a", "b", "c"}));  // "." is literal
}

TEST(PreTokenizers, ByteLevelWithGpt2Regex) {
  Json config = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  EXPECT_EQ(pre_tokenize(config, "Hello my friend, how is your day going?"),
            (Pieces{"\xC4\xA0Hello", "\xC4\xA0my",
                    "\xC4\xA0"
                    "friend",
                    ",", "\xC4\xA0how", "\xC4\xA0is", "\xC4\xA0your",
                    "\xC4\xA0"
                    "day",
                    "\xC4\xA0going", "?"}));
  // Whitespace runs keep their last space for the next word; newlines map to Ċ.
  Json plain = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  EXPECT_EQ(pre_tokenize(plain, "a   b\n"), (Pieces{"a", "\xC4\xA0\xC4\xA0",
                                                    "\xC4\xA0"
                                                    "b",
                                                    "\xC4\x8A"}));
  EXPECT_EQ(pre_tokenize(plain, "I'm"), (Pieces{"I", "'m"}));
}

TEST(PreTokenizers, ByteLevelWithoutRegexMapsBytes) {
  Json config = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  EXPECT_EQ(pre_tokenize(config, "a b\xC3\xA9"), (Pieces{"a\xC4\xA0"
                                                         "b\xC3\x83\xC2\xA9"}));
}

TEST(PreTokenizers, Digits) {
  Json individual = {{"type", "Digits"}, {"individual_digits", true}};
  EXPECT_EQ(pre_tokenize(individual, "Hey 123 friend!"),
            (Pieces{"Hey ", "1", "2", "3", " friend!"}));
  Json grouped = {{"type", "Digits"}, {"individual_digits", false}};
  EXPECT_EQ(pre_tokenize(grouped, "Hey 123 friend!"), (Pieces{"Hey ", "123", " friend!"}));
  // Rust's char::is_numeric: every N category, not only ASCII.
  EXPECT_EQ(pre_tokenize(grouped, "x\xD9\xA3\xC2\xBDy"), (Pieces{"x", "\xD9\xA3\xC2\xBD", "y"}));
}

const std::string kM = "\xE2\x96\x81";  // ▁

TEST(PreTokenizers, MetaspaceAlwaysSplits) {
  Json config = {
      {"type", "Metaspace"}, {"replacement", kM}, {"prepend_scheme", "always"}, {"split", true}};
  EXPECT_EQ(pre_tokenize(config, "Hey friend!"), (Pieces{kM + "Hey", kM + "friend!"}));
  EXPECT_EQ(pre_tokenize(config, "Hey   friend!"), (Pieces{kM + "Hey", kM, kM, kM + "friend!"}));
  // Prepended on every piece, including ones not at the start of the input.
  EXPECT_EQ(pre_tokenize(config, "how", /*at_original_start=*/false), (Pieces{kM + "how"}));
}

TEST(PreTokenizers, MetaspaceFirstOnlyAtTheStart) {
  Json config = {
      {"type", "Metaspace"}, {"replacement", kM}, {"prepend_scheme", "first"}, {"split", false}};
  EXPECT_EQ(pre_tokenize(config, "Hey my friend ", true),
            (Pieces{kM + "Hey" + kM + "my" + kM + "friend" + kM}));
  EXPECT_EQ(pre_tokenize(config, "how" + kM + "are you", false),
            (Pieces{"how" + kM + "are" + kM + "you"}));
  EXPECT_EQ(pre_tokenize(config, " Hey ", true),
            (Pieces{kM + "Hey" + kM}));  // already starts with ▁
  Json never = {{"type", "Metaspace"}, {"replacement", kM}, {"prepend_scheme", "never"}};
  EXPECT_EQ(pre_tokenize(never, "a b", true), (Pieces{"a", kM + "b"}));
}

TEST(PreTokenizers, MetaspaceLegacyAddPrefixSpace) {
  Json old_style = {{"type", "Metaspace"}, {"replacement", kM}, {"add_prefix_space", false}};
  EXPECT_EQ(pre_tokenize(old_style, "a b"), (Pieces{"a", kM + "b"}));
  auto contradiction = parse_pre_tokenizer(Json{{"type", "Metaspace"},
                                                {"replacement", kM},
                                                {"add_prefix_space", false},
                                                {"prepend_scheme", "always"}},
                                           "pre_tokenizer");
  EXPECT_FALSE(contradiction.has_value());
}

TEST(PreTokenizers, SequenceChainsSteps) {
  // Llama 3's layout: a Split by its regex, then ByteLevel without regex.
  Json config = {{"type", "Sequence"},
                 {"pretokenizers",
                  {split("\\p{N}{1,3}| ?\\p{L}+|\\s+", "Isolated"),
                   {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  EXPECT_EQ(pre_tokenize(config, "hi 12345"), (Pieces{"hi", "\xC4\xA0", "123", "45"}));
  // A step after ByteLevel sees the mapped characters (Ġ), as in HF.
  Json after = {{"type", "Sequence"},
                {"pretokenizers",
                 {{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}},
                  split("\xC4\xA0", "Removed")}}};
  EXPECT_EQ(pre_tokenize(after, "a b"), (Pieces{"a", "b"}));
}

TEST(PreTokenizers, UnknownTypeIsNamed) {
  auto result = parse_pre_tokenizer(
      Json{{"type", "Sequence"}, {"pretokenizers", {{{"type", "Whitespace"}}}}}, "pre_tokenizer");
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(result.error().message().find("pre_tokenizer.pretokenizers[0]"), std::string::npos);
  EXPECT_NE(result.error().message().find("'Whitespace'"), std::string::npos);
  auto behavior = parse_pre_tokenizer(split("x", "Sideways"), "pre_tokenizer");
  ASSERT_FALSE(behavior.has_value());
  EXPECT_NE(behavior.error().message().find("pre_tokenizer.behavior"), std::string::npos);
}

}  // namespace
}  // namespace locus::tokenizer
