// config.json -> ModelConfig: architecture dispatch, per-family field names and defaults, shape
// validation, and file loading. Defaults follow the transformers configuration classes so that a
// config that omits a field means what it means to transformers.
#include "io/model_config.h"

#include <array>
#include <fstream>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/config_json.h"
#include "io/model_config_families.h"

namespace locus {
namespace {

using config_json::Fields;
using model_config_internal::check_positive;
using model_config_internal::parse_deepseek;
using model_config_internal::parse_glm4_moe;
using model_config_internal::parse_minimax_m2;
using model_config_internal::parse_mixtral;
using model_config_internal::parse_qwen3_moe;

constexpr std::array<std::pair<Architecture, std::string_view>, 6> kArchitectures = {{
    {Architecture::kDeepseekV3, "DeepseekV3ForCausalLM"},
    {Architecture::kDeepseekV2, "DeepseekV2ForCausalLM"},
    {Architecture::kGlm4Moe, "Glm4MoeForCausalLM"},
    {Architecture::kMiniMaxM2, "MiniMaxM2ForCausalLM"},
    {Architecture::kQwen3Moe, "Qwen3MoeForCausalLM"},
    {Architecture::kMixtral, "MixtralForCausalLM"},
}};

// Only consulted when "architectures" is absent (some converted checkpoints drop it).
constexpr std::array<std::pair<std::string_view, Architecture>, 7> kModelTypes = {{
    {"deepseek_v3", Architecture::kDeepseekV3},
    {"kimi_k2", Architecture::kDeepseekV3},
    {"deepseek_v2", Architecture::kDeepseekV2},
    {"glm4_moe", Architecture::kGlm4Moe},
    {"minimax_m2", Architecture::kMiniMaxM2},
    {"qwen3_moe", Architecture::kQwen3Moe},
    {"mixtral", Architecture::kMixtral},
}};

Status validate(const Fields& f, const ModelConfig& cfg) {
  const auto& a = cfg.attention;
  const auto& m = cfg.moe;
  for (auto [name, value] : std::initializer_list<std::pair<std::string_view, int64_t>>{
           {"vocab_size", cfg.vocab_size},
           {"hidden_size", cfg.hidden_size},
           {"num_hidden_layers", cfg.num_hidden_layers},
           {"max_position_embeddings", cfg.max_position_embeddings},
           {"intermediate_size", cfg.intermediate_size},
           {"num_attention_heads", a.num_attention_heads},
           {"num_key_value_heads", a.num_key_value_heads},
           {"head_dim", a.head_dim},
           {"num_experts", m.num_experts},
           {"num_experts_per_tok", m.num_experts_per_tok},
           {"moe_intermediate_size", m.moe_intermediate_size},
           {"n_group", m.n_group},
           {"topk_group", m.topk_group},
           {"moe_layer_freq", m.moe_layer_freq},
           {"decoder_sparse_step", m.decoder_sparse_step}}) {
    LOCUS_RETURN_IF_ERROR(check_positive(f, name, value));
  }
  if (!(cfg.rms_norm_eps > 0.0)) {
    return f.invalid(fmt::format("rms_norm_eps must be positive, got {}", cfg.rms_norm_eps));
  }
  if (a.kind == AttentionKind::kGqa && a.num_attention_heads % a.num_key_value_heads != 0) {
    return f.invalid(
        fmt::format("num_attention_heads ({}) must be divisible by num_key_value_heads ({})",
                    a.num_attention_heads, a.num_key_value_heads));
  }
  if (a.kind == AttentionKind::kMla) {
    const auto& mla = a.mla;
    LOCUS_RETURN_IF_ERROR(check_positive(f, "kv_lora_rank", mla.kv_lora_rank));
    LOCUS_RETURN_IF_ERROR(check_positive(f, "qk_rope_head_dim", mla.qk_rope_head_dim));
    LOCUS_RETURN_IF_ERROR(check_positive(f, "v_head_dim", mla.v_head_dim));
    if (mla.qk_nope_head_dim < 0) {
      return f.invalid(
          fmt::format("qk_nope_head_dim must not be negative, got {}", mla.qk_nope_head_dim));
    }
    if (mla.q_lora_rank) LOCUS_RETURN_IF_ERROR(check_positive(f, "q_lora_rank", *mla.q_lora_rank));
  }
  const int64_t rope_span = a.kind == AttentionKind::kMla ? a.mla.qk_rope_head_dim : a.head_dim;
  if (cfg.rope.rotary_dim <= 0 || cfg.rope.rotary_dim % 2 != 0 || cfg.rope.rotary_dim > rope_span) {
    return f.invalid(fmt::format("rotary dimension {} must be even and in (0, {}]",
                                 cfg.rope.rotary_dim, rope_span));
  }
  if (a.sliding_window && *a.sliding_window <= 0) {
    return f.invalid(fmt::format("sliding_window must be positive, got {}", *a.sliding_window));
  }
  if (m.num_experts_per_tok > m.num_experts) {
    return f.invalid(fmt::format("num_experts_per_tok ({}) exceeds the number of experts ({})",
                                 m.num_experts_per_tok, m.num_experts));
  }
  if (m.num_experts % m.n_group != 0) {
    return f.invalid(fmt::format("n_group ({}) does not divide the number of experts ({})",
                                 m.n_group, m.num_experts));
  }
  if (m.topk_group > m.n_group) {
    return f.invalid(fmt::format("topk_group ({}) exceeds n_group ({})", m.topk_group, m.n_group));
  }
  const bool grouped = m.topk_method != TopkMethod::kGreedy && m.n_group > 1;
  if (grouped && m.num_experts_per_tok > m.topk_group * (m.num_experts / m.n_group)) {
    return f.invalid(
        fmt::format("num_experts_per_tok ({}) exceeds the experts in topk_group ({}) groups of {}",
                    m.num_experts_per_tok, m.topk_group, m.num_experts / m.n_group));
  }
  if (!(m.routed_scaling_factor > 0.0)) {
    return f.invalid(
        fmt::format("routed_scaling_factor must be positive, got {}", m.routed_scaling_factor));
  }
  if (m.num_shared_experts < 0 || m.shared_expert_intermediate_size < 0) {
    return f.invalid("the number and width of shared experts must not be negative");
  }
  if (m.first_k_dense_replace < 0 || m.first_k_dense_replace > cfg.num_hidden_layers) {
    return f.invalid(fmt::format("first_k_dense_replace ({}) must be in [0, num_hidden_layers={}]",
                                 m.first_k_dense_replace, cfg.num_hidden_layers));
  }
  for (int64_t layer : m.mlp_only_layers) {
    if (layer < 0 || layer >= cfg.num_hidden_layers) {
      return f.invalid(
          fmt::format("mlp_only_layers entry {} is outside [0, {})", layer, cfg.num_hidden_layers));
    }
  }
  if (cfg.num_nextn_predict_layers < 0) {
    return f.invalid(fmt::format("num_nextn_predict_layers must not be negative, got {}",
                                 cfg.num_nextn_predict_layers));
  }
  return Status::ok();
}

Expected<Architecture> resolve_architecture(const Fields& f, std::string& hf_name) {
  if (f.has("architectures")) {
    LOCUS_ASSIGN_OR_RETURN(auto names, f.string_list("architectures"));
    if (names.empty()) return f.invalid("field 'architectures' is empty");
    for (const auto& name : names) {
      if (auto arch = parse_architecture(name)) {
        hf_name = name;
        return *arch;
      }
    }
    return f.error(ErrorCode::kUnsupported,
                   fmt::format("architecture '{}' is not supported (supported: {})", names[0],
                               supported_architectures()));
  }
  LOCUS_ASSIGN_OR_RETURN(auto model_type, f.optional_string("model_type"));
  if (!model_type) return f.missing("architectures");
  for (auto [type, arch] : kModelTypes) {
    if (type == *model_type) {
      hf_name = std::string(architecture_name(arch));
      return arch;
    }
  }
  return f.error(ErrorCode::kUnsupported,
                 fmt::format("model_type '{}' is not supported and 'architectures' is absent "
                             "(supported: {})",
                             *model_type, supported_architectures()));
}

Expected<ModelConfig> parse_impl(const nlohmann::json& config, std::string_view source_name) {
  Fields f(config, std::string(source_name), "", "");
  if (!config.is_object()) {
    return f.invalid(fmt::format("expected a JSON object, got {}", config_json::type_name(config)));
  }
  ModelConfig cfg;
  cfg.source_name = std::string(source_name);
  LOCUS_ASSIGN_OR_RETURN(cfg.architecture, resolve_architecture(f, cfg.architecture_name));
  f.set_context(cfg.architecture_name);

  LOCUS_ASSIGN_OR_RETURN(cfg.model_type, f.string_or("model_type", ""));
  LOCUS_ASSIGN_OR_RETURN(cfg.vocab_size, f.require_int("vocab_size"));
  LOCUS_ASSIGN_OR_RETURN(cfg.hidden_size, f.require_int("hidden_size"));
  LOCUS_ASSIGN_OR_RETURN(cfg.num_hidden_layers, f.require_int("num_hidden_layers"));
  LOCUS_ASSIGN_OR_RETURN(cfg.max_position_embeddings, f.require_int("max_position_embeddings"));
  LOCUS_RETURN_IF_ERROR(check_positive(f, "hidden_size", cfg.hidden_size));
  LOCUS_ASSIGN_OR_RETURN(cfg.tie_word_embeddings, f.bool_or("tie_word_embeddings", false));
  LOCUS_ASSIGN_OR_RETURN(cfg.bos_token_id, f.optional_int("bos_token_id"));
  LOCUS_ASSIGN_OR_RETURN(cfg.eos_token_ids, f.int_or_int_list("eos_token_id"));
  LOCUS_ASSIGN_OR_RETURN(cfg.pad_token_id, f.optional_int("pad_token_id"));
  LOCUS_ASSIGN_OR_RETURN(cfg.hidden_act, f.string_or("hidden_act", "silu"));

  // transformers 5 writes "dtype"; older configs "torch_dtype". Absent means the bf16 every
  // supported family ships in.
  std::string_view dtype_key = f.has("torch_dtype") ? "torch_dtype" : "dtype";
  LOCUS_ASSIGN_OR_RETURN(auto dtype_name, f.optional_string(dtype_key));
  if (dtype_name) {
    auto dtype = parse_dtype(*dtype_name);
    if (!dtype)
      return f.invalid(fmt::format("{} '{}' is not a known dtype", dtype_key, *dtype_name));
    cfg.dtype = *dtype;
  }

  switch (cfg.architecture) {
    case Architecture::kDeepseekV3:
      LOCUS_RETURN_IF_ERROR(parse_deepseek(f, cfg, /*is_v3=*/true));
      break;
    case Architecture::kDeepseekV2:
      LOCUS_RETURN_IF_ERROR(parse_deepseek(f, cfg, /*is_v3=*/false));
      break;
    case Architecture::kGlm4Moe:
      LOCUS_RETURN_IF_ERROR(parse_glm4_moe(f, cfg));
      break;
    case Architecture::kMiniMaxM2:
      LOCUS_RETURN_IF_ERROR(parse_minimax_m2(f, cfg));
      break;
    case Architecture::kQwen3Moe:
      LOCUS_RETURN_IF_ERROR(parse_qwen3_moe(f, cfg));
      break;
    case Architecture::kMixtral:
      LOCUS_RETURN_IF_ERROR(parse_mixtral(f, cfg));
      break;
  }
  LOCUS_RETURN_IF_ERROR(validate(f, cfg));

  if (const nlohmann::json* q = f.find("quantization_config")) {
    LOCUS_ASSIGN_OR_RETURN(cfg.quant,
                           parse_quantization_config(*q, source_name, cfg.architecture_name));
  }
  return cfg;
}

Expected<std::string> read_text_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return not_found(fmt::format("{}: no such file", path.string()));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(fmt::format("{}: cannot open for reading", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return io_error(fmt::format("{}: read failed", path.string()));
  return text.str();
}

Expected<nlohmann::json> parse_json_text(std::string_view text, std::string_view source_name) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return parse_error(fmt::format("{}: malformed JSON: {}", source_name, e.what()));
  }
}

}  // namespace

std::string_view architecture_name(Architecture arch) {
  for (auto [a, name] : kArchitectures) {
    if (a == arch) return name;
  }
  return "unknown";
}

std::optional<Architecture> parse_architecture(std::string_view hf_name) {
  for (auto [a, name] : kArchitectures) {
    if (name == hf_name) return a;
  }
  return std::nullopt;
}

std::string supported_architectures() {
  std::string out;
  for (auto [a, name] : kArchitectures) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

Expected<ModelConfig> parse_model_config(const nlohmann::json& config,
                                         std::string_view source_name) {
  // Every read checks types first, so this is a backstop: no exception may cross the boundary.
  try {
    return parse_impl(config, source_name);
  } catch (const std::exception& e) {
    return internal_error(
        fmt::format("{}: unexpected error while parsing: {}", source_name, e.what()));
  }
}

Expected<ModelConfig> parse_model_config_text(std::string_view json_text,
                                              std::string_view source_name) {
  LOCUS_ASSIGN_OR_RETURN(auto json, parse_json_text(json_text, source_name));
  return parse_model_config(json, source_name);
}

Expected<ModelConfig> load_model_config(const std::filesystem::path& model_dir_or_file) {
  std::error_code ec;
  std::filesystem::path file = model_dir_or_file;
  if (!std::filesystem::exists(file, ec)) {
    return not_found(fmt::format(
        "{}: no such file or directory (expected a model directory holding config.json, or a "
        "config.json file)",
        file.string()));
  }
  if (std::filesystem::is_directory(file, ec)) file /= "config.json";
  LOCUS_ASSIGN_OR_RETURN(auto text, read_text_file(file));
  LOCUS_ASSIGN_OR_RETURN(auto cfg, parse_model_config_text(text, file.string()));

  const auto hf_quant_path = file.parent_path() / "hf_quant_config.json";
  if (!std::filesystem::is_regular_file(hf_quant_path, ec)) return cfg;
  LOCUS_ASSIGN_OR_RETURN(auto quant_text, read_text_file(hf_quant_path));
  LOCUS_ASSIGN_OR_RETURN(auto quant_json, parse_json_text(quant_text, hf_quant_path.string()));
  Expected<QuantConfig> quant = [&]() -> Expected<QuantConfig> {
    try {
      return parse_hf_quant_config(quant_json, hf_quant_path.string());
    } catch (const std::exception& e) {
      return internal_error(
          fmt::format("{}: unexpected error while parsing: {}", hf_quant_path.string(), e.what()));
    }
  }();
  if (!quant) return quant.error();
  if (!cfg.quant.is_quantized()) {
    cfg.quant = std::move(*quant);
  } else if (cfg.quant.method != quant->method) {
    return invalid_argument(fmt::format(
        "{}: quantization {} disagrees with {}'s quantization_config ({})", hf_quant_path.string(),
        quant_method_name(quant->method), file.string(), quant_method_name(cfg.quant.method)));
  } else if (cfg.quant.producer.empty()) {
    cfg.quant.producer = quant->producer;
  }
  return cfg;
}

}  // namespace locus
