// The ModelRunner that runs a locus Model in this process on one Ops backend: the engine's
// ModelInputBatch becomes the model's ForwardBatch (same arrays, vLLM's names) and the paged
// KV cache lives on the backend. The CPU reference backend and the CUDA backend (#7) both run
// under it.
#pragma once

#include <atomic>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "backend/ops.h"
#include "engine/model_runner.h"
#include "model/decode_graphs.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace locus {

enum class LoadFormat : uint8_t {
  kAuto,         // safetensors from the model folder
  kSafetensors,  // same, explicitly
  kDummy,        // deterministic random weights of the checkpoint's shapes (benchmarks)
};

// "auto" | "safetensors" | "dummy" (vLLM's --load-format values we support).
Expected<LoadFormat> parse_load_format(std::string_view name);

struct LoadedModel {
  ModelConfig config;
  std::unique_ptr<Model> model;  // prepared on the Ops it was loaded with
  std::string weights_description;
};

// Reads config.json from `model_dir`, opens its weights (or makes dummy ones from `seed`) and
// loads them onto `ops`, which must outlive the model; with `parallel`, one rank's part.
Expected<LoadedModel> load_model(const std::filesystem::path& model_dir, LoadFormat format,
                                 Ops& ops, uint64_t seed = 0, const ModelParallel& parallel = {});

class LocalModelRunner final : public ModelRunner {
 public:
  // Takes the backend and a model loaded on it; `block_size` is the engine's --block-size.
  static Expected<std::unique_ptr<LocalModelRunner>> create(std::unique_ptr<Ops> ops,
                                                            std::unique_ptr<Model> model,
                                                            int block_size);

  int vocab_size() const override { return static_cast<int>(model_->vocab_size()); }
  const KVCacheSpec& kv_cache_spec() const override { return spec_; }
  Status initialize_kv_cache(int num_blocks) override;
  Expected<Tensor> execute(const ModelInputBatch& batch) override;
  bool supports_device_sampling() const override { return ops_->supports_sampling(); }
  Expected<std::vector<int32_t>> execute_sampled(const ModelInputBatch& batch) override;
  // Token slots alternate between launches; a fed step that replays a graph copies the tokens
  // on the device, any other fed step waits for them on the host first.
  bool supports_async_sampling() const override { return ops_->supports_sampling(); }
  bool prefers_async_sampling() const override {
    return ops_->supports_sampling() && ops_->supports_graphs();
  }
  Status launch_sampled(const ModelInputBatch& batch, bool tokens_from_previous) override;
  Expected<std::vector<int32_t>> collect_sampled() override;
  // Also what a tensor-parallel peer runs (rank 0 returns the group's logits).
  Status execute_dropping_logits(const ModelInputBatch& batch) override;

  const Model& model() const { return *model_; }
  Model& model() { return *model_; }
  Ops& ops() const { return *ops_; }

  // Decode steps replay CUDA graphs (model/decode_graphs.h) on backends that record them; call
  // before initialize_kv_cache, which then reserves one extra block for padding rows. A no-op
  // on backends without graphs (the CPU), so callers need not ask.
  void enable_decode_graphs(int max_batch_size, int64_t max_model_len) {
    graph_max_batch_ = max_batch_size;
    graph_max_model_len_ = max_model_len;
  }
  // For a backend on another GPU than the calling threads' current one (data-parallel replica
  // r on cuda:r): `bind` runs at the start of every call (CudaBackend::make_current), on
  // whichever thread the engine calls from.
  void bind_thread(std::function<Status()> bind) { bind_ = std::move(bind); }
  int64_t graph_steps() const { return graph_steps_.load(); }
  int64_t eager_steps() const { return eager_steps_.load(); }
  // Steps whose tokens were drawn on the backend (execute_sampled) rather than on the host.
  int64_t device_sampled_steps() const { return device_sampled_steps_.load(); }
  // Steps launched with their input tokens fed from the step before (async scheduling).
  int64_t fed_steps() const { return fed_steps_.load(); }

 private:
  // The step's f32 logits on the backend's device (a graph replay or an eager forward).
  Expected<Tensor> run_step(const ModelInputBatch& batch, int feed_slot = -1);

  LocalModelRunner(std::unique_ptr<Ops> ops, std::unique_ptr<Model> model, KVCacheSpec spec)
      : ops_(std::move(ops)), model_(std::move(model)), spec_(spec) {}

  std::unique_ptr<Ops> ops_;
  std::unique_ptr<Model> model_;  // declared after ops_: destroyed first
  KVCacheSpec spec_;
  KvCache cache_;
  bool cache_ready_ = false;
  ForwardBatch forward_;  // reused across steps: its vectors keep their capacity
  int graph_max_batch_ = 0;
  int64_t graph_max_model_len_ = 0;
  std::unique_ptr<DecodeGraphs> graphs_;
  std::function<Status()> bind_;
  std::atomic<int64_t> graph_steps_{0};  // read by other threads (benchmarks)
  std::atomic<int64_t> eager_steps_{0};
  std::atomic<int64_t> device_sampled_steps_{0};
  std::atomic<int64_t> fed_steps_{0};
  // Launched, not yet collected steps: (token slot, rows), oldest first.
  std::deque<std::pair<int, size_t>> launched_;
  int next_slot_ = 0;
};

}  // namespace locus
