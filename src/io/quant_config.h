// How a checkpoint's weights are quantized, read from config.json's quantization_config or from
// ModelOpt's hf_quant_config.json. Recognizes and describes formats; the kernels that consume
// them live in backend/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/dtype.h"
#include "core/status.h"

namespace locus {

enum class QuantMethod : uint8_t {
  kNone,
  // quant_method "fp8": e4m3 weights with float32 inverse scales per weight_block_size block
  // (DeepSeek-V3, Kimi-K2, MiniMax-M2, GLM/Qwen "-FP8" releases), or per tensor without blocks.
  kFp8,
  // quant_method "modelopt", quant_algo "NVFP4": e2m1 weights packed two per byte, one e4m3
  // scale per group_size (16) elements plus a float32 per-tensor scale (weight_scale_2).
  kNvfp4,
};

enum class ActivationScheme : uint8_t { kDynamic, kStatic };

std::string_view quant_method_name(QuantMethod method);

struct QuantConfig {
  QuantMethod method = QuantMethod::kNone;
  std::string quant_method;  // as written in the file ("fp8", "modelopt"); empty when none

  // kFp8
  DType weight_dtype = DType::kBF16;  // kF8E4M3 for fp8, kF4E2M1 for nvfp4
  ActivationScheme activation_scheme = ActivationScheme::kDynamic;
  // {rows, cols} of one scale block, e.g. {128, 128}; empty means one scale per tensor.
  std::vector<int64_t> weight_block_size;
  // Scale element type: float32 normally, ue8m0 where the config says scale_fmt "ue8m0".
  DType scale_dtype = DType::kF32;

  // kNvfp4
  std::string quant_algo;  // "NVFP4"
  int64_t group_size = 0;
  std::optional<std::string> kv_cache_quant_algo;
  std::string producer;  // "modelopt 0.29.0" when hf_quant_config.json names one

  // Modules left unquantized: fp8's modules_to_not_convert / ignored_layers, ModelOpt's
  // exclude_modules / ignore. Entries may hold '*' wildcards (ModelOpt) or plain substrings.
  std::vector<std::string> ignored_modules;

  bool is_quantized() const { return method != QuantMethod::kNone; }
  // "fp8 e4m3 block [128,128] dynamic", "nvfp4 group 16", "none".
  std::string summary() const;
};

// Parses config.json's "quantization_config" object. `source_name` and `context` prefix and
// suffix error messages ("config.json: ... (DeepseekV3ForCausalLM)"). Unknown quant_method or
// quant_algo values are kUnsupported errors that name the value.
Expected<QuantConfig> parse_quantization_config(const nlohmann::json& quantization_config,
                                                std::string_view source_name,
                                                std::string_view context);

// Parses ModelOpt's hf_quant_config.json ({"producer": {...}, "quantization": {...}}).
Expected<QuantConfig> parse_hf_quant_config(const nlohmann::json& hf_quant_config,
                                            std::string_view source_name);

}  // namespace locus
