// Hugging Face config.json -> one typed ModelConfig for the MoE families locus serves. Every
// family-specific field name and default is resolved here, so the model code reads one struct
// and never looks at JSON. Validates shapes once; never throws.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/dtype.h"
#include "core/status.h"
#include "io/quant_config.h"
#include "io/rope_config.h"

namespace locus {

enum class Architecture : uint8_t {
  kDeepseekV3,  // DeepseekV3ForCausalLM: DeepSeek-V3/R1, Kimi-K2 (MLA + sigmoid noaux_tc MoE)
  kDeepseekV2,  // DeepseekV2ForCausalLM: DeepSeek-V2(-Lite) (MLA + softmax MoE)
  kGlm4Moe,     // Glm4MoeForCausalLM: GLM-4.5, GLM-4.5-Air
  kMiniMaxM2,   // MiniMaxM2ForCausalLM: MiniMax-M2
  kQwen3Moe,    // Qwen3MoeForCausalLM: Qwen3-30B-A3B, Qwen3-235B-A22B
  kMixtral,     // MixtralForCausalLM: Mixtral-8x7B/8x22B
};

// The HF class name ("Qwen3MoeForCausalLM").
std::string_view architecture_name(Architecture arch);
// Accepts the HF class name; nullopt for anything else.
std::optional<Architecture> parse_architecture(std::string_view hf_name);
// "DeepseekV3ForCausalLM, DeepseekV2ForCausalLM, ..." for error messages and --help.
std::string supported_architectures();

enum class AttentionKind : uint8_t { kGqa, kMla };

// Which RMSNorm, if any, is applied to q and k before rope.
enum class QkNorm : uint8_t {
  kNone,
  kPerHead,   // one weight of size head_dim shared by all heads (Qwen3, GLM-4.5 use_qk_norm)
  kPerLayer,  // one weight over all heads at once, num_heads*head_dim (MiniMax-M2 "per_layer")
};

struct MlaConfig {
  std::optional<int64_t> q_lora_rank;  // nullopt: q is projected directly (DeepSeek-V2-Lite)
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
};

struct AttentionConfig {
  AttentionKind kind = AttentionKind::kGqa;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // MLA: as written (equals heads); only GQA uses it
  // Width of one q/k head. GQA: explicit head_dim or hidden_size / num_attention_heads.
  // MLA: qk_nope_head_dim + qk_rope_head_dim.
  int64_t head_dim = 0;
  int64_t v_head_dim = 0;  // GQA: head_dim; MLA: v_head_dim
  bool qkv_bias = false;   // q/k/v projections carry a bias (GLM attention_bias)
  bool o_bias = false;     // o projection carries a bias (Qwen3 attention_bias)
  QkNorm qk_norm = QkNorm::kNone;
  std::optional<int64_t> sliding_window;  // Mixtral/Qwen3 when enabled; nullopt = full attention
  MlaConfig mla;                          // meaningful when kind == kMla
};

enum class ScoringFunc : uint8_t { kSoftmax, kSigmoid };

// DeepSeek's names for how the top-k is chosen.
enum class TopkMethod : uint8_t {
  kGreedy,              // plain top-k over scores
  kGroupLimitedGreedy,  // top-k within the topk_group best groups (group score = max)
  kNoauxTc,             // scores + e_score_correction_bias choose; group score = sum of top-2
};

struct MoeConfig {
  int64_t num_experts = 0;  // routed experts (n_routed_experts / num_experts / num_local_experts)
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;  // one routed expert's FFN width
  int64_t num_shared_experts = 0;
  // Width of the always-on shared MLP (all shared experts fused): n_shared * moe_intermediate for
  // DeepSeek/GLM, shared_intermediate_size for MiniMax; 0 without shared experts.
  int64_t shared_expert_intermediate_size = 0;
  ScoringFunc scoring_func = ScoringFunc::kSoftmax;
  TopkMethod topk_method = TopkMethod::kGreedy;
  // The router has an e_score_correction_bias that biases selection only (not the weights).
  bool has_score_correction_bias = false;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  double routed_scaling_factor = 1.0;
  bool norm_topk_prob = false;  // renormalize the top-k weights to sum to 1
  // Layer placement; see ModelConfig::is_moe_layer for how each family combines them.
  int64_t first_k_dense_replace = 0;
  int64_t moe_layer_freq = 1;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
};

struct ModelConfig {
  Architecture architecture = Architecture::kQwen3Moe;
  std::string architecture_name;  // as written in config.json's "architectures"
  std::string model_type;         // "deepseek_v3", "kimi_k2", "qwen3_moe", ... (informational)
  std::string source_name;        // where the config came from, for later error messages

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;  // excludes MTP layers
  int64_t intermediate_size = 0;  // dense MLP width (equals the expert width where all are MoE)
  double rms_norm_eps = 1e-6;
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // config.json's eos_token_id, int or list
  std::optional<int64_t> pad_token_id;
  DType dtype = DType::kBF16;  // torch_dtype / dtype: the unquantized weights' type
  std::string hidden_act = "silu";
  int64_t num_nextn_predict_layers = 0;  // MTP modules in the checkpoint; locus skips them

  AttentionConfig attention;
  RopeConfig rope;
  MoeConfig moe;
  QuantConfig quant;

  bool is_mla() const { return attention.kind == AttentionKind::kMla; }
  // Whether decoder layer `layer` (0-based) has a routed-expert MLP rather than a dense one.
  bool is_moe_layer(int64_t layer) const;
  int64_t num_moe_layers() const;

  // 1/sqrt(qk head dim), times DeepSeek's yarn mscale(mscale_all_dim)^2 for MLA models: their
  // attention logits are rescaled for the extended context, others fold yarn into cos/sin.
  double attention_softmax_scale() const;

  // Parameter counts of the main model (embeddings, lm_head and norms included; MTP layers
  // excluded), from the shapes alone. Active = with only num_experts_per_tok routed experts.
  int64_t num_parameters() const;
  int64_t num_active_parameters() const;

  // One line: "Qwen3MoeForCausalLM (qwen3_moe): 48 layers, hidden 2048, GQA 32/4 x 128, ...".
  std::string summary() const;
};

// Builds a ModelConfig from a parsed config.json object. `source_name` prefixes error messages
// ("config.json: missing required field 'hidden_size' (Qwen3MoeForCausalLM)").
// Codes: kUnsupported (unknown architecture / quant method), kNotFound (missing required
// field), kInvalidArgument (wrong JSON type or inconsistent values).
Expected<ModelConfig> parse_model_config(const nlohmann::json& config,
                                         std::string_view source_name);

// Same, from text; malformed JSON is kParseError with the parser's position.
Expected<ModelConfig> parse_model_config_text(std::string_view json_text,
                                              std::string_view source_name);

// Reads <dir>/config.json (or the file itself when given one). When hf_quant_config.json sits
// next to it (ModelOpt exports) and config.json has no quantization_config, its quantization is
// used; when both are present they must agree on the method.
Expected<ModelConfig> load_model_config(const std::filesystem::path& model_dir_or_file);

}  // namespace locus
