#include "engine/lockstep_runner.h"

#include <fmt/format.h>

#include <algorithm>

namespace locus {

uint64_t LockstepGroup::claim_real(int r) {
  std::lock_guard lock(mutex_);
  uint64_t& claimed = claimed_[static_cast<size_t>(r)];
  if (claimed == rounds_) ++rounds_;
  ++claimed;
  cv_.notify_all();
  return claimed;
}

uint64_t LockstepGroup::claim_dummy(int r) {
  std::unique_lock lock(mutex_);
  uint64_t& claimed = claimed_[static_cast<size_t>(r)];
  cv_.wait(lock, [&] { return stopped_ || claimed < rounds_; });
  if (stopped_) return 0;
  return ++claimed;
}

bool LockstepGroup::wait_turn(int r, uint64_t step) {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return stopped_ || done_[static_cast<size_t>(r)] + 1 == step; });
  return !stopped_;
}

int64_t LockstepGroup::max_tokens(uint64_t step, int64_t tokens) {
  std::unique_lock lock(mutex_);
  const int replicas = static_cast<int>(claimed_.size());
  Counts& c = counts_[step];
  c.most = std::max(c.most, tokens);
  ++c.posted;
  cv_.notify_all();
  cv_.wait(lock, [&] { return stopped_ || c.posted == replicas; });
  if (stopped_) return 0;
  const int64_t most = c.most;
  if (++c.read == replicas) counts_.erase(step);
  return most;
}

void LockstepGroup::finish(int r, uint64_t step) {
  std::lock_guard lock(mutex_);
  done_[static_cast<size_t>(r)] = step;
  cv_.notify_all();
}

void LockstepGroup::stop() {
  std::lock_guard lock(mutex_);
  stopped_ = true;
  cv_.notify_all();
}

LockstepRunner::LockstepRunner(std::vector<std::shared_ptr<Communicator>> comms,
                               std::unique_ptr<ModelRunner> inner,
                               std::shared_ptr<LockstepGroup> group, int replica,
                               std::function<void(const std::string&)> abort_group)
    : comms_(std::move(comms)),
      inner_(std::move(inner)),
      group_(std::move(group)),
      replica_(replica),
      abort_group_(std::move(abort_group)) {}

LockstepRunner::~LockstepRunner() {
  group_->stop();
  abort_group_(fmt::format("data-parallel replica {} stopped", replica_));
  if (dummy_thread_.joinable()) dummy_thread_.join();
}

Status LockstepRunner::initialize_kv_cache(int num_blocks) {
  LOCUS_RETURN_IF_ERROR(inner_->initialize_kv_cache(num_blocks + 1));
  // One token at position 0 in the scratch block, its logits computed and dropped.
  const int block_size = inner_->kv_cache_spec().block_size;
  dummy_.num_reqs = 1;
  dummy_.block_size = block_size;
  dummy_.token_ids = {0};
  dummy_.positions = {0};
  dummy_.query_start_loc = {0, 1};
  dummy_.seq_lens = {1};
  dummy_.num_computed_tokens = {0};
  dummy_.max_num_blocks_per_req = 1;
  dummy_.block_table = {num_blocks};
  dummy_.slot_mapping = {static_cast<int64_t>(num_blocks) * block_size};
  dummy_.logits_indices = {0};
  if (!dummy_thread_.joinable()) dummy_thread_ = std::thread([this] { dummy_loop(); });
  return Status::ok();
}

Status LockstepRunner::run(uint64_t step, const ModelInputBatch& batch,
                           const std::function<Status(const ModelInputBatch&)>& forward) {
  if (!group_->wait_turn(replica_, step)) {
    return internal_error(fmt::format("data-parallel replica {}: stopped", replica_));
  }
  // Every replica runs this step: agree on its most tokens once, here, rather than in each MoE
  // layer.
  const int64_t most = group_->max_tokens(step, batch.num_tokens());
  if (most == 0) return internal_error(fmt::format("data-parallel replica {}: stopped", replica_));
  ModelInputBatch padded_batch = batch;
  padded_batch.dp_max_tokens = most;
  Status out = forward(padded_batch);
  if (!out.is_ok()) {
    abort_group_(fmt::format("data-parallel replica {} failed: {}", replica_, out.to_string()));
    group_->stop();
  }
  group_->finish(replica_, step);
  return out;
}

Expected<Tensor> LockstepRunner::execute(const ModelInputBatch& batch) {
  Tensor logits;
  LOCUS_RETURN_IF_ERROR(
      run(group_->claim_real(replica_), batch, [&](const ModelInputBatch& b) -> Status {
        LOCUS_ASSIGN_OR_RETURN(logits, inner_->execute(b));
        return Status::ok();
      }));
  return logits;
}

Expected<std::vector<int32_t>> LockstepRunner::execute_sampled(const ModelInputBatch& batch) {
  std::vector<int32_t> tokens;
  LOCUS_RETURN_IF_ERROR(
      run(group_->claim_real(replica_), batch, [&](const ModelInputBatch& b) -> Status {
        LOCUS_ASSIGN_OR_RETURN(tokens, inner_->execute_sampled(b));
        return Status::ok();
      }));
  return tokens;
}

void LockstepRunner::dummy_loop() {
  while (true) {
    const uint64_t step = group_->claim_dummy(replica_);
    if (step == 0) return;
    // The dummy step's logits are never read: they stay on the device.
    const Status s = run(
        step, dummy_, [&](const ModelInputBatch& b) { return inner_->execute_dropping_logits(b); });
    if (!s.is_ok()) return;
    std::lock_guard lock(stats_mutex_);
    ++dummy_steps_;
  }
}

uint64_t LockstepRunner::dummy_steps() const {
  std::lock_guard lock(stats_mutex_);
  return dummy_steps_;
}

}  // namespace locus
