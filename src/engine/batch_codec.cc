#include "engine/batch_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace locus {
namespace {

constexpr uint32_t kMagic = 0x4c425431;  // "LBT1": the layout below, version 1

class Writer {
 public:
  template <typename T>
  void value(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  template <typename T>
  void vector(const std::vector<T>& v) {
    value<uint64_t>(v.size());
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  Status value(const char* field, T& v) {
    if (in_.size() < sizeof(T)) return truncated(field);
    std::memcpy(&v, in_.data(), sizeof(T));
    in_.remove_prefix(sizeof(T));
    return Status::ok();
  }
  template <typename T>
  Status vector(const char* field, std::vector<T>& v) {
    uint64_t n = 0;
    LOCUS_RETURN_IF_ERROR(value(field, n));
    if (n > in_.size() / sizeof(T)) return truncated(field);
    v.resize(n);
    std::memcpy(v.data(), in_.data(), n * sizeof(T));
    in_.remove_prefix(n * sizeof(T));
    return Status::ok();
  }
  size_t left() const { return in_.size(); }

 private:
  static Status truncated(const char* field) {
    return parse_error(fmt::format("step batch: truncated at {}", field));
  }
  std::string_view in_;
};

}  // namespace

std::string encode_batch(const ModelInputBatch& batch) {
  Writer w;
  w.value(kMagic);
  w.value<int32_t>(batch.num_reqs);
  w.value<int32_t>(batch.block_size);
  w.value<int32_t>(batch.max_num_blocks_per_req);
  w.value<int64_t>(batch.dp_max_tokens);
  w.vector(batch.token_ids);
  w.vector(batch.positions);
  w.vector(batch.query_start_loc);
  w.vector(batch.seq_lens);
  w.vector(batch.num_computed_tokens);
  w.vector(batch.block_table);
  w.vector(batch.slot_mapping);
  w.vector(batch.logits_indices);
  w.vector(batch.device_sampling);
  return w.take();
}

Expected<ModelInputBatch> decode_batch(std::string_view bytes) {
  Reader r(bytes);
  uint32_t magic = 0;
  LOCUS_RETURN_IF_ERROR(r.value("magic", magic));
  if (magic != kMagic) {
    return parse_error(
        fmt::format("step batch: magic {:#x}, want {:#x} (a node of another locus "
                    "version or byte order)",
                    magic, kMagic));
  }
  ModelInputBatch b;
  int32_t num_reqs = 0;
  int32_t block_size = 0;
  int32_t max_blocks = 0;
  LOCUS_RETURN_IF_ERROR(r.value("num_reqs", num_reqs));
  LOCUS_RETURN_IF_ERROR(r.value("block_size", block_size));
  LOCUS_RETURN_IF_ERROR(r.value("max_num_blocks_per_req", max_blocks));
  LOCUS_RETURN_IF_ERROR(r.value("dp_max_tokens", b.dp_max_tokens));
  b.num_reqs = num_reqs;
  b.block_size = block_size;
  b.max_num_blocks_per_req = max_blocks;
  LOCUS_RETURN_IF_ERROR(r.vector("token_ids", b.token_ids));
  LOCUS_RETURN_IF_ERROR(r.vector("positions", b.positions));
  LOCUS_RETURN_IF_ERROR(r.vector("query_start_loc", b.query_start_loc));
  LOCUS_RETURN_IF_ERROR(r.vector("seq_lens", b.seq_lens));
  LOCUS_RETURN_IF_ERROR(r.vector("num_computed_tokens", b.num_computed_tokens));
  LOCUS_RETURN_IF_ERROR(r.vector("block_table", b.block_table));
  LOCUS_RETURN_IF_ERROR(r.vector("slot_mapping", b.slot_mapping));
  LOCUS_RETURN_IF_ERROR(r.vector("logits_indices", b.logits_indices));
  LOCUS_RETURN_IF_ERROR(r.vector("device_sampling", b.device_sampling));
  if (r.left() != 0) {
    return parse_error(fmt::format("step batch: {} bytes after the last field", r.left()));
  }
  // The shapes the runner relies on; a mismatch here is a bug or a corrupt frame, never a step.
  const auto reqs = static_cast<size_t>(std::max(num_reqs, 0));
  const size_t tokens = b.token_ids.size();
  const bool ok = num_reqs >= 0 && max_blocks >= 0 && b.positions.size() == tokens &&
                  b.slot_mapping.size() == tokens && b.query_start_loc.size() == reqs + 1 &&
                  b.seq_lens.size() == reqs && b.num_computed_tokens.size() == reqs &&
                  b.block_table.size() == reqs * static_cast<size_t>(max_blocks);
  if (!ok) {
    return parse_error(fmt::format(
        "step batch: inconsistent shapes ({} requests, {} tokens, {} positions, {} slots, "
        "{} query starts, {} block table entries for {} blocks per request)",
        num_reqs, tokens, b.positions.size(), b.slot_mapping.size(), b.query_start_loc.size(),
        b.block_table.size(), max_blocks));
  }
  return b;
}

}  // namespace locus
