#include "model/forward_batch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace locus {
namespace {

template <typename T>
Expected<Tensor> host_tensor(const std::vector<T>& values, const Dims& shape, DType dtype) {
  LOCUS_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(shape, dtype));
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
  return t;
}

}  // namespace

Status validate_forward_batch(const ForwardBatch& b, int64_t num_blocks) {
  const int64_t tokens = b.num_tokens();
  const int64_t seqs = b.num_seqs();
  auto fail = [](std::string message) {
    return invalid_argument("forward batch: " + std::move(message));
  };
  if (b.block_size <= 0) return fail(fmt::format("block_size {} must be positive", b.block_size));
  if (static_cast<int64_t>(b.positions.size()) != tokens ||
      static_cast<int64_t>(b.slot_mapping.size()) != tokens) {
    return fail(fmt::format("{} token ids but {} positions and {} slots", tokens,
                            b.positions.size(), b.slot_mapping.size()));
  }
  if (static_cast<int64_t>(b.query_start_loc.size()) != seqs + 1) {
    return fail(fmt::format("query_start_loc has {} entries for {} sequences",
                            b.query_start_loc.size(), seqs));
  }
  if (b.max_num_blocks_per_seq < 0 ||
      static_cast<int64_t>(b.block_table.size()) != seqs * b.max_num_blocks_per_seq) {
    return fail(fmt::format("block_table has {} entries, expected {} sequences x {}",
                            b.block_table.size(), seqs, b.max_num_blocks_per_seq));
  }
  if (b.query_start_loc.front() != 0 || b.query_start_loc.back() != tokens) {
    return fail(fmt::format("query_start_loc must run from 0 to {}", tokens));
  }
  for (int64_t s = 0; s < seqs; ++s) {
    const int64_t first = b.query_start_loc[static_cast<size_t>(s)];
    const int64_t q_len = b.query_start_loc[static_cast<size_t>(s + 1)] - first;
    const int64_t seq_len = b.seq_lens[static_cast<size_t>(s)];
    if (q_len < 0 || q_len > seq_len) {
      return fail(fmt::format("sequence {} has {} new tokens and seq_len {}", s, q_len, seq_len));
    }
    const int64_t blocks = (seq_len + b.block_size - 1) / b.block_size;
    if (blocks > b.max_num_blocks_per_seq) {
      return fail(fmt::format("sequence {} needs {} blocks for {} tokens, its table holds {}", s,
                              blocks, seq_len, b.max_num_blocks_per_seq));
    }
    const int32_t* table = b.block_table.data() + s * b.max_num_blocks_per_seq;
    for (int64_t i = 0; i < blocks; ++i) {
      if (table[i] < 0 || table[i] >= num_blocks) {
        return fail(fmt::format("sequence {} block {} is id {}, outside the cache's [0, {})", s, i,
                                table[i], num_blocks));
      }
    }
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t index = seq_len - q_len + i;
      const int64_t expected =
          static_cast<int64_t>(table[index / b.block_size]) * b.block_size + index % b.block_size;
      const int64_t actual = b.slot_mapping[static_cast<size_t>(first + i)];
      if (actual != expected) {
        return fail(
            fmt::format("token {} (sequence {}, index {}) has slot {}, but its block table "
                        "puts it at {}",
                        first + i, s, index, actual, expected));
      }
    }
  }
  for (size_t i = 0; i < b.logits_indices.size(); ++i) {
    if (b.logits_indices[i] < 0 || b.logits_indices[i] >= tokens) {
      return fail(
          fmt::format("logits index {} is outside the {} tokens", b.logits_indices[i], tokens));
    }
  }
  return Status::ok();
}

Expected<DeviceBatch> upload_forward_batch(Ops& ops, const ForwardBatch& b) {
  const int64_t tokens = b.num_tokens();
  const int64_t seqs = b.num_seqs();
  DeviceBatch out;
  LOCUS_ASSIGN_OR_RETURN(Tensor ids, host_tensor(b.token_ids, {tokens}, DType::kI32));
  LOCUS_ASSIGN_OR_RETURN(Tensor positions, host_tensor(b.positions, {tokens}, DType::kI32));
  LOCUS_ASSIGN_OR_RETURN(
      Tensor logits,
      host_tensor(b.logits_indices, {static_cast<int64_t>(b.logits_indices.size())}, DType::kI32));
  LOCUS_ASSIGN_OR_RETURN(Tensor qsl, host_tensor(b.query_start_loc, {seqs + 1}, DType::kI32));
  LOCUS_ASSIGN_OR_RETURN(Tensor seq_lens, host_tensor(b.seq_lens, {seqs}, DType::kI32));
  LOCUS_ASSIGN_OR_RETURN(Tensor table,
                         host_tensor(b.block_table, {seqs, b.max_num_blocks_per_seq}, DType::kI32));
  LOCUS_ASSIGN_OR_RETURN(Tensor slots, host_tensor(b.slot_mapping, {tokens}, DType::kI64));
  LOCUS_ASSIGN_OR_RETURN(out.token_ids, ops.to_device(ids));
  LOCUS_ASSIGN_OR_RETURN(out.positions, ops.to_device(positions));
  LOCUS_ASSIGN_OR_RETURN(out.logits_indices, ops.to_device(logits));
  out.logits_all_rows = static_cast<int64_t>(b.logits_indices.size()) == tokens;
  for (size_t i = 0; out.logits_all_rows && i < b.logits_indices.size(); ++i)
    out.logits_all_rows = b.logits_indices[i] == static_cast<int32_t>(i);
  out.attention.block_size = b.block_size;
  out.dp_max_tokens = b.dp_max_tokens;
  for (int64_t s = 0; s < seqs; ++s) {
    const auto i = static_cast<size_t>(s);
    out.attention.max_query_len = std::max<int64_t>(
        out.attention.max_query_len, b.query_start_loc[i + 1] - b.query_start_loc[i]);
    out.attention.max_seq_len = std::max<int64_t>(out.attention.max_seq_len, b.seq_lens[i]);
  }
  LOCUS_ASSIGN_OR_RETURN(out.attention.query_start_loc, ops.to_device(qsl));
  LOCUS_ASSIGN_OR_RETURN(out.attention.seq_lens, ops.to_device(seq_lens));
  LOCUS_ASSIGN_OR_RETURN(out.attention.block_table, ops.to_device(table));
  LOCUS_ASSIGN_OR_RETURN(out.attention.slot_mapping, ops.to_device(slots));
  return out;
}

// ---- builder ------------------------------------------------------------------------------------

ForwardBatchBuilder::ForwardBatchBuilder(int block_size) {
  batch_.block_size = block_size;
  batch_.query_start_loc.push_back(0);
}

Status ForwardBatchBuilder::add_sequence(std::span<const int32_t> new_tokens,
                                         int64_t num_computed_tokens,
                                         std::span<const int32_t> block_table, LogitsFor logits) {
  const int64_t block_size = batch_.block_size;
  if (block_size <= 0) {
    return invalid_argument(
        fmt::format("ForwardBatchBuilder: block_size {} must be positive", block_size));
  }
  const int64_t seq_len = num_computed_tokens + static_cast<int64_t>(new_tokens.size());
  const int64_t blocks = (seq_len + block_size - 1) / block_size;
  if (num_computed_tokens < 0 || static_cast<int64_t>(block_table.size()) < blocks) {
    return invalid_argument(
        fmt::format("ForwardBatchBuilder: {} tokens need {} blocks of {}, got "
                    "a table of {}",
                    seq_len, blocks, block_size, block_table.size()));
  }
  const int32_t first_row = batch_.num_tokens();
  for (size_t i = 0; i < new_tokens.size(); ++i) {
    const int64_t index = num_computed_tokens + static_cast<int64_t>(i);
    batch_.token_ids.push_back(new_tokens[i]);
    batch_.positions.push_back(static_cast<int32_t>(index));
    batch_.slot_mapping.push_back(
        static_cast<int64_t>(block_table[index / block_size]) * block_size + index % block_size);
  }
  const int32_t rows = static_cast<int32_t>(new_tokens.size());
  if (logits == LogitsFor::kAllTokens) {
    for (int32_t i = 0; i < rows; ++i)
      batch_.logits_indices.push_back(first_row + i);
  } else if (logits == LogitsFor::kLastToken && rows > 0) {
    batch_.logits_indices.push_back(first_row + rows - 1);
  }
  batch_.query_start_loc.push_back(first_row + rows);
  batch_.seq_lens.push_back(static_cast<int32_t>(seq_len));
  pending_.push_back({std::vector<int32_t>(block_table.begin(), block_table.begin() + blocks)});
  batch_.max_num_blocks_per_seq = std::max(batch_.max_num_blocks_per_seq, static_cast<int>(blocks));
  return Status::ok();
}

ForwardBatch ForwardBatchBuilder::build() && {
  const int width = batch_.max_num_blocks_per_seq;
  batch_.block_table.assign(pending_.size() * static_cast<size_t>(width), -1);
  for (size_t s = 0; s < pending_.size(); ++s) {
    std::copy(pending_[s].block_table.begin(), pending_[s].block_table.end(),
              batch_.block_table.begin() + static_cast<std::ptrdiff_t>(s * width));
  }
  return std::move(batch_);
}

}  // namespace locus
