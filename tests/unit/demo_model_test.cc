// The trained demo model (models/demo, tools/demo_model/) on the CPU backend against what
// PyTorch + transformers computed from the same bf16 weights in f32 when it was trained
// (models/demo/reference.json): the tokenizer and chat template give the same prompt ids, the
// greedy continuations are the same tokens, the prompt logprobs agree, and so does the
// validation perplexity over the same 16 x 256 tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "io/model_config.h"
#include "model/demo_model.h"
#include "model/model.h"
#include "model/weight_source.h"
#include "tokenizer/chat_template/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "unit/forward_test_util.h"

namespace locus {
namespace {

// log_softmax(row)[token], in double.
double logprob(std::span<const float> row, int32_t token) {
  const float max = *std::max_element(row.begin(), row.end());
  double sum = 0.0;
  for (float v : row)
    sum += std::exp(static_cast<double>(v) - max);
  return static_cast<double>(row[static_cast<size_t>(token)]) - max - std::log(sum);
}

TEST(DemoModelLookup, FindsTheFirstDirectoryWithAConfigAndNamesEveryPlaceOtherwise) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / "locus_demo_lookup_test";
  fs::remove_all(root);
  fs::create_directories(root / "empty");
  fs::create_directories(root / "model");
  std::ofstream(root / "model" / "config.json") << "{}";
  const fs::path missing[] = {root / "empty", root / "absent"};
  auto none = find_model_dir(missing);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(none.status().message().find((root / "empty").string()), std::string::npos);
  EXPECT_NE(none.status().message().find((root / "absent").string()), std::string::npos);
  const fs::path some[] = {root / "empty", root / "model", root / "absent"};
  auto found = find_model_dir(some);
  ASSERT_TRUE(found.has_value()) << found.status().to_string();
  EXPECT_EQ(*found, fs::weakly_canonical(root / "model").string());
  fs::remove_all(root);
}

TEST(DemoModelLookup, OnlyAnUnnamedModelBecomesTheDemo) {
  std::string named = "some/dir";
  bool defaulted = true;
  ASSERT_TRUE(use_demo_model_if_unnamed(named, &defaulted).is_ok());
  EXPECT_EQ(named, "some/dir");
  EXPECT_FALSE(defaulted);
  std::string unnamed;
  ASSERT_TRUE(use_demo_model_if_unnamed(unnamed, &defaulted).is_ok());
  EXPECT_TRUE(defaulted);
  EXPECT_EQ(unnamed, find_demo_model().value());
}

class DemoModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto dir = find_demo_model();
    ASSERT_TRUE(dir.has_value()) << dir.status().to_string();
    dir_ = *dir;
    std::ifstream in(std::filesystem::path(dir_) / "reference.json");
    ASSERT_TRUE(in.good()) << "models/demo/reference.json is missing";
    reference_ = nlohmann::json::parse(in);
  }
  static std::vector<int32_t> ids(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

  static inline std::string dir_;
  static inline nlohmann::json reference_;
};

TEST_F(DemoModel, IsTheSourceTreeModelAndFitsTheSizeBudget) {
  EXPECT_EQ(std::filesystem::path(dir_),
            std::filesystem::weakly_canonical(std::filesystem::path(LOCUS_TEST_DATA_DIR) /
                                              "../../models/demo"));
  const auto bytes = std::filesystem::file_size(std::filesystem::path(dir_) / "model.safetensors");
  EXPECT_LE(bytes, 20u * 1000 * 1000) << "issue #9: at most 20 MB in bf16";
  auto config = load_model_config(dir_);
  ASSERT_TRUE(config.has_value()) << config.status().to_string();
  EXPECT_EQ(config->architecture, Architecture::kQwen3Moe);
  EXPECT_GE(config->moe.num_experts, 8);
}

TEST_F(DemoModel, TokenizerAndChatTemplateGiveThePromptIds) {
  auto tokenizer = Tokenizer::load(dir_);
  ASSERT_TRUE(tokenizer.has_value()) << tokenizer.status().to_string();
  auto chat = load_chat_template(dir_);
  ASSERT_TRUE(chat.has_value()) << chat.status().to_string();
  int checked_chat = 0;
  for (const auto& g : reference_.at("greedy")) {
    const auto prompt = g.at("prompt").get<std::string>();
    if (g.at("kind") == "chat") {
      ChatTemplateInputs inputs;
      inputs.messages = nlohmann::ordered_json::parse(g.at("messages").dump());
      inputs.add_generation_prompt = true;
      auto rendered = chat->render(inputs);
      ASSERT_TRUE(rendered.has_value()) << rendered.status().to_string();
      EXPECT_EQ(*rendered, prompt);
      ++checked_chat;
    }
    auto encoded = tokenizer->encode(prompt);
    ASSERT_TRUE(encoded.has_value()) << encoded.status().to_string();
    EXPECT_EQ(*encoded, ids(g.at("prompt_ids"))) << prompt;
    const auto out = ids(g.at("output_ids"));
    EXPECT_EQ(tokenizer->decode(out), g.at("output_text").get<std::string>());
  }
  EXPECT_EQ(checked_chat, 3);
}

TEST_F(DemoModel, MatchesPyTorch) {
  auto config = load_model_config(dir_);
  ASSERT_TRUE(config.has_value()) << config.status().to_string();
  auto weights = CheckpointWeights::open(dir_);
  ASSERT_TRUE(weights.has_value()) << weights.status().to_string();
  CpuBackend backend;
  auto model = Model::load(*config, **weights, backend);
  ASSERT_TRUE(model.has_value()) << model.status().to_string();

  // Greedy continuations, all six prompts decoding in one batch. The reference stops at an end
  // token; the driver runs on, so compare its first tokens.
  testing::Prompts prompts, want;
  for (const auto& g : reference_.at("greedy")) {
    prompts.push_back(ids(g.at("prompt_ids")));
    want.push_back(ids(g.at("output_ids")));
  }
  const auto steps = reference_.at("greedy_max_new_tokens").get<int64_t>();
  testing::Driver driver{**model, 16, 64};
  const auto got = driver.greedy(prompts, steps);
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_GE(got[i].size(), want[i].size());
    EXPECT_EQ(std::vector<int32_t>(got[i].begin(), got[i].begin() + want[i].size()), want[i])
        << "greedy continuation of prompt " << i;
  }

  // Prompt logprobs of the plain prompts.
  double worst_logprob = 0.0;
  const int64_t vocab = (*model)->vocab_size();
  for (const auto& p : reference_.at("prompt_logprobs")) {
    const auto prompt = ids(p.at("prompt_ids"));
    const auto want_lp = p.at("logprobs").get<std::vector<double>>();
    const auto logits = driver.prefill_logits({prompt}, 0)[0];
    ASSERT_EQ(want_lp.size() + 1, prompt.size());
    for (size_t t = 1; t < prompt.size(); ++t) {
      std::span row(logits.data() + static_cast<int64_t>(t - 1) * vocab, vocab);
      worst_logprob = std::max(worst_logprob, std::abs(logprob(row, prompt[t]) - want_lp[t - 1]));
    }
  }
  // Both sides are f32 from the same bf16 weights; they differ only in summation order.
  EXPECT_LT(worst_logprob, 1e-4);

  // Validation perplexity over the reference's windows (each token after the first scored).
  const auto windows = reference_.at("val_windows").get<std::vector<std::vector<int32_t>>>();
  ASSERT_EQ(windows.size(), 16u);
  testing::Driver long_driver{**model, 16, static_cast<int64_t>(windows[0].size())};
  const auto logits = long_driver.prefill_logits(windows, 0);
  double nll = 0.0;
  int64_t scored = 0;
  for (size_t w = 0; w < windows.size(); ++w) {
    for (size_t t = 1; t < windows[w].size(); ++t) {
      std::span row(logits[w].data() + static_cast<int64_t>(t - 1) * vocab, vocab);
      nll -= logprob(row, windows[w][t]);
      ++scored;
    }
  }
  const double ppl = std::exp(nll / static_cast<double>(scored));
  const double want_ppl = reference_.at("val_perplexity").get<double>();
  EXPECT_NEAR(ppl / want_ppl, 1.0, 1e-4);
  std::printf(
      "[demo] greedy %zu prompts identical to PyTorch; prompt logprobs max |diff| %.2e; "
      "validation perplexity %.4f (PyTorch %.4f) over %lld tokens\n",
      prompts.size(), worst_logprob, ppl, want_ppl, static_cast<long long>(scored));
}

}  // namespace
}  // namespace locus
