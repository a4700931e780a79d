// The GPU sampler (launch_sample_rows) against the CPU logits processors it mirrors
// (sampling/logits_processors.h): the same token for the same row, params and uniform draw.
// SKIPPED where no GPU is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/device.h"
#include "gpu/gpu_test_util.h"
#include "sampling/logits_processors.h"
#include "sampling/sampling_params.h"

#ifdef LOCUS_HAS_CUDA
#include <cuda_runtime_api.h>

#include "backend/cuda/kernels/sampling/sampling_launch.h"
#endif

namespace locus {
namespace {

#ifndef LOCUS_HAS_CUDA

TEST(GpuSampling, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#else

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

#define SKIP_WITHOUT_GPU()                                          \
  do {                                                              \
    DeviceReport report = query_devices();                          \
    if (report.gpus.empty()) {                                      \
      GTEST_SKIP() << "no GPU: " << report.cuda_unavailable_reason; \
    }                                                               \
  } while (0)

// A device allocation that frees itself.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) {
    if (cudaMalloc(&ptr_, std::max<size_t>(bytes, 1)) != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

// Runs the GPU sampler over rows of `vocab` logits stored with stride ld.
void sample_on_gpu(const std::vector<float>& logits, int64_t ld, int vocab,
                   const std::vector<cuda::SampleRowParams>& params, std::vector<int32_t>& tokens) {
  const int rows = static_cast<int>(params.size());
  ASSERT_EQ(logits.size(), static_cast<size_t>(rows) * static_cast<size_t>(ld));
  DeviceBuffer d_logits(logits.size() * sizeof(float));
  DeviceBuffer d_params(params.size() * sizeof(cuda::SampleRowParams));
  DeviceBuffer d_out(static_cast<size_t>(rows) * sizeof(int32_t));
  DeviceBuffer d_workspace(cuda::sample_rows_workspace_bytes(rows, vocab));
  ASSERT_NE(d_logits.as<void>(), nullptr);
  CUDA_ASSERT(cudaMemcpy(d_logits.as<void>(), logits.data(), logits.size() * sizeof(float),
                         cudaMemcpyHostToDevice));
  CUDA_ASSERT(cudaMemcpy(d_params.as<void>(), params.data(),
                         params.size() * sizeof(cuda::SampleRowParams), cudaMemcpyHostToDevice));
  CUDA_ASSERT(cuda::launch_sample_rows(d_logits.as<float>(), ld, rows, vocab,
                                       d_params.as<cuda::SampleRowParams>(), d_workspace.as<void>(),
                                       d_out.as<int32_t>(), nullptr));
  CUDA_ASSERT(cudaDeviceSynchronize());
  tokens.assign(static_cast<size_t>(rows), -1);
  CUDA_ASSERT(cudaMemcpy(tokens.data(), d_out.as<void>(), tokens.size() * sizeof(int32_t),
                         cudaMemcpyDeviceToHost));
}

// The CPU sampler's pipeline for one row (Sampler::sample_row without bias and penalties).
// *processed gets the row after the processors (dropped = -inf).
int32_t sample_on_cpu(std::vector<float> row, const cuda::SampleRowParams& p,
                      std::vector<float>* processed = nullptr) {
  if (p.temperature < kGreedyTemperatureEpsilon) return argmax(row);
  std::vector<float> float_scratch;
  std::vector<int32_t> index_scratch;
  apply_temperature(row, p.temperature);
  apply_min_p(row, p.min_p);
  if (p.top_k > 0) apply_top_k(row, p.top_k, float_scratch);
  apply_top_p(row, p.top_p, index_scratch);
  const int32_t token = sample_from_logits(row, p.u, float_scratch);
  if (processed != nullptr) *processed = std::move(row);
  return token;
}

// Whether u * total lies within `rel` (of the total) of a boundary of the CPU's CDF, where a
// different summation order may legitimately pick the neighbouring token.
bool near_cdf_boundary(const std::vector<float>& processed, float u, double rel) {
  const float max_logit = *std::max_element(processed.begin(), processed.end());
  if (max_logit == kNegInf) return false;
  double total = 0.0;
  for (float x : processed)
    total += static_cast<double>(std::exp(x - max_logit));
  const double target = static_cast<double>(u) * total;
  double cumulative = 0.0;
  for (float x : processed) {
    const float w = std::exp(x - max_logit);
    if (w == 0.0f) continue;
    cumulative += static_cast<double>(w);
    if (std::abs(cumulative - target) <= rel * total) return true;
  }
  return false;
}

std::vector<float> random_row(int vocab, std::mt19937& rng, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> row(static_cast<size_t>(vocab));
  for (float& x : row)
    x = normal(rng);
  return row;
}

// LLM-like: a broad bulk plus a few dominant tokens.
std::vector<float> peaked_row(int vocab, std::mt19937& rng) {
  std::vector<float> row = random_row(vocab, rng, 2.0f);
  std::uniform_int_distribution<int> pick(0, vocab - 1);
  for (int j = 0; j < 8; ++j)
    row[static_cast<size_t>(pick(rng))] = 12.0f + 2.0f * static_cast<float>(j % 4);
  return row;
}

// Logits with bf16 precision (as a bf16 lm_head produces): many exact ties.
std::vector<float> quantized_row(int vocab, std::mt19937& rng) {
  std::vector<float> row = random_row(vocab, rng, 3.0f);
  for (float& x : row)
    x = std::round(x * 8.0f) / 8.0f;
  return row;
}

cuda::SampleRowParams greedy_params() {
  return cuda::SampleRowParams{0.0f, 0, 1.0f, 0.0f, 0.5f};
}

TEST(GpuSampling, GreedyMatchesArgmax) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(1234);
  for (int vocab : {1, 7, 13, 1000, 1001, 4099, 151936}) {
    std::vector<std::vector<float>> rows;
    for (int r = 0; r < 6; ++r)
      rows.push_back(random_row(vocab, rng, 3.0f));
    std::uniform_int_distribution<int> pick(0, vocab - 1);
    // Ties at the maximum: the lowest id wins.
    for (int j = 0; j < 5; ++j)
      rows[1][static_cast<size_t>(pick(rng))] = 50.0f;
    // -inf entries, including the first.
    rows[2][0] = kNegInf;
    for (int j = 0; j < vocab / 3; ++j)
      rows[2][static_cast<size_t>(pick(rng))] = kNegInf;
    std::fill(rows[3].begin(), rows[3].end(), kNegInf);  // all -inf: token 0
    std::fill(rows[4].begin(), rows[4].end(), 0.25f);    // all equal: token 0
    rows[5] = quantized_row(vocab, rng);
    std::vector<float> logits;
    for (const auto& row : rows)
      logits.insert(logits.end(), row.begin(), row.end());
    std::vector<cuda::SampleRowParams> params(rows.size(), greedy_params());
    std::vector<int32_t> tokens;
    sample_on_gpu(logits, vocab, vocab, params, tokens);
    if (HasFatalFailure()) return;
    for (size_t r = 0; r < rows.size(); ++r)
      EXPECT_EQ(tokens[r], argmax(rows[r])) << "vocab " << vocab << " row " << r;
  }
}

// Every combination of the parameter grid, on flat, peaked and tied rows, for several u: the
// same token as the CPU, except where u * total lies within 1e-5 of a CDF boundary (then the
// GPU's token must still be one the CPU kept), and such exceptions stay rare.
TEST(GpuSampling, MatchesCpuPipelineOverParamGrid) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(42);
  for (int vocab : {4099, 151936}) {
    std::vector<std::vector<float>> bases = {random_row(vocab, rng, 1.0f), peaked_row(vocab, rng),
                                             quantized_row(vocab, rng),
                                             random_row(vocab, rng, 4.0f)};
    std::vector<float> equal(static_cast<size_t>(vocab), 1.5f);  // ties everywhere: the fallback
    bases.push_back(equal);
    const std::vector<float> us = {0.0f, 0.13f, 0.5f, 0.77f, 0.999f};
    const bool large = vocab > 100000;

    std::vector<float> logits;
    std::vector<cuda::SampleRowParams> params;
    std::vector<size_t> base_of;
    for (size_t b = 0; b < bases.size(); ++b) {
      if (large && (b == 0 || b == 3)) continue;  // flat rows: the small vocab covers them
      for (float temperature : {0.5f, 1.0f, 1.7f}) {
        for (int top_k : {0, 1, 5, 50, 4096}) {
          for (float top_p : {1.0f, 0.9f, 0.5f, 0.05f}) {
            for (float min_p : {0.0f, 0.05f, 0.3f}) {
              for (size_t ui = 0; ui < us.size(); ++ui) {
                if (large && ui % 2 == 1) continue;  // keeps the big-vocab batch small
                params.push_back({temperature, top_k, top_p, min_p, us[ui]});
                base_of.push_back(b);
              }
            }
          }
        }
      }
    }
    logits.reserve(params.size() * static_cast<size_t>(vocab));
    for (size_t b : base_of)
      logits.insert(logits.end(), bases[b].begin(), bases[b].end());
    std::vector<int32_t> tokens;
    sample_on_gpu(logits, vocab, vocab, params, tokens);
    if (HasFatalFailure()) return;

    int exceptions = 0;
    for (size_t r = 0; r < params.size(); ++r) {
      const auto& p = params[r];
      std::vector<float> processed;
      const int32_t expected = sample_on_cpu(bases[base_of[r]], p, &processed);
      if (tokens[r] == expected) continue;
      const std::string what = "vocab " + std::to_string(vocab) + " base " +
                               std::to_string(base_of[r]) + " T " + std::to_string(p.temperature) +
                               " top_k " + std::to_string(p.top_k) + " top_p " +
                               std::to_string(p.top_p) + " min_p " + std::to_string(p.min_p) +
                               " u " + std::to_string(p.u);
      ASSERT_GE(tokens[r], 0) << what;
      ASSERT_LT(tokens[r], vocab) << what;
      EXPECT_NE(processed[static_cast<size_t>(tokens[r])], kNegInf)
          << what << ": GPU token " << tokens[r] << " was dropped by the CPU";
      EXPECT_TRUE(near_cdf_boundary(processed, p.u, 1e-5))
          << what << ": GPU " << tokens[r] << " CPU " << expected;
      ++exceptions;
    }
    EXPECT_LT(static_cast<double>(exceptions), 0.005 * static_cast<double>(params.size()))
        << exceptions << " of " << params.size() << " at vocab " << vocab;
  }
}

// 20000 evenly spaced draws from one row: the GPU's frequencies match the CPU's within 1e-3.
TEST(GpuSampling, DistributionMatchesCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(7);
  const int vocab = 64;
  const std::vector<float> row = random_row(vocab, rng, 1.5f);
  constexpr int kDraws = 20000;
  for (const cuda::SampleRowParams base : {cuda::SampleRowParams{1.0f, 0, 1.0f, 0.0f, 0.0f},
                                           cuda::SampleRowParams{0.8f, 20, 0.9f, 0.01f, 0.0f}}) {
    std::vector<float> logits;
    std::vector<cuda::SampleRowParams> params;
    for (int i = 0; i < kDraws; ++i) {
      cuda::SampleRowParams p = base;
      p.u = (static_cast<float>(i) + 0.5f) / kDraws;
      params.push_back(p);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    std::vector<int32_t> tokens;
    sample_on_gpu(logits, vocab, vocab, params, tokens);
    if (HasFatalFailure()) return;
    std::vector<double> gpu_freq(vocab, 0.0);
    std::vector<double> cpu_freq(vocab, 0.0);
    for (int i = 0; i < kDraws; ++i) {
      ASSERT_GE(tokens[static_cast<size_t>(i)], 0);
      ASSERT_LT(tokens[static_cast<size_t>(i)], vocab);
      gpu_freq[static_cast<size_t>(tokens[static_cast<size_t>(i)])] += 1.0 / kDraws;
      cpu_freq[static_cast<size_t>(sample_on_cpu(row, params[static_cast<size_t>(i)]))] +=
          1.0 / kDraws;
    }
    for (int t = 0; t < vocab; ++t)
      EXPECT_NEAR(gpu_freq[static_cast<size_t>(t)], cpu_freq[static_cast<size_t>(t)], 1e-3)
          << "token " << t;
  }
}

// Greedy and sampled rows in one launch, rows with a stride larger than the vocabulary, and
// padding that must never be read as a token.
TEST(GpuSampling, MixedRowsAndRowStride) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(99);
  for (int vocab : {7, 1001, 32003}) {
    const int64_t ld = vocab + 5;
    const int rows = 24;
    std::vector<float> logits(static_cast<size_t>(rows) * static_cast<size_t>(ld), 1000.0f);
    std::vector<std::vector<float>> row_values;
    std::vector<cuda::SampleRowParams> params;
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    for (int r = 0; r < rows; ++r) {
      row_values.push_back(r % 3 == 2 ? quantized_row(vocab, rng) : peaked_row(vocab, rng));
      std::copy(row_values.back().begin(), row_values.back().end(),
                logits.begin() + static_cast<int64_t>(r) * ld);
      if (r % 4 == 0) {
        params.push_back(greedy_params());
      } else {
        const float temperature = r % 4 == 1 ? 1.0f : 0.7f;
        const int top_k = r % 5 == 0 ? 0 : 3 + r;
        const float top_p = r % 2 == 0 ? 0.8f : 1.0f;
        const float min_p = r % 3 == 0 ? 0.02f : 0.0f;
        params.push_back({temperature, top_k, top_p, min_p, uniform(rng)});
      }
    }
    std::vector<int32_t> tokens;
    sample_on_gpu(logits, ld, vocab, params, tokens);
    if (HasFatalFailure()) return;
    for (int r = 0; r < rows; ++r) {
      const auto& p = params[static_cast<size_t>(r)];
      std::vector<float> processed;
      const int32_t expected = sample_on_cpu(row_values[static_cast<size_t>(r)], p, &processed);
      if (tokens[static_cast<size_t>(r)] == expected) continue;
      ASSERT_GE(tokens[static_cast<size_t>(r)], 0) << "row " << r;
      ASSERT_LT(tokens[static_cast<size_t>(r)], vocab) << "row " << r;
      EXPECT_TRUE(p.temperature >= kGreedyTemperatureEpsilon &&
                  near_cdf_boundary(processed, p.u, 1e-5))
          << "vocab " << vocab << " row " << r << ": GPU " << tokens[static_cast<size_t>(r)]
          << " CPU " << expected;
    }
  }
}

// The split argmax (launch_argmax_rows): the same tokens as the CPU's argmax, on row strides
// that leave rows unaligned to 16 bytes, ties and NaNs placed on and across slice boundaries,
// and launch after launch on the same counters (the last CTA of each row must reset its own).
TEST(GpuSampling, SplitArgmaxMatchesArgmax) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(4321);
  constexpr int kMaxRows = 9;
  DeviceBuffer d_counters(kMaxRows * sizeof(int32_t));
  CUDA_ASSERT(cudaMemset(d_counters.as<void>(), 0, kMaxRows * sizeof(int32_t)));
  for (int vocab : {1, 3, 4096, 4097, 8191, 32003, 151936}) {
    for (int64_t pad : {0, 1, 3}) {
      const int rows = 1 + static_cast<int>((vocab + pad) % kMaxRows);
      const int64_t ld = vocab + pad;
      std::vector<std::vector<float>> values;
      std::uniform_int_distribution<int> pick(0, vocab - 1);
      for (int r = 0; r < rows; ++r) {
        values.push_back(r % 2 == 0 ? quantized_row(vocab, rng) : random_row(vocab, rng, 3.0f));
        std::vector<float>& row = values.back();
        switch (r % 5) {
          case 1:  // ties at the maximum, one of them at a slice's first or last entry
            for (int j = 0; j < 4; ++j)
              row[static_cast<size_t>(pick(rng))] = 40.0f;
            row[static_cast<size_t>(std::min(vocab - 1, 4096))] = 40.0f;
            row[static_cast<size_t>(std::min(vocab - 1, 4095))] = 40.0f;
            break;
          case 2:  // NaNs never win, -inf everywhere else but one finite entry
            std::fill(row.begin(), row.end(), kNegInf);
            for (int j = 0; j < vocab / 2; ++j)
              row[static_cast<size_t>(pick(rng))] = std::numeric_limits<float>::quiet_NaN();
            row[0] = kNegInf;  // the CPU's argmax starts from entry 0, NaN or not
            row[static_cast<size_t>(vocab - 1)] = -3.0f;
            break;
          case 3:  // all NaN: token 0, as on the CPU
            std::fill(row.begin(), row.end(), std::numeric_limits<float>::quiet_NaN());
            break;
          case 4:  // all -inf: the lowest id
            std::fill(row.begin(), row.end(), kNegInf);
            break;
          default:
            break;
        }
      }
      std::vector<float> logits(static_cast<size_t>(rows) * static_cast<size_t>(ld), 1e30f);
      for (int r = 0; r < rows; ++r)
        std::copy(values[static_cast<size_t>(r)].begin(), values[static_cast<size_t>(r)].end(),
                  logits.begin() + r * ld);
      DeviceBuffer d_logits(logits.size() * sizeof(float));
      DeviceBuffer d_partials(cuda::argmax_rows_partials_bytes(rows, vocab));
      DeviceBuffer d_out(static_cast<size_t>(rows) * sizeof(int32_t));
      CUDA_ASSERT(cudaMemcpy(d_logits.as<void>(), logits.data(), logits.size() * sizeof(float),
                             cudaMemcpyHostToDevice));
      for (int launch = 0; launch < 2; ++launch) {
        CUDA_ASSERT(cudaMemset(d_out.as<void>(), 0xff, static_cast<size_t>(rows) * 4));
        CUDA_ASSERT(cuda::launch_argmax_rows(d_logits.as<float>(), ld, rows, vocab,
                                             d_counters.as<int32_t>(), d_partials.as<void>(),
                                             d_out.as<int32_t>(), nullptr));
        CUDA_ASSERT(cudaDeviceSynchronize());
        std::vector<int32_t> tokens(static_cast<size_t>(rows));
        CUDA_ASSERT(cudaMemcpy(tokens.data(), d_out.as<void>(), tokens.size() * sizeof(int32_t),
                               cudaMemcpyDeviceToHost));
        for (int r = 0; r < rows; ++r)
          EXPECT_EQ(tokens[static_cast<size_t>(r)], argmax(values[static_cast<size_t>(r)]))
              << "vocab " << vocab << " ld " << ld << " row " << r << " launch " << launch;
      }
    }
  }
  std::vector<int32_t> counters(kMaxRows, -1);
  CUDA_ASSERT(cudaMemcpy(counters.data(), d_counters.as<void>(), kMaxRows * sizeof(int32_t),
                         cudaMemcpyDeviceToHost));
  EXPECT_EQ(counters, std::vector<int32_t>(kMaxRows, 0));
}

#endif  // LOCUS_HAS_CUDA

}  // namespace
}  // namespace locus
