// Which architectures the model forward serves, keyed by config.json's architectures[0]. Each
// entry names the family's spec (model/arch/<family>.cc); unknown names are errors that list
// what is supported.
#pragma once

#include <span>
#include <string_view>

#include "core/status.h"
#include "io/model_config.h"
#include "model/arch/architecture.h"

namespace locus {

struct ArchitectureEntry {
  Architecture architecture;
  std::string_view hf_name;  // "Qwen3MoeForCausalLM"
  Expected<ArchitectureSpec> (*spec)(const ModelConfig& config);
};

std::span<const ArchitectureEntry> registered_architectures();

// The registry entry for `hf_name`; kUnsupported naming the supported ones otherwise.
Expected<const ArchitectureEntry*> find_architecture(std::string_view hf_name);

// The spec for `config` (looked up by config.architecture).
Expected<ArchitectureSpec> architecture_spec(const ModelConfig& config);

}  // namespace locus
