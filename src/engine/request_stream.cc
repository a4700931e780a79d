// Per-request output channel.
#include "engine/request_stream.h"

#include <utility>

namespace locus {

Expected<RequestOutput> RequestStream::pop_locked() {
  if (!queue_.empty()) {
    RequestOutput out = std::move(queue_.front());
    queue_.pop_front();
    return out;
  }
  if (error_) return *error_;
  return out_of_range("stream ended");
}

Expected<RequestOutput> RequestStream::next() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return ready_locked(); });
  return pop_locked();
}

std::optional<Expected<RequestOutput>> RequestStream::next_for(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!cv_.wait_for(lock, timeout, [&] { return ready_locked(); })) return std::nullopt;
  return pop_locked();
}

std::optional<Expected<RequestOutput>> RequestStream::try_next() {
  std::lock_guard lock(mutex_);
  if (!ready_locked()) return std::nullopt;
  return pop_locked();
}

Expected<RequestResult> RequestStream::collect() {
  RequestResult result;
  result.request_id = request_id_;
  while (true) {
    LOCUS_ASSIGN_OR_RETURN(RequestOutput out, next());
    const bool last = out.request_finished;
    accumulate_output(result, std::move(out));
    if (last) return result;
  }
}

void RequestStream::set_on_ready(std::function<void()> on_ready) {
  std::lock_guard lock(mutex_);
  on_ready_ = std::move(on_ready);
}

void RequestStream::push(RequestOutput output) {
  std::function<void()> notify;
  {
    std::lock_guard lock(mutex_);
    if (ended_ || error_) return;  // nothing after the end
    ended_ = output.request_finished;
    queue_.push_back(std::move(output));
    notify = on_ready_;
  }
  cv_.notify_all();
  if (notify) notify();
}

void RequestStream::fail(const Status& status) {
  std::function<void()> notify;
  {
    std::lock_guard lock(mutex_);
    if (ended_ || error_) return;
    error_ = status;
    notify = on_ready_;
  }
  cv_.notify_all();
  if (notify) notify();
}

}  // namespace locus
