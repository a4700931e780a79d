// Internal to the load generator (serve_bench.cc, agentic_session.cc): the state of one
// measured run on the I/O thread and the request coroutine every workload shares. Everything
// here runs on that one thread, so nothing is locked.
#pragma once

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/progress.h"
#include "loadgen/serve_bench.h"

namespace locus::loadgen {

struct ServeRun {
  const ServeBenchOptions& o;
  std::chrono::steady_clock::time_point epoch;
  std::vector<RequestRecord> records;
  int in_flight = 0;
  // Expires never; cancelled whenever a request finishes, which wakes every slot waiter.
  std::unique_ptr<boost::asio::steady_timer> slot_free;
  std::unique_ptr<Progress> progress;
};

// Returns once fewer than max_concurrency requests are in flight, and takes the slot (vLLM's
// semaphore: the wait delays the send, not the schedule).
boost::asio::awaitable<void> acquire_request_slot(ServeRun& run);

// Sends one streaming request (its slot already taken; `body` is moved from) and returns its
// record; frees the slot. The arguments are references to the caller's named objects: GCC 12
// mishandles temporaries inside co_await expressions.
boost::asio::awaitable<RequestRecord> send_request(ServeRun& run, std::string& body,
                                                   const int64_t& prompt_tokens,
                                                   const bool& keep_text);

// The agentic workload: one coroutine per session, started at session_starts[s] seconds from
// the epoch; fills run.records[s * turns + t].
boost::asio::awaitable<void> run_agentic_sessions(ServeRun& run,
                                                  std::vector<double> session_starts);

// The warm-up request of the agentic workload: the shared system prompt and a short user
// message, so warm-ups never put a session's own context in the server's cache.
std::string agentic_warmup_body(const ServeBenchOptions& o);

}  // namespace locus::loadgen
