// Safetensors header validation and the mmap'ed reader. Every check that guards a memory access
// lives in parse_safetensors_header, which the fuzzer drives directly; the reader only maps the
// file and hands out views of ranges the parser accepted.
#include "io/safetensors.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <numeric>
#include <system_error>
#include <utility>

namespace locus {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kLengthPrefixBytes = 8;

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) {
    v = (v << 8) | p[i];
  }
  return v;
}

// Describes a JSON scalar for an error message: `a number (2.5)`, `a string ("x")`.
std::string describe(std::string_view kind, std::string_view text) {
  constexpr size_t kMax = 40;
  std::string shown(text.substr(0, kMax));
  if (text.size() > kMax) shown += "...";
  return fmt::format("{} ({})", kind, shown);
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

// Checked a*b for unsigned 64-bit values.
bool multiply_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return true;
  *out = a * b;
  return false;
}

// Builds a SafetensorsHeader straight from nlohmann's SAX events, with no JSON tree in between.
// A tree would cost memory proportional to a hostile header, nlohmann's DOM silently keeps the
// last of duplicate keys, and its callback parser rescans the parent object after every entry
// (quadratic: 2000 tensors took 18 ms, most of it in that rescan). Every event is checked against
// the one shape a header may have, and the first mismatch stops the parse.
class HeaderBuilder {
 public:
  HeaderBuilder(std::string_view file, SafetensorsHeader* header) : file_(file), header_(header) {}

  const Status& status() const { return status_; }

  // ---- nlohmann SAX interface ----
  bool null() { return scalar("null", "null"); }
  bool boolean(bool value) { return scalar("a boolean", value ? "true" : "false"); }
  bool number_integer(int64_t value) {
    // nlohmann reports non-negative integers as unsigned, so this one is negative.
    return scalar("a negative number", std::to_string(value));
  }
  bool number_unsigned(uint64_t value) {
    if (depth_ == 3) return array_number(value);
    return scalar("a number", std::to_string(value));
  }
  bool number_float(double, const std::string& text) { return scalar("a number", text); }
  bool string(std::string& value) {
    if (depth_ == 2 && in_metadata_) {
      header_->metadata.emplace(std::move(key_), std::move(value));
      return true;
    }
    if (depth_ == 2 && field_ == Field::kDtype) return set_dtype(value);
    return scalar("a string", "\"" + value + "\"");
  }
  bool binary(Json::binary_t&) { return scalar("binary data", ""); }  // not produced from JSON text

  bool start_object(size_t) {
    if (depth_ == 0) {
      depth_ = 1;
      return true;
    }
    if (depth_ == 1) {
      depth_ = 2;
      if (in_metadata_) return true;
      entry_ = RawEntry{};
      entry_.name = std::move(key_);
      field_ = Field::kNone;
      return true;
    }
    return container("an object");
  }
  bool end_object() {
    if (depth_ == 2) {
      depth_ = 1;
      if (in_metadata_) {
        in_metadata_ = false;
        return true;
      }
      return finish_entry();
    }
    depth_ = 0;
    return true;
  }
  bool start_array(size_t) {
    if (depth_ == 2 && !in_metadata_ && (field_ == Field::kShape || field_ == Field::kOffsets)) {
      depth_ = 3;
      array_length_ = 0;
      return true;
    }
    return container("an array");
  }
  bool end_array() {
    depth_ = 2;
    if (field_ == Field::kShape) {
      entry_.rank = array_length_;
      if (array_length_ > static_cast<size_t>(kMaxDims)) {
        return fail(unsupported(fmt::format("shape has {} dimensions; locus supports at most {}",
                                            array_length_, kMaxDims)));
      }
    } else if (array_length_ != 2) {
      return fail(invalid_argument(fmt::format(
          "data_offsets must be [begin, end], got an array of {} values", array_length_)));
    }
    return true;
  }
  bool key(std::string& key) {
    if (depth_ == 1) {
      if (key == "__metadata__") {
        if (seen_metadata_)
          return fail(locus::parse_error("duplicate key '__metadata__' in the header"));
        seen_metadata_ = in_metadata_ = true;
      }
      key_ = std::move(key);
      return true;
    }
    if (in_metadata_) {
      if (header_->metadata.count(key) != 0) {
        return fail(locus::parse_error(fmt::format("duplicate key '{}'", key)));
      }
      key_ = std::move(key);
      return true;
    }
    Field field = key == "dtype"          ? Field::kDtype
                  : key == "shape"        ? Field::kShape
                  : key == "data_offsets" ? Field::kOffsets
                                          : Field::kNone;
    if (field == Field::kNone) {
      return fail(invalid_argument(fmt::format(
          "unexpected field '{}' (an entry has exactly dtype, shape and data_offsets)", key)));
    }
    const auto bit = 1u << static_cast<unsigned>(field);
    if ((entry_.fields_seen & bit) != 0) {
      return fail(locus::parse_error(fmt::format("duplicate key '{}'", key)));
    }
    entry_.fields_seen |= bit;
    field_ = field;
    return true;
  }
  bool parse_error(size_t position, const std::string&, const Json::exception& e) {
    status_ = locus::parse_error(fmt::format("{}: header is not valid JSON (at byte {}): {}", file_,
                                             kLengthPrefixBytes + position, e.what()));
    return false;
  }

 private:
  enum class Field : unsigned { kNone, kDtype, kShape, kOffsets };

  struct RawEntry {
    std::string name;
    unsigned fields_seen = 0;
    DType dtype = DType::kF32;
    std::array<uint64_t, kMaxDims> dims{};
    size_t rank = 0;
    std::array<uint64_t, 2> offsets{};
  };

  // Prefixes the file and, inside an entry, the tensor.
  bool fail(Status s) {
    if (depth_ >= 2 && !in_metadata_) {
      status_ =
          Status(s.code(), fmt::format("{}: tensor '{}': {}", file_, entry_.name, s.message()));
    } else if (in_metadata_) {
      status_ = Status(s.code(), fmt::format("{}: __metadata__: {}", file_, s.message()));
    } else {
      status_ = Status(s.code(), fmt::format("{}: {}", file_, s.message()));
    }
    return false;
  }

  // A scalar where it does not belong (numbers in arrays are handled by array_number).
  bool scalar(std::string_view kind, std::string_view text) {
    std::string what = describe(kind, text);
    if (depth_ == 1) {
      if (in_metadata_) {
        return fail(invalid_argument(
            fmt::format("must be an object mapping strings to strings, got {}", what)));
      }
      return fail(invalid_argument(fmt::format(
          "tensor '{}': entry must be an object with dtype, shape and data_offsets, got {}", key_,
          what)));
    }
    if (depth_ == 2 && in_metadata_) {
      return fail(
          invalid_argument(fmt::format("must map strings to strings; '{}' is {}", key_, what)));
    }
    if (depth_ == 2) {
      switch (field_) {
        case Field::kDtype:
          return fail(invalid_argument(fmt::format("dtype must be a string, got {}", what)));
        case Field::kShape:
          return fail(invalid_argument(fmt::format("shape must be an array, got {}", what)));
        default:
          return fail(
              invalid_argument(fmt::format("data_offsets must be [begin, end], got {}", what)));
      }
    }
    if (depth_ == 3) {
      if (field_ == Field::kShape) {
        return fail(invalid_argument(fmt::format(
            "shape[{}] is {}; sizes must be non-negative integers", array_length_, what)));
      }
      return fail(invalid_argument(fmt::format(
          "data_offsets[{}] is {}; offsets must be non-negative integers", array_length_, what)));
    }
    return fail(locus::parse_error(fmt::format("header must be a JSON object, got {}", what)));
  }

  bool container(std::string_view kind) {
    if (depth_ >= 3) {
      return fail(locus::parse_error("JSON nests deeper than a safetensors header allows"));
    }
    if (depth_ == 1) {
      if (in_metadata_) {
        return fail(invalid_argument(
            fmt::format("must be an object mapping strings to strings, got {}", kind)));
      }
      return fail(invalid_argument(fmt::format(
          "tensor '{}': entry must be an object with dtype, shape and data_offsets, got {}", key_,
          kind)));
    }
    return scalar(kind, "...");
  }

  bool array_number(uint64_t value) {
    if (field_ == Field::kShape) {
      if (array_length_ < static_cast<size_t>(kMaxDims)) entry_.dims[array_length_] = value;
    } else if (array_length_ < 2) {
      entry_.offsets[array_length_] = value;
    }
    ++array_length_;
    return true;
  }

  bool set_dtype(const std::string& name) {
    auto dtype = dtype_from_safetensors(name);
    if (!dtype) {
      constexpr size_t kMax = 40;
      std::string shown = name.size() > kMax ? name.substr(0, kMax) + "..." : name;
      return fail(unsupported(fmt::format("dtype \"{}\" is not supported (locus reads {})", shown,
                                          supported_dtype_names())));
    }
    entry_.dtype = *dtype;
    return true;
  }

  // All fields are in: check them against each other and against the data region.
  bool finish_entry() {
    depth_ = 2;  // errors below still name the tensor
    for (Field f : {Field::kDtype, Field::kShape, Field::kOffsets}) {
      if ((entry_.fields_seen & (1u << static_cast<unsigned>(f))) == 0) {
        static constexpr std::string_view kNames[] = {"", "dtype", "shape", "data_offsets"};
        return fail(
            invalid_argument(fmt::format("missing '{}'", kNames[static_cast<unsigned>(f)])));
      }
    }
    SafetensorsTensorInfo info;
    info.dtype = entry_.dtype;
    const std::string_view dtype_text = dtype_info(entry_.dtype).safetensors_name;
    const auto dims = std::span<const uint64_t>(entry_.dims.data(), entry_.rank);
    uint64_t numel = 1;
    for (uint64_t dim : dims) {
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          multiply_overflows(numel, dim, &numel) ||
          numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return fail(out_of_range(fmt::format("shape [{}] has more elements than fit in 64 bits",
                                             fmt::join(dims, ", "))));
      }
    }
    for (uint64_t dim : dims)
      info.shape.push_back(static_cast<int64_t>(dim));
    uint64_t nbits = 0;
    if (multiply_overflows(numel, static_cast<uint64_t>(dtype_bits(info.dtype)), &nbits)) {
      return fail(out_of_range(fmt::format("{}{} has more bits than fit in 64 bits", dtype_text,
                                           info.shape.to_string())));
    }
    if (nbits % 8 != 0) {
      return fail(invalid_argument(fmt::format("{}{} holds {} bits, not a whole number of bytes",
                                               dtype_text, info.shape.to_string(), nbits)));
    }
    // locus packs fp4 two per byte along the last dimension, so a row must not end mid-byte.
    if (is_sub_byte(info.dtype) && !info.shape.empty() &&
        info.shape[info.shape.size() - 1] % 2 != 0) {
      return fail(unsupported(fmt::format(
          "{}{}: packed {} needs an even last dimension (two elements per byte along it)",
          dtype_text, info.shape.to_string(), dtype_name(info.dtype))));
    }
    const uint64_t nbytes = nbits / 8;
    info.data_begin = entry_.offsets[0];
    info.data_end = entry_.offsets[1];
    if (info.data_begin > info.data_end) {
      return fail(invalid_argument(
          fmt::format("data offsets [{}, {}) are reversed", info.data_begin, info.data_end)));
    }
    if (info.data_end - info.data_begin != nbytes) {
      return fail(invalid_argument(fmt::format(
          "data offsets [{}, {}) hold {} bytes but {}{} needs {}", info.data_begin, info.data_end,
          info.data_end - info.data_begin, dtype_text, info.shape.to_string(), nbytes)));
    }
    if (info.data_end > header_->data_size) {
      return fail(out_of_range(
          fmt::format("data offsets [{}, {}) end past data size {} (is the file truncated?)",
                      info.data_begin, info.data_end, header_->data_size)));
    }
    info.name = std::move(entry_.name);
    header_->tensors.push_back(std::move(info));
    depth_ = 1;
    return true;
  }

  std::string_view file_;
  SafetensorsHeader* header_;
  Status status_;
  int depth_ = 0;  // open containers: 1 = top object, 2 = an entry, 3 = shape/data_offsets
  bool in_metadata_ = false;
  bool seen_metadata_ = false;
  std::string key_;  // the latest key at depth 1 (tensor name) or in __metadata__
  Field field_ = Field::kNone;
  size_t array_length_ = 0;
  RawEntry entry_;
};

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

  SafetensorsHeader header;
  header.file_name = std::string(file_name);
  header.file_size = file_size;
  header.header_size = header_size;
  header.data_offset = data_offset;
  header.data_size = file_size - data_offset;
  HeaderBuilder builder(file_name, &header);
  bool parsed = false;
  try {
    parsed = Json::sax_parse(json_begin, json_end, &builder, nlohmann::json::input_format_t::json,
                             /*strict=*/true, /*ignore_comments=*/false);
  } catch (const std::bad_alloc&) {
    return resource_exhausted(
        fmt::format("{}: out of memory parsing a {}-byte header", file_name, header_size));
  } catch (const std::exception& e) {
    return parse_error(fmt::format("{}: header is not valid JSON: {}", file_name, e.what()));
  }
  if (!parsed) {
    if (!builder.status().is_ok()) return builder.status();
    return internal_error(fmt::format("{}: header parse stopped without a reason", file_name));
  }

  // Sorted by name: lookups become a binary search, and duplicate names end up side by side.
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const SafetensorsTensorInfo& a, const SafetensorsTensorInfo& b) {
              return a.name < b.name;
            });
  for (size_t i = 1; i < header.tensors.size(); ++i) {
    if (header.tensors[i].name == header.tensors[i - 1].name) {
      return parse_error(
          fmt::format("{}: duplicate key '{}' in the header (two tensors of that "
                      "name)",
                      file_name, header.tensors[i].name));
    }
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
