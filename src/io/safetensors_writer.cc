// Safetensors and sharded-checkpoint writer. The output is byte-compatible with what the Rust
// crate writes for the same tensor order; files appear under their final names only when whole.
#include "io/safetensors_writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <nlohmann/json.hpp>
#include <system_error>
#include <unordered_set>

namespace locus {
namespace {

std::string errno_message(int err) {
  return std::error_code(err, std::generic_category()).message();
}

// A file written under a temporary name beside `path` and renamed over it by commit(). Until
// then the final name is untouched; a writer destroyed without commit removes its temporary.
class AtomicFileWriter {
 public:
  static Expected<std::unique_ptr<AtomicFileWriter>> create(const std::filesystem::path& path) {
    static std::atomic<uint64_t> counter{0};
    // Hidden and without the .safetensors suffix, so a directory scan never picks it up.
    std::filesystem::path temp =
        path.parent_path() / fmt::format(".{}.tmp.{}.{}", path.filename().string(),
                                         static_cast<long>(::getpid()), counter.fetch_add(1));
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      int err = errno;
      return io_error(fmt::format("{}: cannot create temporary file {}: {}", path.string(),
                                  temp.string(), errno_message(err)));
    }
    return std::unique_ptr<AtomicFileWriter>(new AtomicFileWriter(path, std::move(temp), fd));
  }

  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temp_.c_str());
  }

  Status write(const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (size > 0) {
      ssize_t n = ::write(fd_, p, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        return io_error(fmt::format("{}: write failed: {}", path_.string(), errno_message(err)));
      }
      p += n;
      size -= static_cast<size_t>(n);
    }
    return Status::ok();
  }

  // fsync before rename: otherwise a power loss can leave the new name pointing at a file whose
  // data never reached the disk. The directory is synced so that the rename itself persists.
  Status commit() {
    if (::fsync(fd_) != 0) {
      int err = errno;
      return io_error(fmt::format("{}: fsync failed: {}", path_.string(), errno_message(err)));
    }
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) {
      int err = errno;
      return io_error(fmt::format("{}: close failed: {}", path_.string(), errno_message(err)));
    }
    if (::rename(temp_.c_str(), path_.c_str()) != 0) {
      int err = errno;
      return io_error(fmt::format("{}: rename from {} failed: {}", path_.string(), temp_.string(),
                                  errno_message(err)));
    }
    committed_ = true;
    std::filesystem::path dir = path_.parent_path().empty() ? "." : path_.parent_path();
    int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
      // Some file systems cannot sync a directory (EINVAL); the file itself is already safe.
      ::fsync(dir_fd);
      ::close(dir_fd);
    }
    return Status::ok();
  }

 private:
  AtomicFileWriter(std::filesystem::path path, std::filesystem::path temp, int fd)
      : path_(std::move(path)), temp_(std::move(temp)), fd_(fd) {}

  std::filesystem::path path_;
  std::filesystem::path temp_;
  int fd_ = -1;
  bool committed_ = false;
};

Status check_writable(const std::filesystem::path& path, const std::string& name,
                      const Tensor& tensor) {
  auto fail = [&](const std::string& why) {
    return invalid_argument(fmt::format("{}: tensor '{}': {}", path.string(), name, why));
  };
  if (name == "__metadata__") return fail("the name is reserved for the metadata");
  if (!tensor.defined()) return fail("undefined tensor");
  if (!tensor.device().is_cpu()) {
    return fail(fmt::format("{} is not on the host; copy it there first", tensor.to_string()));
  }
  if (!tensor.is_contiguous()) {
    return fail(
        fmt::format("{} is not contiguous; make a contiguous copy first", tensor.to_string()));
  }
  if (dtype_info(tensor.dtype()).safetensors_name.empty()) {
    return unsupported(fmt::format("{}: tensor '{}': {} has no safetensors name", path.string(),
                                   name, dtype_name(tensor.dtype())));
  }
  return Status::ok();
}

// The header exactly as the Rust crate lays it out: compact JSON, "__metadata__" first, each
// entry's fields in the order dtype, shape, data_offsets, then spaces up to a multiple of 8.
Expected<std::string> build_header(const std::filesystem::path& path, const NamedTensors& tensors,
                                   const std::map<std::string, std::string>& metadata) {
  using OrderedJson = nlohmann::ordered_json;
  OrderedJson root = OrderedJson::object();
  if (!metadata.empty()) {
    OrderedJson meta = OrderedJson::object();
    for (const auto& [key, value] : metadata) {
      meta[key] = value;
    }
    root["__metadata__"] = std::move(meta);
  }
  std::unordered_set<std::string_view> seen;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    LOCUS_RETURN_IF_ERROR(check_writable(path, name, tensor));
    if (!seen.insert(name).second) {
      return invalid_argument(
          fmt::format("{}: tensor '{}' appears more than once", path.string(), name));
    }
    const uint64_t nbytes = tensor.nbytes();
    OrderedJson entry = OrderedJson::object();
    entry["dtype"] = std::string(dtype_info(tensor.dtype()).safetensors_name);
    entry["shape"] = tensor.shape().to_vector();
    entry["data_offsets"] = OrderedJson::array({offset, offset + nbytes});
    root[name] = std::move(entry);
    offset += nbytes;
  }
  std::string text;
  try {
    text = root.dump();
  } catch (const nlohmann::json::exception& e) {
    // dump() throws on names or metadata that are not valid UTF-8.
    return invalid_argument(
        fmt::format("{}: cannot encode the header as JSON: {}", path.string(), e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

std::string sharded_checkpoint_file_name(int index, int count) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index, count);
}

Status write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                         const std::map<std::string, std::string>& metadata) {
  LOCUS_ASSIGN_OR_RETURN(std::string header, build_header(path, tensors, metadata));
  LOCUS_ASSIGN_OR_RETURN(auto file, AtomicFileWriter::create(path));
  uint8_t length[8];
  uint64_t n = header.size();
  for (auto& byte : length) {
    byte = static_cast<uint8_t>(n & 0xff);
    n >>= 8;
  }
  LOCUS_RETURN_IF_ERROR(file->write(length, sizeof(length)));
  LOCUS_RETURN_IF_ERROR(file->write(header.data(), header.size()));
  for (const auto& [name, tensor] : tensors) {
    LOCUS_RETURN_IF_ERROR(file->write(tensor.raw_data(), tensor.nbytes()));
  }
  return file->commit();
}

Status write_sharded_checkpoint(const std::filesystem::path& dir, const NamedTensors& tensors,
                                uint64_t max_shard_bytes,
                                const std::map<std::string, std::string>& metadata) {
  if (max_shard_bytes == 0) {
    return invalid_argument(fmt::format("{}: max_shard_bytes must be positive", dir.string()));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return io_error(fmt::format("{}: cannot create directory: {}", dir.string(), ec.message()));
  }
  // Names must be unique across shards too, or the index would map one name to two files.
  std::unordered_set<std::string_view> seen;
  for (const auto& [name, tensor] : tensors) {
    if (!seen.insert(name).second) {
      return invalid_argument(
          fmt::format("{}: tensor '{}' appears more than once", dir.string(), name));
    }
  }

  // Greedy in the given order, like transformers: start a new shard when the next tensor would
  // push the current one past the limit.
  std::vector<NamedTensors> shards;
  uint64_t shard_bytes = 0;
  uint64_t total_size = 0;
  for (const auto& named : tensors) {
    const uint64_t nbytes = named.second.nbytes();
    if (shards.empty() || (!shards.back().empty() && shard_bytes + nbytes > max_shard_bytes)) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(named);
    shard_bytes += nbytes;
    total_size += nbytes;
  }
  if (shards.size() <= 1) {
    return write_safetensors(dir / "model.safetensors", tensors, metadata);
  }

  const int count = static_cast<int>(shards.size());
  nlohmann::json weight_map = nlohmann::json::object();
  for (int i = 0; i < count; ++i) {
    const std::string file_name = sharded_checkpoint_file_name(i + 1, count);
    LOCUS_RETURN_IF_ERROR(
        write_safetensors(dir / file_name, shards[static_cast<size_t>(i)], metadata));
    for (const auto& [name, tensor] : shards[static_cast<size_t>(i)]) {
      weight_map[name] = file_name;
    }
  }
  nlohmann::json index = {{"metadata", {{"total_size", total_size}}},
                          {"weight_map", std::move(weight_map)}};
  // Same text as transformers writes (indent 2, sorted keys, trailing newline).
  const std::string text = index.dump(2) + "\n";
  const std::filesystem::path index_path = dir / "model.safetensors.index.json";
  LOCUS_ASSIGN_OR_RETURN(auto file, AtomicFileWriter::create(index_path));
  LOCUS_RETURN_IF_ERROR(file->write(text.data(), text.size()));
  return file->commit();
}

}  // namespace locus
