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
  if (tokens.size() != rows.size()) {
    return invalid_argument(
        fmt::format("sample_rows: {} params, {} tokens", rows.size(), tokens.size()));
  }
  LOCUS_RETURN_IF_ERROR(launch_sampling(logits, rows, 0));
  if (rows.empty()) return Status::ok();
  // The one synchronization of a step.
  LOCUS_CUDA_OK("cudaStreamSynchronize", cudaStreamSynchronize(stream_));
  std::memcpy(tokens.data(), sampling_->host_tokens[0], tokens.size_bytes());
  return Status::ok();
}

Status CudaBackend::sample_rows_async(const Tensor& logits, std::span<const SamplingRowParams> rows,
                                      int slot) {
  if (slot != 0 && slot != 1)
    return invalid_argument(fmt::format("sample_rows_async: slot {}", slot));
  return launch_sampling(logits, rows, slot);
}

Status CudaBackend::collect_sampled(int slot, std::span<int32_t> tokens) {
  if ((slot != 0 && slot != 1) || !sampling_ || tokens.size() > sampling_->drawn[slot]) {
    return invalid_argument(
        fmt::format("collect_sampled: {} tokens from slot {}, which holds {}", tokens.size(), slot,
                    sampling_ && (slot == 0 || slot == 1) ? sampling_->drawn[slot] : size_t{0}));
  }
  if (tokens.empty()) return Status::ok();
  LOCUS_CUDA_OK("cudaEventSynchronize", cudaEventSynchronize(sampling_->ready[slot]));
  std::memcpy(tokens.data(), sampling_->host_tokens[slot], tokens.size_bytes());
  return Status::ok();
}

Status CudaBackend::copy_sampled_tokens(int slot, Tensor& dst) {
  if ((slot != 0 && slot != 1) || !sampling_ || dst.dtype() != DType::kI32 ||
      !dst.is_contiguous() || !on_cuda(dst) ||
      static_cast<size_t>(dst.numel()) > sampling_->drawn[slot]) {
    return invalid_argument(
        fmt::format("copy_sampled_tokens: {} from slot {}", dst.to_string(), slot));
  }
  return cuda_status("cudaMemcpyAsync D2D",
                     cudaMemcpyAsync(dst.raw_data(), sampling_->device_tokens[slot].raw_data(),
                                     dst.nbytes(), cudaMemcpyDeviceToDevice, stream_));
}

Expected<std::shared_ptr<uint8_t[]>> CudaBackend::host_staging(size_t bytes) {
  void* p = nullptr;
  LOCUS_CUDA_OK("cudaMallocHost", cudaMallocHost(&p, bytes > 0 ? bytes : 1));
  std::memset(p, 0, bytes);
  return std::shared_ptr<uint8_t[]>(static_cast<uint8_t*>(p), [](uint8_t* q) { cudaFreeHost(q); });
}

Status CudaBackend::launch_sampling(const Tensor& logits, std::span<const SamplingRowParams> rows,
                                    int slot) {
  if (logits.dtype() != DType::kF32 || logits.ndim() != 2 || !logits.is_contiguous() ||
      logits.device().type != DeviceType::kCuda) {
    return invalid_argument(fmt::format(
        "sample_rows on cuda: logits {} must be contiguous f32 [rows, vocab] on the GPU",
        logits.to_string()));
  }
  if (static_cast<size_t>(logits.size(0)) != rows.size()) {
    return invalid_argument(
        fmt::format("sample_rows: {} logits rows, {} params", logits.size(0), rows.size()));
  }
  if (!sampling_) sampling_ = std::make_unique<SamplingBuffers>();
  SamplingBuffers& s = *sampling_;
  s.drawn[slot] = 0;
  if (rows.empty()) return Status::ok();
  const int num_rows = static_cast<int>(rows.size());
  const int vocab = static_cast<int>(logits.size(1));
  if (s.capacity_rows < rows.size()) {
    const size_t cap = std::max<size_t>(rows.size(), 256);
    // Nothing queued may still read the old buffers.
    LOCUS_CUDA_OK("cudaStreamSynchronize", cudaStreamSynchronize(stream_));
    for (int i = 0; i < 2; ++i) {
      if (s.host_params[i] != nullptr) cudaFreeHost(s.host_params[i]);
      if (s.host_tokens[i] != nullptr) cudaFreeHost(s.host_tokens[i]);
      s.host_params[i] = nullptr;
      s.host_tokens[i] = nullptr;
    }
    s.capacity_rows = 0;
    for (int i = 0; i < 2; ++i) {
      LOCUS_CUDA_OK("cudaMallocHost", cudaMallocHost(reinterpret_cast<void**>(&s.host_params[i]),
                                                     cap * sizeof(SamplingRowParams)));
      LOCUS_CUDA_OK("cudaMallocHost", cudaMallocHost(reinterpret_cast<void**>(&s.host_tokens[i]),
                                                     cap * sizeof(int32_t)));
      LOCUS_ASSIGN_OR_RETURN(
          s.device_params[i],
          do_empty({static_cast<int64_t>(cap * sizeof(SamplingRowParams))}, DType::kU8));
      LOCUS_ASSIGN_OR_RETURN(s.device_tokens[i],
                             do_empty({static_cast<int64_t>(cap)}, DType::kI32));
      if (s.ready[i] == nullptr) {
        LOCUS_CUDA_OK("cudaEventCreate",
                      cudaEventCreateWithFlags(&s.ready[i], cudaEventDisableTiming));
      }
    }
    LOCUS_ASSIGN_OR_RETURN(s.argmax_counters, do_empty({static_cast<int64_t>(cap)}, DType::kI32));
    LOCUS_CUDA_OK("cudaMemsetAsync",
                  cudaMemsetAsync(s.argmax_counters.raw_data(), 0, cap * sizeof(int32_t), stream_));
    s.capacity_rows = cap;
  }
  auto* device_tokens = static_cast<int32_t*>(s.device_tokens[slot].raw_data());
  if (all_greedy(rows) && split_argmax_enabled()) {
    const size_t bytes = cuda::argmax_rows_partials_bytes(num_rows, vocab);
    if (!s.argmax_partials.defined() || s.argmax_partials.nbytes() < bytes) {
      LOCUS_ASSIGN_OR_RETURN(s.argmax_partials,
                             do_empty({static_cast<int64_t>(bytes)}, DType::kU8));
    }
    LOCUS_CUDA_OK("argmax_rows", cuda::launch_argmax_rows(
                                     static_cast<const float*>(logits.raw_data()), logits.size(1),
                                     num_rows, vocab, s.argmax_counters.data<int32_t>(),
                                     s.argmax_partials.raw_data(), device_tokens, stream_));
  } else {
    const size_t ws_bytes = cuda::sample_rows_workspace_bytes(num_rows, vocab);
    if (ws_bytes > 0 && (!s.workspace.defined() || s.workspace.nbytes() < ws_bytes)) {
      LOCUS_ASSIGN_OR_RETURN(s.workspace, do_empty({static_cast<int64_t>(ws_bytes)}, DType::kU8));
    }
    std::memcpy(s.host_params[slot], rows.data(), rows.size_bytes());
    LOCUS_CUDA_OK("cudaMemcpyAsync H2D",
                  cudaMemcpyAsync(s.device_params[slot].raw_data(), s.host_params[slot],
                                  rows.size_bytes(), cudaMemcpyHostToDevice, stream_));
    LOCUS_CUDA_OK("sample_rows",
                  cuda::launch_sample_rows(
                      static_cast<const float*>(logits.raw_data()), logits.size(1), num_rows, vocab,
                      static_cast<const cuda::SampleRowParams*>(s.device_params[slot].raw_data()),
                      ws_bytes > 0 ? s.workspace.raw_data() : nullptr, device_tokens, stream_));
  }
  LOCUS_CUDA_OK("cudaMemcpyAsync D2H",
                cudaMemcpyAsync(s.host_tokens[slot], device_tokens, rows.size() * sizeof(int32_t),
                                cudaMemcpyDeviceToHost, stream_));
  LOCUS_CUDA_OK("cudaEventRecord", cudaEventRecord(s.ready[slot], stream_));
  s.drawn[slot] = rows.size();
  return Status::ok();
}

}  // namespace locus
