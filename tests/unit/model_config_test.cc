// ModelConfig parsing: the committed real configs (tests/fixtures/configs) parse to their known
// shapes, each family places MoE layers by its own rule, and malformed configs fail with the
// right code and a message that names the field.
#include "io/model_config.h"

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

namespace locus {
namespace {

using nlohmann::json;

std::filesystem::path fixture(std::string_view name) {
  return std::filesystem::path(LOCUS_TEST_DATA_DIR) / "configs" / name;
}

ModelConfig load_fixture(std::string_view name) {
  auto cfg = load_model_config(fixture(name));
  EXPECT_TRUE(cfg.has_value()) << name << ": " << cfg.status().to_string();
  if (!cfg) return ModelConfig{};
  return *std::move(cfg);
}

// Parameter counts are estimates from shapes; published totals are rounded and some include
// MTP layers, so they are compared with a relative tolerance.
void expect_near_rel(int64_t actual, double expected, double rel, std::string_view what) {
  EXPECT_NEAR(static_cast<double>(actual) / expected, 1.0, rel)
      << what << ": " << static_cast<double>(actual) / 1e9 << "B vs " << expected / 1e9 << "B";
}

void expect_error(const Expected<ModelConfig>& result, ErrorCode code,
                  std::initializer_list<std::string_view> needles) {
  ASSERT_FALSE(result.has_value()) << "expected an error, got: " << result->summary();
  EXPECT_EQ(result.error().code(), code) << result.error().to_string();
  for (auto needle : needles) {
    EXPECT_NE(result.error().message().find(needle), std::string::npos)
        << "'" << needle << "' not in: " << result.error().message();
  }
}

Expected<ModelConfig> parse(const json& j) {
  return parse_model_config(j, "config.json");
}

// Small but valid configs, one per family, that the error tests break one field at a time.
json qwen3_base() {
  return json::parse(R"({
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
    "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 512,
    "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32,
    "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
    "num_experts": 16, "num_experts_per_tok": 4, "moe_intermediate_size": 128,
    "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "torch_dtype": "bfloat16"})");
}

json deepseek_v3_base() {
  return json::parse(R"({
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
    "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 512,
    "num_hidden_layers": 6, "num_attention_heads": 8, "num_key_value_heads": 8,
    "max_position_embeddings": 4096, "q_lora_rank": 64, "kv_lora_rank": 32,
    "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
    "n_routed_experts": 32, "num_experts_per_tok": 4, "moe_intermediate_size": 64,
    "n_shared_experts": 1, "n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.5,
    "first_k_dense_replace": 1, "moe_layer_freq": 1, "scoring_func": "sigmoid",
    "topk_method": "noaux_tc", "norm_topk_prob": true, "rope_theta": 10000})");
}

json minimax_base() {
  return json::parse(R"({
    "architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2",
    "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32,
    "max_position_embeddings": 4096, "num_local_experts": 8, "num_experts_per_tok": 2,
    "rotary_dim": 16, "use_qk_norm": true, "qk_norm_type": "per_layer",
    "scoring_func": "sigmoid", "use_routing_bias": true, "rope_theta": 5000000})");
}

// --- The real configs --------------------------------------------------------------------------

TEST(ModelConfigFixtures, Qwen3_30B_A3B) {
  const ModelConfig c = load_fixture("qwen3-30b-a3b");
  EXPECT_EQ(c.architecture, Architecture::kQwen3Moe);
  EXPECT_EQ(c.architecture_name, "Qwen3MoeForCausalLM");
  EXPECT_EQ(c.model_type, "qwen3_moe");
  EXPECT_EQ(c.num_hidden_layers, 48);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.intermediate_size, 6144);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_EQ(c.attention.kind, AttentionKind::kGqa);
  EXPECT_EQ(c.attention.num_attention_heads, 32);
  EXPECT_EQ(c.attention.num_key_value_heads, 4);
  EXPECT_EQ(c.attention.head_dim, 128);
  EXPECT_EQ(c.attention.qk_norm, QkNorm::kPerHead);
  EXPECT_FALSE(c.attention.qkv_bias);
  EXPECT_FALSE(c.attention.sliding_window.has_value());
  EXPECT_EQ(c.moe.num_experts, 128);
  EXPECT_EQ(c.moe.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe.moe_intermediate_size, 768);
  EXPECT_EQ(c.moe.num_shared_experts, 0);
  EXPECT_EQ(c.moe.scoring_func, ScoringFunc::kSoftmax);
  EXPECT_TRUE(c.moe.norm_topk_prob);
  EXPECT_FALSE(c.moe.has_score_correction_bias);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
  EXPECT_EQ(c.rope.rotary_dim, 128);
  EXPECT_EQ(c.rope.layout, RopeLayout::kNeox);
  EXPECT_EQ(c.rope.scaling.type, RopeScalingType::kNone);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{151645});
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.dtype, DType::kBF16);
  EXPECT_FALSE(c.quant.is_quantized());
  EXPECT_EQ(c.num_moe_layers(), 48);
  // The exact count of the released safetensors (model card: 30.5B total, 3.3B active).
  EXPECT_EQ(c.num_parameters(), 30'532'122'624);
  expect_near_rel(c.num_active_parameters(), 3.3e9, 0.03, "active");
  EXPECT_DOUBLE_EQ(c.attention_softmax_scale(), 1.0 / std::sqrt(128.0));
}

TEST(ModelConfigFixtures, Qwen3_235B_A22B) {
  const ModelConfig c = load_fixture("qwen3-235b-a22b");
  EXPECT_EQ(c.architecture, Architecture::kQwen3Moe);
  EXPECT_EQ(c.num_hidden_layers, 94);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.attention.num_attention_heads, 64);
  EXPECT_EQ(c.attention.num_key_value_heads, 4);
  EXPECT_EQ(c.attention.head_dim, 128);
  EXPECT_EQ(c.moe.num_experts, 128);
  EXPECT_EQ(c.moe.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe.moe_intermediate_size, 1536);
  expect_near_rel(c.num_parameters(), 235e9, 0.01, "total");
  expect_near_rel(c.num_active_parameters(), 22e9, 0.03, "active");
}

TEST(ModelConfigFixtures, DeepSeekV3) {
  const ModelConfig c = load_fixture("deepseek-v3");
  EXPECT_EQ(c.architecture, Architecture::kDeepseekV3);
  EXPECT_EQ(c.model_type, "deepseek_v3");
  EXPECT_EQ(c.num_hidden_layers, 61);
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.intermediate_size, 18432);
  EXPECT_EQ(c.vocab_size, 129280);
  ASSERT_TRUE(c.is_mla());
  const auto& mla = c.attention.mla;
  EXPECT_EQ(c.attention.num_attention_heads, 128);
  EXPECT_EQ(mla.q_lora_rank, 1536);
  EXPECT_EQ(mla.kv_lora_rank, 512);
  EXPECT_EQ(mla.qk_nope_head_dim, 128);
  EXPECT_EQ(mla.qk_rope_head_dim, 64);
  EXPECT_EQ(mla.v_head_dim, 128);
  EXPECT_EQ(c.attention.head_dim, 192);
  EXPECT_EQ(c.attention.v_head_dim, 128);
  EXPECT_EQ(c.moe.num_experts, 256);
  EXPECT_EQ(c.moe.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe.moe_intermediate_size, 2048);
  EXPECT_EQ(c.moe.num_shared_experts, 1);
  EXPECT_EQ(c.moe.shared_expert_intermediate_size, 2048);
  EXPECT_EQ(c.moe.n_group, 8);
  EXPECT_EQ(c.moe.topk_group, 4);
  EXPECT_DOUBLE_EQ(c.moe.routed_scaling_factor, 2.5);
  EXPECT_EQ(c.moe.first_k_dense_replace, 3);
  EXPECT_EQ(c.moe.scoring_func, ScoringFunc::kSigmoid);
  EXPECT_EQ(c.moe.topk_method, TopkMethod::kNoauxTc);
  EXPECT_TRUE(c.moe.has_score_correction_bias);
  EXPECT_TRUE(c.moe.norm_topk_prob);
  EXPECT_EQ(c.num_nextn_predict_layers, 1);
  EXPECT_EQ(c.rope.layout, RopeLayout::kInterleaved);
  EXPECT_EQ(c.rope.rotary_dim, 64);
  EXPECT_DOUBLE_EQ(c.rope.theta, 10000.0);
  EXPECT_EQ(c.rope.scaling.type, RopeScalingType::kYarn);
  EXPECT_DOUBLE_EQ(c.rope.scaling.factor, 40.0);
  EXPECT_EQ(c.rope.scaling.original_max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(c.rope.scaling.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(c.rope.scaling.beta_slow, 1.0);
  EXPECT_EQ(c.rope.scaling.mscale, 1.0);
  EXPECT_EQ(c.rope.scaling.mscale_all_dim, 1.0);
  EXPECT_EQ(c.quant.method, QuantMethod::kFp8);
  EXPECT_EQ(c.quant.weight_dtype, DType::kF8E4M3);
  EXPECT_EQ(c.quant.weight_block_size, (std::vector<int64_t>{128, 128}));
  EXPECT_EQ(c.quant.activation_scheme, ActivationScheme::kDynamic);
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{1});
  EXPECT_EQ(c.num_moe_layers(), 58);
  // README_WEIGHTS: 671B main-model parameters (MTP excluded), 37B activated.
  EXPECT_EQ(c.num_parameters(), 671'026'419'200);
  expect_near_rel(c.num_active_parameters(), 37e9, 0.03, "active");
  const double m = 0.1 * std::log(40.0) + 1.0;
  EXPECT_NEAR(c.attention_softmax_scale(), m * m / std::sqrt(192.0), 1e-12);
}

TEST(ModelConfigFixtures, KimiK2) {
  const ModelConfig c = load_fixture("kimi-k2-instruct");
  EXPECT_EQ(c.architecture, Architecture::kDeepseekV3);
  EXPECT_EQ(c.model_type, "kimi_k2");
  EXPECT_EQ(c.num_hidden_layers, 61);
  EXPECT_EQ(c.attention.num_attention_heads, 64);
  EXPECT_EQ(c.moe.num_experts, 384);
  EXPECT_EQ(c.moe.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe.n_group, 1);
  EXPECT_EQ(c.moe.topk_group, 1);
  EXPECT_DOUBLE_EQ(c.moe.routed_scaling_factor, 2.827);
  EXPECT_EQ(c.moe.first_k_dense_replace, 1);
  EXPECT_EQ(c.num_moe_layers(), 60);
  EXPECT_EQ(c.vocab_size, 163840);
  EXPECT_DOUBLE_EQ(c.rope.theta, 50000.0);
  EXPECT_DOUBLE_EQ(c.rope.scaling.factor, 32.0);
  EXPECT_DOUBLE_EQ(c.rope.scaling.beta_fast, 1.0);
  EXPECT_EQ(c.num_nextn_predict_layers, 0);
  EXPECT_EQ(c.quant.method, QuantMethod::kFp8);
  // Model card: 1T total, 32B activated.
  expect_near_rel(c.num_parameters(), 1.03e12, 0.02, "total");
  expect_near_rel(c.num_active_parameters(), 32.5e9, 0.03, "active");
}

TEST(ModelConfigFixtures, DeepSeekV2Lite) {
  const ModelConfig c = load_fixture("deepseek-v2-lite");
  EXPECT_EQ(c.architecture, Architecture::kDeepseekV2);
  EXPECT_EQ(c.num_hidden_layers, 27);
  EXPECT_EQ(c.hidden_size, 2048);
  ASSERT_TRUE(c.is_mla());
  EXPECT_FALSE(c.attention.mla.q_lora_rank.has_value());
  EXPECT_EQ(c.attention.mla.kv_lora_rank, 512);
  EXPECT_EQ(c.attention.num_attention_heads, 16);
  EXPECT_EQ(c.moe.num_experts, 64);
  EXPECT_EQ(c.moe.num_experts_per_tok, 6);
  EXPECT_EQ(c.moe.num_shared_experts, 2);
  EXPECT_EQ(c.moe.shared_expert_intermediate_size, 2 * 1408);
  EXPECT_EQ(c.moe.scoring_func, ScoringFunc::kSoftmax);
  EXPECT_EQ(c.moe.topk_method, TopkMethod::kGreedy);
  EXPECT_FALSE(c.moe.has_score_correction_bias);
  EXPECT_FALSE(c.moe.norm_topk_prob);
  EXPECT_EQ(c.num_moe_layers(), 26);
  EXPECT_EQ(c.rope.scaling.mscale_all_dim, 0.707);
  EXPECT_FALSE(c.quant.is_quantized());
  // Model card: 15.7B total, 2.4B activated. Vendors differ on whether "activated" counts the
  // embedding tables; locus counts them (they are read for every token's logits), so the
  // active comparisons allow for the 0.1-1.2B of embeddings.
  expect_near_rel(c.num_parameters(), 15.7e9, 0.01, "total");
  expect_near_rel(c.num_active_parameters(), 2.4e9, 0.12, "active");
}

TEST(ModelConfigFixtures, Glm45) {
  const ModelConfig c = load_fixture("glm-4.5");
  EXPECT_EQ(c.architecture, Architecture::kGlm4Moe);
  EXPECT_EQ(c.num_hidden_layers, 92);
  EXPECT_EQ(c.hidden_size, 5120);
  // 5120 / 96 is not an integer: the explicit head_dim must win.
  EXPECT_EQ(c.attention.head_dim, 128);
  EXPECT_EQ(c.attention.num_attention_heads, 96);
  EXPECT_EQ(c.attention.num_key_value_heads, 8);
  EXPECT_EQ(c.attention.qk_norm, QkNorm::kPerHead);
  EXPECT_TRUE(c.attention.qkv_bias);
  EXPECT_FALSE(c.attention.o_bias);
  EXPECT_EQ(c.rope.rotary_dim, 64);
  EXPECT_EQ(c.rope.layout, RopeLayout::kNeox);
  EXPECT_EQ(c.moe.num_experts, 160);
  EXPECT_EQ(c.moe.num_shared_experts, 1);
  EXPECT_DOUBLE_EQ(c.moe.routed_scaling_factor, 2.5);
  EXPECT_EQ(c.moe.scoring_func, ScoringFunc::kSigmoid);
  EXPECT_TRUE(c.moe.has_score_correction_bias);
  EXPECT_EQ(c.moe.first_k_dense_replace, 3);
  EXPECT_EQ(c.num_nextn_predict_layers, 1);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151329, 151336, 151338}));
  EXPECT_EQ(c.pad_token_id, 151329);
  EXPECT_FALSE(c.bos_token_id.has_value());
  // Published 355B total / 32B active include the MTP layer, which is not counted here.
  expect_near_rel(c.num_parameters(), 355e9, 0.03, "total");
  expect_near_rel(c.num_active_parameters(), 32e9, 0.12, "active");
}

TEST(ModelConfigFixtures, Glm45Air) {
  const ModelConfig c = load_fixture("glm-4.5-air");
  EXPECT_EQ(c.architecture, Architecture::kGlm4Moe);
  EXPECT_EQ(c.num_hidden_layers, 46);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.attention.qk_norm, QkNorm::kNone);
  EXPECT_EQ(c.moe.num_experts, 128);
  EXPECT_EQ(c.moe.moe_intermediate_size, 1408);
  EXPECT_EQ(c.moe.first_k_dense_replace, 1);
  EXPECT_DOUBLE_EQ(c.moe.routed_scaling_factor, 1.0);
  EXPECT_EQ(c.num_moe_layers(), 45);
  expect_near_rel(c.num_parameters(), 106e9, 0.03, "total");
  expect_near_rel(c.num_active_parameters(), 12e9, 0.12, "active");
}

TEST(ModelConfigFixtures, MiniMaxM2) {
  const ModelConfig c = load_fixture("minimax-m2");
  EXPECT_EQ(c.architecture, Architecture::kMiniMaxM2);
  EXPECT_EQ(c.num_hidden_layers, 62);
  EXPECT_EQ(c.hidden_size, 3072);
  EXPECT_EQ(c.attention.num_attention_heads, 48);
  EXPECT_EQ(c.attention.num_key_value_heads, 8);
  EXPECT_EQ(c.attention.head_dim, 128);
  EXPECT_EQ(c.attention.qk_norm, QkNorm::kPerLayer);
  EXPECT_EQ(c.rope.rotary_dim, 64);
  EXPECT_DOUBLE_EQ(c.rope.theta, 5e6);
  EXPECT_EQ(c.moe.num_experts, 256);
  EXPECT_EQ(c.moe.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe.moe_intermediate_size, 1536);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.moe.num_shared_experts, 0);
  EXPECT_EQ(c.moe.scoring_func, ScoringFunc::kSigmoid);
  EXPECT_TRUE(c.moe.has_score_correction_bias);
  EXPECT_EQ(c.num_moe_layers(), 62);
  EXPECT_EQ(c.num_nextn_predict_layers, 3);
  EXPECT_EQ(c.dtype, DType::kBF16);  // from "dtype", not "torch_dtype"
  EXPECT_EQ(c.quant.method, QuantMethod::kFp8);
  EXPECT_EQ(c.quant.weight_dtype, DType::kF8E4M3);
  EXPECT_EQ(c.quant.ignored_modules,
            (std::vector<std::string>{"gate", "e_score_correction_bias", "lm_head"}));
  // Model card: 230B total, 10B activated.
  expect_near_rel(c.num_parameters(), 229e9, 0.02, "total");
  expect_near_rel(c.num_active_parameters(), 10e9, 0.12, "active");
}

TEST(ModelConfigFixtures, Mixtral8x7B) {
  const ModelConfig c = load_fixture("mixtral-8x7b-v0.1");
  EXPECT_EQ(c.architecture, Architecture::kMixtral);
  EXPECT_EQ(c.num_hidden_layers, 32);
  EXPECT_EQ(c.attention.num_attention_heads, 32);
  EXPECT_EQ(c.attention.num_key_value_heads, 8);
  EXPECT_EQ(c.attention.head_dim, 128);
  EXPECT_FALSE(c.attention.sliding_window.has_value());
  EXPECT_EQ(c.moe.num_experts, 8);
  EXPECT_EQ(c.moe.num_experts_per_tok, 2);
  EXPECT_EQ(c.moe.moe_intermediate_size, 14336);
  EXPECT_TRUE(c.moe.norm_topk_prob);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.num_moe_layers(), 32);
  // Mistral's published 46.7B / 12.9B, exactly.
  EXPECT_EQ(c.num_parameters(), 46'702'792'704);
  EXPECT_EQ(c.num_active_parameters(), 12'879'925'248);
}

TEST(ModelConfigFixtures, Nvfp4FromHfQuantConfig) {
  const ModelConfig c = load_fixture("qwen3-30b-a3b-nvfp4");
  EXPECT_EQ(c.architecture, Architecture::kQwen3Moe);
  EXPECT_EQ(c.quant.method, QuantMethod::kNvfp4);
  EXPECT_EQ(c.quant.quant_algo, "NVFP4");
  EXPECT_EQ(c.quant.group_size, 16);
  EXPECT_EQ(c.quant.weight_dtype, DType::kF4E2M1);
  EXPECT_EQ(c.quant.scale_dtype, DType::kF8E4M3);
  EXPECT_EQ(c.quant.producer, "modelopt 0.29.0");
  EXPECT_FALSE(c.quant.kv_cache_quant_algo.has_value());
  EXPECT_EQ(c.quant.ignored_modules,
            (std::vector<std::string>{"lm_head", "model.layers.*.mlp.gate"}));
}

TEST(ModelConfigFixtures, LoadsFromFilePathToo) {
  auto c = load_model_config(fixture("mixtral-8x7b-v0.1") / "config.json");
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->architecture, Architecture::kMixtral);
  EXPECT_NE(c->source_name.find("config.json"), std::string::npos);
}

TEST(ModelConfigFixtures, SummaryNamesTheShape) {
  const ModelConfig c = load_fixture("deepseek-v3");
  const std::string s = c.summary();
  for (std::string_view part :
       {"DeepseekV3ForCausalLM", "61 layers (58 MoE)", "MLA 128 heads", "kv_lora 512",
        "256 experts top-8", "+ 1 shared", "yarn x40", "fp8 e4m3 block [128,128]"}) {
    EXPECT_NE(s.find(part), std::string::npos) << "'" << part << "' not in: " << s;
  }
}

// --- MoE layer placement per family ------------------------------------------------------------

TEST(ModelConfigMoeLayers, DeepSeekFirstKDenseAndFrequency) {
  json j = deepseek_v3_base();
  j["first_k_dense_replace"] = 2;
  j["moe_layer_freq"] = 2;
  auto c = parse(j);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  // layer >= 2 && layer % 2 == 0
  EXPECT_FALSE(c->is_moe_layer(0));
  EXPECT_FALSE(c->is_moe_layer(1));
  EXPECT_TRUE(c->is_moe_layer(2));
  EXPECT_FALSE(c->is_moe_layer(3));
  EXPECT_TRUE(c->is_moe_layer(4));
  EXPECT_FALSE(c->is_moe_layer(6));  // past the last layer
  EXPECT_FALSE(c->is_moe_layer(-1));
}

TEST(ModelConfigMoeLayers, Qwen3SparseStepAndMlpOnlyLayers) {
  json j = qwen3_base();
  j["num_hidden_layers"] = 6;
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3};
  auto c = parse(j);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  // (layer + 1) % 2 == 0 and not listed: 1 and 5 (3 is listed).
  std::vector<bool> moe;
  for (int64_t l = 0; l < 6; ++l)
    moe.push_back(c->is_moe_layer(l));
  EXPECT_EQ(moe, (std::vector<bool>{false, true, false, false, false, true}));
}

TEST(ModelConfigMoeLayers, GlmMiniMaxMixtral) {
  const ModelConfig glm = load_fixture("glm-4.5");
  EXPECT_FALSE(glm.is_moe_layer(2));
  EXPECT_TRUE(glm.is_moe_layer(3));
  EXPECT_TRUE(glm.is_moe_layer(91));
  const ModelConfig minimax = load_fixture("minimax-m2");
  EXPECT_TRUE(minimax.is_moe_layer(0));
  EXPECT_TRUE(minimax.is_moe_layer(61));
  const ModelConfig mixtral = load_fixture("mixtral-8x7b-v0.1");
  EXPECT_TRUE(mixtral.is_moe_layer(0));
  EXPECT_FALSE(mixtral.is_moe_layer(32));
}

// --- Field spellings ---------------------------------------------------------------------------

TEST(ModelConfigSpellings, RopeTypeKeyAndTransformers5RopeParameters) {
  json j = deepseek_v3_base();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fast", 32}};
  auto c = parse(j);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->rope.scaling.type, RopeScalingType::kYarn);
  EXPECT_DOUBLE_EQ(c->rope.scaling.factor, 4.0);

  json m = minimax_base();
  m.erase("rotary_dim");
  m.erase("rope_theta");
  m["rope_parameters"] = {
      {"rope_type", "default"}, {"rope_theta", 5000000}, {"partial_rotary_factor", 0.5}};
  auto mc = parse(m);
  ASSERT_TRUE(mc.has_value()) << mc.status().to_string();
  EXPECT_DOUBLE_EQ(mc->rope.theta, 5e6);
  EXPECT_EQ(mc->rope.rotary_dim, 16);
  EXPECT_EQ(mc->rope.scaling.type, RopeScalingType::kNone);
}

TEST(ModelConfigSpellings, ExpertCountAndDtypeNamesOfTransformers5) {
  json j = qwen3_base();
  j.erase("num_experts");
  j["num_local_experts"] = 16;
  j.erase("torch_dtype");
  j["dtype"] = "float16";
  auto c = parse(j);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->moe.num_experts, 16);
  EXPECT_EQ(c->dtype, DType::kF16);
}

TEST(ModelConfigSpellings, ModelTypeStandsInForMissingArchitectures) {
  json j = deepseek_v3_base();
  j.erase("architectures");
  j["model_type"] = "kimi_k2";
  auto c = parse(j);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->architecture, Architecture::kDeepseekV3);
}

TEST(ModelConfigSpellings, HeadDimFromHiddenWhenAbsent) {
  json j = qwen3_base();
  j.erase("head_dim");
  auto c = parse(j);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->attention.head_dim, 32);  // 256 / 8
}

TEST(ModelConfigSpellings, MiniMaxPerHeadQkNorm) {
  json j = minimax_base();
  j["qk_norm_type"] = "per_head";
  auto c = parse(j);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->attention.qk_norm, QkNorm::kPerHead);
}

TEST(ModelConfigSpellings, ModelOptInsideConfigJson) {
  json j = qwen3_base();
  j["quantization_config"] = json::parse(R"({
    "quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
    "kv_cache_quant_algo": "FP8", "ignore": ["lm_head", "model.layers.0.self_attn*"]})");
  auto c = parse(j);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->quant.method, QuantMethod::kNvfp4);
  EXPECT_EQ(c->quant.kv_cache_quant_algo, "FP8");
  EXPECT_EQ(c->quant.ignored_modules.size(), 2u);
}

TEST(ModelConfigSpellings, Fp8Ue8m0ScalesAndPerTensor) {
  json j = deepseek_v3_base();
  j["quantization_config"] = {{"quant_method", "fp8"},
                              {"fmt", "e4m3"},
                              {"activation_scheme", "dynamic"},
                              {"weight_block_size", {128, 128}},
                              {"scale_fmt", "ue8m0"}};
  auto c = parse(j);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->quant.scale_dtype, DType::kUE8M0);
  j["quantization_config"] = {{"quant_method", "fp8"}, {"activation_scheme", "static"}};
  c = parse(j);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_TRUE(c->quant.weight_block_size.empty());
  EXPECT_EQ(c->quant.activation_scheme, ActivationScheme::kStatic);
}

// --- Errors ------------------------------------------------------------------------------------

TEST(ModelConfigErrors, UnknownArchitectureListsSupported) {
  json j = qwen3_base();
  j["architectures"] = {"LlamaForCausalLM"};
  expect_error(parse(j), ErrorCode::kUnsupported,
               {"LlamaForCausalLM", "Qwen3MoeForCausalLM", "DeepseekV3ForCausalLM"});
}

TEST(ModelConfigErrors, MissingRequiredField) {
  json j = qwen3_base();
  j.erase("hidden_size");
  auto c = parse(j);
  expect_error(c, ErrorCode::kNotFound, {});
  EXPECT_EQ(c.error().message(),
            "config.json: missing required field 'hidden_size' (Qwen3MoeForCausalLM)");
}

TEST(ModelConfigErrors, MissingQLoraRankIsNotTheSameAsNull) {
  json j = deepseek_v3_base();
  j.erase("q_lora_rank");
  expect_error(parse(j), ErrorCode::kNotFound, {"'q_lora_rank'"});
  j["q_lora_rank"] = nullptr;
  EXPECT_TRUE(parse(j).has_value());
}

TEST(ModelConfigErrors, WrongTypeNamesFieldAndExpectedType) {
  json j = qwen3_base();
  j["hidden_size"] = "2048";
  expect_error(parse(j), ErrorCode::kInvalidArgument,
               {"'hidden_size'", "an integer", "string", "Qwen3MoeForCausalLM"});
  j = qwen3_base();
  j["norm_topk_prob"] = 1;
  expect_error(parse(j), ErrorCode::kInvalidArgument, {"'norm_topk_prob'", "a boolean"});
  j = qwen3_base();
  j["architectures"] = "Qwen3MoeForCausalLM";
  expect_error(parse(j), ErrorCode::kInvalidArgument, {"'architectures'", "array"});
  j = qwen3_base();
  j["eos_token_id"] = "eos";
  expect_error(parse(j), ErrorCode::kInvalidArgument, {"'eos_token_id'"});
  j = deepseek_v3_base();
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", "40"}};
  expect_error(parse(j), ErrorCode::kInvalidArgument, {"'rope_scaling.factor'", "a number"});
  j = qwen3_base();
  j["num_hidden_layers"] = 1e30;  // a float that does not fit an integer
  expect_error(parse(j), ErrorCode::kInvalidArgument, {"'num_hidden_layers'"});
}

TEST(ModelConfigErrors, HeadsNotDividingHidden) {
  json j = qwen3_base();
  j.erase("head_dim");
  j["num_attention_heads"] = 7;
  j["num_key_value_heads"] = 7;
  expect_error(parse(j), ErrorCode::kInvalidArgument,
               {"hidden_size (256)", "num_attention_heads (7)"});
}

TEST(ModelConfigErrors, KvHeadsNotDividingHeads) {
  json j = qwen3_base();
  j["num_key_value_heads"] = 3;
  expect_error(parse(j), ErrorCode::kInvalidArgument, {"num_key_value_heads (3)"});
}

TEST(ModelConfigErrors, TopKExceedsExperts) {
  json j = qwen3_base();
  j["num_experts_per_tok"] = 17;
  expect_error(parse(j), ErrorCode::kInvalidArgument, {"num_experts_per_tok (17)"});
}

TEST(ModelConfigErrors, NonPositiveSizes) {
  json j = qwen3_base();
  j["hidden_size"] = -1;
  expect_error(parse(j), ErrorCode::kInvalidArgument, {"hidden_size must be positive"});
  j = qwen3_base();
  j["moe_intermediate_size"] = 0;
  expect_error(parse(j), ErrorCode::kInvalidArgument, {"moe_intermediate_size"});
  j = deepseek_v3_base();
  j["kv_lora_rank"] = 0;
  expect_error(parse(j), ErrorCode::kInvalidArgument, {"kv_lora_rank"});
}

TEST(ModelConfigErrors, GroupRoutingMismatch) {
  json j = deepseek_v3_base();
  j["n_group"] = 5;  // does not divide 32
  expect_error(parse(j), ErrorCode::kInvalidArgument, {"n_group (5)"});
  j = deepseek_v3_base();
  j["topk_group"] = 5;  // > n_group 4
  expect_error(parse(j), ErrorCode::kInvalidArgument, {"topk_group (5)", "n_group (4)"});
  j = deepseek_v3_base();
  j["topk_group"] = 1;  // one group of 8 cannot supply top-9
  j["num_experts_per_tok"] = 9;
  expect_error(parse(j), ErrorCode::kInvalidArgument, {"num_experts_per_tok (9)"});
}

TEST(ModelConfigErrors, LayerIndicesOutOfRange) {
  json j = qwen3_base();
  j["mlp_only_layers"] = {4};
  expect_error(parse(j), ErrorCode::kInvalidArgument, {"mlp_only_layers"});
  j = deepseek_v3_base();
  j["first_k_dense_replace"] = 7;
  expect_error(parse(j), ErrorCode::kInvalidArgument, {"first_k_dense_replace (7)"});
}

TEST(ModelConfigErrors, UnsupportedQuantizationNamesTheMethod) {
  json j = qwen3_base();
  j["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}};
  expect_error(parse(j), ErrorCode::kUnsupported, {"'gptq'", "quant_method"});
  j["quantization_config"] = {{"quant_method", "modelopt"}, {"quant_algo", "FP8"}};
  expect_error(parse(j), ErrorCode::kUnsupported, {"'FP8'", "NVFP4"});
  j["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128}}};
  expect_error(parse(j), ErrorCode::kInvalidArgument, {"weight_block_size"});
  j["quantization_config"] = {{"bits", 4}};
  expect_error(parse(j), ErrorCode::kNotFound, {"'quantization_config.quant_method'"});
}

TEST(ModelConfigErrors, UnsupportedRopeScaling) {
  json j = qwen3_base();
  j["rope_scaling"] = {{"type", "longrope"}, {"factor", 4.0}};
  expect_error(parse(j), ErrorCode::kUnsupported, {"'longrope'", "rope_scaling.type"});
  j["rope_scaling"] = {{"factor", 4.0}};
  expect_error(parse(j), ErrorCode::kNotFound, {"rope_scaling.type"});
}

TEST(ModelConfigErrors, MiniMaxLinearAttentionLayers) {
  json j = minimax_base();
  j["attn_type_list"] = {1, 0};
  expect_error(parse(j), ErrorCode::kUnsupported, {"attn_type_list[1]"});
}

TEST(ModelConfigErrors, UnknownDtype) {
  json j = qwen3_base();
  j["torch_dtype"] = "float7";
  expect_error(parse(j), ErrorCode::kInvalidArgument, {"torch_dtype", "'float7'"});
}

TEST(ModelConfigErrors, NotAnObjectAndMalformedText) {
  expect_error(parse(json::array()), ErrorCode::kInvalidArgument, {"JSON object"});
  expect_error(parse_model_config_text("{\"hidden_size\": ", "config.json"), ErrorCode::kParseError,
               {"config.json", "malformed JSON"});
}

// --- Files -------------------------------------------------------------------------------------

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ =
        std::filesystem::temp_directory_path() /
        ("locus_model_config_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name) << text;
  }

 private:
  std::filesystem::path path_;
};

TEST(ModelConfigFiles, MissingDirectoryIsNotFound) {
  auto c = load_model_config(fixture("no-such-model"));
  expect_error(c, ErrorCode::kNotFound, {"no-such-model", "no such file or directory"});
}

TEST(ModelConfigFiles, MalformedFileIsParseError) {
  TempDir dir;
  dir.write("config.json", "{ \"architectures\": [\"Qwen3MoeForCausalLM\"], ");
  expect_error(load_model_config(dir.path()), ErrorCode::kParseError, {"config.json"});
}

TEST(ModelConfigFiles, HfQuantConfigMustAgreeWithConfigJson) {
  TempDir dir;
  json j = deepseek_v3_base();
  j["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
  dir.write("config.json", j.dump());
  dir.write("hf_quant_config.json",
            R"({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4"}})");
  expect_error(load_model_config(dir.path()), ErrorCode::kInvalidArgument,
               {"hf_quant_config.json", "nvfp4", "fp8"});
}

TEST(ModelConfigFiles, BadHfQuantConfigNamesItsFile) {
  TempDir dir;
  dir.write("config.json", qwen3_base().dump());
  dir.write("hf_quant_config.json", R"({"quantization": {"quant_algo": "W4A8_AWQ"}})");
  expect_error(load_model_config(dir.path()), ErrorCode::kUnsupported,
               {"hf_quant_config.json", "'W4A8_AWQ'"});
}

}  // namespace
}  // namespace locus
