// The server-side counters `locus bench serve` reads from a Prometheus /metrics page before and
// after a run: vLLM's prefix-cache counters (locus and vLLM expose the same names), so the
// report can say how much of the prompt work the server's cache saved.
#pragma once

#include <optional>
#include <string_view>

namespace locus::loadgen {

struct PrefixCacheCounters {
  double queries = 0;  // prompt tokens looked up
  double hits = 0;     // of those, found in the cache
};

// Sums vllm:prefix_cache_queries_total and vllm:prefix_cache_hits_total over their label sets;
// nullopt when the page has neither (a server without a prefix cache or without metrics).
std::optional<PrefixCacheCounters> parse_prefix_cache_counters(std::string_view metrics_text);

}  // namespace locus::loadgen
