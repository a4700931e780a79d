// Writes safetensors files and Hugging Face style sharded checkpoints from host tensors (tests,
// dummy weights, conversion tools). Never leaves a partial file under a final name: each file is
// written to a temporary name in the same folder, synced, and renamed into place.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace locus {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Writes one file that the Rust crate reads back: compact JSON header padded with spaces to a
// multiple of 8 bytes, tensors stored back to back in the order given (so the caller decides
// alignment; the crate itself sorts by descending element size). Tensors must be defined,
// contiguous and on the host; names must be unique, valid UTF-8 and not "__metadata__".
// "__metadata__" is written only when `metadata` is non-empty.
Status write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                         const std::map<std::string, std::string>& metadata = {});

// Splits `tensors` in order into shards of at most `max_shard_bytes` of tensor data (a tensor
// larger than that gets a shard of its own), the way transformers' save_pretrained does, and
// writes model-0000i-of-0000N.safetensors plus model.safetensors.index.json
// ({"metadata": {"total_size": ...}, "weight_map": {...}}). When everything fits one shard it
// writes a single model.safetensors and no index, as transformers does. Creates `dir` if needed;
// the index is written last, so a crash leaves no index naming missing shards. Files of an
// earlier checkpoint in `dir` are left alone. `metadata` goes into every shard's header.
Status write_sharded_checkpoint(const std::filesystem::path& dir, const NamedTensors& tensors,
                                uint64_t max_shard_bytes,
                                const std::map<std::string, std::string>& metadata = {});

// "model-00003-of-00004.safetensors" (1-based index), the transformers naming scheme.
std::string sharded_checkpoint_file_name(int index, int count);

}  // namespace locus
