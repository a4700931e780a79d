// Golden tests: every string of tools/golden/tokenizer/corpus.json, encoded with and without
// special tokens and decoded with and without skip_special_tokens, must give exactly the ids and
// text Hugging Face's tokenizers give (tests/fixtures/tokenizers/golden/<name>.json, written by
// tools/golden/tokenizer/golden_js.mjs). The real tokenizers come from scripts/fetch_test_data.sh;
// without them these tests fail, never skip.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace locus {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Where scripts/fetch_test_data.sh puts the real tokenizers.
fs::path tokenizer_data_dir() {
  if (const char* dir = std::getenv("LOCUS_TOKENIZER_DATA_DIR")) return dir;
  return fs::path(LOCUS_TEST_DATA_DIR) / ".." / ".." / "build" / "test-data" / "tokenizers";
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

std::string show_ids(const std::vector<TokenId>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i)
    out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "]";
}

class TokenizerGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerGolden, MatchesHuggingFace) {
  const std::string name = GetParam();
  fs::path dir = tokenizer_data_dir() / name;
  ASSERT_TRUE(fs::exists(dir / "tokenizer.json"))
      << dir << " is missing: run scripts/fetch_test_data.sh (or set LOCUS_TOKENIZER_DATA_DIR)";
  auto tokenizer = Tokenizer::load(dir);
  ASSERT_TRUE(tokenizer.has_value()) << tokenizer.error().message();

  fs::path golden_path = fs::path(LOCUS_TEST_DATA_DIR) / "tokenizers" / "golden" / (name + ".json");
  json golden = json::parse(read_text(golden_path));
  const auto& cases = golden.at("cases");
  ASSERT_GE(cases.size(), 500u);

  size_t failures = 0, checked = 0;
  for (const auto& entry : cases) {
    const std::string text = entry.at("text").get<std::string>();
    const std::string input = entry.contains("bytes_hex") ? from_hex(entry["bytes_hex"]) : text;
    const auto want_ids = entry.at("ids").get<std::vector<TokenId>>();
    const auto want_special = entry.at("ids_special").get<std::vector<TokenId>>();
    const std::string want_decoded = entry.value("decoded", text);
    const std::string want_decoded_skip = entry.value("decoded_skip", text);

    auto ids = tokenizer->encode(input, /*add_special_tokens=*/false);
    auto ids_special = tokenizer->encode(input, /*add_special_tokens=*/true);
    ASSERT_TRUE(ids.has_value()) << ids.error().message();
    ASSERT_TRUE(ids_special.has_value()) << ids_special.error().message();
    std::string decoded = tokenizer->decode(want_special, false);
    std::string decoded_skip = tokenizer->decode(want_special, true);
    bool ok = *ids == want_ids && *ids_special == want_special && decoded == want_decoded &&
              decoded_skip == want_decoded_skip;
    ++checked;
    if (ok) continue;
    if (++failures <= 10) {
      ADD_FAILURE() << name << " case " << entry.at("index") << " " << json(text).dump()
                    << "\n  ids      " << show_ids(*ids) << "\n  expected " << show_ids(want_ids)
                    << "\n  special  " << show_ids(*ids_special) << "\n  expected "
                    << show_ids(want_special) << "\n  decoded  " << json(decoded).dump()
                    << "\n  expected " << json(want_decoded).dump() << "\n  skip     "
                    << json(decoded_skip).dump() << "\n  expected "
                    << json(want_decoded_skip).dump();
    }
  }
  EXPECT_EQ(failures, 0u) << name << ": " << failures << " of " << checked << " cases differ";
  std::printf("[ golden   ] %s: %zu/%zu cases identical\n", name.c_str(), checked - failures,
              checked);
}

INSTANTIATE_TEST_SUITE_P(RealTokenizers, TokenizerGolden,
                         ::testing::Values("qwen3", "deepseek_v3", "llama3_1", "gptoss", "llama2",
                                           "llama2_metaspace"),
                         [](const ::testing::TestParamInfo<std::string>& test) {
                           return test.param;
                         });

// Per-thread word caches must never leak between threads or between models: encode every golden
// string from four threads at once while each thread also alternates between more models than
// it keeps caches for.
TEST(TokenizerConcurrency, ThreadsAndAlternatingModelsAgree) {
  const std::vector<std::string> names = {"qwen3", "deepseek_v3", "llama3_1", "gptoss", "llama2"};
  std::vector<Tokenizer> tokenizers;
  std::vector<std::vector<std::pair<std::string, std::vector<TokenId>>>> expected;
  for (const auto& name : names) {
    auto loaded = Tokenizer::load(tokenizer_data_dir() / name);
    ASSERT_TRUE(loaded.has_value())
        << loaded.error().message() << " (run scripts/fetch_test_data.sh)";
    tokenizers.push_back(std::move(*loaded));
    json golden = json::parse(
        read_text(fs::path(LOCUS_TEST_DATA_DIR) / "tokenizers" / "golden" / (name + ".json")));
    expected.emplace_back();
    for (const auto& entry : golden.at("cases")) {
      std::string input = entry.contains("bytes_hex") ? from_hex(entry["bytes_hex"])
                                                      : entry["text"].get<std::string>();
      expected.back().emplace_back(input, entry.at("ids").get<std::vector<TokenId>>());
    }
  }
  std::atomic<size_t> mismatches{0}, encoded{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t round = 0; round < 2; ++round) {
        for (size_t i = 0; i < expected[0].size(); ++i) {
          size_t model = (i + static_cast<size_t>(t) + round) % tokenizers.size();
          const auto& [input, ids] = expected[model][i];
          auto got = tokenizers[model].encode(input, false);
          if (!got.has_value() || *got != ids) ++mismatches;
          ++encoded;
        }
      }
    });
  }
  for (auto& thread : threads)
    thread.join();
  EXPECT_EQ(mismatches.load(), 0u);
  EXPECT_EQ(encoded.load(), 4u * 2u * expected[0].size());
}

}  // namespace
}  // namespace locus
