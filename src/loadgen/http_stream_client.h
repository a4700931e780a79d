// The HTTP side of `locus bench serve`: POSTs one JSON request to an OpenAI-compatible server
// and records its streamed answer as it arrives (StreamRecorder timestamps each piece on the
// steady clock). One connection per request, like a fresh client per user; errors (refused
// connection, non-200 status, timeout) become failed records, never exceptions.
#pragma once

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <string>

#include "core/status.h"
#include "loadgen/serve_metrics.h"

namespace locus::loadgen {

struct ServerAddress {
  std::string host;
  std::string port;
  std::string base_path;  // "" or e.g. "/proxy" (prefix of the endpoint path)
};

// "http://host:port[/base]" -> address; https is refused with a message.
Expected<ServerAddress> parse_base_url(const std::string& url);

// Seconds on the steady clock since `epoch`: the clock every record of a run uses.
double seconds_since(std::chrono::steady_clock::time_point epoch);

struct StreamRequest {
  std::string path;  // e.g. "/v1/completions" (after the base path)
  std::string body;  // JSON
  std::string api_key;
  int64_t prompt_tokens = 0;
  bool keep_text = false;                  // RequestRecord::generated_text
  std::chrono::seconds timeout{6 * 3600};  // vLLM's aiohttp default: 6 hours
};

boost::asio::awaitable<RequestRecord> post_streaming(const ServerAddress& server,
                                                     const StreamRequest& request,
                                                     std::chrono::steady_clock::time_point epoch);

// GET `path` and return the body (non-200 -> error naming the status): /v1/models, /metrics.
boost::asio::awaitable<Expected<std::string>> http_get(const ServerAddress& server,
                                                       const std::string& path,
                                                       const std::string& api_key);

}  // namespace locus::loadgen
