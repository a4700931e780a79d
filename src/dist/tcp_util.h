// Small synchronous TCP helpers on Boost.Asio for talking to other locus processes: connecting
// with retry while a peer starts, and length-prefixed frames. They block the calling thread;
// a socket must never be used by two threads at once.
#pragma once

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded

#include <boost/asio.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "core/status.h"

namespace locus {

// A frame is a u64 little-endian byte count followed by that many bytes. Larger frames are
// refused: a wrong count (a stray client, a peer speaking another protocol) must not make the
// reader allocate gigabytes.
inline constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 30;
inline constexpr size_t kFrameHeaderBytes = 8;

// Connects to host:port, retrying every ~100 ms while the connection fails (the peer may not
// listen yet) until `deadline`; the error names host:port and the last failure. The socket has
// TCP_NODELAY set: collectives send one frame and wait, so Nagle would only add latency.
// Runs `io` on the calling thread while it waits.
Expected<boost::asio::ip::tcp::socket> connect_tcp(boost::asio::io_context& io,
                                                   const std::string& host, int port,
                                                   std::chrono::steady_clock::time_point deadline);

Status write_frame(boost::asio::ip::tcp::socket& socket, std::string_view payload);
// Fails with "the peer closed the connection" when the peer is gone before a whole frame came.
Expected<std::string> read_frame(boost::asio::ip::tcp::socket& socket);

// "the peer closed the connection" for the errors a vanished peer causes (end of file, reset,
// broken pipe), else the system's message.
std::string describe_socket_error(const boost::system::error_code& error);

// The frame header for `payload_bytes` bytes, and its inverse.
void encode_frame_header(uint64_t payload_bytes, unsigned char (&header)[kFrameHeaderBytes]);
uint64_t decode_frame_header(const unsigned char (&header)[kFrameHeaderBytes]);

// "host:port" or "[v6-address]:port" -> {host, port}; the error names the endpoint.
Expected<std::pair<std::string, int>> split_host_port(std::string_view endpoint);

}  // namespace locus
