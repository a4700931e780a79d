// The waiting queue: first-come-first-served, or by (priority, arrival_time) like vLLM's
// --scheduling-policy priority. Holds non-owning pointers; the Scheduler owns the requests.
#pragma once

#include <cstddef>
#include <deque>
#include <set>

#include "sched/request.h"

namespace locus {

enum class SchedulingPolicy : uint8_t { kFcfs, kPriority };

class RequestQueue {
 public:
  explicit RequestQueue(SchedulingPolicy policy) : policy_(policy) {}

  // A new arrival: at the back (FCFS) or in (priority, arrival_time, id) order.
  void push(Request* request);
  // A preempted request: at the front (FCFS) so it resumes before newer work; under the
  // priority policy its own (priority, arrival_time) already decides its place.
  void push_front(Request* request);
  Request* front() const;
  void pop_front();
  // Removes a specific request (abort); false when it is not queued.
  bool remove(Request* request);
  bool empty() const { return size() == 0; }
  size_t size() const {
    return policy_ == SchedulingPolicy::kFcfs ? fifo_.size() : ordered_.size();
  }

 private:
  struct ByPriority {
    bool operator()(const Request* a, const Request* b) const;
  };
  SchedulingPolicy policy_;
  std::deque<Request*> fifo_;
  std::set<Request*, ByPriority> ordered_;
};

}  // namespace locus
