// Host entry point of the GPU sampler: one token per row of f32 logits, with the CPU sampler's
// semantics (sampling/logits_processors.h: temperature, min_p, top_k, top_p, then one uniform
// draw walking the CDF in token-id order). No host synchronization, no allocation: capturable.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace locus::cuda {

// One row's sampling parameters (device memory, one per row). temperature < 1e-5 (our
// kGreedyTemperatureEpsilon) means greedy. top_k <= 0: off. top_p >= 1: off. min_p <= 0: off.
// u: the row's uniform draw in [0, 1).
struct SampleRowParams {
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
  float u;
};

// Bytes of device workspace launch_sample_rows needs for num_rows rows of vocab entries
// (may be 0).
size_t sample_rows_workspace_bytes(int num_rows, int vocab);

// logits: device f32 [num_rows, vocab] with row stride ld (elements), not modified.
// params: device [num_rows]. out: device i32 [num_rows]. No host synchronization; capturable.
cudaError_t launch_sample_rows(const float* logits, int64_t ld, int num_rows, int vocab,
                               const SampleRowParams* params, void* workspace, int32_t* out,
                               cudaStream_t stream);

// Rows that are all greedy: the same tokens as launch_sample_rows, each row's argmax split over
// ceil(vocab / 4096) CTAs so that a few rows still use the whole GPU. counters: num_rows ints,
// zero before the first launch and left zero by each; partials: argmax_rows_partials_bytes.
// No host synchronization; capturable.
size_t argmax_rows_partials_bytes(int num_rows, int vocab);
cudaError_t launch_argmax_rows(const float* logits, int64_t ld, int num_rows, int vocab,
                               int* counters, void* partials, int32_t* out, cudaStream_t stream);

}  // namespace locus::cuda
