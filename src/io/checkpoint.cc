// Checkpoint folder discovery and the sharded index. Only names of files inside the folder are
// ever opened: a weight_map entry with a path in it is rejected, not followed.
#include "io/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "core/logging.h"

namespace locus {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kSingleFileName = "model.safetensors";
// DeepSeek-V3's index (about 90k tensors) is under 10 MB; anything near this is not an index.
constexpr uintmax_t kMaxIndexBytes = 256u << 20;

bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\\\0", 3)) == std::string::npos;
}

Expected<std::string> read_index_text(const std::filesystem::path& path) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return io_error(fmt::format("{}: cannot stat: {}", path.string(), ec.message()));
  if (size > kMaxIndexBytes) {
    return out_of_range(fmt::format("{}: {} bytes is larger than any index should be ({} max)",
                                    path.string(), size, kMaxIndexBytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(fmt::format("{}: cannot open", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return io_error(fmt::format("{}: read failed", path.string()));
  return text.str();
}

struct ShardName {
  std::string prefix;
  int index;
  int count;
};

// "model-00002-of-00005.safetensors" -> {"model", 2, 5}.
std::optional<ShardName> parse_shard_name(const std::string& file_name) {
  static const std::regex pattern(R"(^(.*)-([0-9]{1,9})-of-([0-9]{1,9})\.safetensors$)");
  std::smatch match;
  if (!std::regex_match(file_name, match, pattern)) return std::nullopt;
  return ShardName{match[1].str(), std::stoi(match[2].str()), std::stoi(match[3].str())};
}

// Without an index, a folder of HF-named shards must hold all of them; otherwise an interrupted
// download would load as a model with missing layers and fail much later, or not at all.
Status check_shard_sets_complete(const std::filesystem::path& dir,
                                 const std::vector<std::filesystem::path>& paths) {
  std::map<std::pair<std::string, int>, std::set<int>> sets;
  for (const auto& p : paths) {
    if (auto shard = parse_shard_name(p.filename().string())) {
      sets[{shard->prefix, shard->count}].insert(shard->index);
    }
  }
  for (const auto& [key, indices] : sets) {
    const auto& [prefix, count] = key;
    for (int i = 1; i <= count; ++i) {
      if (indices.count(i) == 0) {
        return not_found(fmt::format(
            "{}: {}-{:05d}-of-{:05d}.safetensors is missing ({} of {} shards present, and no {} "
            "to say which files make up the checkpoint)",
            dir.string(), prefix, i, count, indices.size(), count, kSafetensorsIndexFileName));
      }
    }
  }
  return Status::ok();
}

}  // namespace

Expected<Checkpoint> Checkpoint::open(const std::filesystem::path& model_dir,
                                      const SafetensorsParseOptions& options) {
  std::error_code ec;
  const auto status = std::filesystem::status(model_dir, ec);
  if (!std::filesystem::exists(status)) {
    return not_found(fmt::format("{}: no such file or directory", model_dir.string()));
  }
  if (std::filesystem::is_regular_file(status)) {
    const auto parent = model_dir.parent_path();
    return open_files(parent.empty() ? std::filesystem::path(".") : parent, {model_dir},
                      CheckpointLayout::kSingleFile, options);
  }
  if (!std::filesystem::is_directory(status)) {
    return invalid_argument(
        fmt::format("{}: neither a checkpoint folder nor a .safetensors file", model_dir.string()));
  }
  if (std::filesystem::exists(model_dir / kSafetensorsIndexFileName, ec)) {
    return open_indexed(model_dir, options);
  }
  if (std::filesystem::exists(model_dir / kSingleFileName, ec)) {
    return open_files(model_dir, {model_dir / kSingleFileName}, CheckpointLayout::kSingleFile,
                      options);
  }
  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir, ec)) {
    const auto& p = entry.path();
    if (p.extension() == ".safetensors" && entry.is_regular_file(ec)) paths.push_back(p);
  }
  if (ec) {
    return io_error(
        fmt::format("{}: cannot list the folder: {}", model_dir.string(), ec.message()));
  }
  if (paths.empty()) {
    return not_found(fmt::format("{}: no {}, {} or *.safetensors files", model_dir.string(),
                                 kSafetensorsIndexFileName, kSingleFileName));
  }
  std::sort(paths.begin(), paths.end());
  LOCUS_RETURN_IF_ERROR(check_shard_sets_complete(model_dir, paths));
  return open_files(model_dir, paths, CheckpointLayout::kDirectory, options);
}

Expected<Checkpoint> Checkpoint::open_files(const std::filesystem::path& dir,
                                            const std::vector<std::filesystem::path>& paths,
                                            CheckpointLayout layout,
                                            const SafetensorsParseOptions& options) {
  Checkpoint checkpoint;
  checkpoint.dir_ = dir;
  checkpoint.layout_ = layout;
  for (const auto& p : paths) {
    LOCUS_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(p, options));
    checkpoint.files_.push_back(std::move(file));
  }
  for (size_t i = 0; i < checkpoint.files_.size(); ++i) {
    for (const auto& info : checkpoint.files_[i].tensors()) {
      checkpoint.entries_.push_back({&info, i});
    }
  }
  LOCUS_RETURN_IF_ERROR(checkpoint.sort_entries());
  return checkpoint;
}

Expected<Checkpoint> Checkpoint::open_indexed(const std::filesystem::path& dir,
                                              const SafetensorsParseOptions& options) {
  const std::filesystem::path index_path = dir / kSafetensorsIndexFileName;
  const std::string index_name = index_path.string();
  LOCUS_ASSIGN_OR_RETURN(std::string text, read_index_text(index_path));
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::exception& e) {
    return parse_error(fmt::format("{}: not valid JSON: {}", index_name, e.what()));
  }
  if (!root.is_object()) {
    return invalid_argument(
        fmt::format("{}: must be a JSON object, got {}", index_name, root.type_name()));
  }
  auto weight_map_it = root.find("weight_map");
  if (weight_map_it == root.end() || !weight_map_it->is_object()) {
    return invalid_argument(
        fmt::format("{}: needs a \"weight_map\" object (tensor name -> shard file)", index_name));
  }
  const Json& weight_map = *weight_map_it;
  if (weight_map.empty()) {
    return invalid_argument(fmt::format("{}: weight_map is empty", index_name));
  }

  Checkpoint checkpoint;
  checkpoint.dir_ = dir;
  checkpoint.layout_ = CheckpointLayout::kIndexed;
  if (auto meta = root.find("metadata"); meta != root.end() && meta->is_object()) {
    if (auto total = meta->find("total_size");
        total != meta->end() && total->is_number_unsigned()) {
      checkpoint.index_total_size_ = total->get<uint64_t>();
    }
  }

  // Shards are opened in the order the sorted weight_map first names them.
  std::map<std::string, size_t, std::less<>> shard_positions;
  for (const auto& item : weight_map.items()) {
    const std::string& name = item.key();
    const Json& value = item.value();
    if (!value.is_string() || !is_plain_file_name(value.get_ref<const std::string&>())) {
      return invalid_argument(fmt::format(
          "{}: weight_map puts tensor '{}' in {}; expected the name of a file in {}", index_name,
          name, value.dump(-1, ' ', false, Json::error_handler_t::replace), dir.string()));
    }
    const std::string& shard = value.get_ref<const std::string&>();
    auto [it, inserted] = shard_positions.emplace(shard, checkpoint.files_.size());
    if (inserted) {
      auto file = SafetensorsFile::open(dir / shard, options);
      if (!file) {
        return file.status().with_context(
            fmt::format("{}: weight_map puts tensor '{}' in '{}'", index_name, name, shard));
      }
      checkpoint.files_.push_back(std::move(*file));
    }
    const SafetensorsFile& file = checkpoint.files_[it->second];
    const SafetensorsTensorInfo* info = file.find(name);
    if (info == nullptr) {
      return not_found(
          fmt::format("{}: weight_map puts tensor '{}' in '{}', but {} has no such "
                      "tensor",
                      index_name, name, shard, file.path().string()));
    }
    checkpoint.entries_.push_back({info, it->second});
  }

  // Tensors the map does not name: served anyway (as vLLM does), but said once, because a stale
  // index is usually a sign of a hand-edited or half-converted checkpoint.
  for (size_t i = 0; i < checkpoint.files_.size(); ++i) {
    for (const auto& info : checkpoint.files_[i].tensors()) {
      auto mapped = weight_map.find(info.name);
      if (mapped == weight_map.end()) {
        checkpoint.entries_.push_back({&info, i});
        checkpoint.unindexed_.push_back(info.name);
      } else if (mapped->get_ref<const std::string&>() !=
                 checkpoint.files_[i].path().filename().string()) {
        return invalid_argument(
            fmt::format("{}: tensor '{}' is in {} (where weight_map puts it) and also in {}",
                        index_name, info.name, mapped->get_ref<const std::string&>(),
                        checkpoint.files_[i].path().string()));
      }
    }
  }
  LOCUS_RETURN_IF_ERROR(checkpoint.sort_entries());
  if (!checkpoint.unindexed_.empty()) {
    std::sort(checkpoint.unindexed_.begin(), checkpoint.unindexed_.end());
    log::warn(
        "{}: {} tensor(s) in the shards are missing from weight_map (first: '{}'); "
        "loading them anyway",
        index_name, checkpoint.unindexed_.size(), checkpoint.unindexed_.front());
  }
  return checkpoint;
}

Status Checkpoint::sort_entries() {
  std::sort(entries_.begin(), entries_.end(),
            [](const Entry& a, const Entry& b) { return a.info->name < b.info->name; });
  for (size_t i = 1; i < entries_.size(); ++i) {
    if (entries_[i].info->name == entries_[i - 1].info->name) {
      return invalid_argument(fmt::format(
          "{}: tensor '{}' is in both {} and {}", dir_.string(), entries_[i].info->name,
          files_[entries_[i - 1].file].path().string(), files_[entries_[i].file].path().string()));
    }
  }
  return Status::ok();
}

const Checkpoint::Entry* Checkpoint::find(std::string_view name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const Entry& e, std::string_view n) { return e.info->name < n; });
  if (it == entries_.end() || it->info->name != name) return nullptr;
  return &*it;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) {
    out.push_back(e.info->name);
  }
  return out;
}

Expected<SafetensorsTensorInfo> Checkpoint::info(std::string_view name) const {
  const Entry* e = find(name);
  if (e == nullptr) return not_found(fmt::format("{}: no tensor '{}'", dir_.string(), name));
  return *e->info;
}

Expected<Tensor> Checkpoint::tensor(std::string_view name) const {
  const Entry* e = find(name);
  if (e == nullptr) return not_found(fmt::format("{}: no tensor '{}'", dir_.string(), name));
  return files_[e->file].tensor(name);
}

Expected<std::filesystem::path> Checkpoint::file_of(std::string_view name) const {
  const Entry* e = find(name);
  if (e == nullptr) return not_found(fmt::format("{}: no tensor '{}'", dir_.string(), name));
  return files_[e->file].path();
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t total = 0;
  for (const auto& e : entries_) {
    total += e.info->nbytes();
  }
  return total;
}

}  // namespace locus
