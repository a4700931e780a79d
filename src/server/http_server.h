// The HTTP/1.1 layer of `locus serve`: Boost.Beast on Asio with C++20 coroutines, so a few I/O
// threads hold thousands of keep-alive connections and long Server-Sent-Event streams. It knows
// nothing about OpenAI or the engine: routes map (method, path) to coroutine handlers.
//
// Protection against hostile clients lives here: body size limit (413), header/body read
// deadlines (slowloris), a connection cap, malformed HTTP (400), unknown route (404) and wrong
// method (405) answered with OpenAI-shaped JSON errors, never a crash.
#pragma once

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace locus::http {

// {"error": {"message": ..., "type": ..., "param": null|..., "code": status}} - the body every
// error response has (OpenAI / vLLM shape).
std::string error_body(int status, std::string_view message, std::string_view type,
                       std::string_view param = {});
// OpenAI's error type for an HTTP status: 400 "BadRequestError", 401 "AuthenticationError",
// 404 "NotFoundError", 405 "MethodNotAllowed", 413 "RequestEntityTooLarge",
// 500 "InternalServerError", 503 "ServiceUnavailableError", others "Error".
std::string_view error_type_for_status(int status);

struct Request {
  std::string method;                                        // "GET", "POST", ...
  std::string target;                                        // as sent: path + query
  std::string path;                                          // target without the query string
  std::string query;                                         // after '?', may be empty
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  std::string remote_address;  // "127.0.0.1:53122"

  // The first header with this (lower-case) name, or empty.
  std::string_view header(std::string_view lower_name) const;
};

// How a handler answers. Either send() once, or begin_stream() then write() chunks then
// end_stream(). Everything happens on the connection's executor; a handler must not keep the
// Responder after it returns.
class Responder {
 public:
  virtual ~Responder() = default;

  // A complete response with Content-Length. extra_headers are added as given.
  virtual boost::asio::awaitable<void> send(
      int status, std::string body, std::string_view content_type = "application/json",
      std::vector<std::pair<std::string, std::string>> extra_headers = {}) = 0;
  // Shorthand for send(status, error_body(status, message, type, param)).
  boost::asio::awaitable<void> send_error(int status, std::string_view message,
                                          std::string_view param = {});

  // Starts a chunked response (Transfer-Encoding: chunked), e.g. text/event-stream with
  // Cache-Control: no-cache. Each write() sends one chunk and completes when it is handed to
  // the socket; it returns false (and stays false) once the client is gone.
  virtual boost::asio::awaitable<void> begin_stream(
      int status, std::string_view content_type = "text/event-stream",
      std::vector<std::pair<std::string, std::string>> extra_headers = {}) = 0;
  virtual boost::asio::awaitable<bool> write(std::string chunk) = 0;
  virtual boost::asio::awaitable<void> end_stream() = 0;

  // True once the peer has closed or reset the connection. While a handler is waiting (not
  // writing), the server keeps reading the socket so that a disconnect is seen at once; the
  // callback registered here then runs (on the connection's executor, at most once). A handler
  // uses it to abort its engine request and free KV blocks without waiting for the next write.
  virtual bool client_gone() const = 0;
  virtual void on_client_gone(std::function<void()> callback) = 0;

  // The executor of this connection (to create timers or AsyncSignals on).
  virtual boost::asio::any_io_executor executor() const = 0;
};

using Handler = std::function<boost::asio::awaitable<void>(const Request&, Responder&)>;

// Wakes a coroutine from any thread: notify() is thread-safe and cheap (used from the engine's
// output thread); wait() completes after at least one notify() since the previous wait()
// returned (notifications coalesce), or at once if one is pending. One waiter at a time, and it
// must run on `executor` (e.g. Responder::executor(), a strand): the wake-up is posted there.
// Like any Asio executor, it must not outlive its io_context (for Responder::executor(), the
// HttpServer); a notify() in flight when the AsyncSignal is destroyed is safe.
class AsyncSignal {
 public:
  explicit AsyncSignal(boost::asio::any_io_executor executor);
  ~AsyncSignal();
  AsyncSignal(const AsyncSignal&) = delete;
  AsyncSignal& operator=(const AsyncSignal&) = delete;

  void notify();
  boost::asio::awaitable<void> wait();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

class Router {
 public:
  void add(std::string method, std::string path, Handler handler);  // exact path match
  // The handler for (method, path); 404 when no route has the path, 405 when the path exists
  // with other methods (found_path tells which).
  const Handler* find(std::string_view method, std::string_view path, bool* found_path) const;
  // The methods routed for `path`, sorted (the Allow header of a 405).
  std::vector<std::string> methods_for(std::string_view path) const;

 private:
  std::map<std::pair<std::string, std::string>, Handler, std::less<>> routes_;
};

struct ServerOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 8000;  // 0 = an ephemeral port (tests); see HttpServer::port()
  int io_threads = 2;
  size_t max_body_bytes = size_t{8} << 20;               // larger bodies: 413
  size_t max_header_bytes = size_t{64} << 10;            // larger headers: 431
  std::chrono::milliseconds header_timeout{10'000};      // whole request must arrive in this
  std::chrono::milliseconds keep_alive_timeout{60'000};  // idle keep-alive connections close
  int max_connections = 16384;                           // beyond: accept then close at once
  // A response write that makes no progress for this long (a client that stopped reading)
  // closes the connection, and the handler sees client_gone().
  std::chrono::milliseconds write_timeout{60'000};
};

class HttpServer {
 public:
  // Binds and starts the I/O threads. Errors (address in use, bad host) name host:port.
  static Expected<std::unique_ptr<HttpServer>> start(const ServerOptions& options, Router router);
  ~HttpServer();  // stop(0) + join

  uint16_t port() const;  // the bound port
  int num_connections() const;

  // Stops accepting; waits up to `grace` for in-flight handlers to finish, then closes every
  // connection. Thread-safe, idempotent.
  void stop(std::chrono::milliseconds grace);
  // Blocks until stop() has completed.
  void wait();

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace locus::http
