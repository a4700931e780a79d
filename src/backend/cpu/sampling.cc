// CpuBackend::sample_rows: the host sampler's logits processors applied row by row, so the
// engine's device-sampling path gives the same tokens as its host path on the CPU.
#include <fmt/format.h>

#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "sampling/logits_processors.h"
#include "sampling/sampling_params.h"

namespace locus {

Status CpuBackend::sample_rows(const Tensor& logits, std::span<const SamplingRowParams> rows,
                               std::span<int32_t> tokens) {
  if (logits.dtype() != DType::kF32 || logits.ndim() != 2 || !logits.is_contiguous()) {
    return invalid_argument(fmt::format(
        "sample_rows: logits {} must be contiguous f32 [rows, vocab]", logits.to_string()));
  }
  if (static_cast<size_t>(logits.size(0)) != rows.size() || tokens.size() != rows.size()) {
    return invalid_argument(fmt::format("sample_rows: {} logits rows, {} params, {} tokens",
                                        logits.size(0), rows.size(), tokens.size()));
  }
  const auto vocab = static_cast<size_t>(logits.size(1));
  const float* data = logits.data<float>();
  DrawScratch scratch;
  for (size_t r = 0; r < rows.size(); ++r) {
    const SamplingRowParams& p = rows[r];
    tokens[r] = draw_plain(std::span<const float>(data + r * vocab, vocab), p.temperature, p.top_k,
                           p.top_p, p.min_p, p.u, scratch);
  }
  return Status::ok();
}

}  // namespace locus
