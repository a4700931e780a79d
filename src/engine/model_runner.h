// The boundary between the engine core and a model: a flat batch of tokens with their KV
// addresses in, one row of logits per requested position out. The real runner (#4) plans
// attention and runs the forward on a backend; FakeModel implements it for tests.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/ops.h"
#include "core/status.h"
#include "core/tensor.h"
#include "kv/kv_cache_spec.h"

namespace locus {

// Padding in block_table rows past a request's last block. Never read by a correct kernel
// (it stops at seq_lens), and an invalid id makes a wrong read fail loudly in tests.
inline constexpr int32_t kPadBlockId = -1;

// One step's work, all host arrays (vLLM's names). Requests appear in SchedulerOutput order.
struct ModelInputBatch {
  int num_reqs = 0;
  int block_size = 0;
  std::vector<int32_t> token_ids;            // [num_tokens]
  std::vector<int32_t> positions;            // [num_tokens], position of each token in its sequence
  std::vector<int32_t> query_start_loc;      // [num_reqs + 1], cu_seqlens of the new tokens
  std::vector<int32_t> seq_lens;             // [num_reqs], context length including this step
  std::vector<int32_t> num_computed_tokens;  // [num_reqs], KV already present before this step
  int max_num_blocks_per_req = 0;
  std::vector<int32_t> block_table;   // [num_reqs, max_num_blocks_per_req], kPadBlockId padded
  std::vector<int64_t> slot_mapping;  // [num_tokens], block_id * block_size + offset: KV write
  // Flat token indices whose logits are wanted, ascending: the last token of each request that
  // samples, and every prompt position of requests that asked for prompt logprobs.
  std::vector<int32_t> logits_indices;
  // For execute_sampled: how to draw row i of the logits (one entry per logits_indices entry).
  std::vector<SamplingRowParams> device_sampling;
  // DP attention + EP MoE: the most tokens any data-parallel rank runs in this step, agreed once
  // per step (LockstepRunner) so that the MoE layers need not exchange counts; 0 = not known.
  int64_t dp_max_tokens = 0;

  int num_tokens() const { return static_cast<int>(token_ids.size()); }
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  virtual int vocab_size() const = 0;
  virtual const KVCacheSpec& kv_cache_spec() const = 0;

  // Allocates the KV cache for num_blocks blocks of kv_cache_spec(). Called once, before any
  // execute().
  virtual Status initialize_kv_cache(int num_blocks) = 0;

  // Runs the forward for one step: writes the new tokens' KV at slot_mapping, attends over each
  // request's blocks, and returns f32 logits [logits_indices.size(), vocab_size] on the host.
  virtual Expected<Tensor> execute(const ModelInputBatch& batch) = 0;

  // Runners that can sample where the logits are (the GPU): execute_sampled runs the same step
  // and draws row i with batch.device_sampling[i], returning one token per row; the logits
  // never reach the host. The engine uses it for steps whose every row is a plain draw.
  virtual bool supports_device_sampling() const { return false; }
  virtual Expected<std::vector<int32_t>> execute_sampled(const ModelInputBatch& batch) {
    (void)batch;
    return unsupported("this model runner does not sample on its device");
  }

  // Async scheduling (engine_core.h): launch_sampled queues the same step as execute_sampled
  // and returns before its tokens exist; collect_sampled returns the tokens of the oldest
  // launched step not yet collected, waiting for them. At most two steps are outstanding.
  // With tokens_from_previous, row i's input token is the token the previous launched step
  // drew for its row i, taken where it was drawn; batch.token_ids is then not read.
  virtual bool supports_async_sampling() const { return false; }
  // Whether async scheduling is worth it by default: the steps run on a device the host can
  // queue ahead of (a GPU), not on the calling threads.
  virtual bool prefers_async_sampling() const { return false; }
  virtual Status launch_sampled(const ModelInputBatch& batch, bool tokens_from_previous) {
    (void)batch, (void)tokens_from_previous;
    return unsupported("this model runner does not launch steps asynchronously");
  }
  virtual Expected<std::vector<int32_t>> collect_sampled() {
    return unsupported("this model runner does not launch steps asynchronously");
  }

  // Runs the step and drops its logits where they are (a dummy step whose logits nobody reads);
  // runners whose logits live on a device skip the copy to the host, and may return before the
  // step has finished there.
  virtual Status execute_dropping_logits(const ModelInputBatch& batch) {
    return execute(batch).status();
  }
};

}  // namespace locus
