// Instantiations for e5m2: one file per format so nvcc builds them in parallel.
#include "backend/cuda/kernels/convert/convert.cuh"

namespace locus::cuda {

template cudaError_t launch_encode<NarrowFormat::kF8E5M2>(const float*, void*, size_t,
                                                          cudaStream_t);
template cudaError_t launch_decode<NarrowFormat::kF8E5M2>(const void*, float*, size_t,
                                                          cudaStream_t);

}  // namespace locus::cuda
