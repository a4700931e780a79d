#include "model/parallel.h"

#include <fmt/format.h>

namespace locus {

Expected<ExpertPlacement> parse_expert_placement(const std::string& name) {
  if (name == "linear") return ExpertPlacement::kLinear;
  if (name == "round_robin") return ExpertPlacement::kRoundRobin;
  return invalid_argument(
      fmt::format("--expert-placement-strategy '{}' is not one of linear, round_robin", name));
}

Expected<All2AllBackend> parse_all2all_backend(const std::string& name) {
  if (name == "auto" || name == "allgather_reducescatter") {
    return All2AllBackend::kAllGatherReduceScatter;
  }
  if (name == "naive") return All2AllBackend::kNaive;
  if (name == "low_latency") return All2AllBackend::kLowLatency;
  return invalid_argument(fmt::format(
      "--all2all-backend '{}': choose auto, allgather_reducescatter, naive or low_latency", name));
}

const char* all2all_backend_name(All2AllBackend backend) {
  switch (backend) {
    case All2AllBackend::kNaive:
      return "naive";
    case All2AllBackend::kLowLatency:
      return "low_latency";
    case All2AllBackend::kAllGatherReduceScatter:
      break;
  }
  return "allgather_reducescatter";
}

int ModelParallel::expert_owner(int64_t e, int64_t num_experts) const {
  if (!expert_parallel || expert_size() <= 1) return expert_rank();
  const int64_t n = expert_size();
  if (placement == ExpertPlacement::kRoundRobin) return static_cast<int>(e % n);
  // Linear: contiguous ranges, the first `num_experts % n` ranks one expert longer.
  const int64_t base = num_experts / n;
  const int64_t extra = num_experts % n;
  const int64_t long_part = extra * (base + 1);
  if (e < long_part) return static_cast<int>(e / (base + 1));
  return static_cast<int>(extra + (e - long_part) / base);
}

int ModelParallel::exchange_owner(int64_t e, int64_t num_experts) const {
  const int owner = expert_owner(e, num_experts);
  return owner % size() == rank() ? owner / size() : -1;
}

bool ModelParallel::owns_expert(int64_t e, int64_t num_experts) const {
  return expert_owner(e, num_experts) == expert_rank();
}

ShardRange ModelParallel::kv_heads(int64_t num_kv_heads) const {
  const int n = size();
  if (num_kv_heads >= n) return even_shard(num_kv_heads, rank(), n);
  // Fewer KV heads than ranks: tp / kv_heads consecutive ranks share (replicate) one head.
  return {rank() / (n / num_kv_heads), 1};
}

Status ModelParallel::check(const ModelConfig& config) const {
  if (is_data_parallel()) {
    if (!expert_parallel) {
      return invalid_argument(
          fmt::format("{}: data-parallel ranks share experts only with --enable-expert-parallel",
                      config.source_name));
    }
    if (config.moe.num_experts < expert_size()) {
      return invalid_argument(fmt::format(
          "{}: {} routed experts cannot be spread over {} ranks ({} data-parallel x {} "
          "tensor-parallel)",
          config.source_name, config.moe.num_experts, expert_size(), dp->size(), size()));
    }
    if (!is_parallel()) return Status::ok();
  }
  if (!is_parallel()) return Status::ok();
  const int n = size();
  auto divides = [&](int64_t value, const char* what) -> Status {
    if (value % n == 0) return Status::ok();
    return invalid_argument(
        fmt::format("{}: {} {} does not split evenly over --tensor-parallel-size {}",
                    config.source_name, what, value, n));
  };
  const AttentionConfig& a = config.attention;
  LOCUS_RETURN_IF_ERROR(divides(a.num_attention_heads, "num_attention_heads"));
  if (!config.is_mla()) {
    const int64_t kv = a.num_key_value_heads;
    if (kv >= n) {
      LOCUS_RETURN_IF_ERROR(divides(kv, "num_key_value_heads"));
    } else if (n % kv != 0) {
      return invalid_argument(fmt::format(
          "{}: --tensor-parallel-size {} is not a multiple of num_key_value_heads {} (each KV "
          "head must be replicated on the same number of ranks)",
          config.source_name, n, kv));
    }
  }
  LOCUS_RETURN_IF_ERROR(divides(config.vocab_size, "vocab_size"));
  bool dense = false;
  bool moe = false;
  for (int64_t i = 0; i < config.num_hidden_layers; ++i)
    (config.is_moe_layer(i) ? moe : dense) = true;
  if (dense) LOCUS_RETURN_IF_ERROR(divides(config.intermediate_size, "intermediate_size"));
  if (moe) {
    if (expert_parallel) {
      if (config.moe.num_experts < n) {
        return invalid_argument(fmt::format(
            "{}: {} routed experts cannot be spread over {} ranks with expert parallelism",
            config.source_name, config.moe.num_experts, n));
      }
    } else {
      LOCUS_RETURN_IF_ERROR(divides(config.moe.moe_intermediate_size, "moe_intermediate_size"));
    }
    if (config.moe.shared_expert_intermediate_size > 0) {
      LOCUS_RETURN_IF_ERROR(divides(config.moe.shared_expert_intermediate_size,
                                    "the shared experts' intermediate size"));
    }
  }
  return Status::ok();
}

}  // namespace locus
