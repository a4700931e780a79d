#include "engine/local_model_runner.h"

#include <fmt/format.h>

#include "io/model_config.h"
#include "model/dummy_weights.h"
#include "model/weight_layout.h"
#include "model/weight_source.h"

namespace locus {

Expected<LoadFormat> parse_load_format(std::string_view name) {
  if (name == "auto") return LoadFormat::kAuto;
  if (name == "safetensors") return LoadFormat::kSafetensors;
  if (name == "dummy") return LoadFormat::kDummy;
  return invalid_argument(
      fmt::format("--load-format {}: supported formats are auto, safetensors, dummy", name));
}

Expected<LoadedModel> load_model(const std::filesystem::path& model_dir, LoadFormat format,
                                 Ops& ops, uint64_t seed, const ModelParallel& parallel) {
  LOCUS_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(model_dir));
  std::unique_ptr<WeightSource> source;
  if (format == LoadFormat::kDummy) {
    LOCUS_ASSIGN_OR_RETURN(WeightLayout layout, weight_layout(config));
    source = std::make_unique<DummyWeights>(std::move(layout), seed);
  } else {
    LOCUS_ASSIGN_OR_RETURN(source, CheckpointWeights::open(model_dir));
  }
  LoadedModel loaded;
  loaded.weights_description = source->description();
  LOCUS_ASSIGN_OR_RETURN(loaded.model, Model::load(config, *source, ops, parallel));
  loaded.config = std::move(config);
  return loaded;
}

Expected<std::unique_ptr<LocalModelRunner>> LocalModelRunner::create(std::unique_ptr<Ops> ops,
                                                                     std::unique_ptr<Model> model,
                                                                     int block_size) {
  if (!ops || !model) return invalid_argument("LocalModelRunner: needs a backend and a model");
  if (&model->ops() != ops.get()) {
    return invalid_argument("LocalModelRunner: the model was loaded on another backend");
  }
  const KvCacheShape shape = model->kv_cache_shape();
  const DType dtype = ops->kv_cache_dtype();
  const int layers = static_cast<int>(shape.num_layers);
  KVCacheSpec spec =
      shape.kind == KvCacheKind::kMla
          ? KVCacheSpec::mla(layers, static_cast<int>(shape.kv_lora_rank),
                             static_cast<int>(shape.qk_rope_head_dim), dtype, block_size)
          : KVCacheSpec::full_attention(layers, static_cast<int>(shape.num_kv_heads),
                                        static_cast<int>(shape.head_dim), dtype, block_size);
  // KVCacheSpec sizes GQA blocks as K + V of head_dim each; a model with a different V width
  // would be under-counted, so say so rather than overrun the budget.
  if (shape.kind == KvCacheKind::kGqa && shape.v_head_dim != shape.head_dim) {
    return unsupported(fmt::format("LocalModelRunner: v_head_dim {} != head_dim {}",
                                   shape.v_head_dim, shape.head_dim));
  }
  LOCUS_RETURN_IF_ERROR(spec.validate());
  return std::unique_ptr<LocalModelRunner>(
      new LocalModelRunner(std::move(ops), std::move(model), spec));
}

Status LocalModelRunner::initialize_kv_cache(int num_blocks) {
  if (cache_ready_) return internal_error("initialize_kv_cache: called twice");
  if (bind_) LOCUS_RETURN_IF_ERROR(bind_());
  const bool graphs = graph_max_batch_ > 0 && ops_->supports_graphs();
  // The spare block past the engine's num_blocks holds the graphs' padding rows.
  LOCUS_ASSIGN_OR_RETURN(
      cache_, model_->allocate_kv_cache(num_blocks + (graphs ? 1 : 0), spec_.block_size));
  if (graphs) {
    DecodeGraphOptions o;
    o.max_batch_size = graph_max_batch_;
    o.max_model_len = graph_max_model_len_;
    o.max_blocks_per_seq =
        static_cast<int>((graph_max_model_len_ + spec_.block_size - 1) / spec_.block_size);
    o.pad_block = num_blocks;
    LOCUS_ASSIGN_OR_RETURN(graphs_, DecodeGraphs::create(*model_, cache_, o));
  }
  cache_ready_ = true;
  return Status::ok();
}

Expected<Tensor> LocalModelRunner::execute(const ModelInputBatch& batch) {
  if (bind_) LOCUS_RETURN_IF_ERROR(bind_());
  LOCUS_ASSIGN_OR_RETURN(Tensor logits, run_step(batch));
  return ops_->to_host(logits);
}

Expected<std::vector<int32_t>> LocalModelRunner::execute_sampled(const ModelInputBatch& batch) {
  if (bind_) LOCUS_RETURN_IF_ERROR(bind_());
  if (batch.device_sampling.size() != batch.logits_indices.size()) {
    return invalid_argument(fmt::format("execute_sampled: {} sampling rows for {} logits rows",
                                        batch.device_sampling.size(), batch.logits_indices.size()));
  }
  LOCUS_ASSIGN_OR_RETURN(Tensor logits, run_step(batch));
  std::vector<int32_t> tokens(batch.device_sampling.size(), -1);
  LOCUS_RETURN_IF_ERROR(ops_->sample_rows(logits, batch.device_sampling, tokens));
  ++device_sampled_steps_;
  return tokens;
}

Status LocalModelRunner::launch_sampled(const ModelInputBatch& batch, bool tokens_from_previous) {
  if (bind_) LOCUS_RETURN_IF_ERROR(bind_());
  if (batch.device_sampling.size() != batch.logits_indices.size()) {
    return invalid_argument(fmt::format("launch_sampled: {} sampling rows for {} logits rows",
                                        batch.device_sampling.size(), batch.logits_indices.size()));
  }
  if (launched_.size() >= 2) return internal_error("launch_sampled: two steps already queued");
  int feed_slot = -1;
  if (tokens_from_previous) {
    if (launched_.empty()) return internal_error("launch_sampled: no previous step to feed from");
    if (launched_.back().second != static_cast<size_t>(batch.num_tokens())) {
      return internal_error(fmt::format("launch_sampled: {} tokens fed from a step of {} rows",
                                        batch.num_tokens(), launched_.back().second));
    }
    feed_slot = launched_.back().first;
    ++fed_steps_;
  }
  LOCUS_ASSIGN_OR_RETURN(Tensor logits, run_step(batch, feed_slot));
  const int slot = next_slot_;
  LOCUS_RETURN_IF_ERROR(ops_->sample_rows_async(logits, batch.device_sampling, slot));
  next_slot_ ^= 1;
  launched_.emplace_back(slot, batch.device_sampling.size());
  ++device_sampled_steps_;
  return Status::ok();
}

Expected<std::vector<int32_t>> LocalModelRunner::collect_sampled() {
  if (bind_) LOCUS_RETURN_IF_ERROR(bind_());
  if (launched_.empty()) return internal_error("collect_sampled: no step was launched");
  const auto [slot, rows] = launched_.front();
  launched_.pop_front();
  std::vector<int32_t> tokens(rows, -1);
  LOCUS_RETURN_IF_ERROR(ops_->collect_sampled(slot, tokens));
  return tokens;
}

Status LocalModelRunner::execute_dropping_logits(const ModelInputBatch& batch) {
  if (bind_) LOCUS_RETURN_IF_ERROR(bind_());
  return run_step(batch).status();
}

Expected<Tensor> LocalModelRunner::run_step(const ModelInputBatch& batch, int feed_slot) {
  if (!cache_ready_) return internal_error("execute: the KV cache is not initialized");
  if (batch.block_size != spec_.block_size) {
    return invalid_argument(fmt::format("execute: batch block_size {} != the runner's {}",
                                        batch.block_size, spec_.block_size));
  }
  forward_.block_size = batch.block_size;
  forward_.token_ids = batch.token_ids;
  forward_.positions = batch.positions;
  forward_.query_start_loc = batch.query_start_loc;
  forward_.seq_lens = batch.seq_lens;
  forward_.max_num_blocks_per_seq = batch.max_num_blocks_per_req;
  forward_.block_table = batch.block_table;
  forward_.slot_mapping = batch.slot_mapping;
  forward_.logits_indices = batch.logits_indices;
  forward_.dp_max_tokens = batch.dp_max_tokens;
  if (graphs_ && graphs_->can_run(forward_)) {
    ++graph_steps_;
    if (feed_slot < 0) return graphs_->run_on_device(forward_);
    return graphs_->run_on_device(forward_, [&](Tensor& token_ids) {
      return ops_->copy_sampled_tokens(feed_slot, token_ids);
    });
  }
  if (feed_slot >= 0) {
    // No graph to feed on the device: the previous step's tokens through the host (a wait).
    if (!launched_.empty() && launched_.front().first != feed_slot) {
      return internal_error("run_step: feeding from a step that is not the last launched");
    }
    LOCUS_RETURN_IF_ERROR(ops_->collect_sampled(feed_slot, std::span<int32_t>(forward_.token_ids)));
  }
  ++eager_steps_;
  return model_->forward_on_device(forward_, cache_);
}

}  // namespace locus
