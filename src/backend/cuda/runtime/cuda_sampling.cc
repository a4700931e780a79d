// CudaBackend::sample_rows: one small upload of the rows' parameters, the sampling kernel over
// the logits where the model left them, and only the tokens copied back (pinned, so the copy
// is a few microseconds instead of a pageable copy of rows x vocab floats). Batches of greedy
// rows take the split argmax instead, which spreads each row over many CTAs.
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#include "backend/cuda/kernels/sampling/sampling_launch.h"
#include "backend/cuda/runtime/cuda_backend.h"
#include "backend/cuda/runtime/cuda_status.h"
#include "sampling/sampling_params.h"

namespace locus {

// The engine-facing struct and the kernel's must be the same bytes: the upload is a memcpy.
static_assert(sizeof(SamplingRowParams) == sizeof(cuda::SampleRowParams));
static_assert(offsetof(SamplingRowParams, temperature) ==
              offsetof(cuda::SampleRowParams, temperature));
static_assert(offsetof(SamplingRowParams, top_k) == offsetof(cuda::SampleRowParams, top_k));
static_assert(offsetof(SamplingRowParams, top_p) == offsetof(cuda::SampleRowParams, top_p));
static_assert(offsetof(SamplingRowParams, min_p) == offsetof(cuda::SampleRowParams, min_p));
static_assert(offsetof(SamplingRowParams, u) == offsetof(cuda::SampleRowParams, u));

namespace {

bool all_greedy(std::span<const SamplingRowParams> rows) {
  return std::all_of(rows.begin(), rows.end(), [](const SamplingRowParams& p) {
    return p.temperature < kGreedyTemperatureEpsilon;
  });
}

// LOCUS_CUDA_SPLIT_ARGMAX=0 sends greedy rows through the one-CTA-per-row sampler (measuring).
bool split_argmax_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("LOCUS_CUDA_SPLIT_ARGMAX");
    return v == nullptr || std::string_view(v) != "0";
  }();
  return on;
}

}  // namespace

Status CudaBackend::sample_rows(const Tensor& logits, std::span<const SamplingRowParams> rows,
                                std::span<int32_t> tokens) {
  auto timer = profile("sample_rows", static_cast<int64_t>(rows.size()));
  if (logits.dtype() != DType::kF32 || logits.ndim() != 2 || !logits.is_contiguous() ||
      logits.device().type != DeviceType::kCuda) {
    return invalid_argument(fmt::format(
        "sample_rows on cuda: logits {} must be contiguous f32 [rows, vocab] on the GPU",
        logits.to_string()));
  }
  if (static_cast<size_t>(logits.size(0)) != rows.size() || tokens.size() != rows.size()) {
    return invalid_argument(fmt::format("sample_rows: {} logits rows, {} params, {} tokens",
                                        logits.size(0), rows.size(), tokens.size()));
  }
  if (rows.empty()) return Status::ok();
  const int num_rows = static_cast<int>(rows.size());
  const int vocab = static_cast<int>(logits.size(1));
  if (!sampling_) sampling_ = std::make_unique<SamplingBuffers>();
  SamplingBuffers& s = *sampling_;
  if (s.capacity_rows < rows.size()) {
    const size_t cap = std::max<size_t>(rows.size(), 256);
    if (s.host_params != nullptr) cudaFreeHost(s.host_params);
    if (s.host_tokens != nullptr) cudaFreeHost(s.host_tokens);
    s.host_params = nullptr;
    s.host_tokens = nullptr;
    s.capacity_rows = 0;
    LOCUS_CUDA_OK("cudaMallocHost", cudaMallocHost(reinterpret_cast<void**>(&s.host_params),
                                                   cap * sizeof(SamplingRowParams)));
    LOCUS_CUDA_OK("cudaMallocHost",
                  cudaMallocHost(reinterpret_cast<void**>(&s.host_tokens), cap * sizeof(int32_t)));
    LOCUS_ASSIGN_OR_RETURN(
        s.device_params,
        do_empty({static_cast<int64_t>(cap * sizeof(SamplingRowParams))}, DType::kU8));
    LOCUS_ASSIGN_OR_RETURN(s.device_tokens, do_empty({static_cast<int64_t>(cap)}, DType::kI32));
    LOCUS_ASSIGN_OR_RETURN(s.argmax_counters, do_empty({static_cast<int64_t>(cap)}, DType::kI32));
    LOCUS_CUDA_OK("cudaMemsetAsync",
                  cudaMemsetAsync(s.argmax_counters.raw_data(), 0, cap * sizeof(int32_t), stream_));
    s.capacity_rows = cap;
  }
  if (all_greedy(rows) && split_argmax_enabled()) {
    const size_t bytes = cuda::argmax_rows_partials_bytes(num_rows, vocab);
    if (!s.argmax_partials.defined() || s.argmax_partials.nbytes() < bytes) {
      LOCUS_ASSIGN_OR_RETURN(s.argmax_partials,
                             do_empty({static_cast<int64_t>(bytes)}, DType::kU8));
    }
    LOCUS_CUDA_OK("argmax_rows",
                  cuda::launch_argmax_rows(
                      static_cast<const float*>(logits.raw_data()), logits.size(1), num_rows, vocab,
                      s.argmax_counters.data<int32_t>(), s.argmax_partials.raw_data(),
                      static_cast<int32_t*>(s.device_tokens.raw_data()), stream_));
    return copy_tokens_back(tokens);
  }
  const size_t ws_bytes = cuda::sample_rows_workspace_bytes(num_rows, vocab);
  if (ws_bytes > 0 && (!s.workspace.defined() || s.workspace.nbytes() < ws_bytes)) {
    LOCUS_ASSIGN_OR_RETURN(s.workspace, do_empty({static_cast<int64_t>(ws_bytes)}, DType::kU8));
  }
  std::memcpy(s.host_params, rows.data(), rows.size_bytes());
  LOCUS_CUDA_OK("cudaMemcpyAsync H2D",
                cudaMemcpyAsync(s.device_params.raw_data(), s.host_params, rows.size_bytes(),
                                cudaMemcpyHostToDevice, stream_));
  LOCUS_CUDA_OK("sample_rows",
                cuda::launch_sample_rows(
                    static_cast<const float*>(logits.raw_data()), logits.size(1), num_rows, vocab,
                    static_cast<const cuda::SampleRowParams*>(s.device_params.raw_data()),
                    ws_bytes > 0 ? s.workspace.raw_data() : nullptr,
                    static_cast<int32_t*>(s.device_tokens.raw_data()), stream_));
  return copy_tokens_back(tokens);
}

Status CudaBackend::copy_tokens_back(std::span<int32_t> tokens) {
  SamplingBuffers& s = *sampling_;
  LOCUS_CUDA_OK("cudaMemcpyAsync D2H",
                cudaMemcpyAsync(s.host_tokens, s.device_tokens.raw_data(), tokens.size_bytes(),
                                cudaMemcpyDeviceToHost, stream_));
  LOCUS_CUDA_OK("cudaStreamSynchronize", cudaStreamSynchronize(stream_));
  std::memcpy(tokens.data(), s.host_tokens, tokens.size_bytes());
  return Status::ok();
}

}  // namespace locus
