// The BPE model on small hand-made vocabularies: merge order by rank, leftmost on ties, both
// merge formats, byte fallback, unknown tokens (fused or not), ignore_merges, subword affixes,
// the word cache, and the SentencePiece shortcut of cutting long input before "▁".
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace locus {
namespace {

using nlohmann::json;
using Ids = std::vector<TokenId>;

// A tokenizer.json with only a BPE model (no normalizer, pre-tokenizer or decoder).
json bpe(json vocab, json merges, json extra = json::object()) {
  json model = {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", std::move(merges)}};
  for (auto& [key, value] : extra.items())
    model[key] = value;
  return {{"model", model}, {"added_tokens", json::array()}};
}

Tokenizer load(const json& tokenizer_json) {
  auto tokenizer = Tokenizer::from_json(tokenizer_json.dump());
  EXPECT_TRUE(tokenizer.has_value()) << tokenizer.error().message();
  return std::move(*tokenizer);
}

Ids encode(const Tokenizer& tokenizer, std::string_view text) {
  auto ids = tokenizer.encode(text, false);
  EXPECT_TRUE(ids.has_value()) << ids.error().message();
  return ids.value_or(Ids{});
}

const json kAbc = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}, {"aa", 6}};

TEST(Bpe, LowestRankMergesFirst) {
  // b+c outranks a+b: "abc" → [a, bc] (no merge a+bc); the other order gives [ab, c].
  EXPECT_EQ(encode(load(bpe(kAbc, {"b c", "a b"})), "abc"), (Ids{0, 4}));
  EXPECT_EQ(encode(load(bpe(kAbc, {"a b", "b c"})), "abc"), (Ids{3, 2}));
  EXPECT_EQ(encode(load(bpe(kAbc, {"a b", "b c", "ab c"})), "abc"), (Ids{5}));
}

TEST(Bpe, TiesGoToTheLeftmostPair) {
  EXPECT_EQ(encode(load(bpe(kAbc, {"a a"})), "aaa"), (Ids{6, 0}));
  EXPECT_EQ(encode(load(bpe(kAbc, {"a a"})), "aaaa"), (Ids{6, 6}));
}

TEST(Bpe, PairMergeFormatAllowsSpacesInTokens) {
  json vocab = {{"a", 0}, {" ", 1}, {"b", 2}, {"a ", 3}, {"a b", 4}};
  EXPECT_EQ(
      encode(load(bpe(vocab, json::array({json::array({"a", " "}), json::array({"a ", "b"})}))),
             "a b"),
      (Ids{4}));
}

TEST(Bpe, ByteFallbackForUnknownCharacters) {
  json vocab = {{"<unk>", 0}, {"a", 1}, {"<0xC3>", 2}, {"<0xA9>", 3}};
  Tokenizer tokenizer =
      load(bpe(vocab, json::array(), {{"unk_token", "<unk>"}, {"byte_fallback", true}}));
  EXPECT_EQ(encode(tokenizer,
                   "a\xC3\xA9"
                   "a"),
            (Ids{1, 2, 3, 1}));
  // A character whose bytes are not all in the vocabulary falls back to <unk>.
  EXPECT_EQ(encode(tokenizer, "\xC3\xA8"), (Ids{0}));
}

TEST(Bpe, UnknownTokensFuseWhenAsked) {
  json vocab = {{"<unk>", 0}, {"a", 1}};
  EXPECT_EQ(encode(load(bpe(vocab, json::array(), {{"unk_token", "<unk>"}})), "xyaz"),
            (Ids{0, 0, 1, 0}));
  EXPECT_EQ(
      encode(load(bpe(vocab, json::array(), {{"unk_token", "<unk>"}, {"fuse_unk", true}})), "xyaz"),
      (Ids{0, 1, 0}));
  // Without an unk token unknown characters vanish, as in HF.
  EXPECT_EQ(encode(load(bpe(vocab, json::array())), "xay"), (Ids{1}));
}

TEST(Bpe, MissingUnkTokenIsAnEncodeError) {
  json vocab = {{"a", 0}};
  Tokenizer tokenizer = load(bpe(vocab, json::array(), {{"unk_token", "<unk>"}}));
  auto ids = tokenizer.encode("b", false);
  ASSERT_FALSE(ids.has_value());
  EXPECT_NE(ids.error().message().find("unk_token '<unk>'"), std::string::npos);
}

TEST(Bpe, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"abc", 4}};
  EXPECT_EQ(encode(load(bpe(vocab, {"a b"})), "abc"), (Ids{3, 2}));
  EXPECT_EQ(encode(load(bpe(vocab, {"a b"}, {{"ignore_merges", true}})), "abc"), (Ids{4}));
}

TEST(Bpe, SubwordPrefixAndSuffix) {
  json prefixed = {{"a", 0}, {"##b", 1}, {"##c", 2}, {"ab", 3}, {"abc", 4}};
  EXPECT_EQ(encode(load(bpe(prefixed, {"a ##b"}, {{"continuing_subword_prefix", "##"}})), "abc"),
            (Ids{3, 2}));
  json suffixed = {{"a", 0}, {"b</w>", 1}, {"ab</w>", 2}};
  EXPECT_EQ(encode(load(bpe(suffixed, {"a b</w>"}, {{"end_of_word_suffix", "</w>"}})), "ab"),
            (Ids{2}));
}

TEST(Bpe, CachedWordsGiveTheSameIds) {
  Tokenizer tokenizer = load(bpe(kAbc, {"a b", "b c", "ab c"}));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(encode(tokenizer, "abc"), (Ids{5}));
}

// Textbook BPE: repeatedly merge the lowest-rank adjacent pair, leftmost first.
Ids naive_bpe(const std::vector<std::string>& chars,
              const std::vector<std::pair<std::string, std::string>>& merges, const json& vocab) {
  std::vector<std::string> symbols = chars;
  while (true) {
    size_t best_rank = merges.size(), best_at = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      for (size_t r = 0; r < best_rank; ++r) {
        if (merges[r].first == symbols[i] && merges[r].second == symbols[i + 1]) {
          best_rank = r;
          best_at = i;
          break;
        }
      }
    }
    if (best_rank == merges.size()) break;
    symbols[best_at] += symbols[best_at + 1];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
  }
  Ids ids;
  for (const auto& symbol : symbols)
    ids.push_back(vocab.at(symbol).get<TokenId>());
  return ids;
}

// Long random SentencePiece-style words (cut before "▁" by the model) and the same with a
// vocabulary where "▁" follows a letter (never cut) must both equal textbook BPE.
TEST(Bpe, LongInputsMatchTextbookBpe) {
  const std::string m = "\xE2\x96\x81";
  for (bool cuttable : {true, false}) {
    std::vector<std::pair<std::string, std::string>> merges = {
        {"a", "b"},   {m, "a"},   {m, m},      {"ab", "c"},     {m + "a", "b"},
        {m + m, "a"}, {"c", "c"}, {"a", "a"},  {m + "ab", "c"}, {m + m, m},
        {"b", "c"},   {m, "b"},   {"bc", "a"}, {m, "abc"}};
    if (!cuttable) merges.push_back({"a", m});
    json vocab = {{m, 0}, {"a", 1}, {"b", 2}, {"c", 3}};
    std::vector<std::string> merge_strings;
    for (const auto& [left, right] : merges) {
      if (!vocab.contains(left + right)) vocab[left + right] = vocab.size();
      merge_strings.push_back(left + " " + right);
    }
    Tokenizer tokenizer = load(bpe(vocab, merge_strings));
    std::mt19937 rng(cuttable ? 1 : 2);
    const std::string alphabet[] = {m, "a", "b", "c"};
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<std::string> chars;
      std::string text;
      size_t length = 1 + rng() % 300;
      for (size_t i = 0; i < length; ++i) {
        chars.push_back(alphabet[rng() % 4]);
        text += chars.back();
      }
      ASSERT_EQ(encode(tokenizer, text), naive_bpe(chars, merges, vocab)) << text;
    }
  }
}

TEST(Bpe, DropoutIsRejected) {
  auto tokenizer = Tokenizer::from_json(bpe(kAbc, json::array(), {{"dropout", 0.1}}).dump());
  ASSERT_FALSE(tokenizer.has_value());
  EXPECT_EQ(tokenizer.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(tokenizer.error().message().find("model.dropout"), std::string::npos);
  EXPECT_TRUE(
      Tokenizer::from_json(bpe(kAbc, json::array(), {{"dropout", 0.0}}).dump()).has_value());
}

}  // namespace
}  // namespace locus
