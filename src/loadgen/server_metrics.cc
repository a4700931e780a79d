#include "loadgen/server_metrics.h"

#include <cstdlib>
#include <string>

namespace locus::loadgen {

std::optional<PrefixCacheCounters> parse_prefix_cache_counters(std::string_view text) {
  PrefixCacheCounters c;
  bool found = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line.front() == '#') continue;
    double* target = nullptr;
    if (line.starts_with("vllm:prefix_cache_queries_total")) {
      target = &c.queries;
    } else if (line.starts_with("vllm:prefix_cache_hits_total")) {
      target = &c.hits;
    } else {
      continue;
    }
    // "name{labels} value [timestamp]": the value follows the label set (or the name).
    const size_t brace = line.find('}');
    size_t value_at = brace != std::string_view::npos ? brace + 1 : line.find(' ');
    if (value_at == std::string_view::npos) continue;
    const std::string rest(line.substr(value_at));
    char* parsed_end = nullptr;
    const double v = std::strtod(rest.c_str(), &parsed_end);
    if (parsed_end == rest.c_str()) continue;
    *target += v;
    found = true;
  }
  if (!found) return std::nullopt;
  return c;
}

}  // namespace locus::loadgen
