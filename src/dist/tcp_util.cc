#include "dist/tcp_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <thread>

namespace locus {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr auto kRetryInterval = std::chrono::milliseconds(100);

}  // namespace

std::string describe_socket_error(const boost::system::error_code& error) {
  if (error == asio::error::eof || error == asio::error::connection_reset ||
      error == asio::error::broken_pipe) {
    return "the peer closed the connection";
  }
  return error.message();
}

void encode_frame_header(uint64_t payload_bytes, unsigned char (&header)[kFrameHeaderBytes]) {
  for (size_t i = 0; i < kFrameHeaderBytes; ++i)
    header[i] = static_cast<unsigned char>(payload_bytes >> (8 * i));
}

uint64_t decode_frame_header(const unsigned char (&header)[kFrameHeaderBytes]) {
  uint64_t bytes = 0;
  for (size_t i = 0; i < kFrameHeaderBytes; ++i)
    bytes |= static_cast<uint64_t>(header[i]) << (8 * i);
  return bytes;
}

Expected<tcp::socket> connect_tcp(asio::io_context& io, const std::string& host, int port,
                                  std::chrono::steady_clock::time_point deadline) {
  if (port <= 0 || port > 65535) {
    return invalid_argument(fmt::format("cannot connect to {}:{}: not a TCP port", host, port));
  }
  tcp::resolver resolver(io);
  boost::system::error_code last_error;
  int attempts = 0;
  for (;;) {
    ++attempts;
    boost::system::error_code error;
    // Resolved again on every attempt: a peer's name may appear in DNS only once it starts.
    const tcp::resolver::results_type endpoints =
        resolver.resolve(host, std::to_string(port), error);
    if (!error) {
      tcp::socket socket(io);
      bool is_done = false;
      // Asynchronous so that the deadline also bounds a connect that the network never
      // answers (a synchronous one waits for the kernel's timeout, minutes).
      asio::async_connect(socket, endpoints,
                          [&](const boost::system::error_code& result, const tcp::endpoint&) {
                            error = result;
                            is_done = true;
                          });
      io.restart();
      io.run_until(deadline);
      if (!is_done) {
        socket.close(error);
        io.restart();
        io.run();  // the handler sees operation_aborted
        error = asio::error::timed_out;
      }
      if (!error) socket.set_option(tcp::no_delay(true), error);
      if (!error) return socket;
    }
    last_error = error;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(kRetryInterval, deadline - now));
  }
  return io_error(fmt::format("cannot connect to {}:{} ({} attempts until the deadline): {}", host,
                              port, attempts, last_error.message()));
}

Status write_frame(tcp::socket& socket, std::string_view payload) {
  if (payload.size() > kMaxFrameBytes) {
    return invalid_argument(fmt::format("a frame of {} bytes is over the limit of {} bytes",
                                        payload.size(), kMaxFrameBytes));
  }
  unsigned char header[kFrameHeaderBytes];
  encode_frame_header(payload.size(), header);
  const std::array<asio::const_buffer, 2> buffers = {asio::buffer(header),
                                                     asio::buffer(payload.data(), payload.size())};
  boost::system::error_code error;
  asio::write(socket, buffers, error);
  if (error) return io_error("writing a frame: " + describe_socket_error(error));
  return Status::ok();
}

Expected<std::string> read_frame(tcp::socket& socket) {
  unsigned char header[kFrameHeaderBytes];
  boost::system::error_code error;
  asio::read(socket, asio::buffer(header), error);
  if (error) return io_error("reading a frame: " + describe_socket_error(error));
  const uint64_t bytes = decode_frame_header(header);
  if (bytes > kMaxFrameBytes) {
    return io_error(fmt::format(
        "reading a frame: the peer announced {} bytes, over the limit of {} bytes (not a locus "
        "peer?)",
        bytes, kMaxFrameBytes));
  }
  std::string payload(static_cast<size_t>(bytes), '\0');
  asio::read(socket, asio::buffer(payload), error);
  if (error) return io_error("reading a frame: " + describe_socket_error(error));
  return payload;
}

Expected<std::pair<std::string, int>> split_host_port(std::string_view endpoint) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return invalid_argument(fmt::format("endpoint '{}' is not host:port", endpoint));
  }
  std::string_view host = endpoint.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::string_view digits = endpoint.substr(colon + 1);
  int port = 0;
  const auto [end, parse_error] =
      std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (parse_error != std::errc() || end != digits.data() + digits.size() || port <= 0 ||
      port > 65535) {
    return invalid_argument(
        fmt::format("endpoint '{}': '{}' is not a TCP port (1-65535)", endpoint, digits));
  }
  return std::pair<std::string, int>(std::string(host), port);
}

}  // namespace locus
