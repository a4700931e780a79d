// Instantiates the paged attention tiles for head dims up to 128 (exact 128/128, and the padded
// generic path for smaller or unequal dims): decode and prefill warp layouts.
#include "backend/cuda/kernels/attention/paged_attention.cuh"

namespace locus::cuda::attention {

LOCUS_INSTANTIATE_ATTENTION_TILES(128, 128, true, 1, 4)
LOCUS_INSTANTIATE_ATTENTION_TILES(128, 128, true, 4, 1)
LOCUS_INSTANTIATE_ATTENTION_TILES(128, 128, false, 1, 4)
LOCUS_INSTANTIATE_ATTENTION_TILES(128, 128, false, 4, 1)

}  // namespace locus::cuda::attention
