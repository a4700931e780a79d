// Instantiates the paged attention tiles for head dims up to 576 / v_head_dim up to 512 (MLA as
// MQA over the latent cache: 512 + 64 rope dims), generic path only: decode and prefill layouts.
#include "backend/cuda/kernels/attention/paged_attention.cuh"

namespace locus::cuda::attention {

LOCUS_INSTANTIATE_ATTENTION_TILES(576, 512, false, 1, 4)
LOCUS_INSTANTIATE_ATTENTION_TILES(576, 512, false, 4, 4)

}  // namespace locus::cuda::attention
