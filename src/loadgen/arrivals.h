// When each request of `locus bench serve` is sent: vLLM's arrival process. Gaps are drawn from a
// gamma distribution with shape `burstiness` and mean 1 / request_rate (burstiness 1 = Poisson;
// below 1 burstier, above 1 more regular); an infinite rate sends everything at once.
#pragma once

#include <cstdint>
#include <vector>

namespace locus::loadgen {

// Send times in seconds from the start, non-decreasing, for n requests; deterministic in seed.
std::vector<double> arrival_times(int n, double request_rate, double burstiness, uint64_t seed);

}  // namespace locus::loadgen
