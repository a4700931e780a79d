#include "model/weight_layout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>

#include "core/convert.h"
#include "io/safetensors_writer.h"
#include "model/dummy_weights.h"

namespace locus {
namespace {

namespace fs = std::filesystem;

ModelConfig fixture(const std::string& name) {
  auto config = load_model_config(fs::path(LOCUS_TEST_DATA_DIR) / "configs" / name);
  EXPECT_TRUE(config) << config.status().to_string();
  return *config;
}

WeightLayout layout_of(const ModelConfig& config) {
  auto layout = weight_layout(config);
  EXPECT_TRUE(layout) << layout.status().to_string();
  return *layout;
}

void expect_spec(const WeightLayout& layout, const std::string& name, Dims shape, DType dtype) {
  const WeightSpec* spec = layout.find(name);
  ASSERT_NE(spec, nullptr) << name;
  EXPECT_EQ(spec->shape, shape) << name;
  EXPECT_EQ(spec->dtype, dtype) << name;
}

// Parameters counted from the layout (scales excluded; packed fp4 bytes hold two weights).
int64_t layout_parameters(const WeightLayout& layout) {
  int64_t n = 0;
  for (const auto& s : layout.specs) {
    if (s.role == WeightRole::kWeightScale || s.role == WeightRole::kGlobalScale) continue;
    n += shape_numel(s.shape) * (s.dtype == DType::kU8 ? 2 : 1);
  }
  return n;
}

class EveryFixture : public testing::TestWithParam<std::string> {};

// The layout and ModelConfig::num_parameters() are written independently (names and shapes
// here, a formula there); agreeing on the count of every real model checks both.
TEST_P(EveryFixture, LayoutMatchesTheConfigsParameterCount) {
  ModelConfig config = fixture(GetParam());
  WeightLayout layout = layout_of(config);
  EXPECT_EQ(layout_parameters(layout), config.num_parameters()) << config.summary();
  // Names are unique.
  std::set<std::string> names;
  for (const auto& s : layout.specs)
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
}

INSTANTIATE_TEST_SUITE_P(Configs, EveryFixture,
                         testing::Values("deepseek-v3", "kimi-k2-instruct", "deepseek-v2-lite",
                                         "glm-4.5", "glm-4.5-air", "minimax-m2", "qwen3-30b-a3b",
                                         "qwen3-235b-a22b", "mixtral-8x7b-v0.1",
                                         "qwen3-30b-a3b-nvfp4"));

TEST(WeightLayout, Qwen3MoeNamesAndShapes) {
  WeightLayout l = layout_of(fixture("qwen3-30b-a3b"));
  expect_spec(l, "model.embed_tokens.weight", {151936, 2048}, DType::kBF16);
  expect_spec(l, "model.layers.0.self_attn.q_proj.weight", {4096, 2048}, DType::kBF16);
  expect_spec(l, "model.layers.0.self_attn.k_proj.weight", {512, 2048}, DType::kBF16);
  expect_spec(l, "model.layers.47.self_attn.q_norm.weight", {128}, DType::kBF16);
  expect_spec(l, "model.layers.47.mlp.gate.weight", {128, 2048}, DType::kBF16);
  expect_spec(l, "model.layers.47.mlp.experts.127.down_proj.weight", {2048, 768}, DType::kBF16);
  expect_spec(l, "lm_head.weight", {151936, 2048}, DType::kBF16);
  EXPECT_EQ(l.find("model.layers.48.input_layernorm.weight"), nullptr);
  // 48 layers x (2 norms + 4 proj + 2 qk norms + router + 128 x 3 experts) + embed, norm, head.
  EXPECT_EQ(l.specs.size(), 48u * (2 + 4 + 2 + 1 + 128 * 3) + 3);
}

TEST(WeightLayout, DeepseekV3Fp8HasBlockScalesAndDenseLayers) {
  ModelConfig c = fixture("deepseek-v3");
  WeightLayout l = layout_of(c);
  const std::string p0 = "model.layers.0.", p3 = "model.layers.3.";
  expect_spec(l, p0 + "mlp.gate_proj.weight", {18432, 7168}, DType::kF8E4M3);
  expect_spec(l, p0 + "mlp.gate_proj.weight_scale_inv", {144, 56}, DType::kF32);
  EXPECT_EQ(l.find(p0 + "mlp.gate.weight"), nullptr);  // first_k_dense_replace = 3
  expect_spec(l, p3 + "mlp.gate.weight", {256, 7168}, DType::kBF16);
  expect_spec(l, p3 + "mlp.gate.e_score_correction_bias", {256}, DType::kF32);
  expect_spec(l, p3 + "mlp.experts.255.down_proj.weight", {7168, 2048}, DType::kF8E4M3);
  expect_spec(l, p3 + "mlp.shared_experts.up_proj.weight", {2048, 7168}, DType::kF8E4M3);
  expect_spec(l, p3 + "self_attn.q_a_proj.weight", {1536, 7168}, DType::kF8E4M3);
  expect_spec(l, p3 + "self_attn.q_a_layernorm.weight", {1536}, DType::kBF16);
  expect_spec(l, p3 + "self_attn.q_b_proj.weight", {128 * 192, 1536}, DType::kF8E4M3);
  expect_spec(l, p3 + "self_attn.kv_a_proj_with_mqa.weight", {576, 7168}, DType::kF8E4M3);
  expect_spec(l, p3 + "self_attn.kv_a_proj_with_mqa.weight_scale_inv", {5, 56}, DType::kF32);
  expect_spec(l, p3 + "self_attn.kv_b_proj.weight", {128 * 256, 512}, DType::kF8E4M3);
  expect_spec(l, p3 + "self_attn.o_proj.weight", {7168, 128 * 128}, DType::kF8E4M3);
  // The MTP layer (index 61) is not part of the main model.
  EXPECT_EQ(l.find("model.layers.61.input_layernorm.weight"), nullptr);
  EXPECT_NE(l.find("model.layers.60.input_layernorm.weight"), nullptr);
}

TEST(WeightLayout, DeepseekV2LiteProjectsQDirectly) {
  WeightLayout l = layout_of(fixture("deepseek-v2-lite"));
  expect_spec(l, "model.layers.1.self_attn.q_proj.weight", {16 * 192, 2048}, DType::kBF16);
  EXPECT_EQ(l.find("model.layers.1.self_attn.q_a_proj.weight"), nullptr);
  EXPECT_EQ(l.find("model.layers.1.mlp.gate.e_score_correction_bias"), nullptr);  // softmax
  expect_spec(l, "model.layers.1.mlp.shared_experts.down_proj.weight", {2048, 2816}, DType::kBF16);
}

TEST(WeightLayout, KimiK2Has384Experts) {
  WeightLayout l = layout_of(fixture("kimi-k2-instruct"));
  expect_spec(l, "model.layers.1.mlp.gate.weight", {384, 7168}, DType::kBF16);
  EXPECT_NE(l.find("model.layers.1.mlp.experts.383.up_proj.weight_scale_inv"), nullptr);
  EXPECT_EQ(l.find("model.layers.0.mlp.gate.weight"), nullptr);  // first_k_dense_replace = 1
}

TEST(WeightLayout, Glm45BiasesAndSharedExperts) {
  ModelConfig c = fixture("glm-4.5-air");
  WeightLayout l = layout_of(c);
  const int64_t q = c.attention.num_attention_heads * c.attention.head_dim;
  expect_spec(l, "model.layers.0.self_attn.q_proj.bias", {q}, DType::kBF16);
  expect_spec(l, "model.layers.0.mlp.gate_proj.weight", {c.intermediate_size, c.hidden_size},
              DType::kBF16);
  expect_spec(l, "model.layers.1.mlp.gate.e_score_correction_bias", {c.moe.num_experts},
              DType::kF32);
  EXPECT_NE(l.find("model.layers.1.mlp.shared_experts.gate_proj.weight"), nullptr);
  EXPECT_EQ(l.find("model.layers.0.self_attn.o_proj.bias"), nullptr);
}

TEST(WeightLayout, MiniMaxM2PerLayerQkNormAndRouterBias) {
  ModelConfig c = fixture("minimax-m2");
  WeightLayout l = layout_of(c);
  expect_spec(l, "model.layers.0.self_attn.q_norm.weight", {48 * 128}, DType::kBF16);
  expect_spec(l, "model.layers.0.self_attn.k_norm.weight", {8 * 128}, DType::kBF16);
  expect_spec(l, "model.layers.0.block_sparse_moe.e_score_correction_bias", {256}, DType::kF32);
  expect_spec(l, "model.layers.0.block_sparse_moe.experts.0.w1.weight", {1536, 3072},
              DType::kF8E4M3);
  expect_spec(l, "model.layers.0.block_sparse_moe.experts.0.w2.weight_scale_inv", {24, 12},
              DType::kF32);
  // modules_to_not_convert keeps the router and lm_head in bf16 (never a "gate_proj" match).
  expect_spec(l, "model.layers.0.block_sparse_moe.gate.weight", {256, 3072}, DType::kBF16);
  expect_spec(l, "lm_head.weight", {200064, 3072}, DType::kBF16);
}

TEST(WeightLayout, MixtralExpertsAreW1W2W3) {
  WeightLayout l = layout_of(fixture("mixtral-8x7b-v0.1"));
  expect_spec(l, "model.layers.31.block_sparse_moe.experts.7.w1.weight", {14336, 4096},
              DType::kBF16);
  expect_spec(l, "model.layers.31.block_sparse_moe.experts.7.w2.weight", {4096, 14336},
              DType::kBF16);
  expect_spec(l, "model.layers.0.block_sparse_moe.gate.weight", {8, 4096}, DType::kBF16);
}

TEST(WeightLayout, Nvfp4PackedWeightsAndScales) {
  ModelConfig c = fixture("qwen3-30b-a3b-nvfp4");
  ASSERT_EQ(c.quant.method, QuantMethod::kNvfp4);
  WeightLayout l = layout_of(c);
  const std::string e = "model.layers.0.mlp.experts.0.gate_proj.";
  expect_spec(l, e + "weight", {768, 1024}, DType::kU8);
  expect_spec(l, e + "weight_scale", {768, 128}, DType::kF8E4M3);
  expect_spec(l, e + "weight_scale_2", {}, DType::kF32);
  expect_spec(l, e + "input_scale", {}, DType::kF32);
}

TEST(WeightLayout, UnsupportedQuantizationIsAnError) {
  ModelConfig c = fixture("qwen3-30b-a3b-nvfp4");
  c.quant.group_size = 24;  // 2048 input features are not a multiple of 24
  auto l = weight_layout(c);
  ASSERT_FALSE(l);
  EXPECT_EQ(l.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(l.error().message().find("group size 24"), std::string::npos);
}

// ---- dummy weights ----------------------------------------------------------------------------

// A two-layer DeepSeek-V3-shaped model with fp8 128x128 blocks: small enough to write to disk.
constexpr const char* kTinyDeepseek = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
  "vocab_size": 512, "hidden_size": 256, "intermediate_size": 384, "moe_intermediate_size": 128,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
  "n_shared_experts": 1, "n_routed_experts": 8, "num_experts_per_tok": 2, "n_group": 2,
  "topk_group": 1, "routed_scaling_factor": 2.5, "norm_topk_prob": true, "scoring_func": "sigmoid",
  "topk_method": "noaux_tc", "first_k_dense_replace": 1, "moe_layer_freq": 1,
  "q_lora_rank": 96, "kv_lora_rank": 64, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
  "v_head_dim": 32, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 10000,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "hidden_act": "silu",
  "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                          "weight_block_size": [128, 128]}
})";

ModelConfig tiny_deepseek() {
  auto c = parse_model_config_text(kTinyDeepseek, "tiny/config.json");
  EXPECT_TRUE(c) << c.status().to_string();
  return *c;
}

TEST(DummyWeights, DeterministicPerSeedAndName) {
  WeightLayout l = layout_of(tiny_deepseek());
  DummyWeights a(l, 7), b(l, 7), other(l, 8);
  const std::string name = "model.layers.1.mlp.experts.3.up_proj.weight";
  auto ta = a.tensor(name), tb = b.tensor(name), tc = other.tensor(name);
  ASSERT_TRUE(ta && tb && tc);
  EXPECT_EQ(std::memcmp(ta->raw_data(), tb->raw_data(), ta->nbytes()), 0);
  EXPECT_NE(std::memcmp(ta->raw_data(), tc->raw_data(), ta->nbytes()), 0);
  auto td = a.tensor("model.layers.1.mlp.experts.4.up_proj.weight");
  ASSERT_TRUE(td);
  EXPECT_NE(std::memcmp(ta->raw_data(), td->raw_data(), ta->nbytes()), 0);
  EXPECT_FALSE(a.tensor("model.layers.9.mlp.gate.weight"));
}

TEST(DummyWeights, ValuesFollowTheRoleRanges) {
  ModelConfig c = tiny_deepseek();
  DummyWeights w(layout_of(c), 0);
  // A norm: 1 +- 0.1, plus half a bf16 ulp at 1.1 (2^-8) for the rounding.
  auto norm = w.tensor("model.layers.0.input_layernorm.weight");
  ASSERT_TRUE(norm);
  std::vector<float> v(static_cast<size_t>(norm->numel()));
  ASSERT_TRUE(convert_to_f32(norm->dtype(), norm->raw_data(), v.data(), v.size()).is_ok());
  for (float x : v)
    EXPECT_NEAR(x, 1.0f, 0.1f + 0.00391f);

  // An fp8 weight times its block scale stays within sqrt(3/fan_in) and is not degenerate.
  const std::string m = "model.layers.1.mlp.experts.0.gate_proj";
  auto q = w.tensor(m + ".weight");
  auto s = w.tensor(m + ".weight_scale_inv");
  ASSERT_TRUE(q && s);
  ASSERT_EQ(s->shape(), (Dims{1, 2}));
  std::vector<float> dq(static_cast<size_t>(q->numel()));
  ASSERT_TRUE(convert_to_f32(DType::kF8E4M3, q->raw_data(), dq.data(), dq.size()).is_ok());
  const float bound = std::sqrt(3.0f / 256.0f);
  double sum_sq = 0;
  for (int64_t r = 0; r < 128; ++r) {
    for (int64_t col = 0; col < 256; ++col) {
      float x = dq[static_cast<size_t>(r * 256 + col)] * s->data<float>()[col / 128];
      EXPECT_LE(std::fabs(x), 1.26f * bound);
      sum_sq += static_cast<double>(x) * x;
    }
  }
  double rms = std::sqrt(sum_sq / (128.0 * 256.0));
  EXPECT_GT(rms, 0.4 * bound);  // U(-a, a) has rms a/sqrt(3) = 0.577a
  EXPECT_LT(rms, 0.8 * bound);
}

TEST(DummyWeights, FullSizeQwen3IsListedWithoutAllocating) {
  DummyWeights w(layout_of(fixture("qwen3-30b-a3b")), 0);
  EXPECT_GT(w.layout().total_bytes(), 60'000'000'000ull);  // ~61 GB in bf16
  auto info = w.info("model.layers.47.mlp.experts.127.gate_proj.weight");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->shape, (Dims{768, 2048}));
  auto t = w.tensor("model.layers.47.mlp.experts.127.gate_proj.weight");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->nbytes(), 768u * 2048u * 2u);
}

// Dummy weights written as a sharded checkpoint and read back pass the layout check and keep
// every byte; then broken checkpoints fail it with messages naming the tensors.
TEST(CheckWeights, DummyCheckpointRoundTripAndMismatches) {
  ModelConfig c = tiny_deepseek();
  WeightLayout layout = layout_of(c);
  DummyWeights dummy(layout, 3);
  NamedTensors tensors;
  for (const auto& spec : layout.specs) {
    auto t = dummy.tensor(spec.name);
    ASSERT_TRUE(t) << t.status().to_string();
    tensors.emplace_back(spec.name, *t);
  }
  fs::path dir = fs::path(testing::TempDir()) / "locus_dummy_roundtrip";
  fs::remove_all(dir);
  ASSERT_TRUE(write_sharded_checkpoint(dir, tensors, 1 << 20).is_ok());
  auto source = CheckpointWeights::open(dir);
  ASSERT_TRUE(source) << source.status().to_string();
  auto report = check_weights(**source, layout);
  ASSERT_TRUE(report) << report.status().to_string();
  EXPECT_TRUE(report->unused.empty());
  for (const auto& [name, t] : tensors) {
    auto read = (*source)->tensor(name);
    ASSERT_TRUE(read);
    ASSERT_EQ(read->nbytes(), t.nbytes());
    EXPECT_EQ(std::memcmp(read->raw_data(), t.raw_data(), t.nbytes()), 0) << name;
  }

  // Drop one tensor, reshape another, retype a third, add an extra one.
  NamedTensors broken;
  for (const auto& [name, t] : tensors) {
    if (name == "model.layers.1.mlp.experts.5.down_proj.weight") continue;
    if (name == "model.layers.1.self_attn.kv_a_layernorm.weight") {
      broken.emplace_back(name, *Tensor::zeros({65}, DType::kBF16));
    } else if (name == "model.layers.0.mlp.up_proj.weight_scale_inv") {
      broken.emplace_back(name, *Tensor::zeros(t.shape(), DType::kBF16));
    } else {
      broken.emplace_back(name, t);
    }
  }
  broken.emplace_back("model.layers.2.input_layernorm.weight", *Tensor::zeros({256}, DType::kBF16));
  fs::path bad_dir = fs::path(testing::TempDir()) / "locus_dummy_broken";
  fs::remove_all(bad_dir);
  ASSERT_TRUE(write_sharded_checkpoint(bad_dir, broken, 1 << 20).is_ok());
  auto bad = CheckpointWeights::open(bad_dir);
  ASSERT_TRUE(bad);
  auto failed = check_weights(**bad, layout);
  ASSERT_FALSE(failed);
  const std::string& msg = failed.error().message();
  EXPECT_NE(msg.find("3 tensors do not match"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing tensor 'model.layers.1.mlp.experts.5.down_proj.weight'"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("'model.layers.1.self_attn.kv_a_layernorm.weight' has shape [65]"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("'model.layers.0.mlp.up_proj.weight_scale_inv' has dtype bf16"),
            std::string::npos)
      << msg;

  // A bf16 norm stored as f32 is acceptable; the extra layer is reported as unused.
  NamedTensors widened;
  for (const auto& [name, t] : tensors) {
    if (name == "model.norm.weight") {
      widened.emplace_back(name, *Tensor::zeros(t.shape(), DType::kF32));
    } else {
      widened.emplace_back(name, t);
    }
  }
  widened.emplace_back("model.layers.2.input_layernorm.weight",
                       *Tensor::zeros({256}, DType::kBF16));
  fs::path wide_dir = fs::path(testing::TempDir()) / "locus_dummy_widened";
  fs::remove_all(wide_dir);
  ASSERT_TRUE(write_sharded_checkpoint(wide_dir, widened, 1 << 20).is_ok());
  auto wide = CheckpointWeights::open(wide_dir);
  ASSERT_TRUE(wide);
  auto ok = check_weights(**wide, layout);
  ASSERT_TRUE(ok) << ok.status().to_string();
  ASSERT_EQ(ok->unused.size(), 1u);
  EXPECT_EQ(ok->unused[0], "model.layers.2.input_layernorm.weight");
}

}  // namespace
}  // namespace locus
