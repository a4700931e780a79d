// Tensor: a typed, shaped, strided view over bytes on a device. The bytes live in a Storage that
// either owns them (host allocation, device allocation with its deleter) or borrows them (an
// mmap'ed checkpoint kept alive by a shared handle, a caller's buffer). Views share storage.
// A Tensor never copies implicitly and never touches device memory from host code.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace locus {

enum class DeviceType : uint8_t { kCpu, kCuda };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int index) { return {DeviceType::kCuda, index}; }
  bool is_cpu() const { return type == DeviceType::kCpu; }
  std::string to_string() const;  // "cpu", "cuda:0"
  friend bool operator==(const Device&, const Device&) = default;
};

// A block of bytes on one device.
class Storage {
 public:
  using Deleter = std::function<void(void*)>;

  // Host memory aligned to `alignment` bytes (64 by default: a cache line, enough for AVX-512).
  static Expected<std::shared_ptr<Storage>> allocate_host(size_t bytes, size_t alignment = 64);
  // Takes ownership: `deleter(data)` runs when the last view is gone.
  static std::shared_ptr<Storage> adopt(void* data, size_t bytes, Device device, Deleter deleter);
  // Does not own `data`; `keep_alive` (e.g. an mmap handle) is held as long as the storage lives.
  static std::shared_ptr<Storage> borrow(void* data, size_t bytes, Device device,
                                         std::shared_ptr<const void> keep_alive = nullptr);

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  Device device() const { return device_; }
  bool is_owning() const { return static_cast<bool>(deleter_); }

 private:
  Storage(void* data, size_t bytes, Device device, Deleter deleter,
          std::shared_ptr<const void> keep_alive);
  void* data_;
  size_t bytes_;
  Device device_;
  Deleter deleter_;
  std::shared_ptr<const void> keep_alive_;
};

inline constexpr int kMaxDims = 8;

// A small fixed-capacity list of dimension sizes or strides (no heap allocation per view).
class Dims {
 public:
  Dims() = default;
  Dims(std::initializer_list<int64_t> values);
  explicit Dims(std::span<const int64_t> values);

  int size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t operator[](int i) const { return values_[static_cast<size_t>(i)]; }
  int64_t& operator[](int i) { return values_[static_cast<size_t>(i)]; }
  const int64_t* begin() const { return values_.data(); }
  const int64_t* end() const { return values_.data() + size_; }
  void push_back(int64_t v);
  std::vector<int64_t> to_vector() const { return {begin(), end()}; }
  std::string to_string() const;  // "[2, 3, 4]"
  friend bool operator==(const Dims& a, const Dims& b);

 private:
  std::array<int64_t, kMaxDims> values_{};
  int size_ = 0;
};

class Tensor {
 public:
  Tensor() = default;  // an empty tensor: no storage, numel 0

  // Allocates a contiguous host tensor. Contents are uninitialized.
  static Expected<Tensor> empty(const Dims& shape, DType dtype);
  // Allocates a contiguous host tensor filled with zero bytes.
  static Expected<Tensor> zeros(const Dims& shape, DType dtype);
  // A contiguous view of `storage` starting `byte_offset` bytes in; checks it fits.
  static Expected<Tensor> from_storage(std::shared_ptr<Storage> storage, const Dims& shape,
                                       DType dtype, size_t byte_offset = 0);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Dims& shape() const { return shape_; }
  const Dims& strides() const { return strides_; }  // in elements
  int ndim() const { return shape_.size(); }
  int64_t size(int dim) const;    // negative dims count from the end
  int64_t stride(int dim) const;  // negative dims count from the end
  int64_t numel() const;
  size_t nbytes() const { return dtype_bytes(dtype_, static_cast<size_t>(numel())); }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  size_t byte_offset() const;
  bool is_contiguous() const;

  void* raw_data() const;
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw_data());
  }

  // Views (share storage). Each checks its arguments and names them in the error.
  Expected<Tensor> reshape(const Dims& shape) const;  // contiguous tensors only; one -1 allowed
  Expected<Tensor> slice(int dim, int64_t start, int64_t end) const;  // [start, end)
  Expected<Tensor> select(int dim, int64_t index) const;              // drops `dim`
  Expected<Tensor> transpose(int dim0, int dim1) const;
  // Splits `dim` into (outer, size(dim) / outer): works on strided views too (a column slice
  // [T, H * D] of a wider matrix becomes the row view [T, H, D]).
  Expected<Tensor> unflatten(int dim, int64_t outer) const;
  // Same bytes, another dtype of the same element width (e.g. u8 <-> f8_e4m3).
  Expected<Tensor> view_as(DType dtype) const;

  std::string to_string() const;  // "bf16[2, 4096] cpu"

 private:
  Expected<int> normalize_dim(int dim) const;

  std::shared_ptr<Storage> storage_;
  DType dtype_ = DType::kF32;
  Dims shape_;
  Dims strides_;
  int64_t offset_ = 0;  // in elements from storage_->data()
};

// Row-major strides for `shape`.
Dims contiguous_strides(const Dims& shape);
// Product of the sizes; 1 for a 0-d shape. Returns -1 if it overflows int64.
int64_t shape_numel(const Dims& shape);

}  // namespace locus
