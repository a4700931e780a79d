#include "loadgen/arrivals.h"

#include <cmath>
#include <random>

namespace locus::loadgen {

std::vector<double> arrival_times(int n, double request_rate, double burstiness, uint64_t seed) {
  std::vector<double> times(static_cast<size_t>(n > 0 ? n : 0), 0.0);
  if (n <= 0 || std::isinf(request_rate) || !(request_rate > 0) || !(burstiness > 0)) return times;
  std::mt19937_64 rng(seed);
  // theta = 1 / (rate * burstiness): mean shape * theta = 1 / rate, as vLLM draws them.
  std::gamma_distribution<double> gap(burstiness, 1.0 / (request_rate * burstiness));
  double t = 0;
  for (int i = 0; i < n; ++i) {
    times[static_cast<size_t>(i)] = t;
    t += gap(rng);
  }
  return times;
}

}  // namespace locus::loadgen
