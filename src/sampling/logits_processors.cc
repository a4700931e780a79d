// Logits processors for one row: bias, masks, penalties, temperature, min_p, top_k, top_p.
#include "sampling/logits_processors.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "sampling/sampling_params.h"

namespace locus {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}

void apply_logit_bias(std::span<float> logits, const std::map<int32_t, float>& logit_bias) {
  const auto vocab = static_cast<int32_t>(logits.size());
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0 || token >= vocab) continue;  // validated at admission; never index past
    logits[static_cast<size_t>(token)] += std::clamp(bias, -100.0f, 100.0f);
  }
}

void mask_tokens(std::span<float> logits, std::span<const int32_t> token_ids) {
  const auto vocab = static_cast<int32_t>(logits.size());
  for (int32_t t : token_ids) {
    if (t >= 0 && t < vocab) logits[static_cast<size_t>(t)] = kNegInf;
  }
}

void PenaltyScratch::resize(int vocab_size) {
  if (static_cast<int>(output_counts.size()) == vocab_size) return;
  output_counts.assign(static_cast<size_t>(vocab_size), 0);
  seen.assign(static_cast<size_t>(vocab_size), 0);
  touched.clear();
}

void apply_penalties(std::span<float> logits, std::span<const int32_t> prompt_token_ids,
                     std::span<const int32_t> output_token_ids, float repetition_penalty,
                     float frequency_penalty, float presence_penalty, PenaltyScratch& scratch) {
  const bool has_repetition = repetition_penalty != 1.0f;
  const bool has_additive = frequency_penalty != 0.0f || presence_penalty != 0.0f;
  if (!has_repetition && !has_additive) return;
  const auto vocab = static_cast<int32_t>(logits.size());
  scratch.resize(vocab);
  auto mark = [&](int32_t t) {
    if (t < 0 || t >= vocab) return static_cast<size_t>(vocab);
    const auto i = static_cast<size_t>(t);
    if (!scratch.seen[i]) {
      scratch.seen[i] = 1;
      scratch.touched.push_back(t);
    }
    return i;
  };
  if (has_repetition) {
    for (int32_t t : prompt_token_ids)
      mark(t);
  }
  for (int32_t t : output_token_ids) {
    const size_t i = mark(t);
    if (i < static_cast<size_t>(vocab)) ++scratch.output_counts[i];
  }
  for (int32_t t : scratch.touched) {
    const auto i = static_cast<size_t>(t);
    float& x = logits[i];
    if (has_repetition) x = x > 0.0f ? x / repetition_penalty : x * repetition_penalty;
    const int32_t count = scratch.output_counts[i];
    if (count > 0) {
      x -= frequency_penalty * static_cast<float>(count) + presence_penalty;
    }
    scratch.seen[i] = 0;
    scratch.output_counts[i] = 0;
  }
  scratch.touched.clear();
}

void apply_temperature(std::span<float> logits, float temperature) {
  if (temperature == 1.0f) return;
  const float inv = 1.0f / temperature;
  for (float& x : logits)
    x *= inv;
}

void apply_min_p(std::span<float> logits, float min_p) {
  if (min_p <= 0.0f) return;
  float max_logit = kNegInf;
  for (float x : logits)
    max_logit = std::max(max_logit, x);
  // p_i >= min_p * p_max  <=>  logit_i >= max_logit + log(min_p): no softmax needed.
  const float threshold = max_logit + std::log(min_p);
  for (float& x : logits) {
    if (x < threshold) x = kNegInf;
  }
}

float kth_largest(std::span<const float> values, int k) {
  // A size-k min-heap in one pass: nearly every value loses to the heap's minimum after the
  // first few thousand, so this is ~one compare per entry (vs. copying the row for
  // nth_element).
  std::vector<float> heap;
  heap.reserve(static_cast<size_t>(k));
  const auto greater = std::greater<float>();
  for (float x : values) {
    if (static_cast<int>(heap.size()) < k) {
      heap.push_back(x);
      std::push_heap(heap.begin(), heap.end(), greater);
    } else if (x > heap.front()) {
      std::pop_heap(heap.begin(), heap.end(), greater);
      heap.back() = x;
      std::push_heap(heap.begin(), heap.end(), greater);
    }
  }
  return heap.front();
}

void apply_top_k(std::span<float> logits, int top_k, std::vector<float>& scratch) {
  if (top_k <= 0 || static_cast<size_t>(top_k) >= logits.size()) return;
  float threshold;
  if (top_k <= 4096) {
    threshold = kth_largest(logits, top_k);
  } else {
    scratch.assign(logits.begin(), logits.end());
    auto kth = scratch.begin() + (top_k - 1);
    std::nth_element(scratch.begin(), kth, scratch.end(), std::greater<float>());
    threshold = *kth;
  }
  for (float& x : logits) {
    if (x < threshold) x = kNegInf;
  }
}

void apply_top_p(std::span<float> logits, float top_p, std::vector<int32_t>& scratch) {
  if (top_p >= 1.0f) return;
  float max_logit = kNegInf;
  scratch.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == kNegInf) continue;
    scratch.push_back(static_cast<int32_t>(i));
    max_logit = std::max(max_logit, logits[i]);
  }
  if (scratch.empty()) return;
  auto weight = [&](int32_t t) {
    return static_cast<double>(std::exp(logits[static_cast<size_t>(t)] - max_logit));
  };
  double total = 0.0;
  for (int32_t t : scratch)
    total += weight(t);
  const double target = static_cast<double>(top_p) * total;
  // Strict total order (logit desc, then id asc): the kept set is a prefix of it.
  auto before = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)];
    const float lb = logits[static_cast<size_t>(b)];
    return la != lb ? la > lb : a < b;
  };
  // Usually the mass is reached within the top few hundred tokens: select the top 1024 in
  // O(vocab) and sort only those; widen to 16384, then everything, when they fall short (flat
  // distributions). Every path yields the same prefix of the same order.
  size_t sorted = scratch.size();
  for (size_t candidates = 1024; candidates < scratch.size(); candidates *= 16) {
    std::nth_element(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(candidates),
                     scratch.end(), before);
    double head = 0.0;
    for (size_t j = 0; j < candidates; ++j)
      head += weight(scratch[j]);
    if (head >= target) {
      sorted = candidates;
      break;
    }
  }
  std::sort(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(sorted), before);
  double mass = 0.0;
  size_t keep = 0;
  while (keep < sorted) {
    mass += weight(scratch[keep]);
    ++keep;
    if (mass >= target) break;
  }
  for (size_t j = keep; j < scratch.size(); ++j)
    logits[static_cast<size_t>(scratch[j])] = kNegInf;
}

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  float best_value = logits.empty() ? kNegInf : logits[0];
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > best_value) {
      best_value = logits[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

int32_t sample_from_logits(std::span<const float> logits, float u) {
  std::vector<float> scratch;
  return sample_from_logits(logits, u, scratch);
}

int32_t sample_from_logits(std::span<const float> logits, float u, std::vector<float>& weights) {
  float max_logit = kNegInf;
  for (float x : logits)
    max_logit = std::max(max_logit, x);
  if (max_logit == kNegInf) return argmax(logits);  // everything masked: nothing to draw from
  // exp in f32 (one ulp) summed in f64: the weights are computed once and walked once.
  weights.resize(logits.size());
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    weights[i] = std::exp(logits[i] - max_logit);  // exp(-inf) = 0 for masked tokens
    total += static_cast<double>(weights[i]);
  }
  const double target = static_cast<double>(u) * total;
  double cumulative = 0.0;
  int32_t last_possible = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (weights[i] == 0.0f) continue;
    cumulative += static_cast<double>(weights[i]);
    last_possible = static_cast<int32_t>(i);
    if (cumulative > target) return last_possible;
  }
  return last_possible;  // rounding left target just past the sum
}

int32_t draw_plain(std::span<const float> logits, float temperature, int top_k, float top_p,
                   float min_p, float u, DrawScratch& scratch) {
  if (temperature < kGreedyTemperatureEpsilon) return argmax(logits);
  scratch.work.assign(logits.begin(), logits.end());
  apply_temperature(scratch.work, temperature);
  apply_min_p(scratch.work, min_p);
  if (top_k > 0) apply_top_k(scratch.work, top_k, scratch.floats);
  apply_top_p(scratch.work, top_p, scratch.indices);
  return sample_from_logits(scratch.work, u, scratch.floats);
}

}  // namespace locus
