#include "model/weight_layout.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <unordered_set>

#include "model/arch/layouts.h"
#include "model/weight_source.h"

namespace locus {

std::string_view weight_role_name(WeightRole role) {
  switch (role) {
    case WeightRole::kEmbedding:
      return "embedding";
    case WeightRole::kLmHead:
      return "lm_head";
    case WeightRole::kNorm:
      return "norm";
    case WeightRole::kLinear:
      return "linear";
    case WeightRole::kBias:
      return "bias";
    case WeightRole::kRouter:
      return "router";
    case WeightRole::kCorrectionBias:
      return "correction_bias";
    case WeightRole::kWeightScale:
      return "weight_scale";
    case WeightRole::kGlobalScale:
      return "global_scale";
  }
  return "unknown";
}

const WeightSpec* WeightLayout::find(std::string_view name) const {
  for (const auto& spec : specs) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

uint64_t WeightLayout::total_bytes() const {
  uint64_t total = 0;
  for (const auto& spec : specs) {
    total += dtype_bytes(spec.dtype, static_cast<size_t>(shape_numel(spec.shape)));
  }
  return total;
}

// ---- builder ----------------------------------------------------------------------------------

// An ignore-list entry names a module by its full name, by a dotted suffix ("lm_head",
// "block_sparse_moe.gate") or with shell wildcards (ModelOpt: "model.layers.*.self_attn*").
// Matching whole dotted components keeps "gate" from matching "gate_proj".
bool WeightLayoutBuilder::is_ignored(const std::string& module) const {
  for (const auto& entry : config_.quant.ignored_modules) {
    if (entry.find_first_of("*?[") != std::string::npos) {
      if (fnmatch(entry.c_str(), module.c_str(), 0) == 0) return true;
      continue;
    }
    if (module == entry) return true;
    if (module.size() > entry.size() && module.ends_with(entry) &&
        module[module.size() - entry.size() - 1] == '.') {
      return true;
    }
  }
  return false;
}

void WeightLayoutBuilder::tensor(const std::string& name, Dims shape, DType dtype, WeightRole role,
                                 int64_t fan_in) {
  layout_.specs.push_back(WeightSpec{name, shape, dtype, role, fan_in, ""});
}

void WeightLayoutBuilder::norm(const std::string& name, int64_t size) {
  tensor(name, {size}, config_.dtype, WeightRole::kNorm);
}

void WeightLayoutBuilder::linear(const std::string& module, int64_t out, int64_t in, bool bias) {
  const QuantConfig& quant = config_.quant;
  const std::string weight = module + ".weight";
  if (!quant.is_quantized() || is_ignored(module)) {
    tensor(weight, {out, in}, config_.dtype, WeightRole::kLinear, in);
  } else if (quant.method == QuantMethod::kFp8) {
    if (quant.weight_block_size.size() != 2) {
      fail(unsupported(fmt::format(
          "{}: fp8 checkpoints without a 2-d weight_block_size are not supported (module {})",
          config_.source_name, module)));
      return;
    }
    int64_t block_out = quant.weight_block_size[0];
    int64_t block_in = quant.weight_block_size[1];
    tensor(weight, {out, in}, DType::kF8E4M3, WeightRole::kLinear, in);
    // One inverse scale per block; a partial block at the edge still gets its own scale.
    tensor(module + ".weight_scale_inv",
           {(out + block_out - 1) / block_out, (in + block_in - 1) / block_in}, quant.scale_dtype,
           WeightRole::kWeightScale);
    layout_.specs.back().scale_of = weight;
  } else if (quant.method == QuantMethod::kNvfp4) {
    int64_t group = quant.group_size;
    if (group <= 0 || in % group != 0 || in % 2 != 0) {
      fail(unsupported(fmt::format(
          "{}: NVFP4 module {} has {} input features, not a multiple of the group size {}",
          config_.source_name, module, in, group)));
      return;
    }
    // ModelOpt stores packed e2m1 pairs as uint8 [out, in/2].
    tensor(weight, {out, in / 2}, DType::kU8, WeightRole::kLinear, in);
    tensor(module + ".weight_scale", {out, in / group}, DType::kF8E4M3, WeightRole::kWeightScale);
    layout_.specs.back().scale_of = weight;
    tensor(module + ".weight_scale_2", {}, DType::kF32, WeightRole::kGlobalScale);
    layout_.specs.back().scale_of = weight;
    tensor(module + ".input_scale", {}, DType::kF32, WeightRole::kGlobalScale);
    layout_.specs.back().scale_of = weight;
  }
  if (bias) tensor(module + ".bias", {out}, config_.dtype, WeightRole::kBias);
}

void WeightLayoutBuilder::gated_mlp(const std::string& prefix, int64_t width, const char* gate,
                                    const char* up, const char* down) {
  const int64_t hidden = config_.hidden_size;
  linear(prefix + "." + gate, width, hidden);
  linear(prefix + "." + up, width, hidden);
  linear(prefix + "." + down, hidden, width);
}

// ---- whole model ------------------------------------------------------------------------------

Expected<WeightLayout> weight_layout(const ModelConfig& config) {
  WeightLayoutBuilder b(config);
  b.tensor("model.embed_tokens.weight", {config.vocab_size, config.hidden_size}, config.dtype,
           WeightRole::kEmbedding);
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    switch (config.architecture) {
      case Architecture::kDeepseekV3:
      case Architecture::kDeepseekV2:
        arch::append_deepseek_layer(b, layer);
        break;
      case Architecture::kGlm4Moe:
        arch::append_glm4_moe_layer(b, layer);
        break;
      case Architecture::kMiniMaxM2:
        arch::append_minimax_m2_layer(b, layer);
        break;
      case Architecture::kQwen3Moe:
        arch::append_qwen3_moe_layer(b, layer);
        break;
      case Architecture::kMixtral:
        arch::append_mixtral_layer(b, layer);
        break;
    }
  }
  b.norm("model.norm.weight", config.hidden_size);
  if (!config.tie_word_embeddings) {
    b.tensor("lm_head.weight", {config.vocab_size, config.hidden_size}, config.dtype,
             WeightRole::kLmHead, config.hidden_size);
  }
  LOCUS_RETURN_IF_ERROR(b.status());
  return std::move(b).finish();
}

// ---- checks -----------------------------------------------------------------------------------

namespace {

bool is_float_storage(DType d) {
  return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16;
}

// Unquantized float tensors may be stored in any float width (a bf16 model shipped in f32 still
// loads; the loader converts). Quantized payloads and their scales must match exactly.
bool dtype_acceptable(const WeightSpec& spec, DType actual) {
  if (actual == spec.dtype) return true;
  bool is_quantized_payload = spec.dtype == DType::kF8E4M3 || spec.dtype == DType::kU8 ||
                              spec.role == WeightRole::kWeightScale;
  return !is_quantized_payload && is_float_storage(spec.dtype) && is_float_storage(actual);
}

}  // namespace

Expected<WeightCheckReport> check_weights(const WeightSource& source, const WeightLayout& layout) {
  std::vector<std::string> problems;
  size_t count = 0;
  auto add = [&](std::string problem) {
    if (problems.size() < 10) problems.push_back(std::move(problem));
    ++count;
  };
  std::unordered_set<std::string> expected;
  for (const auto& spec : layout.specs) {
    expected.insert(spec.name);
    auto info = source.info(spec.name);
    if (!info) {
      add(fmt::format("missing tensor '{}' ({} {}{})", spec.name, weight_role_name(spec.role),
                      dtype_name(spec.dtype), spec.shape.to_string()));
      continue;
    }
    if (!(info->shape == spec.shape)) {
      add(fmt::format("tensor '{}' has shape {}, expected {}", spec.name, info->shape.to_string(),
                      spec.shape.to_string()));
    } else if (!dtype_acceptable(spec, info->dtype)) {
      add(fmt::format("tensor '{}' has dtype {}, expected {}", spec.name, dtype_name(info->dtype),
                      dtype_name(spec.dtype)));
    }
  }
  if (count > 0) {
    std::string message =
        fmt::format("{}: {} tensor{} do not match the model's layout:\n  {}", source.description(),
                    count, count == 1 ? "" : "s", fmt::join(problems, "\n  "));
    if (count > problems.size())
      message += fmt::format("\n  ... and {} more", count - problems.size());
    return invalid_argument(std::move(message));
  }
  WeightCheckReport report;
  for (auto& name : source.names()) {
    if (!expected.contains(name)) report.unused.push_back(std::move(name));
  }
  return report;
}

}  // namespace locus
