#include "model/decode_graphs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/logging.h"

namespace locus {
namespace {

// Byte offsets of each array in the input buffer, for batches up to `b` and `w` blocks/seq.
struct Layout {
  size_t slots, tokens, positions, seq_lens, qsl, logits, table, total;
  Layout(int64_t b, int64_t w) {
    const auto n = static_cast<size_t>(b);
    slots = 0;
    tokens = slots + 8 * n;
    positions = tokens + 4 * n;
    seq_lens = positions + 4 * n;
    qsl = seq_lens + 4 * n;
    logits = qsl + 4 * (n + 1);
    table = logits + 4 * n;
    total = table + 4 * n * static_cast<size_t>(w);
  }
};

}  // namespace

Expected<std::unique_ptr<DecodeGraphs>> DecodeGraphs::create(Model& model, KvCache& cache,
                                                             const DecodeGraphOptions& options) {
  if (!model.ops().supports_graphs()) {
    return unsupported(fmt::format("{} cannot record graphs", model.ops().name()));
  }
  if (options.max_batch_size <= 0 || options.max_model_len <= 0 || options.pad_block < 0 ||
      options.pad_block >= cache.num_blocks ||
      static_cast<int64_t>(options.max_blocks_per_seq) * cache.block_size < options.max_model_len) {
    return invalid_argument(fmt::format(
        "decode graphs: bad options (max batch {}, max_model_len {}, {} blocks/seq of {}, pad "
        "block {} of {})",
        options.max_batch_size, options.max_model_len, options.max_blocks_per_seq, cache.block_size,
        options.pad_block, cache.num_blocks));
  }
  std::unique_ptr<DecodeGraphs> g(new DecodeGraphs(model, cache, options));
  for (int s : {1, 2, 4}) {
    if (s <= options.max_batch_size) g->sizes_.push_back(s);
  }
  for (int s = 8; s <= options.max_batch_size; s += s < 256 ? 8 : 16)
    g->sizes_.push_back(s);
  if (g->sizes_.back() < options.max_batch_size) g->sizes_.push_back(options.max_batch_size);
  for (int64_t b = 4096; b < options.max_model_len; b *= 4)
    g->seq_bounds_.push_back(b);
  g->seq_bounds_.push_back(options.max_model_len);
  LOCUS_RETURN_IF_ERROR(g->allocate_inputs());
  return g;
}

Status DecodeGraphs::allocate_inputs() {
  const Layout l(options_.max_batch_size, options_.max_blocks_per_seq);
  LOCUS_ASSIGN_OR_RETURN(inputs_, model_.ops().empty({static_cast<int64_t>(l.total)}, DType::kU8));
  for (auto& staging : staging_) {
    LOCUS_ASSIGN_OR_RETURN(staging, model_.ops().host_staging(l.total));
  }
  return Status::ok();
}

DeviceBatch DecodeGraphs::view_for(int b, int64_t seq_bound) const {
  const Layout l(options_.max_batch_size, options_.max_blocks_per_seq);
  auto view = [&](size_t offset, const Dims& shape, DType dtype) {
    return Tensor::from_storage(inputs_.storage(), shape, dtype, inputs_.byte_offset() + offset)
        .value();
  };
  DeviceBatch d;
  d.token_ids = view(l.tokens, {b}, DType::kI32);
  d.positions = view(l.positions, {b}, DType::kI32);
  d.logits_indices = view(l.logits, {b}, DType::kI32);
  d.logits_all_rows = true;  // can_run() admits only these
  d.attention.block_size = cache_.block_size;
  d.attention.query_start_loc = view(l.qsl, {b + 1}, DType::kI32);
  d.attention.seq_lens = view(l.seq_lens, {b}, DType::kI32);
  d.attention.block_table = view(l.table, {b, options_.max_blocks_per_seq}, DType::kI32);
  d.attention.slot_mapping = view(l.slots, {b}, DType::kI64);
  d.attention.max_query_len = 1;
  d.attention.max_seq_len = seq_bound;
  return d;
}

bool DecodeGraphs::can_run(const ForwardBatch& batch) const {
  const int n = batch.num_seqs();
  if (n == 0 || n > options_.max_batch_size || batch.num_tokens() != n) return false;
  if (batch.max_num_blocks_per_seq > options_.max_blocks_per_seq) return false;
  if (static_cast<int>(batch.logits_indices.size()) != n) return false;
  for (int i = 0; i < n; ++i) {
    if (batch.logits_indices[static_cast<size_t>(i)] != i) return false;
    if (batch.seq_lens[static_cast<size_t>(i)] > options_.max_model_len) return false;
  }
  return true;
}

Expected<Tensor> DecodeGraphs::run_on_device(const ForwardBatch& batch, const TokenFeed& feed) {
  if (!can_run(batch)) return invalid_argument("decode graphs: not a decode batch that fits");
  LOCUS_RETURN_IF_ERROR(validate_forward_batch(batch, cache_.num_blocks));
  const int n = batch.num_seqs();
  const int b = *std::lower_bound(sizes_.begin(), sizes_.end(), n);
  const int64_t longest = *std::max_element(batch.seq_lens.begin(), batch.seq_lens.end());
  const int64_t bound = *std::lower_bound(seq_bounds_.begin(), seq_bounds_.end(), longest);

  // Fill the staging copy of the inputs for b rows (padding rows past n), then one upload.
  const Layout l(options_.max_batch_size, options_.max_blocks_per_seq);
  const int w = options_.max_blocks_per_seq;
  uint8_t* staging = staging_[next_staging_].get();
  next_staging_ ^= 1;
  auto* slots = reinterpret_cast<int64_t*>(staging + l.slots);
  auto* tokens = reinterpret_cast<int32_t*>(staging + l.tokens);
  auto* positions = reinterpret_cast<int32_t*>(staging + l.positions);
  auto* seq_lens = reinterpret_cast<int32_t*>(staging + l.seq_lens);
  auto* qsl = reinterpret_cast<int32_t*>(staging + l.qsl);
  auto* logits = reinterpret_cast<int32_t*>(staging + l.logits);
  auto* table = reinterpret_cast<int32_t*>(staging + l.table);
  const int src_w = batch.max_num_blocks_per_seq;
  for (int i = 0; i < b; ++i) {
    const auto u = static_cast<size_t>(i);
    int32_t* row = table + static_cast<size_t>(i) * static_cast<size_t>(w);
    std::fill(row, row + w, -1);
    qsl[u] = i;
    logits[u] = i;
    if (i < n) {
      slots[u] = batch.slot_mapping[u];
      tokens[u] = batch.token_ids[u];
      positions[u] = batch.positions[u];
      seq_lens[u] = batch.seq_lens[u];
      std::copy_n(batch.block_table.begin() + static_cast<ptrdiff_t>(i) * src_w, src_w, row);
    } else {
      slots[u] = static_cast<int64_t>(options_.pad_block) * cache_.block_size;
      tokens[u] = 0;
      positions[u] = 0;
      seq_lens[u] = 1;
      row[0] = options_.pad_block;
    }
  }
  qsl[b] = b;
  // Upload only the prefix the graph of size b reads: everything but the table rows past b.
  const size_t bytes = l.table + 4 * static_cast<size_t>(b) * static_cast<size_t>(w);
  Ops& ops = model_.ops();
  LOCUS_RETURN_IF_ERROR(ops.copy_into(staging, inputs_, bytes));
  if (feed) {
    LOCUS_ASSIGN_OR_RETURN(Tensor token_ids, view_for(b, bound).token_ids.slice(0, 0, n));
    LOCUS_RETURN_IF_ERROR(feed(token_ids));
  }

  auto key = std::make_pair(b, bound);
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    // Warm up eagerly on the real inputs (allocations, uploads of constants, GEMM plans), then
    // capture the same body; the eager run's results are what this step returns.
    const DeviceBatch inputs = view_for(b, bound);
    LOCUS_ASSIGN_OR_RETURN(Tensor eager, model_.forward_device(inputs, cache_));
    Captured c;
    auto graph = ops.capture_graph([&]() -> Status {
      LOCUS_ASSIGN_OR_RETURN(c.logits, model_.forward_device(inputs, cache_));
      return Status::ok();
    });
    if (!graph) return graph.status();
    c.graph = std::move(*graph);
    log::debug("captured a decode graph for batch {} and context <= {}", b, bound);
    graphs_.emplace(key, std::move(c));
    return eager.slice(0, 0, n);
  }
  LOCUS_RETURN_IF_ERROR(it->second.graph->replay());
  return it->second.logits.slice(0, 0, n);
}

Expected<Tensor> DecodeGraphs::run(const ForwardBatch& batch) {
  LOCUS_ASSIGN_OR_RETURN(Tensor logits, run_on_device(batch));
  return model_.ops().to_host(logits);
}

}  // namespace locus
