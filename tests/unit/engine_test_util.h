// Shared by the engine tests that run fixtures through open_model_engine on the CPU.
#pragma once

#include <filesystem>
#include <string>

#include "engine/model_engine.h"

namespace locus::testing {

// A fixture on the CPU, token ids only, in small blocks and steps: prompts prefill in chunks
// beside decodes, so every step mixes both.
inline ModelEngineOptions cpu_engine_options(const std::string& fixture) {
  ModelEngineOptions o;
  o.model_dir = std::filesystem::path(LOCUS_TEST_DATA_DIR) / "models" / fixture;
  o.load_tokenizer = false;
  o.device = "cpu";
  o.cpu_threads = 2;
  o.block_size = 4;
  o.engine.scheduler.max_model_len = 128;
  o.engine.scheduler.max_num_batched_tokens = 16;
  o.engine.scheduler.max_num_seqs = 16;
  o.engine.num_kv_blocks = 512;
  return o;
}

}  // namespace locus::testing
