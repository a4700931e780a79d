// The agentic workload's sessions on the load generator's I/O thread: each session is one
// coroutine that sends a turn, waits for the whole reply, thinks, and sends the next turn with the
// reply in its context. Requests go through the same send_request as every other workload.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "loadgen/serve_run.h"

namespace locus::loadgen {

namespace net = boost::asio;
using Json = nlohmann::json;

namespace {

// Later turns cannot be built without the failed turn's reply; they count as failed requests
// with this one message, so the first-errors list keeps the real cause next to it.
constexpr const char* kNotSent = "not sent: an earlier turn of its session failed";

std::string dump(const Json& body) {
  // Decoded random ids may end in a broken UTF-8 sequence; send U+FFFD rather than throw.
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

net::awaitable<void> agentic_session(ServeRun& run, int session, double start_s) {
  auto executor = co_await net::this_coro::executor;
  const AgenticWorkload& w = *run.o.agentic;
  const int turns = w.options.turns;
  const bool chat = is_chat_endpoint(run.o);
  net::steady_timer timer(executor);
  boost::system::error_code ec;
  auto token = net::redirect_error(net::use_awaitable, ec);
  timer.expires_at(run.epoch + seconds(start_s));
  co_await timer.async_wait(token);

  AgenticConversation conversation(w, session);
  while (!conversation.finished()) {
    const int turn = conversation.turn();
    if (turn > 1 && w.options.think_time_s > 0) {
      timer.expires_after(seconds(w.options.think_time_s));
      co_await timer.async_wait(token);
    }
    co_await acquire_request_slot(run);
    std::string body =
        dump(conversation.request_body(base_request_body(run.o, w.options.output_len), chat));
    const int64_t context_tokens = conversation.context_tokens();
    const bool keep_text = true;
    RequestRecord record = co_await send_request(run, body, context_tokens, keep_text);
    const auto first = static_cast<size_t>(session) * static_cast<size_t>(turns);
    if (!record.success) {
      run.records[first + static_cast<size_t>(turn - 1)] = std::move(record);
      for (int t = turn + 1; t <= turns; ++t) {
        run.records[first + static_cast<size_t>(t - 1)].error = kNotSent;
        if (run.progress) run.progress->advance();
      }
      co_return;
    }
    conversation.add_reply(record.generated_text, record.output_tokens);
    run.records[first + static_cast<size_t>(turn - 1)] = std::move(record);
  }
}

}  // namespace

net::awaitable<void> run_agentic_sessions(ServeRun& run, std::vector<double> session_starts) {
  auto executor = co_await net::this_coro::executor;
  for (size_t s = 0; s < session_starts.size(); ++s) {
    net::co_spawn(executor, agentic_session(run, static_cast<int>(s), session_starts[s]),
                  net::detached);
  }
}

std::string agentic_warmup_body(const ServeBenchOptions& o) {
  const AgenticWorkload& w = *o.agentic;
  Json body = base_request_body(o, w.options.output_len);
  const std::string user = "warm-up";
  if (is_chat_endpoint(o)) {
    body["messages"] = Json::array({{{"role", "system"}, {"content", w.system_prompt}},
                                    {{"role", "user"}, {"content", user}}});
  } else {
    body["prompt"] = w.system_prompt + user;
  }
  return dump(body);
}

}  // namespace locus::loadgen
