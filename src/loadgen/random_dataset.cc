#include "loadgen/random_dataset.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace locus::loadgen {

std::vector<BenchRequest> random_dataset(const RandomDatasetOptions& o) {
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int32_t> token(o.id_low, std::max(o.id_low, o.id_high - 1));
  auto length = [&](int64_t len) {
    const auto lo =
        static_cast<int64_t>(std::floor(static_cast<double>(len) * (1 - o.range_ratio)));
    const auto hi = static_cast<int64_t>(std::ceil(static_cast<double>(len) * (1 + o.range_ratio)));
    return std::uniform_int_distribution<int64_t>(std::max<int64_t>(lo, 1),
                                                  std::max<int64_t>(hi, 1))(rng);
  };
  std::vector<int32_t> prefix(static_cast<size_t>(std::max<int64_t>(o.prefix_len, 0)));
  for (int32_t& t : prefix)
    t = token(rng);
  std::vector<BenchRequest> out(static_cast<size_t>(std::max(o.num_prompts, 0)));
  for (BenchRequest& r : out) {
    const int64_t in = o.range_ratio > 0 ? length(o.input_len) : o.input_len;
    r.output_len = o.range_ratio > 0 ? length(o.output_len) : o.output_len;
    r.prompt_ids = prefix;
    r.prompt_ids.reserve(prefix.size() + static_cast<size_t>(in));
    for (int64_t i = 0; i < in; ++i)
      r.prompt_ids.push_back(token(rng));
  }
  return out;
}

}  // namespace locus::loadgen
