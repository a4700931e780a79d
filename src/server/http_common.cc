// The small, connection-independent parts of the HTTP layer: OpenAI-shaped error bodies, the
// request header lookup, the router, and AsyncSignal (the engine thread's way to wake a handler).
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <mutex>
#include <nlohmann/json.hpp>

#include "server/http_server.h"

namespace locus::http {

namespace net = boost::asio;
using boost::system::error_code;

namespace {

constexpr auto kUseAwaitableEc = [](error_code& ec) {
  return net::redirect_error(net::use_awaitable, ec);
};

}  // namespace
// ---------------------------------------------------------------------------------------------
// Errors, requests, responders, routes.

std::string error_body(int status, std::string_view message, std::string_view type,
                       std::string_view param) {
  nlohmann::json error = {{"message", std::string(message)},
                          {"type", std::string(type)},
                          {"param", nullptr},
                          {"code", status}};
  if (!param.empty()) error["param"] = std::string(param);
  // Messages can quote client bytes (a path) that are not valid UTF-8.
  return nlohmann::json{{"error", std::move(error)}}.dump(-1, ' ', false,
                                                          nlohmann::json::error_handler_t::replace);
}

std::string_view error_type_for_status(int status) {
  switch (status) {
    case 400:
      return "BadRequestError";
    case 401:
      return "AuthenticationError";
    case 404:
      return "NotFoundError";
    case 405:
      return "MethodNotAllowed";
    case 413:
      return "RequestEntityTooLarge";
    case 500:
      return "InternalServerError";
    case 503:
      return "ServiceUnavailableError";
    default:
      return "Error";
  }
}

std::string_view Request::header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name) return value;
  }
  return {};
}

net::awaitable<void> Responder::send_error(int status, std::string_view message,
                                           std::string_view param) {
  // Named locals, not temporaries, in co_await expressions: GCC 12 mishandles some temporaries
  // in coroutine frames (double destruction).
  std::string body = error_body(status, message, error_type_for_status(status), param);
  std::vector<std::pair<std::string, std::string>> headers;
  co_await send(status, std::move(body), "application/json", std::move(headers));
}

void Router::add(std::string method, std::string path, Handler handler) {
  routes_[{std::move(method), std::move(path)}] = std::move(handler);
}

const Handler* Router::find(std::string_view method, std::string_view path,
                            bool* found_path) const {
  const auto it = routes_.find(std::pair<std::string, std::string>(method, path));
  if (it != routes_.end()) {
    if (found_path != nullptr) *found_path = true;
    return &it->second;
  }
  if (found_path != nullptr) {
    *found_path = std::any_of(routes_.begin(), routes_.end(),
                              [&](const auto& route) { return route.first.second == path; });
  }
  return nullptr;
}

std::vector<std::string> Router::methods_for(std::string_view path) const {
  std::vector<std::string> methods;
  for (const auto& [key, handler] : routes_) {
    if (key.second == path) methods.push_back(key.first);
  }
  return methods;
}

// ---------------------------------------------------------------------------------------------
// AsyncSignal: wait() sleeps on a timer that never expires, and notify() cancels it. The cancel is
// posted to the waiter's own executor (a strand), so it cannot run between wait()'s registration
// and its async_wait. The timer and the executor are held only while a wait is suspended, so a
// notify() with no waiter posts nothing. Not yet guaranteed: a wait still suspended when the
// io_context is destroyed may leave its executor registered: drop signals before the server.

struct AsyncSignal::State {
  std::mutex mutex;
  bool pending = false;
  bool wake_posted = false;
  std::optional<net::any_io_executor> waiter_executor;
  net::steady_timer* waiter = nullptr;
};

// The executor is not stored (see above); wait() uses the one it runs on.
AsyncSignal::AsyncSignal(net::any_io_executor /*executor*/) : state_(std::make_shared<State>()) {}

AsyncSignal::~AsyncSignal() = default;

void AsyncSignal::notify() {
  std::lock_guard lock(state_->mutex);
  if (state_->pending) return;  // coalesce: the waiter has not consumed the last one yet
  state_->pending = true;
  if (state_->waiter == nullptr || state_->wake_posted) return;
  state_->wake_posted = true;
  // The posted handler holds the State, so the AsyncSignal may be destroyed meanwhile.
  net::post(*state_->waiter_executor, [state = state_] {
    std::lock_guard handler_lock(state->mutex);
    state->wake_posted = false;
    if (state->waiter != nullptr) state->waiter->cancel();
  });
}

net::awaitable<void> AsyncSignal::wait() {
  std::shared_ptr<State> state = state_;
  {
    std::lock_guard lock(state->mutex);
    if (state->pending) {
      state->pending = false;
      co_return;
    }
  }
  net::steady_timer timer(co_await net::this_coro::executor, net::steady_timer::time_point::max());
  // Registers the waiter; unregisters however the frame ends, also when it is destroyed while
  // suspended (io_context shutdown).
  struct WaiterScope {
    WaiterScope(State& s, net::steady_timer& t) : state(s) {
      std::lock_guard lock(state.mutex);
      state.waiter = &t;
      state.waiter_executor = t.get_executor();
    }
    ~WaiterScope() {
      std::lock_guard lock(state.mutex);
      state.waiter = nullptr;
      state.waiter_executor.reset();
    }
    WaiterScope(const WaiterScope&) = delete;
    WaiterScope& operator=(const WaiterScope&) = delete;
    State& state;
  } scope(*state, timer);
  for (;;) {
    {
      // Also catches a notify() that came between the first check and the registration.
      std::lock_guard lock(state->mutex);
      if (state->pending) {
        state->pending = false;
        co_return;
      }
    }
    error_code ec;
    // Woken by a cancel (operation_aborted); a stale cancel only makes the loop go round.
    co_await timer.async_wait(kUseAwaitableEc(ec));
  }
}

}  // namespace locus::http
