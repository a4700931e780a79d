// Reads safetensors files: a strictly validated header and zero-copy tensor views over a
// read-only mmap. Must never read outside the file, whatever the bytes (a fuzzer checks).
//
// Format (huggingface/safetensors): 8 bytes little-endian u64 N, N bytes of UTF-8 JSON, then the
// data region. The JSON maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]}
// with offsets relative to the first byte after the header; "__metadata__" maps strings to
// strings. We accept exactly what the Rust crate accepts, plus locus's own limits (rank <= 8,
// packed fp4 needs an even last dimension), and reject duplicate JSON keys, which the crate
// silently resolves to the last one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace locus {

// Same limit as the Rust crate: a header larger than this is rejected before it is parsed.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

struct SafetensorsParseOptions {
  // The format requires the tensors to cover the data region exactly: no unused bytes between
  // tensors or after the last one (the Rust crate's MetadataIncompleteBuffer). Turning this off
  // accepts files that other writers padded; overlaps and out-of-file ranges stay errors.
  bool require_full_coverage = true;
};

struct SafetensorsTensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  Dims shape;
  // Byte range [data_begin, data_end) relative to the start of the data region.
  uint64_t data_begin = 0;
  uint64_t data_end = 0;

  uint64_t nbytes() const { return data_end - data_begin; }
  int64_t numel() const { return shape_numel(shape); }
};

struct SafetensorsHeader {
  std::string file_name;     // as given to the parser; every error message starts with it
  uint64_t file_size = 0;    // bytes of the whole file
  uint64_t header_size = 0;  // N: bytes of JSON, padding included
  uint64_t data_offset = 0;  // 8 + N: where the data region starts in the file
  uint64_t data_size = 0;    // file_size - data_offset
  std::map<std::string, std::string> metadata;
  // Sorted by name, so that lookups are a binary search and names() needs no sort.
  std::vector<SafetensorsTensorInfo> tensors;

  // nullptr when there is no such tensor.
  const SafetensorsTensorInfo* find(std::string_view name) const;
};

// Parses and validates the header of a safetensors file of `file_size` bytes. `file_bytes` is
// the whole file or a prefix holding at least its first 8 + N bytes; the data region is not
// read. `file_name` only prefixes error messages. Pure: no I/O, no global state.
Expected<SafetensorsHeader> parse_safetensors_header(std::span<const uint8_t> file_bytes,
                                                     uint64_t file_size, std::string_view file_name,
                                                     const SafetensorsParseOptions& options = {});

// A zero-copy view of one tensor of a validated header over `file_bytes` (the whole file).
// `keep_alive` owns those bytes and is held by the tensor's storage. The storage covers exactly
// the tensor's bytes, so the view needs no alignment of data_begin to the element size; the
// pointer may still be misaligned for the dtype (the format does not pad between tensors).
Expected<Tensor> safetensors_tensor_view(const SafetensorsHeader& header,
                                         const SafetensorsTensorInfo& info,
                                         std::span<const uint8_t> file_bytes,
                                         std::shared_ptr<const void> keep_alive);

// An open, mmap'ed (read-only, MAP_PRIVATE) safetensors file. Copies share the mapping; the
// mapping lives until the last copy and the last tensor view of it are gone. Views are read-only
// memory: writing through Tensor::data() faults. If another process truncates the file while it
// is mapped, touching the lost pages raises SIGBUS, as with every mmap reader.
class SafetensorsFile {
 public:
  static Expected<SafetensorsFile> open(const std::filesystem::path& path,
                                        const SafetensorsParseOptions& options = {});

  const std::filesystem::path& path() const { return path_; }
  const SafetensorsHeader& header() const { return *header_; }
  const std::map<std::string, std::string>& metadata() const { return header_->metadata; }
  const std::vector<SafetensorsTensorInfo>& tensors() const { return header_->tensors; }
  size_t num_tensors() const { return header_->tensors.size(); }

  std::vector<std::string> names() const;  // sorted
  bool contains(std::string_view name) const { return header_->find(name) != nullptr; }
  const SafetensorsTensorInfo* find(std::string_view name) const { return header_->find(name); }
  // not_found naming the file and the tensor when absent.
  Expected<SafetensorsTensorInfo> info(std::string_view name) const;
  // A borrowed view into the mapping; no bytes are read until the caller touches them.
  Expected<Tensor> tensor(std::string_view name) const;

  // The whole mapped file (for tests and for callers that stream the data region themselves).
  std::span<const uint8_t> bytes() const;

 private:
  struct Mapping;
  SafetensorsFile() = default;

  std::filesystem::path path_;
  std::shared_ptr<const Mapping> mapping_;
  std::shared_ptr<const SafetensorsHeader> header_;
};

}  // namespace locus
