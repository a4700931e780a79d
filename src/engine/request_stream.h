// The per-request channel from the engine to one client: a thread-safe queue of deltas that the
// output thread fills and the client drains (blocking, polling or with a wake-up callback).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>

#include "core/status.h"
#include "engine/request_output.h"

namespace locus {

class RequestStream {
 public:
  explicit RequestStream(RequestId request_id) : request_id_(request_id) {}
  RequestStream(const RequestStream&) = delete;
  RequestStream& operator=(const RequestStream&) = delete;

  RequestId request_id() const { return request_id_; }

  // Blocks for the next delta. After the delta with request_finished it returns an
  // out_of_range "stream ended" error; an engine failure or shutdown returns its error.
  Expected<RequestOutput> next();
  // Like next() but gives up after `timeout` (nullopt).
  std::optional<Expected<RequestOutput>> next_for(std::chrono::milliseconds timeout);
  // Never blocks (nullopt when nothing is queued).
  std::optional<Expected<RequestOutput>> try_next();
  // Drains the stream to the end and returns the accumulated result.
  Expected<RequestResult> collect();

  // Called on the output thread after each push or failure, outside the engine's locks, for
  // event-loop servers that poll with try_next(). Must be cheap and must not block.
  void set_on_ready(std::function<void()> on_ready);

  // Producer side (engine internals).
  void push(RequestOutput output);
  void fail(const Status& status);

 private:
  // Requires mutex_ held and something to return.
  Expected<RequestOutput> pop_locked();
  bool ready_locked() const { return !queue_.empty() || error_ || ended_; }

  RequestId request_id_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
  std::optional<Status> error_;
  bool ended_ = false;  // the request_finished delta was queued
  std::function<void()> on_ready_;
};

}  // namespace locus
