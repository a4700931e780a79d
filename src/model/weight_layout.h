// The tensors a model's forward pass reads: Hugging Face names, shapes and dtypes, derived from a
// ModelConfig alone. Each architecture file in model/arch/ owns its names; this file holds the
// shared vocabulary and the checks of a weight source against a layout.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "io/model_config.h"

namespace locus {

class WeightSource;

// What a tensor is for: decides how dummy values are drawn and which dtypes a checkpoint may
// store it in.
enum class WeightRole : uint8_t {
  kEmbedding,
  kLmHead,
  kNorm,            // RMSNorm weights (input, post-attention, q/k, MLA latent, final)
  kLinear,          // a projection that quantized checkpoints store quantized
  kBias,            // a projection's bias
  kRouter,          // the MoE gate (router) weight; never quantized
  kCorrectionBias,  // e_score_correction_bias of sigmoid routers
  kWeightScale,     // fp8 weight_scale_inv, NVFP4 weight_scale (per block / group)
  kGlobalScale,     // NVFP4 weight_scale_2 and input_scale (per tensor)
};

std::string_view weight_role_name(WeightRole role);

struct WeightSpec {
  std::string name;
  Dims shape;
  DType dtype = DType::kBF16;
  WeightRole role = WeightRole::kLinear;
  // Linear layers: input features (sets the dummy value range so activations keep unit scale).
  int64_t fan_in = 0;
  // The spec of the quantized weight a scale belongs to ("" for others).
  std::string scale_of;
};

struct WeightLayout {
  std::vector<WeightSpec> specs;  // in forward order: embedding, layer 0 ..., final norm, lm_head

  const WeightSpec* find(std::string_view name) const;
  uint64_t total_bytes() const;
};

// Every tensor of `config`'s main model (MTP / next-n layers excluded). Unsupported quantization
// layouts (fp8 without a block size, NVFP4 with an input width not divisible by the group) are
// kUnsupported errors naming the module.
Expected<WeightLayout> weight_layout(const ModelConfig& config);

struct WeightCheckReport {
  std::vector<std::string> unused;  // tensors in the source that the layout does not read
};

// Checks that `source` holds every tensor of `layout` with the right shape and an acceptable
// dtype (float weights may come as f32, f16 or bf16; quantized weights and their scales must
// match exactly). The error names up to 10 offending tensors and says how many there were.
Expected<WeightCheckReport> check_weights(const WeightSource& source, const WeightLayout& layout);

// Builds a layout: adds projections with their quantization scales, norms, experts.
class WeightLayoutBuilder {
 public:
  explicit WeightLayoutBuilder(const ModelConfig& config) : config_(config) {}

  // A projection `module` (e.g. "model.layers.0.self_attn.q_proj") mapping `in` to `out`
  // features: `<module>.weight`, its scales when the checkpoint is quantized and the module is
  // not in the ignore list, and `<module>.bias` when asked.
  void linear(const std::string& module, int64_t out, int64_t in, bool bias = false);
  void norm(const std::string& name, int64_t size);
  void tensor(const std::string& name, Dims shape, DType dtype, WeightRole role,
              int64_t fan_in = 0);
  // A gated MLP: `<prefix>.<gate>`, `<prefix>.<up>` (hidden -> width), `<prefix>.<down>`.
  void gated_mlp(const std::string& prefix, int64_t width, const char* gate, const char* up,
                 const char* down);

  const ModelConfig& config() const { return config_; }
  // Records the first error; finish() callers check status().
  void fail(Status status) {
    if (status_.is_ok()) status_ = std::move(status);
  }
  Status status() const { return status_; }
  WeightLayout finish() && { return std::move(layout_); }

 private:
  bool is_ignored(const std::string& module) const;
  const ModelConfig& config_;
  WeightLayout layout_;
  Status status_;
};

}  // namespace locus
