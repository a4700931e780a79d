#include "engine/parallel_model_runner.h"

#include <fmt/format.h>

namespace locus {

Expected<std::unique_ptr<ParallelModelRunner>> ParallelModelRunner::create(
    std::vector<std::unique_ptr<Communicator>> comms,
    std::vector<std::unique_ptr<LocalModelRunner>> ranks,
    std::function<void(const std::string&)> abort_group, std::function<Status(int)> bind_rank) {
  if (ranks.empty() || ranks.size() != comms.size()) {
    return invalid_argument(fmt::format("ParallelModelRunner: {} ranks with {} communicators",
                                        ranks.size(), comms.size()));
  }
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r]->vocab_size() != ranks[0]->vocab_size()) {
      return invalid_argument(fmt::format("ParallelModelRunner: rank {} has vocab {}, rank 0 {}", r,
                                          ranks[r]->vocab_size(), ranks[0]->vocab_size()));
    }
  }
  return std::unique_ptr<ParallelModelRunner>(new ParallelModelRunner(
      std::move(comms), std::move(ranks), std::move(abort_group), std::move(bind_rank)));
}

ParallelModelRunner::ParallelModelRunner(std::vector<std::unique_ptr<Communicator>> comms,
                                         std::vector<std::unique_ptr<LocalModelRunner>> ranks,
                                         std::function<void(const std::string&)> abort_group,
                                         std::function<Status(int)> bind_rank)
    : comms_(std::move(comms)),
      ranks_(std::move(ranks)),
      abort_group_(std::move(abort_group)),
      bind_rank_(std::move(bind_rank)),
      results_(ranks_.size()) {
  for (int r = 1; r < size(); ++r)
    threads_.emplace_back([this, r] { worker(r); });
}

ParallelModelRunner::~ParallelModelRunner() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  start_.notify_all();
  for (std::thread& t : threads_)
    t.join();
}

void ParallelModelRunner::worker(int rank) {
  uint64_t seen = 0;
  while (true) {
    const std::function<Status(int)>* work = nullptr;
    {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return stop_ || posted_ != seen; });
      if (stop_) return;
      seen = posted_;
      work = work_;
    }
    Status s = bind_rank_ ? bind_rank_(rank) : Status::ok();
    if (s.is_ok()) s = (*work)(rank);
    if (!s.is_ok()) abort_group_(fmt::format("rank {} failed: {}", rank, s.to_string()));
    std::lock_guard lock(mutex_);
    results_[static_cast<size_t>(rank)] = std::move(s);
    if (--running_ == 0) done_.notify_all();
  }
}

Status ParallelModelRunner::on_every_rank(const std::function<Status(int)>& work) {
  {
    std::lock_guard lock(mutex_);
    work_ = &work;
    running_ = size() - 1;
    for (Status& s : results_)
      s = Status::ok();
    ++posted_;
  }
  start_.notify_all();
  Status first = bind_rank_ ? bind_rank_(0) : Status::ok();
  if (first.is_ok()) first = work(0);
  if (!first.is_ok()) abort_group_(fmt::format("rank 0 failed: {}", first.to_string()));
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return running_ == 0; });
  // The rank that failed first says why; its peers only report the abort.
  if (!first.is_ok()) return first;
  for (const Status& s : results_) {
    if (!s.is_ok()) return s;
  }
  return Status::ok();
}

Status ParallelModelRunner::initialize_kv_cache(int num_blocks) {
  return on_every_rank(
      [&](int r) { return ranks_[static_cast<size_t>(r)]->initialize_kv_cache(num_blocks); });
}

Expected<Tensor> ParallelModelRunner::execute(const ModelInputBatch& batch) {
  Tensor logits;
  LOCUS_RETURN_IF_ERROR(on_every_rank([&](int r) -> Status {
    if (r > 0) return ranks_[static_cast<size_t>(r)]->execute_dropping_logits(batch);
    LOCUS_ASSIGN_OR_RETURN(logits, ranks_.front()->execute(batch));
    return Status::ok();
  }));
  return logits;
}

Expected<std::vector<int32_t>> ParallelModelRunner::execute_sampled(const ModelInputBatch& batch) {
  std::vector<int32_t> tokens;
  LOCUS_RETURN_IF_ERROR(on_every_rank([&](int r) -> Status {
    if (r > 0) return ranks_[static_cast<size_t>(r)]->execute_dropping_logits(batch);
    LOCUS_ASSIGN_OR_RETURN(tokens, ranks_.front()->execute_sampled(batch));
    return Status::ok();
  }));
  return tokens;
}

Status ParallelModelRunner::execute_dropping_logits(const ModelInputBatch& batch) {
  return on_every_rank(
      [&](int r) { return ranks_[static_cast<size_t>(r)]->execute_dropping_logits(batch); });
}

}  // namespace locus
