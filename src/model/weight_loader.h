// Reads weights by Hugging Face name from a WeightSource (checkpoint or dummy) and hands them
// to the backend to prepare. Knows the quantized forms: an fp8 e4m3 projection comes with its
// `<module>.weight_scale_inv` and the config's block size.
#pragma once

#include <optional>
#include <string>

#include "backend/ops.h"
#include "dist/communicator.h"
#include "io/model_config.h"
#include "model/weight_source.h"

namespace locus {

// One rank's slice of a projection (tensor parallelism): output features [start, start + length)
// for a column-parallel layer (dim 0), input features for a row-parallel one (dim 1). The ranks
// of a row-parallel layer sum their outputs, so only one of them keeps the bias.
struct LinearShard {
  int dim = 0;
  int64_t start = 0;
  int64_t length = 0;
  bool keep_bias = true;
};

class WeightLoader {
 public:
  WeightLoader(const ModelConfig& config, const WeightSource& source, Ops& ops)
      : config_(config), source_(source), ops_(ops) {}

  // `<module>.weight` (+ `.weight_scale_inv` when stored as fp8) (+ `.bias` when has_bias),
  // or the `shard` of them. An fp8 shard keeps its scales where it starts on a scale block or
  // lies inside one; one that cuts across blocks comes back dequantized (f32).
  Expected<LinearWeight> linear(const std::string& module, bool has_bias = false,
                                const std::optional<LinearShard>& shard = std::nullopt);
  // A float tensor (norm weight, embedding table, correction bias), prepared.
  Expected<Tensor> tensor(const std::string& name);
  // `<prefix>.<gate>`, `<prefix>.<up>`, `<prefix>.<down>`; with `width`, only that range of the
  // intermediate features (gate/up column-parallel, down row-parallel).
  Expected<ExpertWeights> gated_mlp(const std::string& prefix, const char* gate, const char* up,
                                    const char* down,
                                    const std::optional<ShardRange>& width = std::nullopt);

  // Bytes of the checkpoint (or dummy) tensors read so far, for load progress.
  uint64_t bytes_read() const { return bytes_read_; }

  Ops& ops() { return ops_; }
  const ModelConfig& config() const { return config_; }

 private:
  const ModelConfig& config_;
  // A dummy weight made directly on the device when the backend can (nullopt otherwise); with
  // `shard`, a tensor of the shard's shape (dummy values need not match the whole's slice).
  Expected<std::optional<Tensor>> device_dummy(const std::string& name,
                                               const std::optional<LinearShard>& shard = {});

  const WeightSource& source_;
  Ops& ops_;
  uint64_t bytes_read_ = 0;
};

}  // namespace locus
