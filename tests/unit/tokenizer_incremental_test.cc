// Incremental detokenization: fed one id at a time, the pieces never split a UTF-8 character
// and concatenate to exactly the one-shot decode: over random id sequences (which break
// characters, mix special tokens and byte-fallback runs) and over every golden string, for every
// real tokenizer, with and without skip_special_tokens.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace locus {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<TokenId>;

fs::path tokenizer_data_dir() {
  if (const char* dir = std::getenv("LOCUS_TOKENIZER_DATA_DIR")) return dir;
  return fs::path(LOCUS_TEST_DATA_DIR) / ".." / ".." / "build" / "test-data" / "tokenizers";
}

// Streams `ids` and checks every piece; returns the concatenation.
std::string stream(const Tokenizer& tokenizer, const Ids& ids, bool skip, const Ids& prompt = {}) {
  IncrementalDetokenizer detokenizer(tokenizer, skip, prompt);
  std::string text;
  for (TokenId id : ids) {
    std::string piece = detokenizer.step(id);
    EXPECT_TRUE(tokenizer::utf8::is_valid(piece));
    text += piece;
  }
  text += detokenizer.finish();
  return text;
}

class IncrementalDetokenization : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    fs::path dir = tokenizer_data_dir() / GetParam();
    ASSERT_TRUE(fs::exists(dir / "tokenizer.json"))
        << dir << " is missing: run scripts/fetch_test_data.sh (or set LOCUS_TOKENIZER_DATA_DIR)";
    auto loaded = Tokenizer::load(dir);
    ASSERT_TRUE(loaded.has_value()) << loaded.error().message();
    tokenizer_ = std::make_unique<Tokenizer>(std::move(*loaded));
  }
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_P(IncrementalDetokenization, RandomIdsConcatenateToTheOneShotDecode) {
  const Tokenizer& tokenizer = *tokenizer_;
  std::mt19937 rng(42);
  auto limit = static_cast<TokenId>(tokenizer.id_limit());
  // Low ids are bytes and byte-fallback tokens in these vocabularies; draw them often so that
  // characters get split and byte runs get broken.
  auto draw = [&] {
    switch (rng() % 4) {
      case 0:
        return static_cast<TokenId>(rng() % 300);
      case 1:
        return static_cast<TokenId>(limit - 1 - static_cast<TokenId>(rng() % 300));
      default:
        return static_cast<TokenId>(rng() % static_cast<uint32_t>(limit));
    }
  };
  int sequences = 0;
  for (int trial = 0; trial < 600; ++trial) {
    Ids ids(1 + rng() % 48);
    for (auto& id : ids)
      id = draw();
    for (bool skip : {false, true}) {
      ASSERT_EQ(stream(tokenizer, ids, skip), tokenizer.decode(ids, skip))
          << GetParam() << " trial " << trial << " skip " << skip;
      ++sequences;
    }
  }
  EXPECT_EQ(sequences, 1200);
}

TEST_P(IncrementalDetokenization, GoldenStringsConcatenateToTheOneShotDecode) {
  const Tokenizer& tokenizer = *tokenizer_;
  std::ifstream in(fs::path(LOCUS_TEST_DATA_DIR) / "tokenizers" / "golden" /
                   (GetParam() + ".json"));
  std::stringstream contents;
  contents << in.rdbuf();
  auto golden = nlohmann::json::parse(contents.str());
  size_t with_prompt = 0;
  for (const auto& entry : golden.at("cases")) {
    auto ids = entry.at("ids_special").get<Ids>();
    for (bool skip : {false, true}) {
      ASSERT_EQ(stream(tokenizer, ids, skip), tokenizer.decode(ids, skip))
          << GetParam() << " case " << entry.at("index");
    }
    // With the first half as the prompt: the pieces are the text the second half adds.
    if (ids.size() < 2) continue;
    Ids prompt(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(ids.size() / 2));
    Ids generated(ids.begin() + static_cast<std::ptrdiff_t>(ids.size() / 2), ids.end());
    std::string before = tokenizer.decode(prompt, false);
    std::string all = tokenizer.decode(ids, false);
    if (all.compare(0, before.size(), before) != 0) continue;  // the cut splits a character
    ASSERT_EQ(stream(tokenizer, generated, false, prompt), all.substr(before.size()))
        << GetParam() << " case " << entry.at("index");
    ++with_prompt;
  }
  EXPECT_GT(with_prompt, 300u);
}

INSTANTIATE_TEST_SUITE_P(RealTokenizers, IncrementalDetokenization,
                         ::testing::Values("qwen3", "deepseek_v3", "llama3_1", "gptoss", "llama2",
                                           "llama2_metaspace"),
                         [](const ::testing::TestParamInfo<std::string>& test) {
                           return test.param;
                         });

TEST(IncrementalDetokenizationExamples, HoldsIncompleteCharacters) {
  auto tokenizer = Tokenizer::load(tokenizer_data_dir() / "llama2");
  ASSERT_TRUE(tokenizer.has_value())
      << tokenizer.error().message() << " (run scripts/fetch_test_data.sh)";
  // "🦀" is four byte-fallback tokens in Llama 2: nothing comes out until its run ends.
  Ids ids = *tokenizer->encode("\xF0\x9F\xA6\x80!", false);
  ASSERT_EQ(tokenizer->id_to_token(ids[1]), "<0xF0>");
  IncrementalDetokenizer detokenizer(*tokenizer, false);
  std::string joined;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string piece = detokenizer.step(ids[i]);
    if (i >= 1 && i <= 4) {
      EXPECT_EQ(piece, "") << i;
    }
    joined += piece;
  }
  joined += detokenizer.finish();
  EXPECT_EQ(joined, tokenizer->decode(ids, false));
  // With the prompt as context the first word keeps its leading space.
  Ids prompt = *tokenizer->encode("Hello", true);
  Ids next = *tokenizer->encode("Hello world", true);
  Ids generated(next.begin() + static_cast<std::ptrdiff_t>(prompt.size()), next.end());
  EXPECT_EQ(stream(*tokenizer, generated, true, prompt), " world");
}

}  // namespace
}  // namespace locus
