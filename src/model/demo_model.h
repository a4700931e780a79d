// The trained demo model that `locus serve` and `locus generate` run when no model is named
// (models/demo/: a 4-layer Qwen3-MoE with 16 experts and its own 4k-token BPE tokenizer, trained
// by tools/demo_model/). It ships with the repository, so a fresh clone answers with real text.
#pragma once

#include <filesystem>
#include <span>
#include <string>

#include "core/status.h"

namespace locus {

// The name the API serves the demo model under when no --served-model-name is given.
inline constexpr const char* kDemoModelName = "demo";

// The first of `candidates` that holds a config.json (canonical path); not_found naming every
// candidate otherwise.
Expected<std::string> find_model_dir(std::span<const std::filesystem::path> candidates);

// The demo model's directory: the source tree's models/demo when this binary was built from one
// that still exists, else models/demo found from the executable (build/<preset>/locus or an
// install's bin/locus).
Expected<std::string> find_demo_model();

// A named model directory is left alone; an empty one becomes the demo model's, and
// *defaulted (when given) says which happened.
Status use_demo_model_if_unnamed(std::string& model_dir, bool* defaulted = nullptr);

}  // namespace locus
