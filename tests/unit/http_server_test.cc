// The HTTP layer against real sockets on 127.0.0.1: routing, keep-alive, limits, deadlines,
// streaming, disconnect detection, shutdown and load. Clients are written with Beast here, so a
// test never depends on what the server itself thinks it sent.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "server/http_server.h"

namespace locus::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Response = bhttp::response<bhttp::string_body>;

// Waits for `condition` up to `timeout`; true when it held.
template <typename Condition>
bool eventually(Condition condition, std::chrono::milliseconds timeout = 2000ms) {
  const auto end = Clock::now() + timeout;
  while (Clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return condition();
}

// A blocking client: every operation runs its own io_context until done, bounded by a deadline
// on the stream, so a server bug fails a test instead of hanging it.
class Client {
 public:
  explicit Client(uint16_t port) {
    stream_.expires_after(5s);
    error_code ec;
    stream_.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
    if (ec) throw std::runtime_error("connect: " + ec.message());
  }

  error_code send_raw(std::string_view bytes, std::chrono::milliseconds timeout = 5s) {
    stream_.expires_after(timeout);
    return run([&](auto done) { net::async_write(stream_, net::buffer(bytes), done); });
  }

  Response request(bhttp::verb method, std::string target, std::string body = {},
                   unsigned version = 11, bool close = false) {
    bhttp::request<bhttp::string_body> request(method, target, version);
    request.set(bhttp::field::host, "127.0.0.1");
    if (close) request.set(bhttp::field::connection, "close");
    if (!body.empty() || method == bhttp::verb::post) {
      request.body() = std::move(body);
      request.prepare_payload();
    }
    stream_.expires_after(5s);
    error_code ec = run([&](auto done) { bhttp::async_write(stream_, request, done); });
    if (ec) throw std::runtime_error("write: " + ec.message());
    return read_response();
  }

  Response read_response(std::chrono::milliseconds timeout = 5s) {
    Response response;
    stream_.expires_after(timeout);
    error_code ec = run([&](auto done) { bhttp::async_read(stream_, buffer_, response, done); });
    if (ec) throw std::runtime_error("read: " + ec.message());
    return response;
  }

  // Reads until `needle` arrived; returns everything read up to and including it.
  std::string read_until(std::string_view needle, std::chrono::milliseconds timeout = 5s) {
    stream_.expires_after(timeout);
    for (;;) {
      const std::string text = beast::buffers_to_string(buffer_.data());
      const size_t at = text.find(needle);
      if (at != std::string::npos) {
        buffer_.consume(at + needle.size());
        return text.substr(0, at + needle.size());
      }
      error_code ec = run([&](auto done) {
        stream_.async_read_some(buffer_.prepare(4096), [&, done](error_code e, size_t n) {
          buffer_.commit(n);
          done(e, n);
        });
      });
      if (ec) throw std::runtime_error("read_until '" + std::string(needle) + "': " + ec.message());
    }
  }

  // What was received but not consumed.
  std::string pending() const { return beast::buffers_to_string(buffer_.data()); }

  // True when the server closes the connection within `timeout` (reads and drops any bytes).
  bool closed_within(std::chrono::milliseconds timeout) {
    stream_.expires_after(timeout);
    char scratch[1024];
    for (;;) {
      error_code ec =
          run([&](auto done) { stream_.async_read_some(net::buffer(scratch), std::move(done)); });
      if (ec == beast::error::timeout) return false;
      if (ec) return true;
    }
  }

  void close() {
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

 private:
  template <typename Start>
  error_code run(Start start) {
    error_code result;
    bool finished = false;
    start([&](error_code ec, size_t) {
      result = ec;
      finished = true;
    });
    io_context_.restart();
    io_context_.run();
    if (!finished) return net::error::operation_aborted;
    return result;
  }

  net::io_context io_context_;
  beast::tcp_stream stream_{io_context_};
  beast::flat_buffer buffer_;
};

net::awaitable<void> echo(const Request& request, Responder& responder) {
  nlohmann::json body = {{"method", request.method},
                         {"path", request.path},
                         {"query", request.query},
                         {"body", request.body},
                         {"test_header", request.header("x-test")},
                         {"remote", request.remote_address}};
  co_await responder.send(200, body.dump());
}

Router echo_router() {
  Router router;
  router.add("GET", "/echo", echo);
  router.add("POST", "/echo", echo);
  router.add("POST", "/post_only", echo);
  return router;
}

ServerOptions test_options() {
  ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.io_threads = 2;
  return options;
}

std::unique_ptr<HttpServer> start_server(const ServerOptions& options, Router router) {
  auto server = HttpServer::start(options, std::move(router));
  if (!server) throw std::runtime_error(server.error().to_string());
  return std::move(*server);
}

void expect_json_error(const Response& response, int status) {
  EXPECT_EQ(response.result_int(), static_cast<unsigned>(status));
  EXPECT_EQ(response[bhttp::field::content_type], "application/json");
  const auto body = nlohmann::json::parse(response.body());
  ASSERT_TRUE(body.contains("error")) << response.body();
  EXPECT_EQ(body["error"]["code"], status);
  EXPECT_EQ(body["error"]["type"], std::string(error_type_for_status(status)));
  EXPECT_TRUE(body["error"]["message"].is_string());
  EXPECT_TRUE(body["error"].contains("param"));
}

// ---------------------------------------------------------------------------------------------

TEST(HttpErrorBody, HasTheOpenAiShape) {
  const auto body =
      nlohmann::json::parse(error_body(400, "bad \"temperature\"", "BadRequestError"));
  EXPECT_EQ(body["error"]["message"], "bad \"temperature\"");
  EXPECT_EQ(body["error"]["type"], "BadRequestError");
  EXPECT_TRUE(body["error"]["param"].is_null());
  EXPECT_EQ(body["error"]["code"], 400);
  const auto with_param =
      nlohmann::json::parse(error_body(400, "m", "BadRequestError", "messages[0].content"));
  EXPECT_EQ(with_param["error"]["param"], "messages[0].content");
  // Invalid UTF-8 from a client must not make the error itself fail.
  EXPECT_NO_THROW(
      nlohmann::json::parse(error_body(404, "no route for /\xff\xfe", "NotFoundError")));

  EXPECT_EQ(error_type_for_status(404), "NotFoundError");
  EXPECT_EQ(error_type_for_status(405), "MethodNotAllowed");
  EXPECT_EQ(error_type_for_status(413), "RequestEntityTooLarge");
  EXPECT_EQ(error_type_for_status(503), "ServiceUnavailableError");
  EXPECT_EQ(error_type_for_status(418), "Error");
}

TEST(HttpRouter, MatchesExactPathsAndReportsKnownPaths) {
  Router router = echo_router();
  bool found_path = false;
  EXPECT_NE(router.find("GET", "/echo", &found_path), nullptr);
  EXPECT_TRUE(found_path);
  EXPECT_EQ(router.find("GET", "/post_only", &found_path), nullptr);
  EXPECT_TRUE(found_path);
  EXPECT_EQ(router.find("GET", "/echo/", &found_path), nullptr);
  EXPECT_FALSE(found_path);
  EXPECT_EQ(router.methods_for("/echo"), (std::vector<std::string>{"GET", "POST"}));
}

TEST(HttpServer, AnswersRoutesAnd404And405WithJsonErrors) {
  auto server = start_server(test_options(), echo_router());
  Client client(server->port());

  Response ok = client.request(bhttp::verb::post, "/echo?x=1", "hello");
  EXPECT_EQ(ok.result_int(), 200u);
  const auto echoed = nlohmann::json::parse(ok.body());
  EXPECT_EQ(echoed["method"], "POST");
  EXPECT_EQ(echoed["path"], "/echo");
  EXPECT_EQ(echoed["query"], "x=1");
  EXPECT_EQ(echoed["body"], "hello");
  EXPECT_EQ(echoed["remote"].get<std::string>().rfind("127.0.0.1:", 0), 0u);

  Response missing = client.request(bhttp::verb::get, "/v1/missing");
  expect_json_error(missing, 404);

  Response wrong_method = client.request(bhttp::verb::get, "/post_only");
  expect_json_error(wrong_method, 405);
  EXPECT_EQ(wrong_method[bhttp::field::allow], "POST");
  // Errors keep the connection: one more request on it still works.
  EXPECT_EQ(client.request(bhttp::verb::get, "/echo").result_int(), 200u);
}

TEST(HttpServer, KeepAliveServesSeveralRequestsOnOneConnectionAndHonoursClose) {
  auto server = start_server(test_options(), echo_router());
  Client client(server->port());
  for (int i = 0; i < 5; ++i) {
    Response response = client.request(bhttp::verb::post, "/echo", "n" + std::to_string(i));
    ASSERT_EQ(response.result_int(), 200u);
    EXPECT_EQ(nlohmann::json::parse(response.body())["body"], "n" + std::to_string(i));
    EXPECT_TRUE(response.keep_alive());
  }
  EXPECT_EQ(server->num_connections(), 1);

  Response last = client.request(bhttp::verb::get, "/echo", {}, 11, /*close=*/true);
  EXPECT_EQ(last.result_int(), 200u);
  EXPECT_FALSE(last.keep_alive());
  EXPECT_TRUE(client.closed_within(1000ms));
}

TEST(HttpServer, Http10IsAnsweredAndClosed) {
  auto server = start_server(test_options(), echo_router());
  Client client(server->port());
  Response response = client.request(bhttp::verb::get, "/echo", {}, 10);
  EXPECT_EQ(response.result_int(), 200u);
  EXPECT_EQ(response.version(), 10u);
  EXPECT_TRUE(client.closed_within(1000ms));
}

TEST(HttpServer, PipelinedRequestsAreAnsweredInOrder) {
  auto server = start_server(test_options(), echo_router());
  Client client(server->port());
  ASSERT_FALSE(
      client.send_raw("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\none"
                      "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\ntwo"));
  EXPECT_EQ(nlohmann::json::parse(client.read_response().body())["body"], "one");
  EXPECT_EQ(nlohmann::json::parse(client.read_response().body())["body"], "two");
}

TEST(HttpServer, OversizedContentLengthIs413WithoutReadingTheBody) {
  ServerOptions options = test_options();
  options.max_body_bytes = 1024;
  auto server = start_server(options, echo_router());
  Client client(server->port());
  // The body is never sent: the answer must come from the header alone.
  ASSERT_FALSE(client.send_raw("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n"));
  Response response = client.read_response();
  expect_json_error(response, 413);
  EXPECT_FALSE(response.keep_alive());
  EXPECT_TRUE(client.closed_within(2000ms));

  // Exactly at the limit is fine.
  Client at_limit(server->port());
  EXPECT_EQ(at_limit.request(bhttp::verb::post, "/echo", std::string(1024, 'x')).result_int(),
            200u);
}

TEST(HttpServer, OversizedChunkedBodyIs413) {
  ServerOptions options = test_options();
  options.max_body_bytes = 1024;
  auto server = start_server(options, echo_router());
  Client client(server->port());
  std::string request = "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 4; ++i)
    request += "200\r\n" + std::string(512, 'y') + "\r\n";
  request += "0\r\n\r\n";
  ASSERT_FALSE(client.send_raw(request));
  expect_json_error(client.read_response(), 413);
  EXPECT_TRUE(client.closed_within(2000ms));

  // A chunked body within the limit arrives whole.
  Client small(server->port());
  ASSERT_FALSE(
      small.send_raw("POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"));
  EXPECT_EQ(nlohmann::json::parse(small.read_response().body())["body"], "abcde");
}

TEST(HttpServer, OversizedHeaderIs431) {
  ServerOptions options = test_options();
  options.max_header_bytes = 8 * 1024;
  auto server = start_server(options, echo_router());
  Client client(server->port());
  ASSERT_FALSE(client.send_raw(
      "GET /echo HTTP/1.1\r\nHost: a\r\nX-Big: " + std::string(20 * 1024, 'z') + "\r\n\r\n"));
  Response response = client.read_response();
  EXPECT_EQ(response.result_int(), 431u);
  EXPECT_EQ(nlohmann::json::parse(response.body())["error"]["code"], 431);
  EXPECT_TRUE(client.closed_within(2000ms));
}

TEST(HttpServer, MalformedRequestsAre400AndNeverCrash) {
  auto server = start_server(test_options(), echo_router());
  {
    Client client(server->port());
    ASSERT_FALSE(client.send_raw("\x01\x02 garbage \xff\r\n\r\n"));
    expect_json_error(client.read_response(), 400);
    EXPECT_TRUE(client.closed_within(2000ms));
  }
  {
    Client client(server->port());
    ASSERT_FALSE(client.send_raw("POST /echo HTTP/1.1\r\nContent-Length: abc\r\n\r\n"));
    expect_json_error(client.read_response(), 400);
  }
  // Random bytes: whatever comes back, the server lives on.
  std::mt19937 rng(1234);
  for (int i = 0; i < 30; ++i) {
    Client client(server->port());
    std::string junk(1 + rng() % 300, '\0');
    for (char& c : junk)
      c = static_cast<char>(rng());
    client.send_raw(junk + "\r\n\r\n");
    client.closed_within(200ms);
  }
  Client after(server->port());
  EXPECT_EQ(after.request(bhttp::verb::get, "/echo").result_int(), 200u);
}

TEST(HttpServer, SlowlorisIsDisconnectedAfterHeaderTimeout) {
  ServerOptions options = test_options();
  options.header_timeout = 300ms;
  auto server = start_server(options, echo_router());
  Client client(server->port());
  ASSERT_FALSE(client.send_raw("GET /echo HTTP/1.1\r\nHost: a\r\nX-Slow: "));
  const auto start = Clock::now();
  EXPECT_TRUE(client.closed_within(3000ms));
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, 200ms);
  EXPECT_LT(elapsed, 1500ms);

  // A connection that never sends a byte is cut the same way.
  Client silent(server->port());
  EXPECT_TRUE(silent.closed_within(1500ms));
}

TEST(HttpServer, IdleKeepAliveConnectionsClose) {
  ServerOptions options = test_options();
  options.keep_alive_timeout = 300ms;
  auto server = start_server(options, echo_router());
  Client client(server->port());
  EXPECT_EQ(client.request(bhttp::verb::get, "/echo").result_int(), 200u);
  const auto start = Clock::now();
  EXPECT_TRUE(client.closed_within(3000ms));
  EXPECT_LT(Clock::now() - start, 1500ms);
  EXPECT_TRUE(eventually([&] { return server->num_connections() == 0; }));
}

TEST(HttpServer, ConnectionsBeyondTheCapAreClosedAtOnce) {
  ServerOptions options = test_options();
  options.max_connections = 2;
  auto server = start_server(options, echo_router());
  auto first = std::make_unique<Client>(server->port());
  Client second(server->port());
  EXPECT_EQ(first->request(bhttp::verb::get, "/echo").result_int(), 200u);
  EXPECT_EQ(second.request(bhttp::verb::get, "/echo").result_int(), 200u);
  EXPECT_EQ(server->num_connections(), 2);

  Client third(server->port());
  EXPECT_TRUE(third.closed_within(1000ms));

  first->close();
  ASSERT_TRUE(eventually([&] { return server->num_connections() == 1; }));
  Client fourth(server->port());
  EXPECT_EQ(fourth.request(bhttp::verb::get, "/echo").result_int(), 200u);
}

// A handler that streams "one", waits for the test to notify, streams "two".
struct StreamGate {
  std::mutex mutex;
  // Weak: the handler's frame owns the signal, so it never outlives the server's io_context.
  std::weak_ptr<AsyncSignal> signal;
  std::atomic<bool> client_gone_seen{false};
  std::atomic<bool> write_after_gone_failed{false};
  std::atomic<bool> handler_done{false};
  Clock::time_point gone_at;

  std::shared_ptr<AsyncSignal> get() {
    std::lock_guard lock(mutex);
    return signal.lock();
  }
};

Router streaming_router(StreamGate& gate) {
  Router router = echo_router();
  router.add("POST", "/stream",
             [&gate](const Request&, Responder& responder) -> net::awaitable<void> {
               auto signal = std::make_shared<AsyncSignal>(responder.executor());
               {
                 std::lock_guard lock(gate.mutex);
                 gate.signal = signal;
               }
               responder.on_client_gone([&gate, signal] {
                 gate.gone_at = Clock::now();
                 gate.client_gone_seen = true;
                 signal->notify();
               });
               co_await responder.begin_stream(200);
               co_await responder.write("data: one\n\n");
               co_await signal->wait();
               const bool wrote = co_await responder.write("data: two\n\n");
               if (!wrote && responder.client_gone()) gate.write_after_gone_failed = true;
               co_await responder.end_stream();
               gate.handler_done = true;
             });
  return router;
}

TEST(HttpServer, StreamDeliversChunksIncrementallyAndTheConnectionIsReusable) {
  StreamGate gate;
  auto server = start_server(test_options(), streaming_router(gate));
  Client client(server->port());
  ASSERT_FALSE(client.send_raw("POST /stream HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"));
  const std::string head = client.read_until("data: one\n\n");
  EXPECT_NE(head.find("HTTP/1.1 200"), std::string::npos) << head;
  EXPECT_NE(head.find("Transfer-Encoding: chunked"), std::string::npos) << head;
  EXPECT_NE(head.find("Content-Type: text/event-stream"), std::string::npos) << head;
  EXPECT_NE(head.find("Cache-Control: no-cache"), std::string::npos) << head;
  EXPECT_NE(head.find("Connection: keep-alive"), std::string::npos) << head;

  // The second chunk must wait for the notify.
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(client.pending().find("two"), std::string::npos);
  gate.get()->notify();
  client.read_until("data: two\n\n");
  client.read_until("0\r\n\r\n");
  EXPECT_TRUE(eventually([&] { return gate.handler_done.load(); }));
  EXPECT_FALSE(gate.client_gone_seen);

  EXPECT_EQ(client.request(bhttp::verb::get, "/echo").result_int(), 200u);
}

TEST(HttpServer, ClientDisconnectRunsOnClientGoneWhileTheHandlerWaits) {
  StreamGate gate;
  auto server = start_server(test_options(), streaming_router(gate));
  Client client(server->port());
  ASSERT_FALSE(client.send_raw("POST /stream HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"));
  client.read_until("data: one\n\n");
  const auto closed_at = Clock::now();
  client.close();
  ASSERT_TRUE(eventually([&] { return gate.client_gone_seen.load(); }, 1000ms));
  EXPECT_LT(gate.gone_at - closed_at, 1000ms);
  ASSERT_TRUE(eventually([&] { return gate.handler_done.load(); }));
  EXPECT_TRUE(gate.write_after_gone_failed);
  EXPECT_TRUE(eventually([&] { return server->num_connections() == 0; }));
}

TEST(HttpServer, BytesArrivingDuringAHandlerAreTheNextRequestNotADisconnect) {
  StreamGate gate;
  auto server = start_server(test_options(), streaming_router(gate));
  Client client(server->port());
  ASSERT_FALSE(client.send_raw("POST /stream HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"));
  client.read_until("data: one\n\n");
  // Pipelined while the handler waits: the disconnect watch reads it and must keep it.
  ASSERT_FALSE(client.send_raw("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nnext"));
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(gate.client_gone_seen);
  gate.get()->notify();
  client.read_until("0\r\n\r\n");
  Response next = client.read_response();
  EXPECT_EQ(next.result_int(), 200u);
  EXPECT_EQ(nlohmann::json::parse(next.body())["body"], "next");
  EXPECT_FALSE(gate.client_gone_seen);
}

TEST(HttpServer, HandlerFailuresAre500AndTheConnectionSurvives) {
  Router router = echo_router();
  router.add("GET", "/throws", [](const Request&, Responder&) -> net::awaitable<void> {
    throw std::runtime_error("boom");
    co_return;
  });
  router.add("GET", "/silent",
             [](const Request&, Responder&) -> net::awaitable<void> { co_return; });
  router.add("GET", "/throws_mid_stream",
             [](const Request&, Responder& responder) -> net::awaitable<void> {
               co_await responder.begin_stream(200);
               co_await responder.write("data: partial\n\n");
               throw std::runtime_error("lost the engine");
             });
  auto server = start_server(test_options(), std::move(router));
  Client client(server->port());

  Response thrown = client.request(bhttp::verb::get, "/throws");
  expect_json_error(thrown, 500);
  EXPECT_NE(thrown.body().find("boom"), std::string::npos);
  expect_json_error(client.request(bhttp::verb::get, "/silent"), 500);
  EXPECT_EQ(client.request(bhttp::verb::get, "/echo").result_int(), 200u);

  // Mid-stream there is no status left to change: the connection closes to mark the cut.
  Client streaming(server->port());
  ASSERT_FALSE(streaming.send_raw("GET /throws_mid_stream HTTP/1.1\r\nHost: a\r\n\r\n"));
  streaming.read_until("data: partial\n\n");
  EXPECT_TRUE(streaming.closed_within(2000ms));
  EXPECT_EQ(streaming.pending().find("0\r\n\r\n"), std::string::npos);
}

TEST(HttpServer, Http10StreamEndsWithTheConnection) {
  StreamGate gate;
  auto server = start_server(test_options(), streaming_router(gate));
  Client client(server->port());
  ASSERT_FALSE(client.send_raw("POST /stream HTTP/1.0\r\nContent-Length: 0\r\n\r\n"));
  const std::string head = client.read_until("data: one\n\n");
  EXPECT_EQ(head.find("chunked"), std::string::npos) << head;
  gate.get()->notify();
  client.read_until("data: two\n\n");
  EXPECT_TRUE(client.closed_within(2000ms));
}

TEST(HttpServer, AddressInUseNamesHostAndPort) {
  auto server = start_server(test_options(), echo_router());
  ServerOptions options = test_options();
  options.port = server->port();
  auto second = HttpServer::start(options, echo_router());
  ASSERT_FALSE(second.has_value());
  EXPECT_NE(second.error().message().find("127.0.0.1:" + std::to_string(server->port())),
            std::string::npos)
      << second.error().message();

  options.host = "no-such-host.invalid";
  auto bad_host = HttpServer::start(options, echo_router());
  ASSERT_FALSE(bad_host.has_value());
  EXPECT_NE(bad_host.error().message().find("no-such-host.invalid"), std::string::npos);
}

TEST(HttpServer, StopLetsInFlightHandlersFinishWithinGrace) {
  std::atomic<bool> handler_started{false};
  Router router = echo_router();
  router.add("GET", "/slow", [&](const Request&, Responder& responder) -> net::awaitable<void> {
    handler_started = true;
    net::steady_timer timer(responder.executor(), 200ms);
    co_await timer.async_wait(net::use_awaitable);
    co_await responder.send(200, "{\"done\":true}");
  });
  auto server = start_server(test_options(), std::move(router));
  Client idle(server->port());
  EXPECT_EQ(idle.request(bhttp::verb::get, "/echo").result_int(), 200u);

  Client busy(server->port());
  ASSERT_FALSE(busy.send_raw("GET /slow HTTP/1.1\r\nHost: a\r\n\r\n"));
  ASSERT_TRUE(eventually([&] { return handler_started.load(); }));
  std::thread stopper([&] { server->stop(5000ms); });

  Response response = busy.read_response();
  EXPECT_EQ(response.result_int(), 200u);
  EXPECT_FALSE(response.keep_alive());  // stopping: no more requests on it
  EXPECT_TRUE(idle.closed_within(1000ms));
  server->wait();
  stopper.join();
  server->stop(0ms);  // idempotent

  error_code ec;
  net::io_context io_context;
  tcp::socket socket(io_context);
  socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), server->port()), ec);
  EXPECT_TRUE(ec) << "the listener should be closed";
}

TEST(HttpServer, StopClosesHandlersStuckPastGrace) {
  StreamGate gate;
  auto server = start_server(test_options(), streaming_router(gate));
  Client client(server->port());
  ASSERT_FALSE(client.send_raw("POST /stream HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"));
  client.read_until("data: one\n\n");
  const auto start = Clock::now();
  server->stop(100ms);
  server->wait();
  EXPECT_LT(Clock::now() - start, 1000ms);
  // Closing the socket told the handler, which then finished.
  EXPECT_TRUE(gate.client_gone_seen);
  EXPECT_TRUE(client.closed_within(1000ms));
}

TEST(HttpServerStress, ThousandDroppedConnectionsThenANormalRequest) {
  auto server = start_server(test_options(), echo_router());
  net::io_context io_context;
  const tcp::endpoint endpoint(net::ip::make_address("127.0.0.1"), server->port());
  for (int i = 0; i < 1000; ++i) {
    tcp::socket socket(io_context);
    error_code ec;
    socket.connect(endpoint, ec);
    ASSERT_FALSE(ec) << ec.message();
    if (i % 3 == 1) {
      net::write(socket, net::buffer(std::string_view("POST /echo HTTP/1.1\r\nContent-Len")), ec);
    } else if (i % 3 == 2) {
      net::write(socket,
                 net::buffer(std::string_view(
                     "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nhello")),
                 ec);
    }
    socket.close(ec);
  }
  Client client(server->port());
  EXPECT_EQ(client.request(bhttp::verb::get, "/echo").result_int(), 200u);
  EXPECT_TRUE(eventually([&] { return server->num_connections() == 1; }, 5000ms))
      << server->num_connections();
}

TEST(HttpServerStress, TwoHundredConcurrentKeepAliveClients) {
  auto server = start_server(test_options(), echo_router());
  constexpr int kClients = 200;
  constexpr int kRequestsEach = 5;
  net::io_context io_context;
  const tcp::endpoint endpoint(net::ip::make_address("127.0.0.1"), server->port());
  std::atomic<int> good{0};
  std::atomic<int> failed{0};
  for (int c = 0; c < kClients; ++c) {
    net::co_spawn(
        io_context,
        [&, c]() -> net::awaitable<void> {
          try {
            beast::tcp_stream stream(co_await net::this_coro::executor);
            stream.expires_after(10s);
            co_await stream.async_connect(endpoint, net::use_awaitable);
            beast::flat_buffer buffer;
            for (int r = 0; r < kRequestsEach; ++r) {
              const std::string body = std::to_string(c) + "/" + std::to_string(r);
              bhttp::request<bhttp::string_body> request(bhttp::verb::post, "/echo", 11);
              request.set(bhttp::field::host, "a");
              request.body() = body;
              request.prepare_payload();
              co_await bhttp::async_write(stream, request, net::use_awaitable);
              Response response;
              co_await bhttp::async_read(stream, buffer, response, net::use_awaitable);
              if (response.result_int() == 200 &&
                  nlohmann::json::parse(response.body())["body"] == body) {
                ++good;
              } else {
                ++failed;
              }
            }
          } catch (const std::exception&) {
            ++failed;
          }
        },
        net::detached);
  }
  io_context.run_for(20s);
  EXPECT_EQ(good.load(), kClients * kRequestsEach);
  EXPECT_EQ(failed.load(), 0);
}

}  // namespace
}  // namespace locus::http
