#include "model/demo_model.h"

#include <fmt/format.h>

#include <system_error>
#include <vector>

namespace locus {

Expected<std::string> find_model_dir(std::span<const std::filesystem::path> candidates) {
  namespace fs = std::filesystem;
  std::string looked;
  for (const fs::path& dir : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(dir / "config.json", ec)) return fs::weakly_canonical(dir).string();
    looked += (looked.empty() ? "" : ", ") + dir.string();
  }
  return not_found(fmt::format(
      "no model directory given and the demo model (models/demo) is not at {}; name a model "
      "directory",
      looked.empty() ? "any known place" : looked));
}

Expected<std::string> find_demo_model() {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates;
#ifdef LOCUS_DEMO_MODEL_DIR
  candidates.emplace_back(LOCUS_DEMO_MODEL_DIR);
#endif
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path bin = exe.parent_path();
    candidates.push_back(bin / "../../models/demo");           // build/<preset>/locus
    candidates.push_back(bin / "../share/locus/models/demo");  // <prefix>/bin/locus
  }
  return find_model_dir(candidates);
}

Status use_demo_model_if_unnamed(std::string& model_dir, bool* defaulted) {
  if (defaulted != nullptr) *defaulted = model_dir.empty();
  if (!model_dir.empty()) return Status::ok();
  LOCUS_ASSIGN_OR_RETURN(model_dir, find_demo_model());
  return Status::ok();
}

}  // namespace locus
