// The input of one model forward: a flat batch of several sequences' new tokens with their
// places in the paged KV cache (vLLM's arrays; the same fields as the engine's ModelInputBatch).
// Prefill, chunked prefill and decode are all this one shape: a sequence contributes the tokens
// it has not computed yet, after num_computed_tokens already cached ones.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/ops.h"
#include "core/status.h"
#include "core/tensor.h"

namespace locus {

struct ForwardBatch {
  int block_size = 0;
  std::vector<int32_t> token_ids;        // [num_tokens], sequences back to back
  std::vector<int32_t> positions;        // [num_tokens], rope position of each token
  std::vector<int32_t> query_start_loc;  // [num_seqs + 1], cu_seqlens of the new tokens
  std::vector<int32_t> seq_lens;         // [num_seqs], cached tokens after this step's writes
  int max_num_blocks_per_seq = 0;
  std::vector<int32_t> block_table;     // [num_seqs, max_num_blocks_per_seq], -1 padded
  std::vector<int64_t> slot_mapping;    // [num_tokens], block * block_size + offset of each token
  std::vector<int32_t> logits_indices;  // flat token rows whose logits the forward returns
  // Data-parallel ranks sharing experts: the most tokens any rank runs this step (0 = unknown).
  int64_t dp_max_tokens = 0;

  int num_seqs() const { return static_cast<int>(seq_lens.size()); }
  int num_tokens() const { return static_cast<int>(token_ids.size()); }
};

// Checks the arrays against each other and against a cache of `num_blocks` blocks: sizes,
// query_start_loc monotone from 0, new tokens <= seq_len, every needed block id valid, each new
// token's slot equal to the one its block table gives, logits indices in range. Errors name the
// sequence and token.
Status validate_forward_batch(const ForwardBatch& batch, int64_t num_blocks);

// The batch's arrays as backend tensors (positions, token ids, attention metadata, logits rows).
struct DeviceBatch {
  Tensor token_ids;       // i32 [T]
  Tensor positions;       // i32 [T]
  Tensor logits_indices;  // i32 [n]
  // logits_indices is 0, 1, ..., T - 1 (every decode step): the forward skips the row gather.
  bool logits_all_rows = false;
  AttentionMetadata attention;
  int64_t dp_max_tokens = 0;  // ForwardBatch::dp_max_tokens
};
Expected<DeviceBatch> upload_forward_batch(Ops& ops, const ForwardBatch& batch);

// Which new tokens of a sequence get logits.
enum class LogitsFor : uint8_t { kNone, kLastToken, kAllTokens };

// Builds a ForwardBatch one sequence at a time (tests, `locus generate`, the model runner).
class ForwardBatchBuilder {
 public:
  explicit ForwardBatchBuilder(int block_size);

  // Appends `new_tokens` of a sequence that already has `num_computed_tokens` tokens cached.
  // `block_table` lists the sequence's blocks in order and must cover all its tokens after this
  // step. Positions are num_computed_tokens, num_computed_tokens + 1, ...
  Status add_sequence(std::span<const int32_t> new_tokens, int64_t num_computed_tokens,
                      std::span<const int32_t> block_table, LogitsFor logits);

  ForwardBatch build() &&;

 private:
  struct Pending {
    std::vector<int32_t> block_table;
  };
  ForwardBatch batch_;
  std::vector<Pending> pending_;
};

}  // namespace locus
