// Parses fp8 block-scaled and ModelOpt NVFP4 quantization configs; everything else is refused by
// name so that a user never gets a silently dequantized or garbage model.
#include "io/quant_config.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "io/config_json.h"

namespace locus {
namespace {

using config_json::Fields;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

Status append_strings(const Fields& f, std::string_view key, std::vector<std::string>& out) {
  LOCUS_ASSIGN_OR_RETURN(auto list, f.string_list(key));
  out.insert(out.end(), list.begin(), list.end());
  return Status::ok();
}

Expected<QuantConfig> parse_fp8(const Fields& f, std::string quant_method) {
  QuantConfig out;
  out.method = QuantMethod::kFp8;
  out.quant_method = std::move(quant_method);

  // DeepSeek writes "e4m3", MiniMax "float8_e4m3fn"; both are the OCP e4m3fn format.
  LOCUS_ASSIGN_OR_RETURN(auto fmt_name, f.string_or("fmt", "e4m3"));
  const std::string fmt_lower = lower(fmt_name);
  if (fmt_lower == "e4m3" || fmt_lower == "e4m3fn" || fmt_lower == "float8_e4m3fn") {
    out.weight_dtype = DType::kF8E4M3;
  } else if (fmt_lower == "e5m2" || fmt_lower == "float8_e5m2") {
    return f.error(ErrorCode::kUnsupported,
                   fmt::format("{} '{}' is not supported (fp8 weights must be e4m3)",
                               f.field_name("fmt"), fmt_name));
  } else {
    return f.invalid(fmt::format("{} '{}' is not an fp8 format (expected e4m3 or float8_e4m3fn)",
                                 f.field_name("fmt"), fmt_name));
  }

  LOCUS_ASSIGN_OR_RETURN(auto scheme, f.string_or("activation_scheme", "dynamic"));
  if (scheme == "dynamic") {
    out.activation_scheme = ActivationScheme::kDynamic;
  } else if (scheme == "static") {
    out.activation_scheme = ActivationScheme::kStatic;
  } else {
    return f.invalid(fmt::format("{} must be \"dynamic\" or \"static\", got '{}'",
                                 f.field_name("activation_scheme"), scheme));
  }

  LOCUS_ASSIGN_OR_RETURN(out.weight_block_size, f.int_list("weight_block_size"));
  if (!out.weight_block_size.empty()) {
    const bool ok = out.weight_block_size.size() == 2 && out.weight_block_size[0] > 0 &&
                    out.weight_block_size[1] > 0;
    if (!ok) {
      return f.invalid(fmt::format("{} must be two positive integers [rows, cols], got [{}]",
                                   f.field_name("weight_block_size"),
                                   fmt::join(out.weight_block_size, ", ")));
    }
  }

  // DeepSeek-V3.1 stores block scales as powers of two (ue8m0) and says so here.
  LOCUS_ASSIGN_OR_RETURN(auto scale_fmt, f.optional_string("scale_fmt"));
  if (scale_fmt) {
    const std::string s = lower(*scale_fmt);
    if (s == "ue8m0") {
      out.scale_dtype = DType::kUE8M0;
    } else if (s != "float32" && s != "fp32") {
      return f.error(ErrorCode::kUnsupported,
                     fmt::format("{} '{}' is not supported (supported: float32, ue8m0)",
                                 f.field_name("scale_fmt"), *scale_fmt));
    }
  }

  // transformers' FineGrainedFP8Config says modules_to_not_convert, vLLM's Fp8Config
  // ignored_layers; a checkpoint may carry either.
  LOCUS_RETURN_IF_ERROR(append_strings(f, "modules_to_not_convert", out.ignored_modules));
  LOCUS_RETURN_IF_ERROR(append_strings(f, "ignored_layers", out.ignored_modules));
  return out;
}

// `q` holds quant_algo & co; `outer` is where config.json-embedded variants put "ignore".
Expected<QuantConfig> parse_modelopt(const Fields& q, const Fields& outer,
                                     std::string quant_method) {
  QuantConfig out;
  out.quant_method = std::move(quant_method);

  LOCUS_ASSIGN_OR_RETURN(auto algo, q.optional_string("quant_algo"));
  if (!algo) {
    LOCUS_ASSIGN_OR_RETURN(algo, outer.optional_string("quant_algo"));
  }
  if (!algo) return q.missing("quant_algo");
  out.quant_algo = *algo;
  if (lower(*algo) != "nvfp4") {
    return q.error(ErrorCode::kUnsupported,
                   fmt::format("ModelOpt {} '{}' is not supported (supported: NVFP4)",
                               q.field_name("quant_algo"), *algo));
  }
  out.method = QuantMethod::kNvfp4;
  out.weight_dtype = DType::kF4E2M1;
  out.scale_dtype = DType::kF8E4M3;

  LOCUS_ASSIGN_OR_RETURN(out.group_size, q.int_or("group_size", 16));
  if (out.group_size <= 0) {
    return q.invalid(
        fmt::format("{} must be positive, got {}", q.field_name("group_size"), out.group_size));
  }
  // The NVFP4 format fixes one e4m3 scale per 16 elements; other sizes are a different format.
  if (out.group_size != 16) {
    return q.error(ErrorCode::kUnsupported,
                   fmt::format("NVFP4 {} {} is not supported (NVFP4 scales every 16 elements)",
                               q.field_name("group_size"), out.group_size));
  }

  LOCUS_ASSIGN_OR_RETURN(out.kv_cache_quant_algo, q.optional_string("kv_cache_quant_algo"));
  LOCUS_RETURN_IF_ERROR(append_strings(q, "exclude_modules", out.ignored_modules));
  LOCUS_RETURN_IF_ERROR(append_strings(q, "ignore", out.ignored_modules));
  if (&q.object() != &outer.object()) {
    LOCUS_RETURN_IF_ERROR(append_strings(outer, "exclude_modules", out.ignored_modules));
    LOCUS_RETURN_IF_ERROR(append_strings(outer, "ignore", out.ignored_modules));
  }
  return out;
}

}  // namespace

std::string_view quant_method_name(QuantMethod method) {
  switch (method) {
    case QuantMethod::kNone:
      return "none";
    case QuantMethod::kFp8:
      return "fp8";
    case QuantMethod::kNvfp4:
      return "nvfp4";
  }
  return "unknown";
}

std::string QuantConfig::summary() const {
  switch (method) {
    case QuantMethod::kNone:
      return "none";
    case QuantMethod::kFp8: {
      std::string s = "fp8 e4m3";
      if (weight_block_size.empty()) {
        s += " per-tensor";
      } else {
        s += fmt::format(" block [{}]", fmt::join(weight_block_size, ","));
      }
      if (scale_dtype == DType::kUE8M0) s += " ue8m0-scales";
      s += activation_scheme == ActivationScheme::kDynamic ? " dynamic" : " static";
      return s;
    }
    case QuantMethod::kNvfp4:
      return fmt::format("nvfp4 group {}", group_size);
  }
  return "unknown";
}

Expected<QuantConfig> parse_quantization_config(const nlohmann::json& quantization_config,
                                                std::string_view source_name,
                                                std::string_view context) {
  Fields f(quantization_config, std::string(source_name), "quantization_config.",
           std::string(context));
  if (!quantization_config.is_object()) {
    Fields root(quantization_config, std::string(source_name), "", std::string(context));
    return root.wrong_type("quantization_config", "an object", quantization_config);
  }
  LOCUS_ASSIGN_OR_RETURN(auto method, f.require_string("quant_method"));
  const std::string m = lower(method);
  if (m == "fp8") return parse_fp8(f, method);
  if (m == "modelopt" || m == "modelopt_fp4") {
    // Older ModelOpt exports nest the hf_quant_config.json body under "quantization"; newer ones
    // flatten it into quantization_config.
    if (f.has("quantization")) {
      LOCUS_ASSIGN_OR_RETURN(auto inner, f.child("quantization"));
      return parse_modelopt(inner, f, method);
    }
    return parse_modelopt(f, f, method);
  }
  return f.error(ErrorCode::kUnsupported,
                 fmt::format("{} '{}' is not supported (supported: fp8, modelopt with quant_algo "
                             "NVFP4)",
                             f.field_name("quant_method"), method));
}

Expected<QuantConfig> parse_hf_quant_config(const nlohmann::json& hf_quant_config,
                                            std::string_view source_name) {
  Fields root(hf_quant_config, std::string(source_name), "", "");
  if (!hf_quant_config.is_object()) {
    return root.error(
        ErrorCode::kInvalidArgument,
        fmt::format("expected a JSON object, got {}", config_json::type_name(hf_quant_config)));
  }
  LOCUS_ASSIGN_OR_RETURN(auto q, root.child("quantization"));
  LOCUS_ASSIGN_OR_RETURN(auto out, parse_modelopt(q, q, "modelopt"));
  if (root.has("producer")) {
    LOCUS_ASSIGN_OR_RETURN(auto producer, root.child("producer"));
    LOCUS_ASSIGN_OR_RETURN(auto name, producer.string_or("name", ""));
    LOCUS_ASSIGN_OR_RETURN(auto version, producer.string_or("version", ""));
    out.producer = version.empty() ? name : fmt::format("{} {}", name, version);
  }
  return out;
}

}  // namespace locus
