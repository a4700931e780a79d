// Where a model's weights come from: a checkpoint on disk or generated dummy values. The loader
// asks by HF name; a source answers with a host tensor (a zero-copy mmap view, or freshly made).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "io/checkpoint.h"
#include "io/model_config.h"

namespace locus {

struct WeightInfo {
  std::string name;
  DType dtype = DType::kBF16;
  Dims shape;
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual std::vector<std::string> names() const = 0;  // sorted
  virtual bool contains(std::string_view name) const = 0;
  virtual Expected<WeightInfo> info(std::string_view name) const = 0;
  // A host tensor holding the weight. Checkpoint views may be read-only and unaligned for
  // the dtype (safetensors does not pad): copy before writing or vector-loading.
  virtual Expected<Tensor> tensor(std::string_view name) const = 0;
  // "checkpoint /models/qwen3 (16 files)", "dummy weights (seed 0)".
  virtual std::string description() const = 0;
};

// The weights of a safetensors checkpoint folder.
class CheckpointWeights final : public WeightSource {
 public:
  static Expected<std::unique_ptr<CheckpointWeights>> open(const std::filesystem::path& dir);

  std::vector<std::string> names() const override { return checkpoint_.names(); }
  bool contains(std::string_view name) const override { return checkpoint_.contains(name); }
  Expected<WeightInfo> info(std::string_view name) const override;
  Expected<Tensor> tensor(std::string_view name) const override { return checkpoint_.tensor(name); }
  std::string description() const override;
  const Checkpoint& checkpoint() const { return checkpoint_; }

 private:
  explicit CheckpointWeights(Checkpoint checkpoint) : checkpoint_(std::move(checkpoint)) {}
  Checkpoint checkpoint_;
};

}  // namespace locus
