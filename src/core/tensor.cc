#include "core/tensor.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

namespace locus {

std::string Device::to_string() const {
  return type == DeviceType::kCpu ? std::string("cpu") : fmt::format("cuda:{}", index);
}

// ---- Storage ----------------------------------------------------------------------------------

Storage::Storage(void* data, size_t bytes, Device device, Deleter deleter,
                 std::shared_ptr<const void> keep_alive)
    : data_(data),
      bytes_(bytes),
      device_(device),
      deleter_(std::move(deleter)),
      keep_alive_(std::move(keep_alive)) {}

Storage::~Storage() {
  if (deleter_ && data_ != nullptr) deleter_(data_);
}

Expected<std::shared_ptr<Storage>> Storage::allocate_host(size_t bytes, size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return invalid_argument(
        fmt::format("host allocation alignment {} is not a power of two", alignment));
  }
  // aligned_alloc needs a size that is a multiple of the alignment; a zero-byte tensor still
  // gets a distinct non-null pointer.
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  if (rounded < bytes) return resource_exhausted(fmt::format("host allocation of {} bytes", bytes));
  if (rounded == 0) rounded = alignment;
  void* data = std::aligned_alloc(alignment, rounded);
  if (data == nullptr) {
    return resource_exhausted(fmt::format("out of host memory allocating {} bytes", bytes));
  }
  return std::shared_ptr<Storage>(new Storage(
      data, bytes, Device::cpu(), [](void* p) { std::free(p); }, nullptr));
}

std::shared_ptr<Storage> Storage::adopt(void* data, size_t bytes, Device device, Deleter deleter) {
  return std::shared_ptr<Storage>(new Storage(data, bytes, device, std::move(deleter), nullptr));
}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t bytes, Device device,
                                         std::shared_ptr<const void> keep_alive) {
  return std::shared_ptr<Storage>(new Storage(data, bytes, device, nullptr, std::move(keep_alive)));
}

// ---- Dims -------------------------------------------------------------------------------------

Dims::Dims(std::initializer_list<int64_t> values)
    : Dims(std::span<const int64_t>(values.begin(), values.size())) {}

Dims::Dims(std::span<const int64_t> values) {
  if (values.size() > static_cast<size_t>(kMaxDims)) std::abort();  // a caller bug, not input
  for (int64_t v : values)
    push_back(v);
}

void Dims::push_back(int64_t v) {
  if (size_ >= kMaxDims) std::abort();
  values_[static_cast<size_t>(size_++)] = v;
}

std::string Dims::to_string() const {
  return fmt::format("[{}]", fmt::join(begin(), end(), ", "));
}

bool operator==(const Dims& a, const Dims& b) {
  if (a.size_ != b.size_) return false;
  for (int i = 0; i < a.size_; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

Dims contiguous_strides(const Dims& shape) {
  Dims strides = shape;
  int64_t running = 1;
  for (int i = shape.size() - 1; i >= 0; --i) {
    strides[i] = running;
    running *= shape[i] > 0 ? shape[i] : 1;
  }
  return strides;
}

int64_t shape_numel(const Dims& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

// ---- Tensor -----------------------------------------------------------------------------------

namespace {

Status check_shape(const Dims& shape, DType dtype) {
  if (shape_numel(shape) < 0) {
    return invalid_argument(fmt::format("invalid tensor shape {}", shape.to_string()));
  }
  // Packed fp4 keeps two elements per byte along the last dimension; an odd last dimension
  // would split a byte between rows.
  if (is_sub_byte(dtype) && !shape.empty() && shape[shape.size() - 1] % 2 != 0) {
    return invalid_argument(fmt::format("{} tensor needs an even last dimension, got shape {}",
                                        dtype_name(dtype), shape.to_string()));
  }
  return Status::ok();
}

}  // namespace

Expected<Tensor> Tensor::empty(const Dims& shape, DType dtype) {
  LOCUS_RETURN_IF_ERROR(check_shape(shape, dtype));
  auto bytes = dtype_bytes(dtype, static_cast<size_t>(shape_numel(shape)));
  LOCUS_ASSIGN_OR_RETURN(auto storage, Storage::allocate_host(bytes));
  return from_storage(std::move(storage), shape, dtype, 0);
}

Expected<Tensor> Tensor::zeros(const Dims& shape, DType dtype) {
  LOCUS_ASSIGN_OR_RETURN(Tensor t, empty(shape, dtype));
  std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

Expected<Tensor> Tensor::from_storage(std::shared_ptr<Storage> storage, const Dims& shape,
                                      DType dtype, size_t byte_offset) {
  if (!storage) return invalid_argument("tensor view of a null storage");
  LOCUS_RETURN_IF_ERROR(check_shape(shape, dtype));
  size_t bytes = dtype_bytes(dtype, static_cast<size_t>(shape_numel(shape)));
  if (byte_offset > storage->size() || bytes > storage->size() - byte_offset) {
    return out_of_range(fmt::format("{}{} at byte offset {} needs {} bytes; storage has {}",
                                    dtype_name(dtype), shape.to_string(), byte_offset, bytes,
                                    storage->size()));
  }
  // Offsets are kept in elements; the byte offset must land on an element (or, for packed
  // fp4, on a whole byte holding two elements).
  size_t element_bits = static_cast<size_t>(dtype_bits(dtype));
  if ((byte_offset * 8) % element_bits != 0) {
    return invalid_argument(
        fmt::format("byte offset {} is not aligned to {}", byte_offset, dtype_name(dtype)));
  }
  Tensor t;
  t.storage_ = std::move(storage);
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.offset_ = static_cast<int64_t>(byte_offset * 8 / element_bits);
  return t;
}

Expected<int> Tensor::normalize_dim(int dim) const {
  int n = ndim();
  int d = dim < 0 ? dim + n : dim;
  if (d < 0 || d >= n) {
    return out_of_range(fmt::format("dim {} out of range for {}", dim, to_string()));
  }
  return d;
}

int64_t Tensor::size(int dim) const {
  auto d = normalize_dim(dim);
  if (!d) std::abort();  // indexing a dimension that does not exist is a caller bug
  return shape_[*d];
}

int64_t Tensor::stride(int dim) const {
  auto d = normalize_dim(dim);
  if (!d) std::abort();
  return strides_[*d];
}

int64_t Tensor::numel() const {
  return defined() ? shape_numel(shape_) : 0;
}

size_t Tensor::byte_offset() const {
  return static_cast<size_t>(offset_) * static_cast<size_t>(dtype_bits(dtype_)) / 8;
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // no element to be out of place
  int64_t expected = 1;
  for (int i = ndim() - 1; i >= 0; --i) {
    if (shape_[i] == 1) continue;  // the stride of a size-1 dimension never matters
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  if (!storage_) return nullptr;
  return static_cast<char*>(storage_->data()) + byte_offset();
}

Expected<Tensor> Tensor::reshape(const Dims& shape) const {
  if (!is_contiguous()) {
    return invalid_argument(fmt::format("reshape of non-contiguous {}", to_string()));
  }
  Dims resolved = shape;
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < resolved.size(); ++i) {
    if (resolved[i] == -1) {
      if (infer >= 0) return invalid_argument("reshape: more than one -1 in the new shape");
      infer = i;
    } else if (resolved[i] < 0) {
      return invalid_argument(fmt::format("reshape: invalid shape {}", shape.to_string()));
    } else {
      known *= resolved[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel() % known != 0) {
      return invalid_argument(
          fmt::format("reshape {} to {}: sizes do not divide", to_string(), shape.to_string()));
    }
    resolved[infer] = numel() / known;
  }
  if (shape_numel(resolved) != numel()) {
    return invalid_argument(fmt::format("reshape {} to {}: {} elements vs {}", to_string(),
                                        resolved.to_string(), numel(), shape_numel(resolved)));
  }
  LOCUS_RETURN_IF_ERROR(check_shape(resolved, dtype_));
  Tensor t = *this;
  t.shape_ = resolved;
  t.strides_ = contiguous_strides(resolved);
  return t;
}

Expected<Tensor> Tensor::slice(int dim, int64_t start, int64_t end) const {
  LOCUS_ASSIGN_OR_RETURN(int d, normalize_dim(dim));
  if (start < 0 || end < start || end > shape_[d]) {
    return out_of_range(
        fmt::format("slice [{}, {}) of dim {} of {}", start, end, dim, to_string()));
  }
  if (is_sub_byte(dtype_) && d == ndim() - 1 && (start % 2 != 0 || end % 2 != 0)) {
    return invalid_argument(
        fmt::format("slice [{}, {}) splits packed {} bytes", start, end, dtype_name(dtype_)));
  }
  Tensor t = *this;
  t.shape_[d] = end - start;
  t.offset_ += start * strides_[d];
  return t;
}

Expected<Tensor> Tensor::unflatten(int dim, int64_t outer) const {
  LOCUS_ASSIGN_OR_RETURN(int d, normalize_dim(dim));
  if (outer <= 0 || shape_[d] % outer != 0) {
    return invalid_argument(
        fmt::format("unflatten dim {} of {} into {} parts", dim, to_string(), outer));
  }
  if (shape_.size() >= kMaxDims) {
    return invalid_argument(fmt::format("unflatten of {}: too many dims", to_string()));
  }
  if (is_sub_byte(dtype_) && d == ndim() - 1 && (shape_[d] / outer) % 2 != 0) {
    return invalid_argument(fmt::format("unflatten of {} splits packed bytes", to_string()));
  }
  Dims shape, strides;
  for (int i = 0; i < ndim(); ++i) {
    if (i == d) {
      const int64_t inner = shape_[i] / outer;
      shape.push_back(outer);
      strides.push_back(strides_[i] * inner);
      shape.push_back(inner);
      strides.push_back(strides_[i]);
    } else {
      shape.push_back(shape_[i]);
      strides.push_back(strides_[i]);
    }
  }
  Tensor t = *this;
  t.shape_ = shape;
  t.strides_ = strides;
  return t;
}

Expected<Tensor> Tensor::select(int dim, int64_t index) const {
  LOCUS_ASSIGN_OR_RETURN(int d, normalize_dim(dim));
  if (index < 0 || index >= shape_[d]) {
    return out_of_range(fmt::format("index {} of dim {} of {}", index, dim, to_string()));
  }
  if (is_sub_byte(dtype_) && d == ndim() - 1) {
    return invalid_argument(fmt::format("select on the packed dim of {}", to_string()));
  }
  Tensor t;
  t.storage_ = storage_;
  t.dtype_ = dtype_;
  t.offset_ = offset_ + index * strides_[d];
  for (int i = 0; i < ndim(); ++i) {
    if (i == d) continue;
    t.shape_.push_back(shape_[i]);
    t.strides_.push_back(strides_[i]);
  }
  return t;
}

Expected<Tensor> Tensor::transpose(int dim0, int dim1) const {
  LOCUS_ASSIGN_OR_RETURN(int a, normalize_dim(dim0));
  LOCUS_ASSIGN_OR_RETURN(int b, normalize_dim(dim1));
  if (is_sub_byte(dtype_) && a != b && (a == ndim() - 1 || b == ndim() - 1)) {
    return invalid_argument(fmt::format("transpose moves the packed dim of {}", to_string()));
  }
  Tensor t = *this;
  std::swap(t.shape_[a], t.shape_[b]);
  std::swap(t.strides_[a], t.strides_[b]);
  return t;
}

Expected<Tensor> Tensor::view_as(DType dtype) const {
  if (dtype_bits(dtype) != dtype_bits(dtype_)) {
    return invalid_argument(
        fmt::format("view {} as {}: element widths differ", to_string(), dtype_name(dtype)));
  }
  Tensor t = *this;
  t.dtype_ = dtype;
  return t;
}

std::string Tensor::to_string() const {
  if (!defined()) return "undefined tensor";
  return fmt::format("{}{} {}", dtype_name(dtype_), shape_.to_string(), device().to_string());
}

}  // namespace locus
