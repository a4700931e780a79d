// The MoE kernels (routing, and the experts chain align -> gate/up -> down -> combine) against
// the CPU backend, the reference oracle, on the same bf16-rounded inputs. SKIPPED where no GPU
// is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/device.h"
#include "core/float_convert.h"
#include "gpu/gpu_test_util.h"
#include "unit/ops_test_util.h"

#ifdef LOCUS_HAS_CUDA
#include <cuda_runtime_api.h>

#include "backend/cuda/kernels/moe/moe_launch.h"
#endif

namespace locus {
namespace {

#ifndef LOCUS_HAS_CUDA

TEST(GpuMoe, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#else

bool has_gpu(std::string& reason) {
  DeviceReport report = query_devices();
  reason = report.cuda_unavailable_reason;
  return !report.gpus.empty();
}

// A device allocation that frees itself.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&ptr_, std::max<size_t>(bytes, 1)) != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

template <typename T>
cudaError_t upload(DeviceBuffer& dst, const std::vector<T>& src) {
  return cudaMemcpy(dst.get(), src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice);
}

template <typename T>
cudaError_t download(std::vector<T>& dst, const DeviceBuffer& src) {
  return cudaMemcpy(dst.data(), src.get(), dst.size() * sizeof(T), cudaMemcpyDeviceToHost);
}

// ---- routing ---------------------------------------------------------------------------------

struct RouteCase {
  const char* name;
  int experts;
  int top_k;
  cuda::MoeScoring scoring;
  cuda::MoeTopk method;
  int n_group;
  int topk_group;
  bool renormalize;
  float scale;
  bool has_bias;
};

MoeRouting cpu_routing(const RouteCase& c) {
  MoeRouting r;
  r.scoring =
      c.scoring == cuda::MoeScoring::kSoftmax ? ScoringFunc::kSoftmax : ScoringFunc::kSigmoid;
  r.topk_method = c.method == cuda::MoeTopk::kGreedy               ? TopkMethod::kGreedy
                  : c.method == cuda::MoeTopk::kGroupLimitedGreedy ? TopkMethod::kGroupLimitedGreedy
                                                                   : TopkMethod::kNoauxTc;
  r.top_k = c.top_k;
  r.n_group = c.n_group;
  r.topk_group = c.topk_group;
  r.renormalize = c.renormalize;
  r.routed_scaling_factor = c.scale;
  return r;
}

// Both sides round differently in the last bits (f32 here, f64 exp on the CPU), so a token is
// only a fair test when the selection does not hinge on a near-tie: every decision boundary
// (kept vs dropped group, each adjacent pair of the top k + 1) must differ by far more than
// rounding. Recomputed in f64 from the definitions.
bool is_well_separated(const float* logits, const std::vector<float>& bias, const RouteCase& c) {
  const int e_count = c.experts;
  std::vector<double> choice(static_cast<size_t>(e_count));
  double max_logit = -INFINITY;
  for (int e = 0; e < e_count; ++e)
    max_logit = std::max(max_logit, static_cast<double>(logits[e]));
  double sum = 0.0;
  for (int e = 0; e < e_count; ++e)
    sum += std::exp(logits[e] - max_logit);
  for (int e = 0; e < e_count; ++e) {
    const double l = logits[e];
    double score = c.scoring == cuda::MoeScoring::kSoftmax ? std::exp(l - max_logit) / sum
                                                           : 1.0 / (1.0 + std::exp(-l));
    if (!bias.empty()) score += bias[static_cast<size_t>(e)];
    choice[static_cast<size_t>(e)] = score;
  }
  auto separated = [](double a, double b) {
    return std::fabs(a - b) > 1e-5 * std::max(std::fabs(a), std::fabs(b)) + 1e-6;
  };
  std::vector<double> candidates;
  if (c.method != cuda::MoeTopk::kGreedy && c.n_group > 1) {
    const int group_size = e_count / c.n_group;
    std::vector<std::pair<double, int>> groups;
    for (int g = 0; g < c.n_group; ++g) {
      std::vector<double> members(choice.begin() + g * group_size,
                                  choice.begin() + (g + 1) * group_size);
      std::sort(members.begin(), members.end(), std::greater<double>());
      groups.emplace_back(
          c.method == cuda::MoeTopk::kNoauxTc ? members[0] + members[1] : members[0], g);
    }
    std::sort(groups.begin(), groups.end(), std::greater<>());
    if (c.topk_group < c.n_group && !separated(groups[static_cast<size_t>(c.topk_group - 1)].first,
                                               groups[static_cast<size_t>(c.topk_group)].first)) {
      return false;
    }
    for (int i = 0; i < c.topk_group; ++i) {
      const int g = groups[static_cast<size_t>(i)].second;
      candidates.insert(candidates.end(), choice.begin() + g * group_size,
                        choice.begin() + (g + 1) * group_size);
    }
  } else {
    candidates = choice;
  }
  std::sort(candidates.begin(), candidates.end(), std::greater<double>());
  for (int i = 0; i < c.top_k && i + 1 < static_cast<int>(candidates.size()); ++i) {
    if (!separated(candidates[static_cast<size_t>(i)], candidates[static_cast<size_t>(i + 1)])) {
      return false;
    }
  }
  return true;
}

// integer_logits: logits rounded to integers, so many experts tie exactly (same logit, same
// score bits on both sides) and the picks at the boundary depend only on the tie rule: the
// lower expert id first.
void check_route(const RouteCase& c, int tokens, uint64_t seed, bool integer_logits = false) {
  SCOPED_TRACE(std::string(c.name) + " tokens " + std::to_string(tokens) +
               (integer_logits ? " integer logits" : ""));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f,
                                         c.scoring == cuda::MoeScoring::kSoftmax ? 1.0f : 1.5f);
  std::vector<float> bias;
  if (c.has_bias) {
    std::uniform_real_distribution<float> uniform(-0.05f, 0.05f);
    for (int e = 0; e < c.experts; ++e)
      bias.push_back(uniform(rng));
  }
  std::vector<float> logits(static_cast<size_t>(tokens) * c.experts);
  for (int t = 0; t < tokens; ++t) {
    float* row = logits.data() + static_cast<size_t>(t) * c.experts;
    int attempts = 0;
    do {
      ASSERT_LT(attempts++, 100) << "no well-separated logits for token " << t;
      for (int e = 0; e < c.experts; ++e)
        row[e] = integer_logits ? std::round(normal(rng)) : normal(rng);
    } while (!integer_logits && !is_well_separated(row, bias, c));
  }

  CpuBackend cpu;
  Tensor cpu_ids = Tensor::empty({tokens, c.top_k}, DType::kI32).value();
  Tensor cpu_weights = Tensor::empty({tokens, c.top_k}, DType::kF32).value();
  const Tensor bias_t = bias.empty() ? Tensor() : testing::from_floats(bias, {c.experts});
  const Status s = cpu.moe_route(testing::from_floats(logits, {tokens, c.experts}), bias_t,
                                 cpu_routing(c), cpu_ids, cpu_weights);
  ASSERT_TRUE(s.is_ok()) << s.to_string();

  const size_t outputs = static_cast<size_t>(tokens) * c.top_k;
  DeviceBuffer d_logits(logits.size() * sizeof(float));
  DeviceBuffer d_bias(std::max<size_t>(bias.size(), 1) * sizeof(float));
  DeviceBuffer d_ids(outputs * sizeof(int32_t));
  DeviceBuffer d_weights(outputs * sizeof(float));
  CUDA_ASSERT(upload(d_logits, logits));
  if (!bias.empty()) CUDA_ASSERT(upload(d_bias, bias));
  CUDA_ASSERT(cudaMemset(d_ids.get(), 0xFF, d_ids.bytes()));
  CUDA_ASSERT(cudaMemset(d_weights.get(), 0xFF, d_weights.bytes()));

  cuda::MoeRouteArgs args;
  args.logits = d_logits.as<float>();
  args.correction_bias = bias.empty() ? nullptr : d_bias.as<float>();
  args.topk_ids = d_ids.as<int32_t>();
  args.topk_weights = d_weights.as<float>();
  args.num_tokens = tokens;
  args.num_experts = c.experts;
  args.top_k = c.top_k;
  args.scoring = c.scoring;
  args.topk_method = c.method;
  args.n_group = c.n_group;
  args.topk_group = c.topk_group;
  args.renormalize = c.renormalize;
  args.routed_scaling_factor = c.scale;
  CUDA_ASSERT(cuda::launch_moe_route(args, nullptr));
  CUDA_ASSERT(cudaDeviceSynchronize());

  std::vector<int32_t> gpu_ids(outputs);
  std::vector<float> gpu_weights(outputs);
  CUDA_ASSERT(download(gpu_ids, d_ids));
  CUDA_ASSERT(download(gpu_weights, d_weights));
  int mismatches = 0;
  for (size_t i = 0; i < outputs && mismatches < 10; ++i) {
    const int32_t want_id = cpu_ids.data<int32_t>()[i];
    const float want = cpu_weights.data<float>()[i];
    const bool same_id = gpu_ids[i] == want_id;
    const bool close = std::fabs(gpu_weights[i] - want) <= 1e-5f * std::fabs(want);
    if (!same_id || !close) {
      ++mismatches;
      ADD_FAILURE() << "token " << i / c.top_k << " slot " << i % c.top_k << ": gpu expert "
                    << gpu_ids[i] << " weight " << gpu_weights[i] << ", cpu expert " << want_id
                    << " weight " << want;
    }
  }
}

const RouteCase kRouteCases[] = {
    {"softmax_greedy_e8_k2", 8, 2, cuda::MoeScoring::kSoftmax, cuda::MoeTopk::kGreedy, 1, 1, false,
     1.0f, false},
    {"softmax_renorm_e128_k8", 128, 8, cuda::MoeScoring::kSoftmax, cuda::MoeTopk::kGreedy, 1, 1,
     true, 1.0f, false},
    {"sigmoid_noaux_tc_e256_k8", 256, 8, cuda::MoeScoring::kSigmoid, cuda::MoeTopk::kNoauxTc, 8, 4,
     true, 2.5f, true},
    {"softmax_group_limited_e64_k6", 64, 6, cuda::MoeScoring::kSoftmax,
     cuda::MoeTopk::kGroupLimitedGreedy, 8, 3, false, 16.0f, false},
    {"sigmoid_noaux_tc_e384_k8_kimi", 384, 8, cuda::MoeScoring::kSigmoid, cuda::MoeTopk::kNoauxTc,
     1, 1, true, 2.827f, true},
    {"sigmoid_bias_ungrouped_e256_k8_minimax", 256, 8, cuda::MoeScoring::kSigmoid,
     cuda::MoeTopk::kNoauxTc, 1, 1, true, 1.0f, true},
    {"sigmoid_greedy_e1024_k32", 1024, 32, cuda::MoeScoring::kSigmoid, cuda::MoeTopk::kGreedy, 1, 1,
     true, 1.0f, false},
};

TEST(GpuMoe, RouteMatchesCpu) {
  std::string reason;
  if (!has_gpu(reason)) GTEST_SKIP() << "no CUDA GPU: " << reason;
  uint64_t seed = 100;
  for (const RouteCase& c : kRouteCases) {
    for (int tokens : {1, 7, 1000})
      check_route(c, tokens, ++seed);
  }
}

TEST(GpuMoe, RouteTiesGoToTheLowerExpertId) {
  std::string reason;
  if (!has_gpu(reason)) GTEST_SKIP() << "no CUDA GPU: " << reason;
  uint64_t seed = 500;
  for (const RouteCase& c : kRouteCases) {
    if (c.method != cuda::MoeTopk::kGreedy || c.has_bias) continue;  // ungrouped, unbiased
    for (int tokens : {1, 33})
      check_route(c, tokens, ++seed, /*integer_logits=*/true);
  }
}

TEST(GpuMoe, RouteRejectsUnsupportedShapes) {
  std::string reason;
  if (!has_gpu(reason)) GTEST_SKIP() << "no CUDA GPU: " << reason;
  DeviceBuffer d(1 << 16);
  cuda::MoeRouteArgs args;
  args.logits = d.as<float>();
  args.topk_ids = d.as<int32_t>();
  args.topk_weights = d.as<float>();
  args.num_tokens = 1;
  args.num_experts = 64;
  args.top_k = 33;  // more than a warp's lanes
  EXPECT_EQ(cuda::launch_moe_route(args, nullptr), cudaErrorInvalidValue);
  args.top_k = 4;
  args.num_experts = 2048;
  EXPECT_EQ(cuda::launch_moe_route(args, nullptr), cudaErrorInvalidValue);
  args.num_experts = 60;
  args.topk_method = cuda::MoeTopk::kNoauxTc;
  args.n_group = 8;  // 60 experts do not split into 8 groups
  args.topk_group = 2;
  EXPECT_EQ(cuda::launch_moe_route(args, nullptr), cudaErrorInvalidValue);
  cudaGetLastError();
}

// ---- experts ---------------------------------------------------------------------------------

struct ExpertsCase {
  const char* name;
  int hidden;
  int inter;
  int experts;
  int top_k;
  int tokens;
  int x_pad = 0;          // x row stride = hidden + x_pad (the gap is poisoned)
  int one_expert = -1;    // >= 0: every assignment goes to this expert (imbalance)
  int compare_every = 1;  // compare every n-th token with the CPU (keeps the reference quick)
};

// Expert weights as shifted windows of one random pool per projection kind: every (expert,
// matrix) starts at its own 256-byte-aligned offset, so each expert computes a different
// function (a wrong expert index shows), while the pools stay small for CPU and GPU alike.
constexpr int64_t kPoolShift = 37 * 128;  // elements between consecutive matrices

struct WeightPool {
  Tensor host;          // f32, bf16-exact values, for the CPU
  DeviceBuffer device;  // the same values as bf16
  explicit WeightPool(int64_t elements) : device(static_cast<size_t>(elements) * 2) {}
};

void fill_pool(WeightPool& pool, int64_t elements, float scale, uint64_t seed) {
  pool.host = Tensor::empty({elements}, DType::kF32).value();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<uint16_t> bits(static_cast<size_t>(elements));
  float* values = pool.host.data<float>();
  for (int64_t i = 0; i < elements; ++i) {
    bits[static_cast<size_t>(i)] = f32_to_bf16_bits(normal(rng));
    values[i] = bf16_bits_to_f32(bits[static_cast<size_t>(i)]);
  }
  ASSERT_EQ(upload(pool.device, bits), cudaSuccess);
}

Tensor pool_view(const WeightPool& pool, int64_t offset, int64_t rows, int64_t cols) {
  return Tensor::from_storage(pool.host.storage(), {rows, cols}, DType::kF32,
                              static_cast<size_t>(offset) * sizeof(float))
      .value();
}

// Runs the GPU chain once with poisoned output (and, when asked, poisoned workspace).
void run_gpu_experts(const cuda::MoeExpertsArgs& base, DeviceBuffer& d_out, size_t out_elems,
                     bool poison_workspace, cudaStream_t stream, std::vector<uint16_t>& out) {
  cuda::MoeExpertsArgs args = base;
  // On `stream` itself: a non-blocking stream does not wait for the legacy default stream.
  if (poison_workspace) {
    CUDA_ASSERT(cudaMemsetAsync(args.workspace, 0xFF, args.workspace_bytes, stream));
  }
  CUDA_ASSERT(cudaMemsetAsync(d_out.get(), 0xFF, d_out.bytes(), stream));
  CUDA_ASSERT(cuda::launch_moe_experts(args, stream));
  CUDA_ASSERT(cudaStreamSynchronize(stream));
  out.resize(out_elems);
  CUDA_ASSERT(download(out, d_out));
}

void check_experts(const ExpertsCase& c, uint64_t seed) {
  SCOPED_TRACE(std::string(c.name) + " tokens " + std::to_string(c.tokens));
  const int64_t hidden = c.hidden;
  const int64_t inter = c.inter;
  const int64_t matrix = hidden * inter;
  WeightPool in_pool(matrix + 2 * c.experts * kPoolShift);
  WeightPool down_pool(matrix + c.experts * kPoolShift);
  fill_pool(in_pool, matrix + 2 * c.experts * kPoolShift,
            1.0f / std::sqrt(static_cast<float>(hidden)), seed);
  fill_pool(down_pool, matrix + c.experts * kPoolShift, 1.0f / std::sqrt(static_cast<float>(inter)),
            seed + 1);

  std::vector<ExpertWeights> cpu_experts(static_cast<size_t>(c.experts));
  std::vector<const void*> gate_ptrs;
  std::vector<const void*> up_ptrs;
  std::vector<const void*> down_ptrs;
  for (int e = 0; e < c.experts; ++e) {
    const int64_t gate_offset = (2 * e) * kPoolShift;
    const int64_t up_offset = (2 * e + 1) * kPoolShift;
    const int64_t down_offset = e * kPoolShift;
    ExpertWeights& w = cpu_experts[static_cast<size_t>(e)];
    w.gate.weight = pool_view(in_pool, gate_offset, inter, hidden);
    w.up.weight = pool_view(in_pool, up_offset, inter, hidden);
    w.down.weight = pool_view(down_pool, down_offset, hidden, inter);
    gate_ptrs.push_back(in_pool.device.as<uint16_t>() + gate_offset);
    up_ptrs.push_back(in_pool.device.as<uint16_t>() + up_offset);
    down_ptrs.push_back(down_pool.device.as<uint16_t>() + down_offset);
  }

  // Tokens and routing.
  std::mt19937_64 rng(seed + 2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.1f, 1.0f);
  const int tokens = c.tokens;
  std::vector<float> x(static_cast<size_t>(tokens * hidden));
  std::vector<uint16_t> x_bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x_bits[i] = f32_to_bf16_bits(normal(rng));
    x[i] = bf16_bits_to_f32(x_bits[i]);
  }
  std::vector<int32_t> ids(static_cast<size_t>(tokens) * c.top_k);
  std::vector<float> weights(ids.size());
  std::vector<int32_t> order(static_cast<size_t>(c.experts));
  for (int t = 0; t < tokens; ++t) {
    std::iota(order.begin(), order.end(), 0);
    for (int j = 0; j < c.top_k; ++j) {
      // Distinct experts per token (partial Fisher-Yates), as a router gives.
      std::uniform_int_distribution<int> pick(j, c.experts - 1);
      std::swap(order[static_cast<size_t>(j)], order[static_cast<size_t>(pick(rng))]);
      const size_t slot = static_cast<size_t>(t) * c.top_k + j;
      ids[slot] = c.one_expert >= 0 ? c.one_expert : order[static_cast<size_t>(j)];
      weights[slot] = uniform(rng);
    }
  }

  // Device inputs.
  const int64_t x_stride = hidden + c.x_pad;
  DeviceBuffer d_x(static_cast<size_t>(tokens * x_stride) * 2);
  DeviceBuffer d_ids(ids.size() * sizeof(int32_t));
  DeviceBuffer d_weights(weights.size() * sizeof(float));
  DeviceBuffer d_gate(gate_ptrs.size() * sizeof(void*));
  DeviceBuffer d_up(up_ptrs.size() * sizeof(void*));
  DeviceBuffer d_down(down_ptrs.size() * sizeof(void*));
  DeviceBuffer d_out(static_cast<size_t>(tokens * hidden) * 2);
  CUDA_ASSERT(cudaMemset(d_x.get(), 0xFF, d_x.bytes()));  // the stride gap reads as NaN
  CUDA_ASSERT(cudaMemcpy2D(d_x.get(), static_cast<size_t>(x_stride) * 2, x_bits.data(),
                           static_cast<size_t>(hidden) * 2, static_cast<size_t>(hidden) * 2,
                           static_cast<size_t>(tokens), cudaMemcpyHostToDevice));
  CUDA_ASSERT(upload(d_ids, ids));
  CUDA_ASSERT(upload(d_weights, weights));
  CUDA_ASSERT(upload(d_gate, gate_ptrs));
  CUDA_ASSERT(upload(d_up, up_ptrs));
  CUDA_ASSERT(upload(d_down, down_ptrs));

  cuda::MoeExpertsArgs args;
  args.x = d_x.get();
  args.x_row_stride = x_stride;
  args.topk_ids = d_ids.as<int32_t>();
  args.topk_weights = d_weights.as<float>();
  args.gate_w = d_gate.as<const void*>();
  args.up_w = d_up.as<const void*>();
  args.down_w = d_down.as<const void*>();
  args.out = d_out.get();
  args.num_tokens = tokens;
  args.num_experts = c.experts;
  args.top_k = c.top_k;
  args.hidden = c.hidden;
  args.inter = c.inter;
  const size_t workspace_bytes = cuda::moe_experts_workspace_bytes(args);
  ASSERT_GT(workspace_bytes, 0u);
  DeviceBuffer d_workspace(workspace_bytes);
  ASSERT_NE(d_workspace.get(), nullptr);
  args.workspace = d_workspace.get();
  args.workspace_bytes = workspace_bytes;

  // A workspace one byte short is refused before anything runs.
  cuda::MoeExpertsArgs short_args = args;
  short_args.workspace_bytes = workspace_bytes - 1;
  EXPECT_EQ(cuda::launch_moe_experts(short_args, nullptr), cudaErrorInvalidValue);

  const size_t out_elems = static_cast<size_t>(tokens * hidden);
  std::vector<uint16_t> first;
  std::vector<uint16_t> second;
  run_gpu_experts(args, d_out, out_elems, /*poison_workspace=*/true, nullptr, first);
  if (::testing::Test::HasFatalFailure()) return;
  // Same inputs again: bit-identical (no atomics decide an order or a sum).
  run_gpu_experts(args, d_out, out_elems, /*poison_workspace=*/false, nullptr, second);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_TRUE(first == second) << "two runs on the same inputs differ";

  std::vector<float> gpu(out_elems);
  int64_t nans = 0;
  for (size_t i = 0; i < out_elems; ++i) {
    gpu[i] = bf16_bits_to_f32(first[i]);
    if (std::isnan(gpu[i])) ++nans;
  }
  EXPECT_EQ(nans, 0) << "output elements left unwritten or poisoned";

  // CPU reference on every compare_every-th token (each token's result depends on its row only).
  std::vector<int64_t> picked;
  for (int64_t t = 0; t < tokens; t += c.compare_every)
    picked.push_back(t);
  const int64_t n = static_cast<int64_t>(picked.size());
  Tensor cpu_x = Tensor::empty({n, hidden}, DType::kF32).value();
  Tensor cpu_ids = Tensor::empty({n, c.top_k}, DType::kI32).value();
  Tensor cpu_weights = Tensor::empty({n, c.top_k}, DType::kF32).value();
  std::vector<float> gpu_picked;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = picked[static_cast<size_t>(i)];
    std::memcpy(cpu_x.data<float>() + i * hidden, x.data() + t * hidden,
                static_cast<size_t>(hidden) * sizeof(float));
    std::memcpy(cpu_ids.data<int32_t>() + i * c.top_k, ids.data() + t * c.top_k,
                static_cast<size_t>(c.top_k) * sizeof(int32_t));
    std::memcpy(cpu_weights.data<float>() + i * c.top_k, weights.data() + t * c.top_k,
                static_cast<size_t>(c.top_k) * sizeof(float));
    gpu_picked.insert(gpu_picked.end(), gpu.begin() + t * hidden, gpu.begin() + (t + 1) * hidden);
  }
  CpuBackend cpu;
  Tensor cpu_out = Tensor::empty({n, hidden}, DType::kF32).value();
  const Status s = cpu.moe_experts(cpu_x, cpu_ids, cpu_weights, cpu_experts, cpu_out);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  const std::vector<float> want = testing::to_floats(cpu_out);
  const double err = testing::rel_l2(gpu_picked, want);
  EXPECT_LT(err, 1e-2) << "max abs diff " << testing::max_abs_diff(gpu_picked, want);
  std::printf("  %-28s T=%-5d rel_l2 %.2e (%lld of %d tokens compared)\n", c.name, tokens, err,
              static_cast<long long>(n), tokens);
}

TEST(GpuMoe, ExpertsFixtureShapes) {
  std::string reason;
  if (!has_gpu(reason)) GTEST_SKIP() << "no CUDA GPU: " << reason;
  uint64_t seed = 1000;
  // hidden 128 inter 48 E 8 k 2: inter is no multiple of 16/32/64 (ragged N and K edges).
  for (int tokens : {1, 5, 33, 200, 600})  // BLOCK_M 16, 16, 16, 64, 128
    check_experts({"h128_i48_e8_k2", 128, 48, 8, 2, tokens}, seed += 10);
  for (int tokens : {1, 40, 300})  // BLOCK_M 16, 16, 128
    check_experts({"h256_i96_e16_k4", 256, 96, 16, 4, tokens}, seed += 10);
  // hidden 72, inter 40: K a multiple of 8 but not of 16 (half a mma step is zero padding).
  check_experts({"h72_i40_e4_k2", 72, 40, 4, 2, 9}, seed += 10);
}

TEST(GpuMoe, ExpertsImbalanceAndStride) {
  std::string reason;
  if (!has_gpu(reason)) GTEST_SKIP() << "no CUDA GPU: " << reason;
  uint64_t seed = 2000;
  check_experts({"one_expert_h256_e16_k4", 256, 96, 16, 4, 100, 0, 11}, seed += 10);
  check_experts({"one_expert_h128_e8_k2", 128, 48, 8, 2, 700, 0, 3}, seed += 10);
  check_experts({"x_stride_h128_e8_k2", 128, 48, 8, 2, 33, 24}, seed += 10);
  check_experts({"x_stride_h256_e16_k4", 256, 96, 16, 4, 300, 64}, seed += 10);
}

TEST(GpuMoe, ExpertsQwen3Shape) {
  std::string reason;
  if (!has_gpu(reason)) GTEST_SKIP() << "no CUDA GPU: " << reason;
  uint64_t seed = 3000;
  // qwen3-30b-a3b: hidden 2048, moe_intermediate 768, 128 experts, top-8.
  for (int tokens : {1, 16, 256})  // BLOCK_M 16
    check_experts({"qwen3_30b_a3b", 2048, 768, 128, 8, tokens}, seed += 10);
  check_experts({"qwen3_30b_a3b", 2048, 768, 128, 8, 1024, 0, -1, 4}, seed += 10);  // BLOCK_M 64
  check_experts({"qwen3_30b_a3b", 2048, 768, 128, 8, 2048, 0, -1, 8}, seed += 10);  // 128
  check_experts({"qwen3_one_expert", 2048, 768, 128, 8, 64, 0, 5}, seed += 10);
  check_experts({"qwen3_x_stride", 2048, 768, 128, 8, 16, 128}, seed += 10);
}

// The chain captured in a CUDA graph and replayed gives the same bits as a direct launch.
TEST(GpuMoe, ExpertsCaptureInAGraph) {
  std::string reason;
  if (!has_gpu(reason)) GTEST_SKIP() << "no CUDA GPU: " << reason;
  const int hidden = 256, inter = 96, experts = 16, top_k = 4, tokens = 40;
  WeightPool in_pool(hidden * inter + 2 * experts * kPoolShift);
  WeightPool down_pool(hidden * inter + experts * kPoolShift);
  fill_pool(in_pool, hidden * inter + 2 * experts * kPoolShift, 0.06f, 51);
  fill_pool(down_pool, hidden * inter + experts * kPoolShift, 0.1f, 52);
  std::vector<const void*> gate_ptrs, up_ptrs, down_ptrs;
  for (int e = 0; e < experts; ++e) {
    gate_ptrs.push_back(in_pool.device.as<uint16_t>() + 2 * e * kPoolShift);
    up_ptrs.push_back(in_pool.device.as<uint16_t>() + (2 * e + 1) * kPoolShift);
    down_ptrs.push_back(down_pool.device.as<uint16_t>() + e * kPoolShift);
  }
  std::mt19937_64 rng(53);
  std::vector<uint16_t> x_bits(static_cast<size_t>(tokens * hidden));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& b : x_bits)
    b = f32_to_bf16_bits(normal(rng));
  std::vector<int32_t> ids(static_cast<size_t>(tokens * top_k));
  std::vector<float> weights(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int32_t>((i * 7 + i / top_k) % experts);
    weights[i] = 0.25f + 0.01f * static_cast<float>(i % 13);
  }
  DeviceBuffer d_x(x_bits.size() * 2), d_ids(ids.size() * 4), d_weights(weights.size() * 4);
  DeviceBuffer d_gate(experts * sizeof(void*)), d_up(experts * sizeof(void*)),
      d_down(experts * sizeof(void*)), d_out(static_cast<size_t>(tokens * hidden) * 2);
  CUDA_ASSERT(upload(d_x, x_bits));
  CUDA_ASSERT(upload(d_ids, ids));
  CUDA_ASSERT(upload(d_weights, weights));
  CUDA_ASSERT(upload(d_gate, gate_ptrs));
  CUDA_ASSERT(upload(d_up, up_ptrs));
  CUDA_ASSERT(upload(d_down, down_ptrs));
  cuda::MoeExpertsArgs args;
  args.x = d_x.get();
  args.x_row_stride = hidden;
  args.topk_ids = d_ids.as<int32_t>();
  args.topk_weights = d_weights.as<float>();
  args.gate_w = d_gate.as<const void*>();
  args.up_w = d_up.as<const void*>();
  args.down_w = d_down.as<const void*>();
  args.out = d_out.get();
  args.num_tokens = tokens;
  args.num_experts = experts;
  args.top_k = top_k;
  args.hidden = hidden;
  args.inter = inter;
  args.workspace_bytes = cuda::moe_experts_workspace_bytes(args);
  DeviceBuffer d_workspace(args.workspace_bytes);
  args.workspace = d_workspace.get();

  cudaStream_t stream = nullptr;
  CUDA_ASSERT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const size_t out_elems = static_cast<size_t>(tokens * hidden);
  std::vector<uint16_t> direct;
  run_gpu_experts(args, d_out, out_elems, true, stream, direct);
  if (::testing::Test::HasFatalFailure()) return;

  CUDA_ASSERT(cudaMemsetAsync(d_out.get(), 0xFF, d_out.bytes(), stream));
  CUDA_ASSERT(cudaMemsetAsync(d_workspace.get(), 0xFF, d_workspace.bytes(), stream));
  CUDA_ASSERT(cudaStreamSynchronize(stream));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_ASSERT(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const cudaError_t launched = cuda::launch_moe_experts(args, stream);
  CUDA_ASSERT(cudaStreamEndCapture(stream, &graph));
  CUDA_ASSERT(launched);
  CUDA_ASSERT(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_ASSERT(cudaGraphLaunch(exec, stream));
  CUDA_ASSERT(cudaStreamSynchronize(stream));
  std::vector<uint16_t> replayed(out_elems);
  CUDA_ASSERT(download(replayed, d_out));
  EXPECT_TRUE(replayed == direct) << "graph replay differs from the direct launch";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(GpuMoe, ExpertsRejectUnsupportedShapes) {
  std::string reason;
  if (!has_gpu(reason)) GTEST_SKIP() << "no CUDA GPU: " << reason;
  DeviceBuffer d(1 << 20);
  cuda::MoeExpertsArgs args;
  args.x = d.get();
  args.x_row_stride = 128;
  args.topk_ids = d.as<int32_t>();
  args.topk_weights = d.as<float>();
  args.gate_w = d.as<const void*>();
  args.up_w = d.as<const void*>();
  args.down_w = d.as<const void*>();
  args.out = d.get();
  args.num_tokens = 4;
  args.num_experts = 8;
  args.top_k = 2;
  args.hidden = 128;
  args.inter = 44;  // not a multiple of 8
  args.workspace = d.get();
  args.workspace_bytes = d.bytes();
  EXPECT_EQ(cuda::launch_moe_experts(args, nullptr), cudaErrorInvalidValue);
  args.inter = 48;
  args.x_row_stride = 100;  // shorter than a row
  EXPECT_EQ(cuda::launch_moe_experts(args, nullptr), cudaErrorInvalidValue);
  cudaGetLastError();
}

#endif  // LOCUS_HAS_CUDA

}  // namespace
}  // namespace locus
