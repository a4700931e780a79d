#include "model/weight_loader.h"

#include <fmt/format.h>

#include "model/dummy_weights.h"

namespace locus {

Expected<std::optional<Tensor>> WeightLoader::device_dummy(const std::string& name) {
  const auto* dummy = dynamic_cast<const DummyWeights*>(&source_);
  if (dummy == nullptr) return std::optional<Tensor>();
  const auto fill = dummy->uniform_fill(name);
  if (!fill) return std::optional<Tensor>();
  return ops_.random_uniform_weight(fill->shape, fill->dtype, fill->stream, fill->low, fill->high);
}

Expected<LinearWeight> WeightLoader::linear(const std::string& module, bool has_bias) {
  LinearWeight host;
  LOCUS_ASSIGN_OR_RETURN(std::optional<Tensor> on_device, device_dummy(module + ".weight"));
  if (on_device) {
    host.weight = std::move(*on_device);
  } else {
    LOCUS_ASSIGN_OR_RETURN(host.weight, source_.tensor(module + ".weight"));
  }
  if (host.weight.dtype() == DType::kF8E4M3) {
    const auto& block = config_.quant.weight_block_size;
    if (config_.quant.method != QuantMethod::kFp8 || block.size() != 2) {
      return unsupported(
          fmt::format("{}: {}.weight is fp8 but the config has no 2-d fp8 "
                      "weight_block_size",
                      source_.description(), module));
    }
    if (config_.quant.scale_dtype != DType::kF32) {
      return unsupported(fmt::format("{}: {}.weight_scale_inv in {} is not supported (f32 only)",
                                     source_.description(), module,
                                     dtype_name(config_.quant.scale_dtype)));
    }
    LOCUS_ASSIGN_OR_RETURN(host.scale_inv, source_.tensor(module + ".weight_scale_inv"));
    host.block_out = block[0];
    host.block_in = block[1];
  }
  if (has_bias) {
    LOCUS_ASSIGN_OR_RETURN(host.bias, source_.tensor(module + ".bias"));
  }
  for (const Tensor* t : {&host.weight, &host.scale_inv, &host.bias}) {
    if (t->defined()) bytes_read_ += t->nbytes();
  }
  auto prepared = ops_.prepare_linear(host);
  if (!prepared) return prepared.status().with_context(module);
  return prepared;
}

Expected<Tensor> WeightLoader::tensor(const std::string& name) {
  LOCUS_ASSIGN_OR_RETURN(std::optional<Tensor> on_device, device_dummy(name));
  if (on_device) {
    bytes_read_ += on_device->nbytes();
    return std::move(*on_device);
  }
  LOCUS_ASSIGN_OR_RETURN(Tensor host, source_.tensor(name));
  bytes_read_ += host.nbytes();
  auto prepared = ops_.prepare_weight(host);
  if (!prepared) return prepared.status().with_context(name);
  return prepared;
}

Expected<ExpertWeights> WeightLoader::gated_mlp(const std::string& prefix, const char* gate,
                                                const char* up, const char* down) {
  ExpertWeights w;
  LOCUS_ASSIGN_OR_RETURN(w.gate, linear(prefix + "." + gate));
  LOCUS_ASSIGN_OR_RETURN(w.up, linear(prefix + "." + up));
  LOCUS_ASSIGN_OR_RETURN(w.down, linear(prefix + "." + down));
  return w;
}

}  // namespace locus
