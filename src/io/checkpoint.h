// A Hugging Face checkpoint folder as one name -> tensor map over its safetensors files. Opening
// validates every header up front, so a bad shard fails at startup, not halfway through loading.
//
// Which files make up the checkpoint, in order of precedence (transformers' order):
//   1. model.safetensors.index.json: its "weight_map" (tensor name -> shard file) names the shards.
//      Each shard named is opened (eagerly: mmap + header parse, no tensor bytes read). A tensor
//      the map names must be in the shard it names (not_found naming both). A tensor found in a
//      shard but missing from the map is still served (vLLM loads every tensor of each shard too)
//      and logged once as a warning; unindexed_tensors() lists them. A tensor in two shards is an
//      error. Files in the folder that the map does not name are ignored (e.g. Mistral's
//      consolidated.safetensors next to its shards).
//   2. model.safetensors alone.
//   3. Every *.safetensors in the folder (sorted); a name in two files is an error, and shards
//      named model-0000i-of-0000N.safetensors must all be present (a half-copied checkpoint
//      without its index must not load silently).
// A path to a single .safetensors file opens that file alone.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "io/safetensors.h"

namespace locus {

enum class CheckpointLayout {
  kIndexed,     // model.safetensors.index.json + shards
  kSingleFile,  // model.safetensors, or a path to one .safetensors file
  kDirectory,   // every *.safetensors in the folder
};

inline constexpr std::string_view kSafetensorsIndexFileName = "model.safetensors.index.json";

class Checkpoint {
 public:
  static Expected<Checkpoint> open(const std::filesystem::path& model_dir,
                                   const SafetensorsParseOptions& options = {});

  const std::filesystem::path& dir() const { return dir_; }
  CheckpointLayout layout() const { return layout_; }
  // The opened files, in the order of their first appearance (index) or sorted by name.
  const std::vector<SafetensorsFile>& files() const { return files_; }

  size_t num_tensors() const { return entries_.size(); }
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  std::vector<std::string> names() const;  // sorted
  // not_found naming the checkpoint folder and the tensor when absent.
  Expected<SafetensorsTensorInfo> info(std::string_view name) const;
  // A zero-copy view into the mmap of the file that holds the tensor.
  Expected<Tensor> tensor(std::string_view name) const;
  // The file that holds the tensor.
  Expected<std::filesystem::path> file_of(std::string_view name) const;

  // Tensors found in shards but not in the index's weight_map (indexed layout only).
  const std::vector<std::string>& unindexed_tensors() const { return unindexed_; }
  // The index's metadata.total_size when it has one (informational; never checked, as real
  // checkpoints often get it slightly wrong).
  std::optional<uint64_t> index_total_size() const { return index_total_size_; }
  // Sum of the bytes of all tensors.
  uint64_t total_bytes() const;

 private:
  struct Entry {
    const SafetensorsTensorInfo* info;  // points into a header owned by files_[file]
    size_t file;
  };

  static Expected<Checkpoint> open_files(const std::filesystem::path& dir,
                                         const std::vector<std::filesystem::path>& paths,
                                         CheckpointLayout layout,
                                         const SafetensorsParseOptions& options);
  static Expected<Checkpoint> open_indexed(const std::filesystem::path& dir,
                                           const SafetensorsParseOptions& options);
  // Sorts entries_ by name and rejects a name held by two files.
  Status sort_entries();
  const Entry* find(std::string_view name) const;

  std::filesystem::path dir_;
  CheckpointLayout layout_ = CheckpointLayout::kSingleFile;
  std::vector<SafetensorsFile> files_;
  std::vector<Entry> entries_;  // sorted by name
  std::vector<std::string> unindexed_;
  std::optional<uint64_t> index_total_size_;
};

}  // namespace locus
