// The ops interface: every computation a model forward needs, with explicit shapes and dtypes.
// The model composes these and never sees a kernel; each backend (cpu/ = the reference oracle,
// cuda/ later) implements the protected do_* hooks. The public methods check every shape and
// dtype once, here, so that all backends reject bad calls with the same message.
//
// Conventions:
//  - T = tokens of the flat batch (all sequences back to back), H = heads, D = head dim.
//  - "row views": arguments documented as such may be strided views (e.g. a column slice of a
//    wider tensor) as long as their last dimension has unit stride. Everything else must be
//    contiguous. Outputs are always contiguous and never alias inputs unless stated.
//  - Activations are activation_dtype() (f32 on the CPU); the GEMM also accepts bf16 inputs.
//  - Index tensors: token ids, positions, block tables i32; slot mappings i64 (vLLM's types).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "io/model_config.h"
#include "io/rope_config.h"

namespace locus {

// A projection y = x W^T (+ bias). As loaded from a checkpoint the weight is f32, f16, bf16 or
// fp8 e4m3 with one f32 inverse scale per block_out x block_in block (DeepSeek's
// weight_scale_inv: W = fp8 * scale_inv[i / block_out][j / block_in], edge blocks partial).
// Ops::prepare_linear turns it into the backend's preferred form (the CPU: dense f32).
struct LinearWeight {
  Tensor weight;     // [out_features, in_features]
  Tensor scale_inv;  // f8_e4m3 weights only: f32 [ceil(out / block_out), ceil(in / block_in)]
  int64_t block_out = 0;
  int64_t block_in = 0;
  Tensor bias;  // [out_features], or undefined

  int64_t out_features() const { return weight.defined() ? weight.size(0) : 0; }
  int64_t in_features() const { return weight.defined() ? weight.size(1) : 0; }
  bool is_block_fp8() const { return weight.defined() && weight.dtype() == DType::kF8E4M3; }
};

// One routed (or shared) expert: down(silu(gate(x)) * up(x)).
struct ExpertWeights {
  LinearWeight gate;
  LinearWeight up;
  LinearWeight down;
};

// Rotary embedding of the leading rotary_dim() dims of each head. inv_freq and attention_factor
// come from compute_rope_frequencies() (backend/ops_rope.h), which reproduces Hugging Face.
struct RopeParams {
  Tensor inv_freq;                // f32 [rotary_dim / 2], host memory
  float attention_factor = 1.0f;  // multiplies cos and sin (YaRN's mscale)
  RopeLayout layout = RopeLayout::kNeox;

  int64_t rotary_dim() const { return 2 * inv_freq.numel(); }
};

// The pre-norm transformer's step between sublayers, out of place: residual_out = residual +
// delta (rounded to the activation dtype), normed = rms_norm(residual_out) * weight, with
// add_rms_norm's arithmetic. All [T, hidden] in the activation dtype except weight [hidden].
// residual_out aliases none of residual, delta and normed: a fused kernel's CTAs may all still
// be reading residual and delta when one of them writes residual_out, so a model alternates two
// residual buffers.
struct AddRmsNorm {
  Tensor residual;
  Tensor delta;
  Tensor weight;
  float eps = 0.0f;
  Tensor residual_out;
  Tensor normed;
};

// How a router turns logits into top-k experts and weights (see Ops::moe_route).
struct MoeRouting {
  ScoringFunc scoring = ScoringFunc::kSoftmax;
  TopkMethod topk_method = TopkMethod::kGreedy;
  int64_t top_k = 1;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  bool renormalize = false;  // norm_topk_prob
  float routed_scaling_factor = 1.0f;
};

// Where each sequence of a flat batch reads and writes the paged KV cache (vLLM's arrays).
// Sequence s owns new tokens [query_start_loc[s], query_start_loc[s+1]) and, after this step's
// writes, seq_lens[s] cached tokens; its new tokens are the last q_len of those, so new token i
// sits at sequence index seq_lens[s] - q_len + i and attends causally to indices <= that one.
// Sequence index j lives in block block_table[s][j / block_size] at offset j % block_size.
struct AttentionMetadata {
  int64_t block_size = 0;
  Tensor query_start_loc;  // i32 [num_seqs + 1]
  Tensor seq_lens;         // i32 [num_seqs]
  Tensor block_table;      // i32 [num_seqs, max_num_blocks_per_seq], padded with -1
  Tensor slot_mapping;     // i64 [num_tokens]: block * block_size + offset of each new token
  // Host-known upper bounds of the query lengths and seq_lens (0 = unknown). GPU backends size
  // their grids from these without reading the device arrays back; a captured CUDA graph sets
  // them to the largest values it will replay with.
  int64_t max_query_len = 0;
  int64_t max_seq_len = 0;

  int64_t num_seqs() const { return seq_lens.numel(); }
  int64_t num_tokens() const { return slot_mapping.numel(); }
};

struct AttentionParams {
  float scale = 1.0f;  // multiplies q.k before the softmax
  // Each query sees only the last `sliding_window` sequence indices, itself included
  // (transformers' sliding mask: kv_idx > q_idx - window). nullopt = full causal attention.
  std::optional<int64_t> sliding_window;
};

struct MlaParams {
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  float scale = 1.0f;
};

// A fused QKV projection's output row, [q: H x D | k: H_kv x D | v: H_kv x D_v], and the q/k
// normalization applied before rope (Ops::qkv_norm_rope_write_kv).
struct QkvSpec {
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t v_head_dim = 0;
  QkNorm norm = QkNorm::kNone;
  Tensor q_norm;  // prepared weights: [D] per head, [H * D] per layer
  Tensor k_norm;  // [D] per head, [H_kv * D] per layer
  float eps = 0.0f;
  // A per-layer norm whose heads are split over tensor-parallel ranks: f32 [2, T], the sums of
  // squares of each token's whole q row (row 0) and whole k row (row 1) over every rank, and
  // those whole rows' widths (split_rms_norm). Undefined when the rows here are whole.
  Tensor sum_squares;
  int64_t q_norm_width = 0;
  int64_t k_norm_width = 0;

  int64_t q_width() const { return num_heads * head_dim; }
  int64_t k_width() const { return num_kv_heads * head_dim; }
  int64_t v_width() const { return num_kv_heads * v_head_dim; }
  int64_t width() const { return q_width() + k_width() + v_width(); }
};

// One row's draw for Ops::sample_rows (the layout the CUDA kernel reads). temperature below
// kGreedyTemperatureEpsilon = greedy; top_k <= 0, top_p >= 1, min_p <= 0 = off; u: the
// request's uniform for this step (counter_uniform of its stream and output index).
struct SamplingRowParams {
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float u = 0.0f;
};

class Ops {
 public:
  Ops() = default;
  Ops(const Ops&) = delete;
  Ops& operator=(const Ops&) = delete;
  virtual ~Ops() = default;

  virtual std::string name() const = 0;
  virtual Device device() const = 0;
  // The dtype of hidden states, attention inputs and outputs between ops.
  virtual DType activation_dtype() const = 0;
  // The dtype of KV cache entries.
  virtual DType kv_cache_dtype() const = 0;

  // ---- memory ---------------------------------------------------------------------------------
  // Uninitialized / zeroed tensors on this backend's device.
  Expected<Tensor> empty(const Dims& shape, DType dtype);
  Expected<Tensor> zeros(const Dims& shape, DType dtype);
  // A host tensor's contents on the device. Host backends may return a view of the same bytes,
  // so the caller must not modify `host` while the result is in use.
  Expected<Tensor> to_device(const Tensor& host);
  // A device tensor's contents in host memory (a view of the same bytes on host backends).
  Expected<Tensor> to_host(const Tensor& tensor);

  // Host bytes into an existing contiguous tensor of this backend, ordered with the compute that
  // follows; `host` must stay unchanged until the next synchronizing call (to_host).
  virtual Status copy_into(const void* host, Tensor& dst, size_t bytes);

  // ---- sampling (optional) --------------------------------------------------------------------
  // One token per row of f32 logits [rows, vocab] on this backend, with the CPU sampler's
  // semantics (sampling/logits_processors.h: temperature, min_p, top_k, top_p, then a draw
  // walking token ids in order; argmax for greedy). Saves copying the logits to the host.
  // Synchronizes: the tokens are in host memory on return.
  virtual bool supports_sampling() const { return false; }
  virtual Status sample_rows(const Tensor& logits, std::span<const SamplingRowParams> rows,
                             std::span<int32_t> tokens);
  // The same draw without the wait (async scheduling, engine/engine_core.h): the tokens go to
  // token slot `slot` (0 or 1) and collect_sampled(slot) waits for them. They also stay where
  // they were drawn, so copy_sampled_tokens can feed them to the next step's inputs without a
  // round trip through the host. Backends that draw on the host do it all in sample_rows_async.
  virtual Status sample_rows_async(const Tensor& logits, std::span<const SamplingRowParams> rows,
                                   int slot);
  virtual Status collect_sampled(int slot, std::span<int32_t> tokens);
  // The first dst.numel() tokens of `slot` into dst (i32, contiguous, this backend), ordered
  // after the draw and before the compute that follows.
  virtual Status copy_sampled_tokens(int slot, Tensor& dst);
  // Host memory for copy_into's sources that the device can read without a staging copy
  // (pinned on CUDA, where a copy from pageable memory first waits for the stream to drain).
  virtual Expected<std::shared_ptr<uint8_t[]>> host_staging(size_t bytes);

  // ---- graphs (optional) ----------------------------------------------------------------------
  // A recorded sequence of ops replayed with the same device addresses (CUDA graphs): the inputs
  // are refreshed with copy_into before each replay. Backends without graphs return
  // unsupported from capture_graph.
  class Graph {
   public:
    virtual ~Graph() = default;
    virtual Status replay() = 0;
  };
  virtual bool supports_graphs() const { return false; }
  // Runs `body` once while recording it. Run the same body eagerly first, so that one-time work
  // (uploads of constants, allocations, GEMM plans) happens outside the recording.
  virtual Expected<std::unique_ptr<Graph>> capture_graph(const std::function<Status()>& body);

  // Bytes this backend may spend on weights; load refuses models whose prepared weights exceed
  // it, before allocating anything.
  virtual uint64_t weight_memory_budget_bytes() const = 0;
  // Bytes a checkpoint tensor of `numel` elements of `dtype` takes once prepared.
  virtual uint64_t prepared_weight_bytes(DType dtype, int64_t numel) const = 0;

  // ---- weights (host tensors in, possibly read-only and unaligned checkpoint views) -----------
  Expected<LinearWeight> prepare_linear(const LinearWeight& host);
  // Norm weights, embedding tables, correction biases: converted to the backend's float type.
  Expected<Tensor> prepare_weight(const Tensor& host);
  // Optional, for dummy weights: a prepared weight of `shape` made on the device, element i =
  // low + (high - low) * counter_uniform(stream, i) rounded to `dtype` (the checkpoint's), in
  // the form prepare_linear / prepare_weight would give. nullopt where the backend has no such
  // fill (the loader then makes the values on the host).
  virtual Expected<std::optional<Tensor>> random_uniform_weight(const Dims& shape, DType dtype,
                                                                uint64_t stream, float low,
                                                                float high) {
    (void)shape, (void)dtype, (void)stream, (void)low, (void)high;
    return std::optional<Tensor>();
  }

  // ---- compute --------------------------------------------------------------------------------
  // out[t] = table[token_ids[t]]. table [V, hidden], token_ids i32 [T], out [T, hidden].
  Status embedding(const Tensor& table, const Tensor& token_ids, Tensor& out);
  // embedding(table, token_ids, residual), then rms_norm(residual, weight, eps, normed): how the
  // first layer's input is made, as one op so a backend can run it as one kernel.
  Status embedding_rms_norm(const Tensor& table, const Tensor& token_ids, const Tensor& weight,
                            float eps, Tensor& residual, Tensor& normed);

  // out = x W^T + bias with f32 accumulation. x: row view [T, in] (f32, bf16 or f16), out
  // [T, out] in f32 or activation_dtype().
  // Unprepared bf16 / f16 / fp8 weights are dequantized per call (correct, slow).
  Status linear(const Tensor& x, const LinearWeight& w, Tensor& out);
  // out = [x W_0^T + b_0 | x W_1^T + b_1 | ...]: several projections of the same input (fused
  // QKV, gate/up) as one op, so a backend can stream all the weights in one kernel. x: row view
  // [T, in]; out [T, sum of out_features] in the activation dtype.
  Status merged_linear(const Tensor& x, std::span<const LinearWeight* const> parts, Tensor& out);
  // add_rms_norm_to(step), then merged_linear(step.normed, parts, out): the step a pre-norm
  // layer starts with, inside the projection that reads its output (a decode GEMV normalizes
  // the row in every CTA instead of waiting for a norm kernel).
  Status add_rms_norm_merged_linear(const AddRmsNorm& step,
                                    std::span<const LinearWeight* const> parts, Tensor& out);

  // out = x / sqrt(mean(x^2) + eps) * weight over the last dim. x: row view [..., n] (e.g.
  // [T, H, D] with weight [D] normalizes each head: q/k-norm per head), weight [n] (activation
  // dtype or f32, as prepare_weight gives it), out
  // contiguous with x's shape.
  Status rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out);
  // An RMSNorm whose rows are split over tensor-parallel ranks (MiniMax-M2's q/k norm over all
  // heads) runs in two halves around an all-reduce of the f32 sums of squares:
  // sum_squares: out[r] = sum of x[r, :]^2 in f32. x row view [rows, n], out f32 [rows].
  Status sum_squares(const Tensor& x, Tensor& out);
  // split_rms_norm: out = x / sqrt(sum_squares / width + eps) * weight, where the whole row has
  // `width` elements (x holds n <= width of them) and the given f32 sum of squares; the same
  // arithmetic as rms_norm on the whole row. x row view [rows, n], weight [n] (this part's),
  // sum_squares f32 [rows], out contiguous [rows, n].
  Status split_rms_norm(const Tensor& x, const Tensor& weight, const Tensor& sum_squares,
                        int64_t width, float eps, Tensor& out);
  // residual += x; out = rms_norm(residual): the pre-norm transformer's fused step. residual,
  // x, out [T, hidden]; out may not alias residual.
  Status add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& weight, float eps,
                      Tensor& out);
  // The same step out of place, as the ops below take it: step.residual_out = residual + delta,
  // step.normed = rms_norm(residual_out).
  Status add_rms_norm_to(const AddRmsNorm& step);

  // Rotates x[t, h, :rotary_dim] in place for position positions[t]. x: row view [T, H, D] with
  // D >= rotary_dim; dims past rotary_dim pass through (partial rotary). positions i32 [T].
  Status rope(Tensor& x, const Tensor& positions, const RopeParams& params);

  // out = silu(gate) * up. gate, up: row views [T, n]; out [T, n].
  Status silu_and_mul(const Tensor& gate, const Tensor& up, Tensor& out);
  // out = a + b, all [T, n]; out may alias a.
  Status add(const Tensor& a, const Tensor& b, Tensor& out);
  // out[i] = x[indices[i]], a zero row where indices[i] is -1. x [T, n], indices i32 [m],
  // out [m, n].
  Status gather_rows(const Tensor& x, const Tensor& indices, Tensor& out);
  // dst = src. Both row views (1 to 3 dims) of the same shape and dtype, not overlapping: the
  // one op whose output may be strided (it fills column slices).
  Status copy(const Tensor& src, Tensor& dst);

  // ---- attention over a paged KV cache --------------------------------------------------------
  // GQA cache layout (per layer): k_cache [num_blocks, block_size, H_kv, D],
  // v_cache [num_blocks, block_size, H_kv, D_v] (flashinfer's NHD). Writes k[t], v[t] (row views
  // [T, H_kv, D] / [T, H_kv, D_v]) at slot_mapping[t].
  Status write_kv_cache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping,
                        Tensor& k_cache, Tensor& v_cache);
  // The GQA step between the fused QKV projection and attention (vLLM's q/k-norm + rope +
  // reshape_and_cache): RMSNorm of q and k as spec.norm says, rope on both, this step's k and v
  // written into the caches at slot_mapping, and q to q_out. qkv: row view [T, spec.width()];
  // q_out [T, H, D]. Same results as rms_norm, rope and write_kv_cache run one by one.
  Status qkv_norm_rope_write_kv(const Tensor& qkv, const QkvSpec& spec, const Tensor& positions,
                                const RopeParams& rope, const Tensor& slot_mapping, Tensor& k_cache,
                                Tensor& v_cache, Tensor& q_out);
  // Causal attention of each new token over its sequence's cached K/V (this step's included:
  // call write_kv_cache first). q [T, H_q, D] with H_q a multiple of H_kv (query head h uses kv
  // head h / (H_q / H_kv)); out [T, H_q, D_v].
  Status paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                         const AttentionMetadata& metadata, const AttentionParams& params,
                         Tensor& out);
  // qkv_norm_rope_write_kv into q_out, then paged_attention of q_out into out, as one op so a
  // backend can fold the first into the second at decode (q then never goes through memory,
  // and q_out's contents are unspecified afterwards). Same results as the two ops.
  Status qkv_norm_rope_attention(const Tensor& qkv, const QkvSpec& spec, const Tensor& positions,
                                 const RopeParams& rope, const Tensor& slot_mapping,
                                 Tensor& k_cache, Tensor& v_cache,
                                 const AttentionMetadata& metadata, const AttentionParams& params,
                                 Tensor& q_out, Tensor& out);

  // MLA cache layout (per layer): [num_blocks, block_size, kv_lora_rank + qk_rope_head_dim],
  // each entry the normalized latent followed by the rotated shared rope key (vLLM's layout).
  // latent: row view [T, kv_lora_rank], k_pe: row view [T, qk_rope_head_dim].
  Status write_mla_cache(const Tensor& latent, const Tensor& k_pe, const Tensor& slot_mapping,
                         Tensor& cache);
  // Multi-head latent attention. q [T, H, qk_nope + qk_rope] with the rope part already rotated,
  // kv_b_proj [H * (qk_nope + v_head), kv_lora_rank] expands a latent into per-head k_nope and v;
  // the key of head h is [k_nope_h, k_pe] (k_pe shared by all heads); out [T, H, v_head].
  Status mla_attention(const Tensor& q, const Tensor& cache, const LinearWeight& kv_b_proj,
                       const AttentionMetadata& metadata, const MlaParams& params, Tensor& out);

  // ---- mixture of experts ---------------------------------------------------------------------
  // Router: router_logits f32 [T, E] -> topk_ids i32 [T, k], topk_weights f32 [T, k].
  //  softmax scoring: p = softmax(logits); sigmoid: p = sigmoid(logits).
  //  Selection uses p + correction_bias (f32 [E], sigmoid routers only; undefined = none):
  //   greedy: top-k of all experts;
  //   group_limited_greedy: keep the topk_group groups (n_group equal slices) with the largest
  //     max, then top-k within them;
  //   noaux_tc: same, with group score = sum of the group's top-2.
  //  Weights are p (without bias) of the chosen experts, divided by their sum when renormalize,
  //  then times routed_scaling_factor. Ties go to the lower expert id.
  Status moe_route(const Tensor& router_logits, const Tensor& correction_bias,
                   const MoeRouting& routing, Tensor& topk_ids, Tensor& topk_weights);
  // The router and routing in one: router_logits = x W^T (f32 [T, E], as linear), then
  // moe_route on them. A backend may run both in one kernel; router_logits is still written.
  Status moe_router(const Tensor& x, const LinearWeight& router, const Tensor& correction_bias,
                    const MoeRouting& routing, Tensor& router_logits, Tensor& topk_ids,
                    Tensor& topk_weights);
  // add_rms_norm_to(step), then moe_router(step.normed, ...), as add_rms_norm_merged_linear.
  Status add_rms_norm_moe_router(const AddRmsNorm& step, const LinearWeight& router,
                                 const Tensor& correction_bias, const MoeRouting& routing,
                                 Tensor& router_logits, Tensor& topk_ids, Tensor& topk_weights);
  // linear(x, proj, step.delta), then add_rms_norm_moe_router(step, ...): the attention's output
  // projection and the router that consumes it. With `experts_follow` the caller's next op is
  // moe_experts(step.normed, topk_ids, topk_weights, ...), and a backend may leave step's
  // residual_out and normed, the logits, ids and weights to that call (the CUDA backend's folded
  // router, gemv_fold_route.cuh); they are all written once it returns.
  Status linear_add_rms_norm_moe_router(const Tensor& x, const LinearWeight& proj,
                                        const AddRmsNorm& step, const LinearWeight& router,
                                        const Tensor& correction_bias, const MoeRouting& routing,
                                        Tensor& router_logits, Tensor& topk_ids,
                                        Tensor& topk_weights, bool experts_follow = false);
  // out[t] = sum_j topk_weights[t, j] * expert_{topk_ids[t, j]}(x[t]). x [T, hidden],
  // experts[e] for every expert id, out [T, hidden]. An expert whose weights are all undefined
  // is on another rank (expert parallelism): its share is left out, and the ranks' outputs sum
  // to the whole. An id of -1 is an empty slot (the low_latency exchange's padding): skipped.
  Status moe_experts(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                     std::span<const ExpertWeights> experts, Tensor& out);

  // ---- expert exchange planned on the device (ops_exchange.cc) -------------------------------
  // The send plan of the low_latency all-to-all: every pair of ranks exchanges a block of
  // `capacity` rows (>= T), so no count goes through the host. Token t goes to every rank that
  // owns one of its experts (expert_owner i32 [E]: the rank of each expert, -1 for one no rank
  // of this group holds), into that rank's
  // block at the next free slot in token order. Outputs, for `ranks` blocks of `capacity` slots:
  //   send_index i32 [ranks * capacity]: the token in each slot, -1 for an empty one;
  //   send_ids i32 / send_weights f32 [ranks * capacity, k]: its whole routing (-1 / 0 if empty);
  //   combine_index i32 [ranks, T]: the slot token t took in rank r's block (r * capacity + s),
  //     -1 where t does not go to r.
  Status moe_dispatch_plan(const Tensor& topk_ids, const Tensor& topk_weights,
                           const Tensor& expert_owner, int64_t ranks, int64_t capacity,
                           Tensor& send_index, Tensor& send_ids, Tensor& send_weights,
                           Tensor& combine_index);
  // out[t] = sum over j of x[index[j, t]] (f32 sums in j order), index -1 adding nothing (a row
  // of only -1 is zeros). x [R, n], index i32 [m, T], out [T, n].
  Status gather_sum_rows(const Tensor& x, const Tensor& index, Tensor& out);

 protected:
  // sample_rows_async on backends that draw on the host: the tokens of each slot.
  std::vector<int32_t> host_sampled_[2];

  // Argument checks shared by ops and the fused ops built from them.
  Status validate_linear(std::string_view op, const Tensor& x, const LinearWeight& w,
                         const Tensor& out) const;
  Status validate_add_rms_norm(std::string_view op, const AddRmsNorm& step) const;
  Status validate_moe_route(std::string_view op, const Tensor& router_logits,
                            const Tensor& correction_bias, const MoeRouting& routing,
                            const Tensor& topk_ids, const Tensor& topk_weights) const;
  Status validate_embedding(std::string_view op, const Tensor& table, const Tensor& token_ids,
                            const Tensor& out) const;
  Status validate_rms_norm(std::string_view op, const Tensor& x, const Tensor& weight, float eps,
                           const Tensor& out) const;
  Status validate_qkv_norm_rope_write_kv(std::string_view op, const Tensor& qkv,
                                         const QkvSpec& spec, const Tensor& positions,
                                         const RopeParams& rope, const Tensor& slot_mapping,
                                         const Tensor& k_cache, const Tensor& v_cache,
                                         const Tensor& q_out) const;
  Status validate_paged_attention(std::string_view op, const Tensor& q, const Tensor& k_cache,
                                  const Tensor& v_cache, const AttentionMetadata& metadata,
                                  const AttentionParams& params, const Tensor& out) const;

  virtual Expected<Tensor> do_empty(const Dims& shape, DType dtype) = 0;
  virtual Status do_fill_zero(Tensor& t) = 0;
  virtual Expected<Tensor> do_to_device(const Tensor& host) = 0;
  virtual Expected<Tensor> do_to_host(const Tensor& tensor) = 0;
  virtual Expected<LinearWeight> do_prepare_linear(const LinearWeight& host) = 0;
  virtual Expected<Tensor> do_prepare_weight(const Tensor& host) = 0;

  virtual Status do_embedding(const Tensor& table, const Tensor& token_ids, Tensor& out) = 0;
  virtual Status do_linear(const Tensor& x, const LinearWeight& w, Tensor& out) = 0;
  virtual Status do_rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) = 0;
  virtual Status do_sum_squares(const Tensor& x, Tensor& out) = 0;
  virtual Status do_split_rms_norm(const Tensor& x, const Tensor& weight, const Tensor& sum_squares,
                                   int64_t width, float eps, Tensor& out) = 0;
  // residual_out = residual + x; out = rms_norm(residual_out). residual_out may be residual
  // (the in-place op) or a separate tensor.
  virtual Status do_add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& weight,
                                 float eps, Tensor& residual_out, Tensor& out) = 0;
  virtual Status do_rope(Tensor& x, const Tensor& positions, const RopeParams& params) = 0;
  virtual Status do_silu_and_mul(const Tensor& gate, const Tensor& up, Tensor& out) = 0;
  virtual Status do_add(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  virtual Status do_gather_rows(const Tensor& x, const Tensor& indices, Tensor& out) = 0;
  virtual Status do_copy(const Tensor& src, Tensor& dst) = 0;
  // Fusions: the defaults compose the ops above (ops_fused.cc); backends override them with
  // fused kernels where those pay.
  virtual Status do_merged_linear(const Tensor& x, std::span<const LinearWeight* const> parts,
                                  Tensor& out);
  virtual Status do_embedding_rms_norm(const Tensor& table, const Tensor& token_ids,
                                       const Tensor& weight, float eps, Tensor& residual,
                                       Tensor& normed);
  virtual Status do_qkv_norm_rope_write_kv(const Tensor& qkv, const QkvSpec& spec,
                                           const Tensor& positions, const RopeParams& rope,
                                           const Tensor& slot_mapping, Tensor& k_cache,
                                           Tensor& v_cache, Tensor& q_out);
  virtual Status do_qkv_norm_rope_attention(const Tensor& qkv, const QkvSpec& spec,
                                            const Tensor& positions, const RopeParams& rope,
                                            const Tensor& slot_mapping, Tensor& k_cache,
                                            Tensor& v_cache, const AttentionMetadata& metadata,
                                            const AttentionParams& params, Tensor& q_out,
                                            Tensor& out);
  virtual Status do_moe_router(const Tensor& x, const LinearWeight& router,
                               const Tensor& correction_bias, const MoeRouting& routing,
                               Tensor& router_logits, Tensor& topk_ids, Tensor& topk_weights);
  virtual Status do_add_rms_norm_merged_linear(const AddRmsNorm& step,
                                               std::span<const LinearWeight* const> parts,
                                               Tensor& out);
  virtual Status do_add_rms_norm_moe_router(const AddRmsNorm& step, const LinearWeight& router,
                                            const Tensor& correction_bias,
                                            const MoeRouting& routing, Tensor& router_logits,
                                            Tensor& topk_ids, Tensor& topk_weights);
  virtual Status do_linear_add_rms_norm_moe_router(
      const Tensor& x, const LinearWeight& proj, const AddRmsNorm& step, const LinearWeight& router,
      const Tensor& correction_bias, const MoeRouting& routing, Tensor& router_logits,
      Tensor& topk_ids, Tensor& topk_weights, bool experts_follow);
  virtual Status do_write_kv_cache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping,
                                   Tensor& k_cache, Tensor& v_cache) = 0;
  virtual Status do_paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                    const AttentionMetadata& metadata,
                                    const AttentionParams& params, Tensor& out) = 0;
  virtual Status do_write_mla_cache(const Tensor& latent, const Tensor& k_pe,
                                    const Tensor& slot_mapping, Tensor& cache) = 0;
  virtual Status do_mla_attention(const Tensor& q, const Tensor& cache,
                                  const LinearWeight& kv_b_proj, const AttentionMetadata& metadata,
                                  const MlaParams& params, Tensor& out) = 0;
  virtual Status do_moe_route(const Tensor& router_logits, const Tensor& correction_bias,
                              const MoeRouting& routing, Tensor& topk_ids,
                              Tensor& topk_weights) = 0;
  virtual Status do_moe_experts(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                                std::span<const ExpertWeights> experts, Tensor& out) = 0;
  virtual Status do_moe_dispatch_plan(const Tensor& topk_ids, const Tensor& topk_weights,
                                      const Tensor& expert_owner, int64_t ranks, int64_t capacity,
                                      Tensor& send_index, Tensor& send_ids, Tensor& send_weights,
                                      Tensor& combine_index) = 0;
  virtual Status do_gather_sum_rows(const Tensor& x, const Tensor& index, Tensor& out) = 0;
};

}  // namespace locus
