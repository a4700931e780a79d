// Waiting queue under FCFS or priority order.
#include "sched/request_queue.h"

#include <algorithm>

namespace locus {

bool RequestQueue::ByPriority::operator()(const Request* a, const Request* b) const {
  if (a->priority != b->priority) return a->priority < b->priority;
  if (a->arrival_time != b->arrival_time) return a->arrival_time < b->arrival_time;
  return a->id < b->id;  // ids are unique, so the order is total
}

void RequestQueue::push(Request* request) {
  if (policy_ == SchedulingPolicy::kFcfs) {
    fifo_.push_back(request);
  } else {
    ordered_.insert(request);
  }
}

void RequestQueue::push_front(Request* request) {
  if (policy_ == SchedulingPolicy::kFcfs) {
    fifo_.push_front(request);
  } else {
    ordered_.insert(request);
  }
}

Request* RequestQueue::front() const {
  if (policy_ == SchedulingPolicy::kFcfs) return fifo_.empty() ? nullptr : fifo_.front();
  return ordered_.empty() ? nullptr : *ordered_.begin();
}

void RequestQueue::pop_front() {
  if (policy_ == SchedulingPolicy::kFcfs) {
    if (!fifo_.empty()) fifo_.pop_front();
  } else if (!ordered_.empty()) {
    ordered_.erase(ordered_.begin());
  }
}

bool RequestQueue::remove(Request* request) {
  if (policy_ == SchedulingPolicy::kFcfs) {
    auto it = std::find(fifo_.begin(), fifo_.end(), request);
    if (it == fifo_.end()) return false;
    fifo_.erase(it);
    return true;
  }
  return ordered_.erase(request) > 0;
}

}  // namespace locus
