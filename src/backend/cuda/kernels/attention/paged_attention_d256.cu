// Instantiates the paged attention tiles for head dims up to 256 (exact 256/256, and the padded
// generic path for smaller or unequal dims): decode and prefill warp layouts.
#include "backend/cuda/kernels/attention/paged_attention.cuh"

namespace locus::cuda::attention {

LOCUS_INSTANTIATE_ATTENTION_TILES(256, 256, true, 1, 4)
LOCUS_INSTANTIATE_ATTENTION_TILES(256, 256, true, 4, 2)
LOCUS_INSTANTIATE_ATTENTION_TILES(256, 256, false, 1, 4)
LOCUS_INSTANTIATE_ATTENTION_TILES(256, 256, false, 4, 2)

}  // namespace locus::cuda::attention
