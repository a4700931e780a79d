// Internal to backend/cpu/: reading the paged-cache metadata, shared by GQA and MLA attention.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "backend/ops.h"
#include "core/status.h"

namespace locus::cpu {

// One sequence of the batch, validated against the cache: its new tokens are flat rows
// [first_token, first_token + num_new) and sequence indices [context_len - num_new, context_len).
struct SequenceSpan {
  int64_t first_token = 0;
  int64_t num_new = 0;
  int64_t context_len = 0;
  const int32_t* block_table = nullptr;  // every entry below ceil(context_len / block_size) valid

  // The cache slot of sequence index j.
  int64_t slot(int64_t j, int64_t block_size) const {
    return static_cast<int64_t>(block_table[j / block_size]) * block_size + j % block_size;
  }
};

// Checks the metadata's contents (counts, block ids in [0, num_blocks)) and returns one span
// per sequence; errors name `op` and the sequence.
Expected<std::vector<SequenceSpan>> resolve_sequences(const AttentionMetadata& metadata,
                                                      int64_t num_blocks, std::string_view op);

// Every slot in [0, num_slots).
Status check_slots(const Tensor& slot_mapping, int64_t num_slots, std::string_view op);

// Max-subtracted softmax in f64.
void softmax_in_place(std::vector<double>& scores);

}  // namespace locus::cpu
