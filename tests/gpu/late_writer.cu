#include "gpu/late_writer.h"

#include "backend/cuda/kernels/pdl.cuh"

namespace locus::gpu_test {
namespace {

constexpr int kMaxCopies = 4;

struct Copies {
  RowCopy c[kMaxCopies];
  int count;
};

__global__ void late_writer_kernel(Copies copies, unsigned delay_ns) {
  cuda::pdl_launch_dependents();
  const long long start = clock64();
  const long long cycles = static_cast<long long>(delay_ns) * 2;  // >= 1 cycle per ns
  while (clock64() - start < cycles)
    __nanosleep(1000);
  for (int i = 0; i < copies.count; ++i) {
    const RowCopy& c = copies.c[i];
    const size_t chunks = c.row_bytes / 16;
    for (size_t idx = blockIdx.x * blockDim.x + threadIdx.x; idx < c.num_rows * chunks;
         idx += static_cast<size_t>(gridDim.x) * blockDim.x) {
      const size_t off = c.rows[idx / chunks] * chunks + idx % chunks;
      static_cast<uint4*>(c.dst)[off] = static_cast<const uint4*>(c.src)[off];
    }
  }
}

}  // namespace

cudaError_t launch_late_writer(const RowCopy* copies, int count, unsigned delay_ns,
                               cudaStream_t stream) {
  if (count < 0 || count > kMaxCopies) return cudaErrorInvalidValue;
  Copies all{};
  for (int i = 0; i < count; ++i) {
    if (copies[i].row_bytes % 16 != 0) return cudaErrorInvalidValue;
    all.c[i] = copies[i];
  }
  all.count = count;
  late_writer_kernel<<<8, 256, 0, stream>>>(all, delay_ns);
  return cudaGetLastError();
}

}  // namespace locus::gpu_test
