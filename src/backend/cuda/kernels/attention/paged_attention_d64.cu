// Instantiates the paged attention tiles for head dims up to 64 (exact 64/64, and the padded
// generic path for smaller or unequal dims): decode and prefill warp layouts.
#include "backend/cuda/kernels/attention/paged_attention.cuh"

namespace locus::cuda::attention {

LOCUS_INSTANTIATE_ATTENTION_TILES(64, 64, true, 1, 4)
LOCUS_INSTANTIATE_ATTENTION_TILES(64, 64, true, 4, 1)
LOCUS_INSTANTIATE_ATTENTION_TILES(64, 64, false, 1, 4)
LOCUS_INSTANTIATE_ATTENTION_TILES(64, 64, false, 4, 1)

}  // namespace locus::cuda::attention
