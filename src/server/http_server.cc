// The HTTP/1.1 server behind `locus serve`: one coroutine per connection on its own strand, which
// reads requests, dispatches them to routes and answers hostile or broken clients with JSON
// errors. Nothing a client or a handler does may take the process down; every failure ends at
// most the one connection it happened on.
#include "server/http_server.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <exception>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <unordered_map>

#include "core/logging.h"

namespace locus::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {

constexpr auto kUseAwaitableEc = [](error_code& ec) {
  return net::redirect_error(net::use_awaitable, ec);
};

// Reads take at most this much at a time; a request larger than this arrives in several reads.
constexpr size_t kReadChunkBytes = 16 * 1024;
// After an error response, the rest of the client's request is drained (up to this much and this
// long) before closing: closing with unread bytes makes the kernel send a reset, which can destroy
// the error response before the client reads it.
constexpr size_t kMaxDrainBytes = size_t{64} << 20;
constexpr std::chrono::milliseconds kMaxLinger{5000};
// stop(): after closing every socket, handlers get this long to notice and return before the
// I/O threads stop.
constexpr std::chrono::milliseconds kUnwindTime{250};

std::string endpoint_string(const tcp::endpoint& endpoint) {
  const auto address = endpoint.address();
  if (address.is_v6()) return fmt::format("[{}]:{}", address.to_string(), endpoint.port());
  return fmt::format("{}:{}", address.to_string(), endpoint.port());
}

std::string host_port(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

bool is_parse_error(const error_code& ec) {
  static const auto& category = bhttp::make_error_code(bhttp::error::bad_method).category();
  // A request cut short by the peer is a disconnect, not a malformed request.
  return ec.category() == category && ec != bhttp::error::end_of_stream &&
         ec != bhttp::error::partial_message && ec != bhttp::error::need_more &&
         ec != bhttp::error::need_buffer;
}

bool is_event_stream(std::string_view content_type) {
  return content_type.substr(0, 17) == "text/event-stream";
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

class Connection;

// What the acceptor, the connections and stop() share. Declared before the io_context in
// HttpServer::Impl so that it outlives coroutine frames destroyed along with the io_context.
struct ServerShared {
  ServerShared(const ServerOptions& server_options, Router server_router)
      : options(server_options), router(std::move(server_router)) {}

  ServerOptions options;
  Router router;
  std::atomic<bool> stopping{false};
  std::atomic<int> num_connections{0};
  std::atomic<int> active_handlers{0};
  std::mutex connections_mutex;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections;
};

class Connection final : public Responder, public std::enable_shared_from_this<Connection> {
 public:
  Connection(ServerShared& server, tcp::socket socket, std::string remote_address)
      : server_(server),
        stream_(std::move(socket)),
        executor_(stream_.get_executor()),
        remote_address_(std::move(remote_address)),
        watch_stopped_(executor_) {}

  ~Connection() override {
    {
      std::lock_guard lock(server_.connections_mutex);
      server_.connections.erase(this);
    }
    server_.num_connections.fetch_sub(1);
  }

  static net::awaitable<void> run(std::shared_ptr<Connection> self) {
    try {
      co_await self->serve();
    } catch (const std::exception& e) {
      log::debug("http: connection {} failed: {}", self->remote_address_, e.what());
    }
    self->close_now();
  }

  // Both run on the connection's strand (stop() posts them there).
  void close_now() {
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }
  void close_if_idle() {
    if (!in_handler_) close_now();
  }

  // Responder.
  net::awaitable<void> send(
      int status, std::string body, std::string_view content_type,
      std::vector<std::pair<std::string, std::string>> extra_headers) override;
  net::awaitable<void> begin_stream(
      int status, std::string_view content_type,
      std::vector<std::pair<std::string, std::string>> extra_headers) override;
  net::awaitable<bool> write(std::string chunk) override;
  net::awaitable<void> end_stream() override;
  bool client_gone() const override { return client_gone_; }
  void on_client_gone(std::function<void()> callback) override;
  net::any_io_executor executor() const override { return executor_; }

 private:
  enum class ResponseState { kNone, kStreaming, kDone };

  net::awaitable<void> serve();
  net::awaitable<void> answer_read_error(error_code ec);
  // Runs the route for one request; false when the connection must close afterwards.
  net::awaitable<bool> dispatch(bhttp::request<bhttp::string_body> message);
  net::awaitable<void> linger_close();
  void set_write_deadline() { stream_.expires_after(server_.options.write_timeout); }
  void mark_gone();
  void watch_for_disconnect();
  void on_watch_read(error_code ec, size_t bytes);
  net::awaitable<void> stop_watching();

  ServerShared& server_;
  beast::tcp_stream stream_;
  net::any_io_executor executor_;  // the strand; tcp_stream's accessor is not const
  beast::flat_buffer buffer_;
  std::string remote_address_;

  // The request being answered.
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool in_handler_ = false;
  ResponseState response_state_ = ResponseState::kNone;
  bool client_gone_ = false;
  bool write_failed_ = false;
  std::function<void()> gone_callback_;

  // The read kept pending while a handler runs, so that a disconnect is seen at once.
  bool watching_ = false;
  bool stop_watch_requested_ = false;
  AsyncSignal watch_stopped_;
};

net::awaitable<void> Connection::serve() {
  const ServerOptions& options = server_.options;
  bool is_first_request = true;
  while (!server_.stopping.load()) {
    error_code ec;
    if (!is_first_request && buffer_.size() == 0) {
      // Idle between keep-alive requests: the header deadline starts with the first byte.
      stream_.expires_after(options.keep_alive_timeout);
      const size_t bytes =
          co_await stream_.async_read_some(buffer_.prepare(kReadChunkBytes), kUseAwaitableEc(ec));
      if (ec) co_return;
      buffer_.commit(bytes);
    }
    is_first_request = false;

    stream_.expires_after(options.header_timeout);
    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(static_cast<uint32_t>(
        std::min<size_t>(options.max_header_bytes, std::numeric_limits<uint32_t>::max())));
    parser.body_limit(options.max_body_bytes);
    co_await bhttp::async_read_header(stream_, buffer_, parser, kUseAwaitableEc(ec));
    if (!ec && !parser.is_done() &&
        equals_ignoring_case(parser.get()[bhttp::field::expect], "100-continue")) {
      // curl waits a second for this before sending a large body.
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      co_await net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                                kUseAwaitableEc(ec));
    }
    if (!ec && !parser.is_done()) {
      co_await bhttp::async_read(stream_, buffer_, parser, kUseAwaitableEc(ec));
    }
    if (ec) {
      co_await answer_read_error(ec);
      co_return;
    }
    stream_.expires_never();
    if (!co_await dispatch(parser.release())) co_return;
  }
}

net::awaitable<void> Connection::answer_read_error(error_code ec) {
  const ServerOptions& options = server_.options;
  int status = 0;
  std::string message;
  if (ec == bhttp::error::header_limit) {
    status = 431;
    message =
        fmt::format("request header fields are larger than {} bytes", options.max_header_bytes);
  } else if (ec == bhttp::error::body_limit) {
    status = 413;
    message = fmt::format("request body is larger than {} bytes", options.max_body_bytes);
  } else if (is_parse_error(ec)) {
    status = 400;
    message = fmt::format("malformed HTTP request: {}", ec.message());
  }
  if (status == 0) {
    // EOF, reset, or the header deadline passed (which already closed the socket).
    log::debug("http: connection {} closed while reading a request: {}", remote_address_,
               ec.message());
    co_return;
  }
  log::debug("http: connection {}: {} {}", remote_address_, status, message);
  version_ = 11;
  keep_alive_ = false;
  response_state_ = ResponseState::kNone;
  co_await send_error(status, message);
  co_await linger_close();
}

net::awaitable<bool> Connection::dispatch(bhttp::request<bhttp::string_body> message) {
  Request request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  const size_t question = request.target.find('?');
  request.path = request.target.substr(0, question);
  if (question != std::string::npos) request.query = request.target.substr(question + 1);
  request.headers.reserve(std::distance(message.begin(), message.end()));
  for (const auto& field : message) {
    std::string name(field.name_string());
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    request.headers.emplace_back(std::move(name), std::string(field.value()));
  }
  request.body = std::move(message.body());
  request.remote_address = remote_address_;

  version_ = message.version();
  keep_alive_ = message.keep_alive() && !server_.stopping.load();
  response_state_ = ResponseState::kNone;
  client_gone_ = false;
  gone_callback_ = nullptr;

  bool found_path = false;
  const Handler* handler = server_.router.find(request.method, request.path, &found_path);
  if (handler == nullptr) {
    if (found_path) {
      std::string allow;
      for (const std::string& method : server_.router.methods_for(request.path)) {
        allow += allow.empty() ? method : ", " + method;
      }
      std::string body = error_body(405,
                                    fmt::format("method {} is not allowed for {}; allowed: {}",
                                                request.method, request.path, allow),
                                    error_type_for_status(405));
      std::vector<std::pair<std::string, std::string>> headers;
      headers.emplace_back("Allow", allow);
      co_await send(405, std::move(body), "application/json", std::move(headers));
    } else {
      const std::string no_route = fmt::format("no route for {}", request.path);
      co_await send_error(404, no_route);
    }
    co_return keep_alive_ && !client_gone_;
  }

  // Counts the handler for stop(), also when the frame is destroyed mid-handler.
  struct HandlerScope {
    explicit HandlerScope(Connection& c) : connection(c) {
      connection.in_handler_ = true;
      connection.server_.active_handlers.fetch_add(1);
    }
    ~HandlerScope() {
      connection.in_handler_ = false;
      connection.server_.active_handlers.fetch_sub(1);
    }
    HandlerScope(const HandlerScope&) = delete;
    HandlerScope& operator=(const HandlerScope&) = delete;
    Connection& connection;
  } scope(*this);

  watch_for_disconnect();
  std::string failure;
  try {
    co_await (*handler)(request, *this);
  } catch (const std::exception& e) {
    failure = e.what()[0] != '\0' ? e.what() : "exception";
  } catch (...) {
    failure = "unknown exception";
  }
  // The callback may point into the handler's frame, which is gone now.
  gone_callback_ = nullptr;
  co_await stop_watching();

  if (!failure.empty()) {
    log::warn("http: handler for {} {} threw: {}", request.method, request.path, failure);
  }
  if (response_state_ == ResponseState::kNone) {
    // Built outside the co_await: GCC 12 mishandles array temporaries in coroutine frames.
    std::string error = "internal error: " + failure;
    if (failure.empty()) error = "the handler returned without a response";
    co_await send_error(500, error);
  } else if (response_state_ == ResponseState::kStreaming) {
    if (failure.empty()) {
      co_await end_stream();
    } else {
      // The stream is incomplete: closing tells the client so, a terminating chunk would not.
      keep_alive_ = false;
    }
  }
  co_return keep_alive_ && !client_gone_;
}

net::awaitable<void> Connection::linger_close() {
  error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream_.expires_after(std::min(kMaxLinger, server_.options.header_timeout));
  std::vector<char> discard(4096);  // GCC 12 cannot keep a std::array in a coroutine frame
  size_t drained = 0;
  while (!ec && drained < kMaxDrainBytes) {
    drained += co_await stream_.async_read_some(net::buffer(discard), kUseAwaitableEc(ec));
  }
  close_now();
}

net::awaitable<void> Connection::send(
    int status, std::string body, std::string_view content_type,
    std::vector<std::pair<std::string, std::string>> extra_headers) {
  if (response_state_ != ResponseState::kNone) {
    log::debug("http: send() after the response was started; ignored");
    co_return;
  }
  response_state_ = ResponseState::kDone;
  // After an EOF the client may only have half-closed and still read: try unless a write failed.
  if (write_failed_) co_return;
  if (status < 100 || status > 999) status = 500;
  if (server_.stopping.load()) keep_alive_ = false;  // tell the client not to send another
  bhttp::response<bhttp::string_body> response;
  response.version(version_);
  response.result(static_cast<unsigned>(status));
  response.set(bhttp::field::server, "locus");
  response.set(bhttp::field::content_type, content_type);
  for (auto& [name, value] : extra_headers)
    response.insert(name, value);
  response.keep_alive(keep_alive_);
  response.body() = std::move(body);
  response.prepare_payload();
  set_write_deadline();
  error_code ec;
  co_await bhttp::async_write(stream_, response, kUseAwaitableEc(ec));
  if (ec) {
    write_failed_ = true;
    mark_gone();
  }
}

net::awaitable<void> Connection::begin_stream(
    int status, std::string_view content_type,
    std::vector<std::pair<std::string, std::string>> extra_headers) {
  if (response_state_ != ResponseState::kNone) {
    log::debug("http: begin_stream() after the response was started; ignored");
    co_return;
  }
  response_state_ = ResponseState::kStreaming;
  if (client_gone_) co_return;
  if (status < 100 || status > 999) status = 500;
  if (server_.stopping.load()) keep_alive_ = false;
  bhttp::response<bhttp::empty_body> response;
  response.version(version_);
  response.result(static_cast<unsigned>(status));
  response.set(bhttp::field::server, "locus");
  response.set(bhttp::field::content_type, content_type);
  if (is_event_stream(content_type)) response.set(bhttp::field::cache_control, "no-cache");
  for (auto& [name, value] : extra_headers)
    response.insert(name, value);
  if (version_ >= 11) {
    response.chunked(true);
    response.keep_alive(keep_alive_);
    if (keep_alive_ && is_event_stream(content_type)) {
      response.set(bhttp::field::connection, "keep-alive");
    }
  } else {
    // HTTP/1.0 has no chunked encoding: the body ends when the connection closes.
    keep_alive_ = false;
    response.keep_alive(false);
  }
  bhttp::response_serializer<bhttp::empty_body> serializer(response);
  set_write_deadline();
  error_code ec;
  co_await bhttp::async_write_header(stream_, serializer, kUseAwaitableEc(ec));
  if (ec) {
    write_failed_ = true;
    mark_gone();
  }
}

net::awaitable<bool> Connection::write(std::string chunk) {
  if (response_state_ != ResponseState::kStreaming || client_gone_) co_return false;
  // An empty chunk would read as the end of the stream.
  if (chunk.empty()) co_return true;
  set_write_deadline();
  error_code ec;
  if (version_ >= 11) {
    co_await net::async_write(stream_, bhttp::make_chunk(net::buffer(chunk)), kUseAwaitableEc(ec));
  } else {
    co_await net::async_write(stream_, net::buffer(chunk), kUseAwaitableEc(ec));
  }
  if (ec) {
    write_failed_ = true;
    mark_gone();
    co_return false;
  }
  co_return true;
}

net::awaitable<void> Connection::end_stream() {
  if (response_state_ != ResponseState::kStreaming) co_return;
  response_state_ = ResponseState::kDone;
  if (client_gone_ || version_ < 11) co_return;
  set_write_deadline();
  error_code ec;
  co_await net::async_write(stream_, bhttp::make_chunk_last(), kUseAwaitableEc(ec));
  if (ec) {
    write_failed_ = true;
    mark_gone();
  }
}

void Connection::on_client_gone(std::function<void()> callback) {
  if (!client_gone_) {
    gone_callback_ = std::move(callback);
    return;
  }
  try {
    if (callback) callback();
  } catch (const std::exception& e) {
    log::warn("http: on_client_gone callback threw: {}", e.what());
  }
}

void Connection::mark_gone() {
  if (client_gone_) return;
  client_gone_ = true;
  keep_alive_ = false;
  std::function<void()> callback = std::move(gone_callback_);
  gone_callback_ = nullptr;
  try {
    if (callback) callback();
  } catch (const std::exception& e) {
    log::warn("http: on_client_gone callback threw: {}", e.what());
  }
}

void Connection::watch_for_disconnect() {
  if (buffer_.size() >= server_.options.max_header_bytes) {
    // A client that pipelines more than a header's worth waits in the kernel buffer instead.
    watching_ = false;
    watch_stopped_.notify();
    return;
  }
  watching_ = true;
  // Stays pending for as long as the handler runs, so no read deadline.
  stream_.expires_never();
  stream_.async_read_some(
      buffer_.prepare(kReadChunkBytes),
      [self = shared_from_this()](error_code ec, size_t bytes) { self->on_watch_read(ec, bytes); });
}

void Connection::on_watch_read(error_code ec, size_t bytes) {
  // Bytes during a handler are a pipelined next request: keep them for serve().
  buffer_.commit(bytes);
  const bool cancelled_by_us = ec == net::error::operation_aborted && stop_watch_requested_;
  if (ec && !cancelled_by_us) {
    // EOF, a reset, or a write deadline that closed the socket: nobody will read the answer.
    mark_gone();
  }
  if (ec || stop_watch_requested_) {
    watching_ = false;
    watch_stopped_.notify();
    return;
  }
  watch_for_disconnect();
}

net::awaitable<void> Connection::stop_watching() {
  stop_watch_requested_ = true;
  if (watching_) {
    error_code ec;
    stream_.socket().cancel(ec);
    while (watching_)
      co_await watch_stopped_.wait();
  }
  stop_watch_requested_ = false;
}

net::awaitable<void> accept_connections(ServerShared& server, tcp::acceptor& acceptor,
                                        net::io_context& io_context) {
  for (;;) {
    tcp::socket socket(net::make_strand(io_context));
    error_code ec;
    co_await acceptor.async_accept(socket, kUseAwaitableEc(ec));
    if (ec) {
      if (!acceptor.is_open() || server.stopping.load()) co_return;
      log::warn("http: accept failed: {}", ec.message());
      // Out of file descriptors and the like: back off instead of spinning on the error.
      net::steady_timer backoff(acceptor.get_executor(), std::chrono::milliseconds(20));
      co_await backoff.async_wait(kUseAwaitableEc(ec));
      continue;
    }
    if (server.stopping.load() || server.num_connections.load() >= server.options.max_connections) {
      socket.close(ec);
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);  // SSE chunks are small and latency-bound
    const tcp::endpoint remote = socket.remote_endpoint(ec);
    std::string remote_address = ec ? std::string("unknown") : endpoint_string(remote);
    server.num_connections.fetch_add(1);
    auto connection =
        std::make_shared<Connection>(server, std::move(socket), std::move(remote_address));
    {
      std::lock_guard lock(server.connections_mutex);
      server.connections.emplace(connection.get(), connection);
    }
    net::co_spawn(connection->executor(), Connection::run(connection), net::detached);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// HttpServer.

struct HttpServer::Impl {
  Impl(const ServerOptions& options, Router router)
      : shared(options, std::move(router)),
        io_context(std::max(1, options.io_threads)),
        acceptor(net::make_strand(io_context)),
        work(io_context.get_executor()) {}

  void stop(std::chrono::milliseconds grace);
  // Posts `action` to the strand of every live connection.
  template <typename Action>
  void for_each_connection(Action action);

  ServerShared shared;  // first: connections destroyed with io_context still reach it
  net::io_context io_context;
  tcp::acceptor acceptor;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  uint16_t port = 0;

  std::mutex stop_mutex;
  std::condition_variable stop_done;
  bool stop_started = false;
  bool stopped = false;
};

template <typename Action>
void HttpServer::Impl::for_each_connection(Action action) {
  std::vector<std::shared_ptr<Connection>> live;
  {
    std::lock_guard lock(shared.connections_mutex);
    live.reserve(shared.connections.size());
    for (auto& [raw, weak] : shared.connections) {
      if (auto connection = weak.lock()) live.push_back(std::move(connection));
    }
  }
  for (auto& connection : live) {
    net::post(connection->executor(), [connection, action] { action(*connection); });
  }
}

void HttpServer::Impl::stop(std::chrono::milliseconds grace) {
  {
    std::unique_lock lock(stop_mutex);
    if (stop_started) {
      stop_done.wait(lock, [&] { return stopped; });
      return;
    }
    stop_started = true;
  }
  using Clock = std::chrono::steady_clock;
  shared.stopping.store(true);
  // The acceptor lives on its strand; waiting here makes "refused after stop()" deterministic.
  auto acceptor_closed = std::make_shared<std::promise<void>>();
  std::future<void> closed = acceptor_closed->get_future();
  net::post(acceptor.get_executor(), [this, acceptor_closed] {
    error_code ec;
    acceptor.close(ec);
    acceptor_closed->set_value();
  });
  closed.wait_for(std::chrono::seconds(1));
  for_each_connection([](Connection& connection) { connection.close_if_idle(); });

  const auto grace_end = Clock::now() + grace;
  while (shared.active_handlers.load() > 0 && Clock::now() < grace_end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for_each_connection([](Connection& connection) { connection.close_now(); });
  const auto unwind_end = Clock::now() + kUnwindTime;
  while (shared.num_connections.load() > 0 && Clock::now() < unwind_end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  work.reset();
  io_context.stop();
  for (std::thread& thread : threads) {
    if (thread.get_id() != std::this_thread::get_id() && thread.joinable()) thread.join();
  }
  {
    std::lock_guard lock(stop_mutex);
    stopped = true;
  }
  stop_done.notify_all();
}

Expected<std::unique_ptr<HttpServer>> HttpServer::start(const ServerOptions& options,
                                                        Router router) {
  const std::string where = host_port(options.host, options.port);
  if (options.io_threads < 1) {
    return invalid_argument(fmt::format("http server {}: io_threads must be at least 1, got {}",
                                        where, options.io_threads));
  }
  auto impl = std::make_unique<Impl>(options, std::move(router));

  error_code ec;
  tcp::endpoint endpoint;
  const auto address = net::ip::make_address(options.host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, options.port);
  } else {
    tcp::resolver resolver(impl->io_context);
    const auto results = resolver.resolve(options.host, std::to_string(options.port), ec);
    if (ec || results.empty()) {
      return invalid_argument(fmt::format("cannot listen on {}: cannot resolve host '{}': {}",
                                          where, options.host, ec.message()));
    }
    endpoint = results.begin()->endpoint();
  }

  tcp::acceptor& acceptor = impl->acceptor;
  if (acceptor.open(endpoint.protocol(), ec); ec) {
    return io_error(fmt::format("cannot listen on {}: {}", where, ec.message()));
  }
  acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (acceptor.bind(endpoint, ec); ec) {
    return io_error(fmt::format("cannot listen on {}: {}", where, ec.message()));
  }
  if (acceptor.listen(net::socket_base::max_listen_connections, ec); ec) {
    return io_error(fmt::format("cannot listen on {}: {}", where, ec.message()));
  }
  impl->port = acceptor.local_endpoint(ec).port();

  net::co_spawn(acceptor.get_executor(),
                accept_connections(impl->shared, acceptor, impl->io_context), net::detached);
  for (int i = 0; i < options.io_threads; ++i) {
    impl->threads.emplace_back([io_context = &impl->io_context] {
      for (;;) {
        try {
          io_context->run();
          return;
        } catch (const std::exception& e) {
          // Handlers catch their own errors; this is a last line so the server keeps serving.
          log::error("http: uncaught exception on an I/O thread: {}", e.what());
        }
      }
    });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
  if (impl_) impl_->stop(std::chrono::milliseconds(0));
}

uint16_t HttpServer::port() const {
  return impl_->port;
}

int HttpServer::num_connections() const {
  return impl_->shared.num_connections.load();
}

void HttpServer::stop(std::chrono::milliseconds grace) {
  impl_->stop(grace);
}

void HttpServer::wait() {
  std::unique_lock lock(impl_->stop_mutex);
  impl_->stop_done.wait(lock, [&] { return impl_->stopped; });
}

}  // namespace locus::http
