// The process-wide switch of programmatic dependent launch (see pdl.cuh).
#include <cstdlib>

#include "backend/cuda/kernels/pdl.cuh"

namespace locus::cuda {

bool pdl_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("LOCUS_CUDA_PDL");
    return v == nullptr || v[0] != '0';
  }();
  return enabled;
}

}  // namespace locus::cuda
