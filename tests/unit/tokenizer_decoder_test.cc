// Decoders of tokenizer.json, on the cases of HF tokenizers' decoder tests, including HF's
// quirks: ByteFallback replaces every byte of an ill-formed run, and Metaspace drops every "▁"
// of the first token.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/decoders.h"

namespace locus::tokenizer {
namespace {

using Tokens = std::vector<std::string>;

Tokens decode_chain(const Json& config, Tokens tokens) {
  auto decoder = parse_decoder(config, "decoder");
  EXPECT_TRUE(decoder.has_value()) << decoder.error().message();
  (*decoder)->decode_chain(tokens);
  return tokens;
}

const std::string kM = "\xE2\x96\x81";  // ▁
const std::string kFFFD = "\xEF\xBF\xBD";

TEST(Decoders, ByteLevel) {
  EXPECT_EQ(decode_chain({{"type", "ByteLevel"}}, {"Hello", "\xC4\xA0my",
                                                   "\xC4\xA0"
                                                   "friend",
                                                   "\xC4\x8A"}),
            (Tokens{"Hello my friend\n"}));
  // é split over two byte tokens, and an added token outside the byte map kept as its UTF-8.
  EXPECT_EQ(decode_chain({{"type", "ByteLevel"}}, {"\xC3\x83", "\xC2\xA9", "<\xEF\xBD\x9C>"}),
            (Tokens{"\xC3\xA9<\xEF\xBD\x9C>"}));
  // A lone lead byte becomes U+FFFD.
  EXPECT_EQ(decode_chain({{"type", "ByteLevel"}}, {"a", "\xC3\xA4"}), (Tokens{"a" + kFFFD}));
}

TEST(Decoders, ByteFallback) {
  Json config = {{"type", "ByteFallback"}};
  EXPECT_EQ(decode_chain(config, {"Hey", "friend!"}), (Tokens{"Hey", "friend!"}));
  EXPECT_EQ(decode_chain(config, {"<0xE5>", "<0x8f>", "<0xab>", "a"}),
            (Tokens{"\xE5\x8F\xAB", "a"}));
  // Ill-formed run: one U+FFFD per byte (not per maximal subpart), as HF does.
  EXPECT_EQ(decode_chain(config, {"<0xE5>", "<0x8f>", "a"}), (Tokens{kFFFD, kFFFD, "a"}));
  EXPECT_EQ(decode_chain(config, {"<0x61>", "<0x80>"}), (Tokens{kFFFD, kFFFD}));
  EXPECT_EQ(decode_chain(config, {"<0xZZ>", "<0x41"}), (Tokens{"<0xZZ>", "<0x41"}));
  auto decoder = parse_decoder(config, "decoder");
  EXPECT_FALSE((*decoder)->can_cut_after("<0xE5>"));
  EXPECT_TRUE((*decoder)->can_cut_after("a"));
}

TEST(Decoders, MetaspaceDropsEveryReplacementOfTheFirstToken) {
  Json always = {{"type", "Metaspace"}, {"replacement", kM}, {"prepend_scheme", "always"}};
  EXPECT_EQ(decode_chain(always, {kM + "Hey", kM + "friend!"}), (Tokens{"Hey", " friend!"}));
  // HF drops all "▁" of token 0, not only a leading one.
  EXPECT_EQ(decode_chain(always, {kM + kM + "a" + kM, kM + "b"}), (Tokens{"a", " b"}));
  Json never = {{"type", "Metaspace"}, {"replacement", kM}, {"prepend_scheme", "never"}};
  EXPECT_EQ(decode_chain(never, {kM + "Hey", kM + "friend!"}), (Tokens{" Hey", " friend!"}));
}

TEST(Decoders, FuseStripReplace) {
  EXPECT_EQ(decode_chain({{"type", "Fuse"}}, {"Hey", " friend", "!"}), (Tokens{"Hey friend!"}));
  Json strip = {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 1}};
  EXPECT_EQ(decode_chain(strip, {"  Hey  ", " x", "y "}), (Tokens{" Hey ", "x", "y"}));
  Json strip_char = {{"type", "Strip"}, {"content", "H"}, {"start", 2}, {"stop", 0}};
  EXPECT_EQ(decode_chain(strip_char, {"HHHey"}), (Tokens{"Hey"}));
  Json replace = {{"type", "Replace"}, {"pattern", {{"String", kM}}}, {"content", " "}};
  EXPECT_EQ(decode_chain(replace, {kM + "Hey", "friend" + kM + kM}), (Tokens{" Hey", "friend  "}));
  Json regex = {{"type", "Replace"}, {"pattern", {{"Regex", "a+"}}}, {"content", "A"}};
  EXPECT_EQ(decode_chain(regex, {"baaab", "c"}), (Tokens{"bAb", "c"}));
}

TEST(Decoders, SentencePieceSequence) {
  // Llama 2 / Mistral: Replace ▁ → space, ByteFallback, Fuse, Strip one leading space.
  Json config = {{"type", "Sequence"},
                 {"decoders",
                  {{{"type", "Replace"}, {"pattern", {{"String", kM}}}, {"content", " "}},
                   {{"type", "ByteFallback"}},
                   {{"type", "Fuse"}},
                   {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  EXPECT_EQ(decode_chain(config, {kM + "Hello", kM + "w", "orld", "<0x0A>", kM + kM + "x"}),
            (Tokens{"Hello world\n  x"}));
  auto decoder = parse_decoder(config, "decoder");
  EXPECT_FALSE((*decoder)->can_cut_after("<0x0A>"));
}

TEST(Decoders, UnknownTypeIsNamed) {
  auto result = parse_decoder(
      Json{{"type", "Sequence"}, {"decoders", {{{"type", "Fuse"}}, {{"type", "CTC"}}}}}, "decoder");
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(result.error().message().find("decoder.decoders[1]: decoder type 'CTC'"),
            std::string::npos)
      << result.error().message();
  auto bad_strip = parse_decoder(Json{{"type", "Strip"}, {"content", "ab"}}, "decoder");
  ASSERT_FALSE(bad_strip.has_value());
  EXPECT_NE(bad_strip.error().message().find("decoder.content"), std::string::npos);
}

}  // namespace
}  // namespace locus::tokenizer
