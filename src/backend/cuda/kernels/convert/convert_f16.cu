// Instantiations for f16: one file per format so nvcc builds them in parallel.
#include "backend/cuda/kernels/convert/convert.cuh"

namespace locus::cuda {

template cudaError_t launch_encode<NarrowFormat::kF16>(const float*, void*, size_t, cudaStream_t);
template cudaError_t launch_decode<NarrowFormat::kF16>(const void*, float*, size_t, cudaStream_t);

}  // namespace locus::cuda
