#include "model/demo_model.h"

#include <fmt/format.h>

#include <filesystem>
#include <system_error>
#include <vector>

namespace locus {

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
  std::string looked;
  for (const fs::path& dir : candidates) {
    if (fs::is_regular_file(dir / "config.json", ec)) return fs::weakly_canonical(dir).string();
    looked += (looked.empty() ? "" : ", ") + dir.string();
  }
  return not_found(fmt::format(
      "no model directory given and the demo model (models/demo) is not at {}; name a model "
      "directory",
      looked.empty() ? "any known place" : looked));
}

}  // namespace locus
