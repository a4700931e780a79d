// The trained demo model that `locus serve` and `locus generate` run when no model is named
// (models/demo/: a 4-layer Qwen3-MoE with 16 experts and its own 4k-token BPE tokenizer, trained
// by tools/demo_model/). It ships with the repository, so a fresh clone answers with real text.
#pragma once

#include <string>

#include "core/status.h"

namespace locus {

// The name the API serves the demo model under when no --served-model-name is given.
inline constexpr const char* kDemoModelName = "demo";

// The demo model's directory: the source tree's models/demo when this binary was built from one
// that still exists, else models/demo found from the executable (build/<preset>/locus or an
// install's bin/locus). not_found with every place looked when none holds a config.json.
Expected<std::string> find_demo_model();

}  // namespace locus
