// Reads weights by Hugging Face name from a WeightSource (checkpoint or dummy) and hands them
// to the backend to prepare. Knows the quantized forms: an fp8 e4m3 projection comes with its
// `<module>.weight_scale_inv` and the config's block size.
#pragma once

#include <optional>
#include <string>

#include "backend/ops.h"
#include "io/model_config.h"
#include "model/weight_source.h"

namespace locus {

class WeightLoader {
 public:
  WeightLoader(const ModelConfig& config, const WeightSource& source, Ops& ops)
      : config_(config), source_(source), ops_(ops) {}

  // `<module>.weight` (+ `.weight_scale_inv` when stored as fp8) (+ `.bias` when has_bias).
  Expected<LinearWeight> linear(const std::string& module, bool has_bias = false);
  // A float tensor (norm weight, embedding table, correction bias), prepared.
  Expected<Tensor> tensor(const std::string& name);
  // `<prefix>.<gate>`, `<prefix>.<up>`, `<prefix>.<down>`.
  Expected<ExpertWeights> gated_mlp(const std::string& prefix, const char* gate, const char* up,
                                    const char* down);

  // Bytes of the checkpoint (or dummy) tensors read so far, for load progress.
  uint64_t bytes_read() const { return bytes_read_; }

  Ops& ops() { return ops_; }
  const ModelConfig& config() const { return config_; }

 private:
  const ModelConfig& config_;
  // A dummy weight made directly on the device when the backend can (nullopt otherwise).
  Expected<std::optional<Tensor>> device_dummy(const std::string& name);

  const WeightSource& source_;
  Ops& ops_;
  uint64_t bytes_read_ = 0;
};

}  // namespace locus
