// Row-wise CPU ops: embedding, RMSNorm, RoPE, SiLU-and-mul, add, row gathers.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"

namespace locus {
namespace {

// x / sqrt(mean(x^2) + eps) * weight, as transformers' RMSNorm orders it: the mean of squares
// (here accumulated in f64, so it is the exactly rounded value), then x * rsqrt in f32, then
// weight * that.
double row_sum_squares(const float* x, int64_t n) {
  double sum_squares = 0.0;
  for (int64_t i = 0; i < n; ++i)
    sum_squares += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return sum_squares;
}

// The row of n elements (a part of a whole row of `width` with that sum of squares) normalized.
void normalize_row(const float* x, const float* weight, float eps, double sum_squares,
                   int64_t width, int64_t n, float* out) {
  const float variance = static_cast<float>(sum_squares / static_cast<double>(width));
  const float inv_rms =
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(variance) + static_cast<double>(eps)));
  for (int64_t i = 0; i < n; ++i)
    out[i] = weight[i] * (x[i] * inv_rms);
}

void rms_norm_row(const float* x, const float* weight, float eps, int64_t n, float* out) {
  normalize_row(x, weight, eps, row_sum_squares(x, n), n, n, out);
}

}  // namespace

Status CpuBackend::do_embedding(const Tensor& table, const Tensor& token_ids, Tensor& out) {
  const int64_t vocab = table.size(0);
  const int64_t hidden = table.size(1);
  LOCUS_ASSIGN_OR_RETURN(Tensor dense, cpu::to_dense_f32(table));
  const int32_t* ids = token_ids.data<int32_t>();
  for (int64_t t = 0; t < token_ids.size(0); ++t) {
    if (ids[t] < 0 || ids[t] >= vocab) {
      return out_of_range(
          fmt::format("embedding: token id {} at position {} is outside the "
                      "vocabulary [0, {})",
                      ids[t], t, vocab));
    }
    std::memcpy(out.data<float>() + t * hidden, dense.data<float>() + ids[t] * hidden,
                static_cast<size_t>(hidden) * sizeof(float));
  }
  return Status::ok();
}

Status CpuBackend::do_rms_norm(const Tensor& x_in, const Tensor& weight, float eps, Tensor& out) {
  const Tensor x = act(x_in);
  const int64_t n = x.size(-1);
  float* dst = out.data<float>();
  cpu::for_each_row<float>(x, [&](int64_t row, const float* src) {
    rms_norm_row(src, weight.data<float>(), eps, n, dst + row * n);
  });
  return Status::ok();
}

Status CpuBackend::do_sum_squares(const Tensor& x_in, Tensor& out) {
  const Tensor x = act(x_in);
  const int64_t n = x.size(1);
  float* dst = out.data<float>();
  for (int64_t row = 0; row < x.size(0); ++row)
    dst[row] = static_cast<float>(row_sum_squares(x.data<float>() + row * x.stride(0), n));
  return Status::ok();
}

Status CpuBackend::do_split_rms_norm(const Tensor& x_in, const Tensor& weight,
                                     const Tensor& sum_squares, int64_t width, float eps,
                                     Tensor& out) {
  const Tensor x = act(x_in);
  const int64_t n = x.size(1);
  for (int64_t row = 0; row < x.size(0); ++row) {
    normalize_row(x.data<float>() + row * x.stride(0), weight.data<float>(), eps,
                  static_cast<double>(sum_squares.data<float>()[row]), width, n,
                  out.data<float>() + row * n);
  }
  return Status::ok();
}

Status CpuBackend::do_add_rms_norm(const Tensor& residual_in, const Tensor& x_in,
                                   const Tensor& weight, float eps, Tensor& residual, Tensor& out) {
  const Tensor r_in = act(residual_in);  // a rounded copy, or residual_in itself
  const Tensor x = act(x_in);
  const int64_t n = residual.size(1);
  const float* in = r_in.data<float>();
  float* r = residual.data<float>();
  const float* a = x.data<float>();
  for (int64_t i = 0; i < residual.numel(); ++i)
    r[i] = in[i] + a[i];
  for (int64_t row = 0; row < residual.size(0); ++row)
    rms_norm_row(r + row * n, weight.data<float>(), eps, n, out.data<float>() + row * n);
  return Status::ok();
}

// cos/sin as transformers builds them: freq = inv_freq * position rounded to f32 (an f32 matmul
// with one term), cos and sin of that f32 value, times attention_factor in f32. Neox pairs
// (x[i], x[i + d/2]) and interleaved pairs (x[2i], x[2i + 1]) rotate by the same angle i;
// DeepSeek's transformers code de-interleaves q and k before a neox rotation, which permutes both
// the same way and leaves q.k unchanged.
Status CpuBackend::do_rope(Tensor& x, const Tensor& positions, const RopeParams& params) {
  round_act_in_place(x);
  const int64_t tokens = x.size(0);
  const int64_t heads = x.size(1);
  const int64_t half = params.rotary_dim() / 2;
  const float* inv_freq = params.inv_freq.data<float>();
  const int32_t* pos = positions.data<int32_t>();
  std::vector<float> cos(static_cast<size_t>(half));
  std::vector<float> sin(static_cast<size_t>(half));
  for (int64_t t = 0; t < tokens; ++t) {
    if (pos[t] < 0) {
      return out_of_range(fmt::format("rope: position {} of token {} is negative", pos[t], t));
    }
    for (int64_t i = 0; i < half; ++i) {
      const float freq = inv_freq[i] * static_cast<float>(pos[t]);
      cos[static_cast<size_t>(i)] =
          static_cast<float>(std::cos(static_cast<double>(freq))) * params.attention_factor;
      sin[static_cast<size_t>(i)] =
          static_cast<float>(std::sin(static_cast<double>(freq))) * params.attention_factor;
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x.data<float>() + t * x.stride(0) + h * x.stride(1);
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = params.layout == RopeLayout::kNeox ? i : 2 * i;
        const int64_t b = params.layout == RopeLayout::kNeox ? i + half : 2 * i + 1;
        const float x1 = v[a];
        const float x2 = v[b];
        const float c = cos[static_cast<size_t>(i)];
        const float s = sin[static_cast<size_t>(i)];
        v[a] = x1 * c - x2 * s;
        v[b] = x2 * c + x1 * s;
      }
    }
  }
  return Status::ok();
}

Status CpuBackend::do_silu_and_mul(const Tensor& gate_in, const Tensor& up_in, Tensor& out) {
  const Tensor gate = act(gate_in);
  const Tensor up = act(up_in);
  const int64_t n = gate.size(1);
  for (int64_t t = 0; t < gate.size(0); ++t) {
    const float* g = gate.data<float>() + t * gate.stride(0);
    const float* u = up.data<float>() + t * up.stride(0);
    float* o = out.data<float>() + t * n;
    for (int64_t i = 0; i < n; ++i) {
      // silu(g) = g * sigmoid(g); exp in f64 keeps large |g| from overflowing to inf/inf.
      const float sigmoid = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(g[i]))));
      o[i] = (g[i] * sigmoid) * u[i];
    }
  }
  return Status::ok();
}

Status CpuBackend::do_add(const Tensor& a_in, const Tensor& b_in, Tensor& out) {
  const Tensor a = act(a_in);
  const Tensor b = act(b_in);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  for (int64_t i = 0; i < a.numel(); ++i)
    po[i] = pa[i] + pb[i];
  return Status::ok();
}

Status CpuBackend::do_gather_rows(const Tensor& x_in, const Tensor& indices, Tensor& out) {
  const Tensor x = act(x_in);
  const int64_t rows = x.size(0);
  const int64_t n = x.size(1);
  const int32_t* idx = indices.data<int32_t>();
  for (int64_t i = 0; i < indices.size(0); ++i) {
    if (idx[i] < -1 || idx[i] >= rows) {
      return out_of_range(
          fmt::format("gather_rows: index {} at {} is outside [-1, {})", idx[i], i, rows));
    }
    float* dst = out.data<float>() + i * n;
    if (idx[i] == -1) {
      std::fill_n(dst, n, 0.0f);
    } else {
      std::memcpy(dst, x.data<float>() + idx[i] * n, static_cast<size_t>(n) * sizeof(float));
    }
  }
  return Status::ok();
}

Status CpuBackend::do_gather_sum_rows(const Tensor& x_in, const Tensor& index, Tensor& out) {
  const Tensor x = act(x_in);
  const int64_t rows = x.size(0);
  const int64_t n = x.size(1);
  const int64_t m = index.size(0);
  const int64_t tokens = index.size(1);
  const int32_t* idx = index.data<int32_t>();
  for (int64_t i = 0; i < m * tokens; ++i) {
    if (idx[i] < -1 || idx[i] >= rows) {
      return out_of_range(fmt::format("gather_sum_rows: index {} at ({}, {}) is outside [-1, {})",
                                      idx[i], i / tokens, i % tokens, rows));
    }
  }
  float* o = out.data<float>();
  std::fill_n(o, tokens * n, 0.0f);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < m; ++j) {
      const int32_t r = idx[j * tokens + t];
      if (r < 0) continue;
      const float* src = x.data<float>() + r * n;
      for (int64_t c = 0; c < n; ++c)
        o[t * n + c] += src[c];
    }
  }
  return Status::ok();
}

Status CpuBackend::do_copy(const Tensor& src, Tensor& dst) {
  // Rows of the last dim are contiguous in both (row views); walk the leading dims.
  const int nd = src.ndim();
  const int64_t d0 = nd >= 3 ? src.size(0) : 1;
  const int64_t d1 = nd >= 2 ? src.size(nd - 2) : 1;
  const int64_t n = src.size(nd - 1);
  const size_t elem = dtype_bytes(src.dtype(), 1);
  const auto* s = static_cast<const char*>(src.raw_data());
  auto* d = static_cast<char*>(dst.raw_data());
  auto offset = [&](const Tensor& t, int64_t i, int64_t j) {
    int64_t e = 0;
    if (nd >= 3) e += i * t.stride(0);
    if (nd >= 2) e += j * t.stride(nd - 2);
    return static_cast<size_t>(e) * elem;
  };
  for (int64_t i = 0; i < d0; ++i) {
    for (int64_t j = 0; j < d1; ++j) {
      std::memcpy(d + offset(dst, i, j), s + offset(src, i, j), static_cast<size_t>(n) * elem);
    }
  }
  return Status::ok();
}

}  // namespace locus
