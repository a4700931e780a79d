#include "loadgen/http_stream_client.h"

#include <fmt/format.h>

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <limits>

#include "loadgen/stream_recorder.h"

namespace locus::loadgen {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

namespace {

using boost::system::error_code;

constexpr size_t kReadChunk = 16 * 1024;
constexpr size_t kMaxErrorBody = 2000;

}  // namespace

Expected<ServerAddress> parse_base_url(const std::string& url) {
  std::string rest;
  if (url.starts_with("http://")) {
    rest = url.substr(7);
  } else if (url.starts_with("https://")) {
    return unsupported(fmt::format("--base-url {}: https is not supported; use http://", url));
  } else {
    return invalid_argument(fmt::format("--base-url {}: expected http://HOST:PORT[/PATH]", url));
  }
  ServerAddress a;
  const size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) a.base_path = rest.substr(slash);
  while (!a.base_path.empty() && a.base_path.back() == '/')
    a.base_path.pop_back();
  const size_t colon = hostport.rfind(':');
  if (colon == std::string::npos || hostport.front() == '[') {
    a.host = hostport;
    a.port = "80";
  } else {
    a.host = hostport.substr(0, colon);
    a.port = hostport.substr(colon + 1);
  }
  if (a.host.empty() || a.port.empty() ||
      a.port.find_first_not_of("0123456789") != std::string::npos) {
    return invalid_argument(fmt::format("--base-url {}: expected http://HOST:PORT[/PATH]", url));
  }
  return a;
}

double seconds_since(std::chrono::steady_clock::time_point epoch) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch).count();
}

net::awaitable<RequestRecord> post_streaming(const ServerAddress& server,
                                             const StreamRequest& request,
                                             std::chrono::steady_clock::time_point epoch) {
  auto executor = co_await net::this_coro::executor;
  StreamRecorder recorder(seconds_since(epoch), request.prompt_tokens, request.keep_text);
  beast::tcp_stream stream(executor);
  stream.expires_after(request.timeout);
  // Errors come back in `ec`; the token is a named object because GCC 12 mishandles
  // temporaries inside co_await expressions.
  error_code ec;
  auto token = net::redirect_error(net::use_awaitable, ec);

  tcp::resolver resolver(executor);
  const auto endpoints = co_await resolver.async_resolve(server.host, server.port, token);
  if (ec) co_return recorder.fail(fmt::format("resolve {}: {}", server.host, ec.message()));
  co_await stream.async_connect(endpoints, token);
  if (ec) {
    co_return recorder.fail(
        fmt::format("connect {}:{}: {}", server.host, server.port, ec.message()));
  }

  bhttp::request<bhttp::string_body> req{bhttp::verb::post, server.base_path + request.path, 11};
  req.set(bhttp::field::host, server.host);
  req.set(bhttp::field::user_agent, "locus-bench");
  req.set(bhttp::field::content_type, "application/json");
  req.set(bhttp::field::accept, "text/event-stream");
  if (!request.api_key.empty()) {
    req.set(bhttp::field::authorization, "Bearer " + request.api_key);
  }
  req.body() = request.body;
  req.prepare_payload();
  co_await bhttp::async_write(stream, req, token);
  if (ec) co_return recorder.fail(fmt::format("send: {}", ec.message()));

  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::buffer_body> parser;
  // A finite limit: Boost 1.74 compares Content-Length against an empty optional as "over".
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  co_await bhttp::async_read_header(stream, buffer, parser, token);
  if (ec) co_return recorder.fail(fmt::format("read header: {}", ec.message()));
  const unsigned status = parser.get().result_int();
  std::string error_body;
  std::vector<char> chunk(kReadChunk);
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    // read_some: returns as soon as some body arrived (async_read would wait for the buffer to
    // fill or the message to end, and every chunk would get the same timestamp).
    co_await bhttp::async_read_some(stream, buffer, parser, token);
    const error_code read_ec = ec;
    const size_t got = chunk.size() - parser.get().body().size;
    if (got > 0) {
      const std::string_view piece(chunk.data(), got);
      if (status == 200) {
        recorder.feed(piece, seconds_since(epoch));
      } else if (error_body.size() < kMaxErrorBody) {
        error_body.append(piece.substr(0, kMaxErrorBody - error_body.size()));
      }
    }
    if (read_ec == bhttp::error::need_buffer) continue;
    if (read_ec == bhttp::error::end_of_stream) break;
    if (read_ec) {
      if (status != 200) break;
      co_return recorder.fail(fmt::format("read: {}", read_ec.message()));
    }
  }
  error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  if (status != 200) co_return recorder.fail(fmt::format("HTTP {}: {}", status, error_body));
  co_return recorder.finish(seconds_since(epoch));
}

net::awaitable<Expected<std::string>> http_get(const ServerAddress& server, const std::string& path,
                                               const std::string& api_key) {
  auto executor = co_await net::this_coro::executor;
  beast::tcp_stream stream(executor);
  stream.expires_after(std::chrono::seconds(30));
  error_code ec;
  auto token = net::redirect_error(net::use_awaitable, ec);
  tcp::resolver resolver(executor);
  const auto endpoints = co_await resolver.async_resolve(server.host, server.port, token);
  if (ec) co_return io_error(fmt::format("resolve {}: {}", server.host, ec.message()));
  co_await stream.async_connect(endpoints, token);
  if (ec) {
    co_return io_error(fmt::format("connect {}:{}: {}", server.host, server.port, ec.message()));
  }
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, server.base_path + path, 11};
  req.set(bhttp::field::host, server.host);
  req.set(bhttp::field::user_agent, "locus-bench");
  if (!api_key.empty()) req.set(bhttp::field::authorization, "Bearer " + api_key);
  co_await bhttp::async_write(stream, req, token);
  if (ec) co_return io_error(fmt::format("GET {}: {}", path, ec.message()));
  beast::flat_buffer buffer;
  bhttp::response<bhttp::string_body> res;
  co_await bhttp::async_read(stream, buffer, res, token);
  if (ec) co_return io_error(fmt::format("GET {}: {}", path, ec.message()));
  if (res.result_int() != 200) {
    co_return io_error(fmt::format("GET {}: HTTP {}: {}", path, res.result_int(), res.body()));
  }
  co_return res.body();
}

}  // namespace locus::loadgen
