// Logprobs of a token and the top-k from one row of raw logits.
#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace locus {

Logprobs compute_logprobs(std::span<const float> logits, int32_t token, int num_top) {
  // log_softmax = x - (max + log(sum(exp(x - max)))): exp in f32, the sum over ~150k terms
  // in f64.
  float max_logit = -std::numeric_limits<float>::infinity();
  for (float x : logits)
    max_logit = std::max(max_logit, x);
  double sum = 0.0;
  for (float x : logits)
    sum += static_cast<double>(std::exp(x - max_logit));
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

  const int k = std::min(num_top, static_cast<int>(logits.size()));
  if (k <= 0) return out;
  // The k best (logit desc, id asc) through a size-k heap whose front is the worst kept.
  auto better = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)];
    const float lb = logits[static_cast<size_t>(b)];
    return la != lb ? la > lb : a < b;
  };
  std::vector<int32_t> heap;
  heap.reserve(static_cast<size_t>(k));
  for (int32_t t = 0; t < static_cast<int32_t>(logits.size()); ++t) {
    if (static_cast<int>(heap.size()) < k) {
      heap.push_back(t);
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (better(t, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = t;
      std::push_heap(heap.begin(), heap.end(), better);
    }
  }
  std::sort(heap.begin(), heap.end(), better);
  out.top.reserve(heap.size());
  for (size_t i = 0; i < heap.size(); ++i) {
    const int32_t t = heap[i];
    // Rank by strict "greater than" count, like the chosen token's: every token with a larger
    // logit is among the ones before it.
    int r = 1;
    for (size_t j = 0; j < i; ++j) {
      r += logits[static_cast<size_t>(heap[j])] > logits[static_cast<size_t>(t)] ? 1 : 0;
    }
    out.top.push_back({t, logprob_of(t), r});
  }
  return out;
}

}  // namespace locus
