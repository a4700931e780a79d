// Helpers for the ops, model and forward tests: random tensors (never zeros), conversions and
// error metrics. Header-only; included by tests/unit/{ops,rope,attention,moe,model,forward}_*.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "backend/ops.h"
#include "backend/ops_rope.h"
#include "core/convert.h"
#include "core/counter_rng.h"
#include "core/tensor.h"

namespace locus::testing {

// A GQA step's shape (v_head_dim = head_dim, eps 1e-6) without norm weights: the tests set
// q_norm / k_norm themselves when `norm` needs them.
inline QkvSpec make_qkv_spec(int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                             QkNorm norm = QkNorm::kNone) {
  QkvSpec s;
  s.num_heads = q_heads;
  s.num_kv_heads = kv_heads;
  s.head_dim = head_dim;
  s.v_head_dim = head_dim;
  s.norm = norm;
  s.eps = 1e-6f;
  return s;
}

// Uniform values in [lo, hi) from stream `seed`; every call site passes its own seed, so each
// tensor is fresh data and a failure reproduces exactly.
inline Tensor random_f32(const Dims& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t = Tensor::empty(shape, DType::kF32).value();
  const uint64_t stream = stream_key(seed, 0x7E57);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = lo + (hi - lo) * counter_uniform(stream, static_cast<uint64_t>(i));
  return t;
}

inline Tensor from_floats(const std::vector<float>& values, const Dims& shape) {
  Tensor t = Tensor::empty(shape, DType::kF32).value();
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
  std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(float));
  return t;
}

inline Tensor from_i32(const std::vector<int32_t>& values, const Dims& shape) {
  Tensor t = Tensor::empty(shape, DType::kI32).value();
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(int32_t));
  return t;
}

inline Tensor from_i64(const std::vector<int64_t>& values, const Dims& shape) {
  Tensor t = Tensor::empty(shape, DType::kI64).value();
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(int64_t));
  return t;
}

// A contiguous f32 tensor's values (copies; strided views are gathered).
inline std::vector<float> to_floats(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::kF32);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (t.is_contiguous()) {
    std::memcpy(out.data(), t.raw_data(), out.size() * sizeof(float));
    return out;
  }
  // Generic strided gather.
  std::vector<int64_t> index(static_cast<size_t>(t.ndim()), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t offset = 0;
    for (int d = 0; d < t.ndim(); ++d)
      offset += index[static_cast<size_t>(d)] * t.stride(d);
    out[i] = t.data<float>()[offset];
    for (int d = t.ndim() - 1; d >= 0; --d) {
      if (++index[static_cast<size_t>(d)] < t.size(d)) break;
      index[static_cast<size_t>(d)] = 0;
    }
  }
  return out;
}

// `t` (f32) rounded to `dtype`.
inline Tensor convert_to(const Tensor& t, DType dtype) {
  Tensor out = Tensor::empty(t.shape(), dtype).value();
  EXPECT_TRUE(
      convert_from_f32(t.data<float>(), dtype, out.raw_data(), static_cast<size_t>(t.numel()))
          .is_ok());
  return out;
}

// `t` of any float dtype, widened to f32.
inline Tensor widen(const Tensor& t) {
  Tensor out = Tensor::empty(t.shape(), DType::kF32).value();
  EXPECT_TRUE(
      convert_to_f32(t.dtype(), t.raw_data(), out.data<float>(), static_cast<size_t>(t.numel()))
          .is_ok());
  return out;
}

// ||a - b|| / ||b||.
inline double rel_l2(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0.0;
  double den = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    num += d * d;
    den += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return den == 0.0 ? std::sqrt(num) : std::sqrt(num / den);
}

inline double max_abs_diff(std::span<const float> a, std::span<const float> b) {
  double m = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return m;
}

inline bool bitwise_equal(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Rope parameters of a config as the model layers build them (Hugging Face frequencies for
// positions below max_positions).
inline RopeParams rope_params_for(const RopeConfig& config, int64_t max_positions,
                                  float attention_factor = 1.0f) {
  auto freqs = compute_rope_frequencies(config, max_positions);
  EXPECT_TRUE(freqs.has_value()) << freqs.status().to_string();
  RopeParams p;
  p.inv_freq = from_floats(freqs->inv_freq, {static_cast<int64_t>(freqs->inv_freq.size())});
  p.layout = config.layout;
  p.attention_factor = attention_factor;
  return p;
}

}  // namespace locus::testing
