// A kernel that lets the next kernel start at once (programmatic dependent launch) and writes
// its data only after a delay: a dependent that reads that data before its pdl_wait sees the
// old contents, so tests can show which reads a kernel issues early. Host-callable; only built
// with CUDA (tests/gpu/late_writer.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace locus::gpu_test {

// One scatter of whole rows: dst row rows[i] = src row rows[i] (row_bytes each, multiples of 16).
struct RowCopy {
  const void* src = nullptr;
  void* dst = nullptr;
  const int64_t* rows = nullptr;  // device array of row indices
  int num_rows = 0;
  size_t row_bytes = 0;
};

// Sleeps about `delay_ns` after triggering its dependents, then performs the copies in order.
cudaError_t launch_late_writer(const RowCopy* copies, int count, unsigned delay_ns,
                               cudaStream_t stream);

}  // namespace locus::gpu_test
