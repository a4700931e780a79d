#include "model/model.h"

#include <fmt/format.h>

#include <cstring>
#include <utility>

#include "backend/ops_rope.h"
#include "core/logging.h"
#include "core/progress.h"
#include "model/layers/mlp.h"
#include "model/model_registry.h"
#include "model/weight_layout.h"
#include "model/weight_loader.h"

namespace locus {
namespace {

// What the backend would spend on the layout's weights; scales fold into their weights. With
// tensor / expert parallelism, about one rank's share: projections split over the ranks, the
// rest (embedding, norms, routers) whole on each.
uint64_t prepared_bytes(const Ops& ops, const WeightLayout& layout, int ranks) {
  uint64_t total = 0;
  for (const WeightSpec& spec : layout.specs) {
    if (spec.role == WeightRole::kWeightScale || spec.role == WeightRole::kGlobalScale) continue;
    const uint64_t bytes = ops.prepared_weight_bytes(spec.dtype, shape_numel(spec.shape));
    const bool split = spec.role == WeightRole::kLinear || spec.role == WeightRole::kBias ||
                       spec.role == WeightRole::kLmHead;
    total += split ? bytes / static_cast<uint64_t>(ranks) : bytes;
  }
  return total;
}

Status check_supported(const ModelConfig& config) {
  if (config.quant.method == QuantMethod::kNvfp4) {
    return unsupported(
        fmt::format("{}: NVFP4 checkpoints have no model forward yet (bf16 and fp8 "
                    "block-scaled only)",
                    config.source_name));
  }
  if (config.hidden_act != "silu") {
    return unsupported(fmt::format("{}: hidden_act '{}' is not supported (silu only)",
                                   config.source_name, config.hidden_act));
  }
  return Status::ok();
}

}  // namespace

Expected<std::unique_ptr<Model>> Model::load(const ModelConfig& config, const WeightSource& source,
                                             Ops& ops, const ModelParallel& parallel) {
  LOCUS_RETURN_IF_ERROR(check_supported(config));
  LOCUS_RETURN_IF_ERROR(parallel.check(config));
  LOCUS_ASSIGN_OR_RETURN(ArchitectureSpec spec, architecture_spec(config));
  LOCUS_ASSIGN_OR_RETURN(WeightLayout layout, weight_layout(config));
  LOCUS_ASSIGN_OR_RETURN(WeightCheckReport report, check_weights(source, layout));
  if (config.num_nextn_predict_layers > 0) {
    log::info("{}: skipping {} MTP / next-n layer(s); the forward runs the {} main layers",
              config.architecture_name, config.num_nextn_predict_layers, config.num_hidden_layers);
  }
  if (!report.unused.empty()) {
    log::debug("{}: {} tensors in {} are not read (first: {})", config.architecture_name,
               report.unused.size(), source.description(), report.unused.front());
  }
  const uint64_t needed = prepared_bytes(ops, layout, parallel.size());
  if (needed > ops.weight_memory_budget_bytes()) {
    return resource_exhausted(fmt::format(
        "{}: the weights need {:.2f} GB on the {} backend, over its budget of {:.2f} GB; this "
        "backend is meant for tiny test models (use a GPU backend for full-size ones)",
        config.source_name, static_cast<double>(needed) / 1e9, ops.name(),
        static_cast<double>(ops.weight_memory_budget_bytes()) / 1e9));
  }
  std::unique_ptr<Model> model(new Model(config, ops, parallel));
  LOCUS_RETURN_IF_ERROR(model->load_weights(source, spec, needed));
  return model;
}

Status Model::load_weights(const WeightSource& source, const ArchitectureSpec& spec,
                           uint64_t prepared_bytes) {
  WeightLoader loader(config_, source, ops_);
  // Test-sized models load in milliseconds: only real ones get a progress report.
  constexpr uint64_t kProgressBytes = 256ull << 20;
  Progress progress(
      "Loading weights", config_.num_hidden_layers + 2, "layers",
      prepared_bytes >= kProgressBytes ? Progress::Mode::kAuto : Progress::Mode::kOff);
  uint64_t reported = 0;
  auto step = [&] {
    progress.advance(1, loader.bytes_read() - reported);
    reported = loader.bytes_read();
  };
  eps_ = static_cast<float>(config_.rms_norm_eps);

  LOCUS_ASSIGN_OR_RETURN(RopeFrequencies freqs,
                         compute_rope_frequencies(config_.rope, config_.max_position_embeddings));
  RopeParams rope;
  LOCUS_ASSIGN_OR_RETURN(rope.inv_freq,
                         Tensor::empty({static_cast<int64_t>(freqs.inv_freq.size())}, DType::kF32));
  std::memcpy(rope.inv_freq.raw_data(), freqs.inv_freq.data(),
              freqs.inv_freq.size() * sizeof(float));
  rope.attention_factor = freqs.attention_factor;
  rope.layout = config_.rope.layout;
  const std::optional<int64_t> window =
      spec.honors_sliding_window ? config_.attention.sliding_window : std::nullopt;

  LOCUS_ASSIGN_OR_RETURN(embed_tokens_, loader.tensor("model.embed_tokens.weight"));
  step();
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
    const std::string prefix = fmt::format("model.layers.{}.", i);
    DecoderLayer layer;
    LOCUS_ASSIGN_OR_RETURN(layer.input_norm, loader.tensor(prefix + "input_layernorm.weight"));
    LOCUS_ASSIGN_OR_RETURN(layer.post_attention_norm,
                           loader.tensor(prefix + "post_attention_layernorm.weight"));
    if (config_.is_mla()) {
      LOCUS_ASSIGN_OR_RETURN(layer.mla,
                             MlaAttention::load(loader, prefix + "self_attn", rope, parallel_));
    } else {
      LOCUS_ASSIGN_OR_RETURN(
          layer.gqa, GqaAttention::load(loader, prefix + "self_attn", rope, window, parallel_));
    }
    if (config_.is_moe_layer(i)) {
      LOCUS_ASSIGN_OR_RETURN(layer.moe, MoeBlock::load(loader, spec, prefix, parallel_));
    } else {
      std::optional<ShardRange> width;
      if (parallel_.is_parallel()) {
        width = even_shard(config_.intermediate_size, parallel_.rank(), parallel_.size());
      }
      LOCUS_ASSIGN_OR_RETURN(layer.dense_mlp, loader.gated_mlp(prefix + "mlp", "gate_proj",
                                                               "up_proj", "down_proj", width));
    }
    layers_.push_back(std::move(layer));
    step();
  }
  LOCUS_ASSIGN_OR_RETURN(final_norm_, loader.tensor("model.norm.weight"));
  // Vocab-parallel: each rank scores its slice of the vocabulary.
  const ShardRange vocab = even_shard(config_.vocab_size, parallel_.rank(), parallel_.size());
  if (config_.tie_word_embeddings) {
    LOCUS_ASSIGN_OR_RETURN(lm_head_.weight,
                           embed_tokens_.slice(0, vocab.start, vocab.start + vocab.length));
  } else {
    std::optional<LinearShard> shard;
    if (parallel_.is_parallel()) shard = LinearShard{0, vocab.start, vocab.length};
    LOCUS_ASSIGN_OR_RETURN(lm_head_, loader.linear("lm_head", false, shard));
  }
  step();
  return Status::ok();
}

KvCacheShape Model::kv_cache_shape() const {
  KvCacheShape shape;
  shape.num_layers = config_.num_hidden_layers;
  if (config_.is_mla()) {
    shape.kind = KvCacheKind::kMla;
    shape.kv_lora_rank = config_.attention.mla.kv_lora_rank;
    shape.qk_rope_head_dim = config_.attention.mla.qk_rope_head_dim;
  } else {
    shape.kind = KvCacheKind::kGqa;
    // This rank's KV heads (all of them on one rank).
    shape.num_kv_heads = layers_.empty() ? config_.attention.num_key_value_heads
                                         : layers_.front().gqa->num_kv_heads();
    shape.head_dim = config_.attention.head_dim;
    shape.v_head_dim = config_.attention.v_head_dim;
  }
  return shape;
}

Expected<KvCache> Model::allocate_kv_cache(int64_t num_blocks, int64_t block_size) const {
  return locus::allocate_kv_cache(ops_, kv_cache_shape(), num_blocks, block_size);
}

Expected<Tensor> Model::run_layer(const DecoderLayer& layer, const Tensor& x, const AddRmsNorm* pre,
                                  const DeviceBatch& batch, KvCacheLayer& cache,
                                  PendingProjection* o) {
  if (layer.mla) {
    if (pre != nullptr) LOCUS_RETURN_IF_ERROR(ops_.add_rms_norm_to(*pre));
    return layer.mla->forward(ops_, x, batch, cache);
  }
  if (o == nullptr) return layer.gqa->forward(ops_, x, batch, cache, pre);
  LOCUS_ASSIGN_OR_RETURN(o->input, layer.gqa->attend(ops_, x, batch, cache, pre));
  o->weight = &layer.gqa->o_proj();
  return ops_.empty({x.size(0), o->weight->out_features()}, ops_.activation_dtype());
}

Expected<Tensor> Model::forward(const ForwardBatch& batch, KvCache& cache) {
  LOCUS_ASSIGN_OR_RETURN(Tensor logits, forward_on_device(batch, cache));
  return ops_.to_host(logits);
}

Expected<Tensor> Model::forward_on_device(const ForwardBatch& batch, KvCache& cache) {
  if (batch.num_tokens() == 0) return invalid_argument("forward: the batch has no tokens");
  if (batch.block_size != cache.block_size ||
      static_cast<int64_t>(cache.layers.size()) != config_.num_hidden_layers) {
    return invalid_argument(fmt::format(
        "forward: batch block_size {} / cache of {} layers with "
        "block_size {} do not fit this {}-layer model",
        batch.block_size, cache.layers.size(), cache.block_size, config_.num_hidden_layers));
  }
  LOCUS_RETURN_IF_ERROR(validate_forward_batch(batch, cache.num_blocks));
  LOCUS_ASSIGN_OR_RETURN(DeviceBatch device, upload_forward_batch(ops_, batch));
  return forward_device(device, cache);
}

Expected<Tensor> Model::forward_device(const DeviceBatch& device, KvCache& cache) {
  const int64_t tokens = device.token_ids.numel();
  const int64_t hidden = config_.hidden_size;
  const DType dtype = ops_.activation_dtype();

  // Pre-norm residual stream: residual accumulates each sublayer's output, and each
  // add + RMSNorm step runs inside the op that consumes its output (the QKV projection, the MoE
  // router) where the backend can fuse them. Such a step reads one residual buffer and writes
  // the other (AddRmsNorm), so the stream alternates between `residual` and `spare`.
  LOCUS_ASSIGN_OR_RETURN(Tensor residual, ops_.empty({tokens, hidden}, dtype));
  LOCUS_ASSIGN_OR_RETURN(Tensor spare, ops_.empty({tokens, hidden}, dtype));
  LOCUS_ASSIGN_OR_RETURN(Tensor normed, ops_.empty({tokens, hidden}, dtype));
  LOCUS_RETURN_IF_ERROR(ops_.embedding_rms_norm(
      embed_tokens_, device.token_ids, layers_.front().input_norm, eps_, residual, normed));
  auto step = [&](const Tensor& delta, const Tensor& weight) {
    return AddRmsNorm{residual, delta, weight, eps_, spare, normed};
  };
  Tensor pending;  // the previous layer's MLP output, not yet added to residual
  for (size_t i = 0; i < layers_.size(); ++i) {
    const DecoderLayer& layer = layers_[i];
    // A GQA layer's o projection runs inside the MoE router's op (one launch at decode on the
    // GPU), unless split heads leave partial sums that need an all-reduce in between.
    const bool defer_o =
        layer.moe && layer.gqa && !(parallel_.is_parallel() && layer.gqa->is_split());
    PendingProjection o;
    PendingProjection* o_out = defer_o ? &o : nullptr;
    Tensor attn;
    if (pending.defined()) {
      const AddRmsNorm pre = step(pending, layer.input_norm);
      LOCUS_ASSIGN_OR_RETURN(attn, run_layer(layer, normed, &pre, device, cache.layers[i], o_out));
      std::swap(residual, spare);
    } else {
      LOCUS_ASSIGN_OR_RETURN(attn,
                             run_layer(layer, normed, nullptr, device, cache.layers[i], o_out));
    }
    // Split heads leave partial sums of the o projection.
    if (parallel_.is_parallel() && (layer.mla || layer.gqa->is_split())) {
      LOCUS_RETURN_IF_ERROR(parallel_.tp->all_reduce_sum(attn));
    }
    const AddRmsNorm post = step(attn, layer.post_attention_norm);
    if (layer.moe) {
      LOCUS_ASSIGN_OR_RETURN(pending, layer.moe->forward(ops_, post, device.dp_max_tokens, o_out));
    } else {
      LOCUS_RETURN_IF_ERROR(ops_.add_rms_norm_to(post));
      LOCUS_ASSIGN_OR_RETURN(pending, gated_mlp_forward(ops_, *layer.dense_mlp, normed));
    }
    if (parallel_.is_parallel()) LOCUS_RETURN_IF_ERROR(parallel_.tp->all_reduce_sum(pending));
    std::swap(residual, spare);
  }
  LOCUS_RETURN_IF_ERROR(ops_.add_rms_norm(residual, pending, final_norm_, eps_, normed));

  const int64_t rows = device.logits_indices.numel();
  Tensor selected = normed;
  if (!device.logits_all_rows) {
    LOCUS_ASSIGN_OR_RETURN(selected, ops_.empty({rows, hidden}, dtype));
    LOCUS_RETURN_IF_ERROR(ops_.gather_rows(normed, device.logits_indices, selected));
  }
  LOCUS_ASSIGN_OR_RETURN(Tensor logits, ops_.empty({rows, config_.vocab_size}, DType::kF32));
  if (!parallel_.is_parallel()) {
    LOCUS_RETURN_IF_ERROR(ops_.linear(selected, lm_head_, logits));
    return logits;
  }
  LOCUS_ASSIGN_OR_RETURN(Tensor part, ops_.empty({rows, lm_head_.out_features()}, DType::kF32));
  LOCUS_RETURN_IF_ERROR(ops_.linear(selected, lm_head_, part));
  LOCUS_RETURN_IF_ERROR(parallel_.tp->all_gather(part, logits, 1));
  return logits;
}

}  // namespace locus
