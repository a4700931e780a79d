// Grouped expert GEMMs with BLOCK_M = 128: one file per tile size so nvcc builds them in parallel.
#include "backend/cuda/kernels/moe/moe_grouped_gemm.cuh"

namespace locus::cuda::moe {

template cudaError_t launch_moe_gate_up<128>(const GroupedGemmParams&, int, cudaStream_t);
template cudaError_t launch_moe_down<128>(const GroupedGemmParams&, int, cudaStream_t);

}  // namespace locus::cuda::moe
