// Logprobs of a token and the top-k from one row of raw logits.
#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace locus {

Logprobs compute_logprobs(std::span<const float> logits, int32_t token, int num_top) {
  // log_softmax = x - (max + log(sum(exp(x - max)))), in double for a stable sum over 150k terms.
  float max_logit = -std::numeric_limits<float>::infinity();
  for (float x : logits)
    max_logit = std::max(max_logit, x);
  double sum = 0.0;
  for (float x : logits)
    sum += std::exp(static_cast<double>(x) - max_logit);
  const double log_z = static_cast<double>(max_logit) + std::log(sum);
  auto logprob_of = [&](int32_t t) {
    return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(t)]) - log_z);
  };

  Logprobs out;
  const float chosen = logits[static_cast<size_t>(token)];
  int rank = 1;
  for (float x : logits)
    rank += x > chosen ? 1 : 0;
  out.token = {token, logprob_of(token), rank};

  const int vocab = static_cast<int>(logits.size());
  const int k = std::min(num_top, vocab);
  if (k > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(vocab));
    for (int32_t i = 0; i < vocab; ++i)
      ids[static_cast<size_t>(i)] = i;
    auto better = [&](int32_t a, int32_t b) {
      const float la = logits[static_cast<size_t>(a)];
      const float lb = logits[static_cast<size_t>(b)];
      return la != lb ? la > lb : a < b;
    };
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), better);
    out.top.reserve(static_cast<size_t>(k));
    for (int i = 0; i < k; ++i) {
      const int32_t t = ids[static_cast<size_t>(i)];
      // Rank by strict "greater than" count, matching the chosen token's rank above.
      int r = 1;
      for (int j = 0; j < i; ++j) {
        r += logits[static_cast<size_t>(ids[static_cast<size_t>(j)])] >
                     logits[static_cast<size_t>(t)]
                 ? 1
                 : 0;
      }
      out.top.push_back({t, logprob_of(t), r});
    }
  }
  return out;
}

}  // namespace locus
