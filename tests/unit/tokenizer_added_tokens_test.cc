// Added tokens: exact matching before pre-tokenization (leftmost-longest), lstrip / rstrip /
// single_word / normalized / special as in HF's AddedVocabulary, skip_special_tokens, and the
// BOS/EOS template transformers builds from tokenizer_config.json.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace locus {
namespace {

using nlohmann::json;
using Ids = std::vector<TokenId>;

// A character-level model (every printable ASCII character, no merges) with a Fuse decoder, so
// ids are easy to read: id = character code; added tokens get ids from 1000.
json char_tokenizer(json added, json normalizer = nullptr) {
  json vocab = json::object();
  for (int c = 32; c < 127; ++c)
    vocab[std::string(1, static_cast<char>(c))] = c;
  return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}},
          {"normalizer", normalizer},
          {"decoder", {{"type", "Fuse"}}},
          {"added_tokens", added}};
}

json token(int id, const std::string& content, json flags = json::object()) {
  json out = {{"id", id},        {"content", content},  {"special", false},    {"lstrip", false},
              {"rstrip", false}, {"normalized", false}, {"single_word", false}};
  for (auto& [key, value] : flags.items())
    out[key] = value;
  return out;
}

Tokenizer load(const json& tokenizer_json, const json& config = nullptr) {
  auto tokenizer =
      Tokenizer::from_json(tokenizer_json.dump(), config.is_null() ? "" : config.dump());
  EXPECT_TRUE(tokenizer.has_value()) << tokenizer.error().message();
  return std::move(*tokenizer);
}

Ids encode(const Tokenizer& tokenizer, std::string_view text, bool special = false) {
  auto ids = tokenizer.encode(text, special);
  EXPECT_TRUE(ids.has_value()) << ids.error().message();
  return ids.value_or(Ids{});
}

Ids chars(std::string_view text) {
  return Ids(text.begin(), text.end());
}

Ids concat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const auto& part : parts)
    out.insert(out.end(), part.begin(), part.end());
  return out;
}

TEST(AddedTokens, MatchedExactlyAndLeftmostLongest) {
  Tokenizer tokenizer =
      load(char_tokenizer({token(1000, "<a>"), token(1001, "<a><b>"), token(1002, "b>")}));
  EXPECT_EQ(encode(tokenizer, "x<a><b>y"), concat({chars("x"), {1001}, chars("y")}));
  EXPECT_EQ(encode(tokenizer, "<a><c>"), concat({{1000}, chars("<c>")}));
  EXPECT_EQ(encode(tokenizer, "<a<a>b>"), concat({chars("<a"), {1000}, {1002}}));
}

TEST(AddedTokens, RstripAndLstripSwallowWhitespace) {
  Tokenizer right = load(char_tokenizer({token(1000, "<mask>", {{"rstrip", true}})}));
  EXPECT_EQ(encode(right, "a <mask>  b"), concat({chars("a "), {1000}, chars("b")}));
  Tokenizer left = load(char_tokenizer({token(1000, "<mask>", {{"lstrip", true}})}));
  EXPECT_EQ(encode(left, "a \t<mask> b"), concat({chars("a"), {1000}, chars(" b")}));
  // Spaces a previous token already took are not taken again.
  Tokenizer both = load(char_tokenizer({token(1000, "<m>", {{"lstrip", true}, {"rstrip", true}})}));
  EXPECT_EQ(encode(both, "x <m>  <m> y"), concat({chars("x"), {1000, 1000}, chars("y")}));
}

TEST(AddedTokens, SingleWordOnlyOutsideWords) {
  Tokenizer tokenizer = load(char_tokenizer({token(1000, "ing", {{"single_word", true}})}));
  EXPECT_EQ(encode(tokenizer, "sing ing"), concat({chars("sing "), {1000}}));
  EXPECT_EQ(encode(tokenizer, "ing!"), concat({{1000}, chars("!")}));
  EXPECT_EQ(encode(tokenizer, "ings"), chars("ings"));
}

TEST(AddedTokens, NormalizedTokensMatchTheNormalizedText) {
  json lowercase = {{"type", "Lowercase"}};
  Tokenizer tokenizer = load(char_tokenizer(
      {token(1000, "HELLO", {{"normalized", true}}), token(1001, "ABC", {{"normalized", false}})},
      lowercase));
  // "HELLO" is matched as "hello" after lowercasing; "ABC" only as written, before it.
  EXPECT_EQ(encode(tokenizer, "Hello ABC abc"),
            concat({{1000}, chars(" "), {1001}, chars(" abc")}));
}

TEST(AddedTokens, SpecialTokensAndSkipping) {
  Tokenizer tokenizer = load(char_tokenizer(
      {token(1000, "<s>", {{"special", true}}), token(1001, "<think>", {{"special", false}})}));
  Ids ids = encode(tokenizer, "<s>hi<think>");
  EXPECT_EQ(ids, concat({{1000}, chars("hi"), {1001}}));
  EXPECT_EQ(tokenizer.decode(ids, false), "<s>hi<think>");
  EXPECT_EQ(tokenizer.decode(ids, true), "hi<think>");  // only special ones are skipped
  EXPECT_TRUE(tokenizer.is_special(1000));
  EXPECT_FALSE(tokenizer.is_special(1001));
  EXPECT_EQ(tokenizer.token_to_id("<think>"), 1001);
  EXPECT_EQ(tokenizer.id_to_token(1000), "<s>");
  EXPECT_EQ(tokenizer.id_limit(), 1002u);
  EXPECT_EQ(tokenizer.vocab_size(), 95u + 2u);
  // Ids outside the vocabulary are skipped by decode, as in HF.
  EXPECT_EQ(tokenizer.decode(Ids{'a', 5000, -1, 'b'}, false), "ab");
}

TEST(AddedTokens, SplitSpecialTokensEncodesThemAsText) {
  json added = {token(1000, "<s>", {{"special", true}})};
  Tokenizer tokenizer = load(char_tokenizer(added), json{{"split_special_tokens", true}});
  EXPECT_EQ(encode(tokenizer, "<s>"), chars("<s>"));
}

TEST(AddedTokens, ConfigTemplateAddsBosAndEos) {
  json added = {token(1000, "<s>", {{"special", true}}), token(1001, "</s>", {{"special", true}})};
  Tokenizer bos_only =
      load(char_tokenizer(added), json{{"add_bos_token", true}, {"bos_token", "<s>"}});
  EXPECT_EQ(encode(bos_only, "hi", true), concat({{1000}, chars("hi")}));
  EXPECT_EQ(encode(bos_only, "hi", false), chars("hi"));
  EXPECT_EQ(bos_only.bos_token_id(), 1000);
  Tokenizer both = load(char_tokenizer(added),
                        json{{"add_bos_token", true},
                             {"add_eos_token", true},
                             {"bos_token", {{"__type", "AddedToken"}, {"content", "<s>"}}},
                             {"eos_token", "</s>"}});
  EXPECT_EQ(encode(both, "hi", true), concat({{1000}, chars("hi"), {1001}}));
  // Without the keys the tokenizer.json post-processor (none here) decides.
  Tokenizer plain = load(char_tokenizer(added), json{{"bos_token", "<s>"}});
  EXPECT_EQ(encode(plain, "hi", true), chars("hi"));
}

TEST(AddedTokens, TemplateProcessingFromTokenizerJson) {
  json tokenizer_json = char_tokenizer({token(1000, "<s>", {{"special", true}})});
  tokenizer_json["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"pair", json::array()},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1000}}, {"tokens", {"<s>"}}}}}}};
  Tokenizer tokenizer = load(tokenizer_json);
  EXPECT_EQ(encode(tokenizer, "a", true), (Ids{1000, 'a'}));
  EXPECT_EQ(encode(tokenizer, "a", false), (Ids{'a'}));
}

TEST(AddedTokens, ConfigCanAddTokens) {
  json config = {{"added_tokens_decoder", {{"1005", {{"content", "<extra>"}, {"special", true}}}}},
                 {"additional_special_tokens", {"<extra>"}}};
  Tokenizer tokenizer = load(char_tokenizer(json::array()), config);
  EXPECT_EQ(encode(tokenizer, "a<extra>"), (Ids{'a', 1005}));
  EXPECT_TRUE(tokenizer.is_special(1005));
}

TEST(AddedTokens, InvalidUtf8IsRepairedBeforeMatching) {
  Tokenizer tokenizer = load(char_tokenizer({token(1000, "<s>")}));
  // 0xFF becomes U+FFFD, which this vocabulary lacks (no unk token): it vanishes.
  EXPECT_EQ(encode(tokenizer, "a\xFF<s>"), concat({chars("a"), {1000}}));
}

}  // namespace
}  // namespace locus
