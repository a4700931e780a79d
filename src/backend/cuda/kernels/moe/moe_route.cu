// Launcher of the router kernel: checks the routing shape the way Ops::moe_route does and
// launches one warp per token.
#include "backend/cuda/kernels/moe/moe_route.cuh"

namespace locus::cuda {

bool moe_route_supported(const MoeRouteArgs& args, int* n_group) {
  const int num_experts = args.num_experts;
  if (args.num_tokens < 0 || num_experts < 1 || num_experts > 1024) return false;
  if (args.top_k < 1 || args.top_k > 32 || args.top_k > num_experts) return false;
  const bool grouped = args.topk_method != MoeTopk::kGreedy && args.n_group > 1;
  if (grouped) {
    if (num_experts % args.n_group != 0 || args.topk_group < 1 || args.topk_group > args.n_group)
      return false;
    const int group_size = num_experts / args.n_group;
    if (args.top_k > args.topk_group * group_size) return false;
    // A group's top-2 sum needs two members (the CPU would read past the group).
    if (args.topk_method == MoeTopk::kNoauxTc && group_size < 2) return false;
  }
  *n_group = grouped ? args.n_group : 1;  // no group scores: keep the scratch small
  return true;
}

cudaError_t launch_moe_route(const MoeRouteArgs& args, cudaStream_t stream) {
  MoeRouteArgs launch_args = args;
  if (!moe_route_supported(args, &launch_args.n_group)) return cudaErrorInvalidValue;
  if (args.num_tokens == 0) return cudaSuccess;
  if (args.logits == nullptr || args.topk_ids == nullptr || args.topk_weights == nullptr) {
    return cudaErrorInvalidValue;
  }
  const int blocks = (args.num_tokens + moe::kRouteWarpsPerBlock - 1) / moe::kRouteWarpsPerBlock;
  const size_t smem = static_cast<size_t>(moe::kRouteWarpsPerBlock) *
                      moe::route_scratch_floats(args.num_experts, launch_args.n_group) *
                      sizeof(float);
  moe::moe_route_kernel<<<blocks, moe::kRouteWarpsPerBlock * 32, smem, stream>>>(launch_args);
  return cudaGetLastError();
}

}  // namespace locus::cuda
