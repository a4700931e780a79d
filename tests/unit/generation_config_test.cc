#include "io/generation_config.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace locus {
namespace {

TEST(GenerationConfig, ReadsSamplingDefaultsAndEosList) {
  // Qwen3-30B-A3B's generation_config.json.
  auto g = parse_generation_config(R"({
    "bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643],
    "pad_token_id": 151643, "temperature": 0.6, "top_k": 20, "top_p": 0.95,
    "transformers_version": "4.51.0"})",
                                   "generation_config.json");
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  EXPECT_EQ(g->eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  EXPECT_EQ(g->bos_token_id, 151643);
  EXPECT_FLOAT_EQ(g->temperature.value(), 0.6f);
  EXPECT_EQ(g->top_k, 20);
  EXPECT_FLOAT_EQ(g->top_p.value(), 0.95f);
  EXPECT_FALSE(g->min_p.has_value());
  EXPECT_EQ(g->do_sample, true);
}

TEST(GenerationConfig, SingleEosAndEmptyObject) {
  auto g = parse_generation_config(R"({"eos_token_id": 2})", "g.json");
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->eos_token_ids, (std::vector<int32_t>{2}));
  auto e = parse_generation_config("{}", "g.json");
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->eos_token_ids.empty());
  EXPECT_FALSE(e->temperature.has_value());
}

TEST(GenerationConfig, BadInputNamesFileAndField) {
  auto bad_json = parse_generation_config("{", "/m/generation_config.json");
  ASSERT_FALSE(bad_json.has_value());
  EXPECT_NE(bad_json.status().message().find("/m/generation_config.json"), std::string::npos);

  auto bad_type = parse_generation_config(R"({"temperature": "hot"})", "g.json");
  ASSERT_FALSE(bad_type.has_value());
  EXPECT_NE(bad_type.status().message().find("temperature"), std::string::npos);

  auto bad_range = parse_generation_config(R"({"top_p": 1.5})", "g.json");
  ASSERT_FALSE(bad_range.has_value());
  EXPECT_NE(bad_range.status().message().find("top_p"), std::string::npos);

  auto bad_eos = parse_generation_config(R"({"eos_token_id": [1, -4]})", "g.json");
  ASSERT_FALSE(bad_eos.has_value());
  EXPECT_NE(bad_eos.status().message().find("eos_token_id"), std::string::npos);

  auto not_object = parse_generation_config("[1]", "g.json");
  EXPECT_FALSE(not_object.has_value());
}

TEST(GenerationConfig, MissingFileIsEmptyConfig) {
  auto g = load_generation_config(std::filesystem::path(LOCUS_TEST_DATA_DIR) / "configs");
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  EXPECT_TRUE(g->eos_token_ids.empty());
}

}  // namespace
}  // namespace locus
