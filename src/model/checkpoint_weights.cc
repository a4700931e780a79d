#include <fmt/format.h>

#include "model/weight_source.h"

namespace locus {

Expected<std::unique_ptr<CheckpointWeights>> CheckpointWeights::open(
    const std::filesystem::path& dir) {
  LOCUS_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::open(dir));
  return std::unique_ptr<CheckpointWeights>(new CheckpointWeights(std::move(checkpoint)));
}

Expected<WeightInfo> CheckpointWeights::info(std::string_view name) const {
  LOCUS_ASSIGN_OR_RETURN(auto st, checkpoint_.info(name));
  return WeightInfo{st.name, st.dtype, st.shape};
}

std::string CheckpointWeights::description() const {
  size_t n = checkpoint_.files().size();
  return fmt::format("checkpoint {} ({} file{}, {} tensors, {:.2f} GB)", checkpoint_.dir().string(),
                     n, n == 1 ? "" : "s", checkpoint_.num_tensors(),
                     static_cast<double>(checkpoint_.total_bytes()) / 1e9);
}

}  // namespace locus
