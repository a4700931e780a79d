// Safetensors header validation and the mmap'ed reader. Every check that guards a memory access
// lives in parse_safetensors_header, which the fuzzer drives directly; the reader only maps the
// file and hands out views of ranges the parser accepted.
#include "io/safetensors.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <numeric>
#include <system_error>
#include <unordered_set>
#include <utility>

namespace locus {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kLengthPrefixBytes = 8;
// Containers nest at most three deep in a valid header: the top object (depth 0), a tensor entry
// or __metadata__ (1), shape and data_offsets (2). Anything deeper is rejected while parsing, so a
// hostile header cannot build a deep tree.
constexpr int kMaxContainerDepth = 2;

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) {
    v = (v << 8) | p[i];
  }
  return v;
}

// A JSON value as a short, printable snippet for error messages.
std::string snippet(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  constexpr size_t kMax = 40;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

std::string supported_dtype_names() {
  std::string names;
  for (int i = 0; i < kNumDTypes; ++i) {
    std::string_view name = dtype_info(static_cast<DType>(i)).safetensors_name;
    if (name.empty()) continue;
    if (!names.empty()) names += ", ";
    names += name;
  }
  return names;
}

// nlohmann keeps the last of duplicate keys without telling; for a checkpoint that would silently
// pick one of two tensors with the same name, so the parser callback records duplicates and
// excessive nesting, and the caller turns them into errors.
class StructureGuard {
 public:
  bool on_event(int depth, Json::parse_event_t event, const Json& parsed) {
    if (!problem_.empty()) return false;  // already failed: discard the rest, build nothing
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (depth > kMaxContainerDepth) {
          problem_ =
              fmt::format("JSON nests deeper than a safetensors header allows{}", where(depth));
          return false;
        }
        if (event == Json::parse_event_t::object_start) {
          auto level = static_cast<size_t>(depth) + 1;
          if (keys_.size() <= level) keys_.resize(level + 1);
          if (last_key_.size() <= level) last_key_.resize(level + 1);
          keys_[level].clear();
        }
        return true;
      case Json::parse_event_t::key: {
        auto level = static_cast<size_t>(depth);
        if (level >= keys_.size()) return true;  // cannot happen: a key follows object_start
        const auto& key = parsed.get_ref<const std::string&>();
        if (!keys_[level].insert(key).second) {
          problem_ = level <= 1 ? fmt::format("duplicate key '{}' in the header", key)
                                : fmt::format("duplicate key '{}' in entry '{}'", key,
                                              last_key_[level - 1]);
          return false;
        }
        last_key_[level] = key;
        return true;
      }
      default:
        return true;
    }
  }

  const std::string& problem() const { return problem_; }

 private:
  // Names the top-level entry (the tensor) a nested value sits in.
  std::string where(int depth) const {
    if (depth >= 2 && last_key_.size() > 1) return fmt::format(" (in entry '{}')", last_key_[1]);
    return "";
  }

  std::vector<std::unordered_set<std::string>> keys_;  // keys seen, per object nesting level
  std::vector<std::string> last_key_;                  // the latest key per level, for messages
  std::string problem_;
};

// Checked a*b for unsigned 64-bit values.
bool multiply_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return true;
  *out = a * b;
  return false;
}

Expected<uint64_t> json_to_u64(const Json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  // nlohmann stores non-negative integers as unsigned; a signed integer here is negative.
  if (value.is_number_integer()) return out_of_range("negative");
  return invalid_argument("not an integer");
}

Expected<SafetensorsTensorInfo> parse_tensor_entry(std::string_view file, const std::string& name,
                                                   const Json& entry, uint64_t data_size) {
  auto fail = [&](Status s) {
    return Status(s.code(), fmt::format("{}: tensor '{}': {}", file, name, s.message()));
  };
  if (!entry.is_object()) {
    return fail(invalid_argument(fmt::format(
        "entry must be an object with dtype, shape and data_offsets, got {}", entry.type_name())));
  }
  for (const auto& item : entry.items()) {
    const std::string& key = item.key();
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return fail(invalid_argument(fmt::format(
          "unexpected field '{}' (an entry has exactly dtype, shape and data_offsets)", key)));
    }
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(field)) return fail(invalid_argument(fmt::format("missing '{}'", field)));
  }

  SafetensorsTensorInfo info;
  info.name = name;

  const Json& dtype = entry["dtype"];
  if (!dtype.is_string()) {
    return fail(invalid_argument(fmt::format("dtype must be a string, got {}", snippet(dtype))));
  }
  auto parsed_dtype = dtype_from_safetensors(dtype.get_ref<const std::string&>());
  if (!parsed_dtype) {
    return fail(unsupported(fmt::format("dtype {} is not supported (locus reads {})",
                                        snippet(dtype), supported_dtype_names())));
  }
  info.dtype = *parsed_dtype;

  const Json& shape = entry["shape"];
  if (!shape.is_array()) {
    return fail(invalid_argument(fmt::format("shape must be an array, got {}", snippet(shape))));
  }
  if (shape.size() > static_cast<size_t>(kMaxDims)) {
    return fail(unsupported(
        fmt::format("shape has {} dimensions; locus supports at most {}", shape.size(), kMaxDims)));
  }
  uint64_t numel = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    auto dim = json_to_u64(shape[i]);
    if (!dim) {
      return fail(invalid_argument(fmt::format(
          "shape[{}] is {}; sizes must be non-negative integers", i, snippet(shape[i]))));
    }
    if (*dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        multiply_overflows(numel, *dim, &numel) ||
        numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return fail(out_of_range(
          fmt::format("shape {} has more elements than fit in 64 bits", snippet(shape))));
    }
    info.shape.push_back(static_cast<int64_t>(*dim));
  }
  uint64_t nbits = 0;
  if (multiply_overflows(numel, static_cast<uint64_t>(dtype_bits(info.dtype)), &nbits)) {
    return fail(
        out_of_range(fmt::format("{}{} has more bits than fit in 64 bits",
                                 dtype.get_ref<const std::string&>(), info.shape.to_string())));
  }
  if (nbits % 8 != 0) {
    return fail(invalid_argument(fmt::format("{}{} holds {} bits, not a whole number of bytes",
                                             dtype.get_ref<const std::string&>(),
                                             info.shape.to_string(), nbits)));
  }
  // locus packs fp4 two per byte along the last dimension, so a row must not end mid-byte.
  if (is_sub_byte(info.dtype) && !info.shape.empty() &&
      info.shape[info.shape.size() - 1] % 2 != 0) {
    return fail(unsupported(fmt::format(
        "{}{}: packed {} needs an even last dimension (two elements per byte along it)",
        dtype.get_ref<const std::string&>(), info.shape.to_string(), dtype_name(info.dtype))));
  }
  uint64_t nbytes = nbits / 8;

  const Json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    return fail(invalid_argument(
        fmt::format("data_offsets must be [begin, end], got {}", snippet(offsets))));
  }
  auto begin = json_to_u64(offsets[0]);
  auto end = json_to_u64(offsets[1]);
  if (!begin || !end) {
    return fail(invalid_argument(
        fmt::format("data_offsets {} must be two non-negative integers", snippet(offsets))));
  }
  info.data_begin = *begin;
  info.data_end = *end;
  if (info.data_begin > info.data_end) {
    return fail(invalid_argument(
        fmt::format("data offsets [{}, {}) are reversed", info.data_begin, info.data_end)));
  }
  if (info.data_end - info.data_begin != nbytes) {
    return fail(invalid_argument(
        fmt::format("data offsets [{}, {}) hold {} bytes but {}{} needs {}", info.data_begin,
                    info.data_end, info.data_end - info.data_begin,
                    dtype.get_ref<const std::string&>(), info.shape.to_string(), nbytes)));
  }
  if (info.data_end > data_size) {
    return fail(out_of_range(
        fmt::format("data offsets [{}, {}) end past data size {} (is the file truncated?)",
                    info.data_begin, info.data_end, data_size)));
  }
  return info;
}

// Overlaps are always errors: two tensors sharing bytes is never what a writer meant. Unused
// bytes are errors unless the options allow them, as the format requires exact coverage.
Status check_layout(const SafetensorsHeader& header, const SafetensorsParseOptions& options) {
  const auto& tensors = header.tensors;
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& ta = tensors[a];
    const auto& tb = tensors[b];
    if (ta.data_begin != tb.data_begin) return ta.data_begin < tb.data_begin;
    if (ta.data_end != tb.data_end) return ta.data_end < tb.data_end;
    return ta.name < tb.name;
  });
  uint64_t cursor = 0;
  const SafetensorsTensorInfo* previous = nullptr;  // the tensor that ends at `cursor`
  for (size_t index : order) {
    const auto& t = tensors[index];
    if (t.data_begin < cursor) {
      return invalid_argument(
          fmt::format("{}: tensor '{}': data offsets [{}, {}) overlap tensor '{}' at [{}, {})",
                      header.file_name, t.name, t.data_begin, t.data_end, previous->name,
                      previous->data_begin, previous->data_end));
    }
    if (t.data_begin > cursor && options.require_full_coverage) {
      return invalid_argument(fmt::format(
          "{}: tensor '{}': data offsets [{}, {}) leave bytes [{}, {}) of the data region "
          "unused; safetensors requires the tensors to cover the data region without holes",
          header.file_name, t.name, t.data_begin, t.data_end, cursor, t.data_begin));
    }
    cursor = t.data_end;
    previous = &t;
  }
  if (cursor != header.data_size && options.require_full_coverage) {
    std::string after =
        previous ? fmt::format("after tensor '{}' ", previous->name) : std::string("(no tensors) ");
    return invalid_argument(fmt::format(
        "{}: bytes [{}, {}) of the data region {}belong to no tensor; safetensors requires the "
        "tensors to cover the data region exactly",
        header.file_name, cursor, header.data_size, after));
  }
  return Status::ok();
}

}  // namespace

const SafetensorsTensorInfo* SafetensorsHeader::find(std::string_view name) const {
  auto it = std::lower_bound(
      tensors.begin(), tensors.end(), name,
      [](const SafetensorsTensorInfo& t, std::string_view n) { return t.name < n; });
  if (it == tensors.end() || it->name != name) return nullptr;
  return &*it;
}

Expected<SafetensorsHeader> parse_safetensors_header(std::span<const uint8_t> file_bytes,
                                                     uint64_t file_size, std::string_view file_name,
                                                     const SafetensorsParseOptions& options) {
  if (file_bytes.size() > file_size) {
    return invalid_argument(fmt::format("{}: {} bytes given for a file of {} bytes", file_name,
                                        file_bytes.size(), file_size));
  }
  if (file_size < kLengthPrefixBytes) {
    return parse_error(
        fmt::format("{}: file is {} bytes; a safetensors file starts with an 8-byte header length "
                    "(truncated or not a safetensors file?)",
                    file_name, file_size));
  }
  if (file_bytes.size() < kLengthPrefixBytes) {
    return invalid_argument(fmt::format("{}: only {} bytes given; the header length needs 8",
                                        file_name, file_bytes.size()));
  }
  const uint64_t header_size = read_u64_le(file_bytes.data());
  if (header_size > kSafetensorsMaxHeaderBytes) {
    return out_of_range(fmt::format("{}: header length {} exceeds the limit of {} bytes", file_name,
                                    header_size, kSafetensorsMaxHeaderBytes));
  }
  // No overflow: header_size is at most the limit above.
  const uint64_t data_offset = kLengthPrefixBytes + header_size;
  if (data_offset > file_size) {
    return out_of_range(
        fmt::format("{}: header length {} runs past the end of the file ({} bytes; truncated?)",
                    file_name, header_size, file_size));
  }
  if (file_bytes.size() < data_offset) {
    return invalid_argument(fmt::format("{}: only {} bytes given; the header needs {}", file_name,
                                        file_bytes.size(), data_offset));
  }
  const uint8_t* json_begin = file_bytes.data() + kLengthPrefixBytes;
  const uint8_t* json_end = file_bytes.data() + data_offset;
  if (header_size == 0 || *json_begin != '{') {
    return parse_error(
        fmt::format("{}: header does not start with '{{' (not a safetensors file?)", file_name));
  }

  // nlohmann stops at a NUL byte as if the input ended there, which would accept anything after
  // it; the Rust crate rejects such a header, and so do we.
  if (const void* nul = std::memchr(json_begin, 0, static_cast<size_t>(header_size))) {
    return parse_error(fmt::format(
        "{}: header has a NUL byte at offset {}", file_name,
        kLengthPrefixBytes + static_cast<uint64_t>(static_cast<const uint8_t*>(nul) - json_begin)));
  }

  StructureGuard guard;
  Json root;
  try {
    root = Json::parse(
        json_begin, json_end,
        [&guard](int depth, Json::parse_event_t event, Json& parsed) {
          return guard.on_event(depth, event, parsed);
        },
        /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const Json::exception& e) {
    return parse_error(fmt::format("{}: header is not valid JSON: {}", file_name, e.what()));
  } catch (const std::bad_alloc&) {
    return resource_exhausted(
        fmt::format("{}: out of memory parsing a {}-byte header", file_name, header_size));
  }
  if (!guard.problem().empty()) {
    return parse_error(fmt::format("{}: {}", file_name, guard.problem()));
  }
  if (!root.is_object()) {
    return parse_error(
        fmt::format("{}: header must be a JSON object, got {}", file_name, root.type_name()));
  }

  SafetensorsHeader header;
  header.file_name = std::string(file_name);
  header.file_size = file_size;
  header.header_size = header_size;
  header.data_offset = data_offset;
  header.data_size = file_size - data_offset;
  header.tensors.reserve(root.size());
  // The JSON object iterates in key order, so tensors come out sorted by name.
  for (const auto& [name, entry] : root.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) {
        return invalid_argument(
            fmt::format("{}: __metadata__ must be an object mapping strings to strings, got {}",
                        file_name, entry.type_name()));
      }
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) {
          return invalid_argument(
              fmt::format("{}: __metadata__ must map strings to strings; '{}' is {} ({})",
                          file_name, key, value.type_name(), snippet(value)));
        }
        header.metadata.emplace(key, value.get<std::string>());
      }
      continue;
    }
    LOCUS_ASSIGN_OR_RETURN(auto info, parse_tensor_entry(file_name, name, entry, header.data_size));
    header.tensors.push_back(std::move(info));
  }
  LOCUS_RETURN_IF_ERROR(check_layout(header, options));
  return header;
}

Expected<Tensor> safetensors_tensor_view(const SafetensorsHeader& header,
                                         const SafetensorsTensorInfo& info,
                                         std::span<const uint8_t> file_bytes,
                                         std::shared_ptr<const void> keep_alive) {
  // The header was validated against its own file_size; these checks make sure the bytes handed
  // in are that file, so a mixed-up header and buffer can never read out of bounds.
  if (file_bytes.size() < header.file_size || header.data_offset > header.file_size ||
      info.data_begin > info.data_end || info.data_end > header.file_size - header.data_offset) {
    return internal_error(fmt::format(
        "{}: tensor '{}': data offsets [{}, {}) fall outside the {} bytes given", header.file_name,
        info.name, info.data_begin, info.data_end, file_bytes.size()));
  }
  // The mapping is PROT_READ; Storage has no read-only flavour, so the constness is dropped here
  // and documented on SafetensorsFile.
  auto* data = const_cast<uint8_t*>(file_bytes.data()) + header.data_offset + info.data_begin;
  auto storage = Storage::borrow(data, static_cast<size_t>(info.nbytes()), Device::cpu(),
                                 std::move(keep_alive));
  auto tensor = Tensor::from_storage(std::move(storage), info.shape, info.dtype, 0);
  if (!tensor) {
    return tensor.status().with_context(
        fmt::format("{}: tensor '{}'", header.file_name, info.name));
  }
  return tensor;
}

// ---- SafetensorsFile ----------------------------------------------------------------------------

struct SafetensorsFile::Mapping {
  void* address = nullptr;
  size_t size = 0;

  Mapping(void* a, size_t s) : address(a), size(s) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (address != nullptr) munmap(address, size);
  }
};

Expected<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path,
                                                const SafetensorsParseOptions& options) {
  const std::string name = path.string();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string reason = std::error_code(err, std::generic_category()).message();
    if (err == ENOENT || err == ENOTDIR) {
      return not_found(fmt::format("{}: no such file", name));
    }
    return io_error(fmt::format("{}: cannot open: {}", name, reason));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return io_error(fmt::format("{}: cannot stat: {}", name,
                                std::error_code(err, std::generic_category()).message()));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument(fmt::format("{}: not a regular file", name));
  }
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < kLengthPrefixBytes) {
    ::close(fd);
    // Too small to map usefully; the parser words the error.
    return parse_safetensors_header({}, file_size, name, options).status();
  }
  void* address = mmap(nullptr, static_cast<size_t>(file_size), PROT_READ, MAP_PRIVATE, fd, 0);
  int map_errno = errno;
  // The mapping keeps the file referenced; the descriptor is not needed any more.
  ::close(fd);
  if (address == MAP_FAILED) {
    return io_error(fmt::format("{}: mmap of {} bytes failed: {}", name, file_size,
                                std::error_code(map_errno, std::generic_category()).message()));
  }
  auto mapping = std::make_shared<const Mapping>(address, static_cast<size_t>(file_size));

  std::span<const uint8_t> bytes(static_cast<const uint8_t*>(address),
                                 static_cast<size_t>(file_size));
  LOCUS_ASSIGN_OR_RETURN(auto header, parse_safetensors_header(bytes, file_size, name, options));

  SafetensorsFile file;
  file.path_ = path;
  file.mapping_ = std::move(mapping);
  file.header_ = std::make_shared<const SafetensorsHeader>(std::move(header));
  return file;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(header_->tensors.size());
  for (const auto& t : header_->tensors) {
    out.push_back(t.name);
  }
  return out;
}

Expected<SafetensorsTensorInfo> SafetensorsFile::info(std::string_view name) const {
  const auto* info = header_->find(name);
  if (info == nullptr) {
    return not_found(fmt::format("{}: no tensor '{}'", header_->file_name, name));
  }
  return *info;
}

Expected<Tensor> SafetensorsFile::tensor(std::string_view name) const {
  const auto* info = header_->find(name);
  if (info == nullptr) {
    return not_found(fmt::format("{}: no tensor '{}'", header_->file_name, name));
  }
  return safetensors_tensor_view(*header_, *info, bytes(), mapping_);
}

std::span<const uint8_t> SafetensorsFile::bytes() const {
  return {static_cast<const uint8_t*>(mapping_->address), mapping_->size};
}

}  // namespace locus
