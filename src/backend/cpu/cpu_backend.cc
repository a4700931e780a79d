// CpuBackend: memory, weight preparation and the linear op. Host memory is device memory here,
// so to_device/to_host are views; weights become dense f32 once, at load.
#include "backend/cpu/cpu_backend.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "core/convert.h"

namespace locus {
namespace {

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

int resolve_threads(int requested) {
  if (requested > 0) return requested;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

}  // namespace

CpuBackend::CpuBackend(const CpuBackendOptions& options)
    : options_(options),
      weight_budget_(options.weight_memory_budget_bytes != 0 ? options.weight_memory_budget_bytes
                                                             : physical_memory_bytes() / 10 * 8),
      pool_(std::make_unique<cpu::ThreadPool>(resolve_threads(options.num_threads))) {}

CpuBackend::~CpuBackend() = default;

std::string CpuBackend::name() const {
  return fmt::format(
      "cpu ({} gemm, {} threads)",
      options_.gemm_engine == cpu::GemmEngine::kOpenBlas ? "openblas" : "batch-invariant",
      pool_->num_threads());
}

uint64_t CpuBackend::prepared_weight_bytes(DType dtype, int64_t numel) const {
  // Every float weight is widened to f32; scales are folded into their weight. Index-like
  // tensors (none today) would keep their size.
  const DTypeInfo& info = dtype_info(dtype);
  if (!info.is_float) return dtype_bytes(dtype, static_cast<size_t>(numel));
  return static_cast<uint64_t>(numel) * sizeof(float);
}

Expected<Tensor> CpuBackend::do_empty(const Dims& shape, DType dtype) {
  return Tensor::empty(shape, dtype);
}

Status CpuBackend::do_fill_zero(Tensor& t) {
  if (!t.is_contiguous()) {
    return invalid_argument(fmt::format("fill_zero: {} is not contiguous", t.to_string()));
  }
  std::memset(t.raw_data(), 0, t.nbytes());
  return Status::ok();
}

Expected<Tensor> CpuBackend::do_to_device(const Tensor& host) {
  return host;
}

Expected<Tensor> CpuBackend::do_to_host(const Tensor& tensor) {
  return tensor;
}

Expected<LinearWeight> CpuBackend::do_prepare_linear(const LinearWeight& host) {
  LinearWeight out;
  LOCUS_ASSIGN_OR_RETURN(Tensor dense, cpu::dense_weight(host));
  // dense_weight may return the caller's own tensor (already dense f32): copy so the prepared
  // weight owns its memory and never aliases a checkpoint mapping.
  if (dense.raw_data() == host.weight.raw_data()) {
    LOCUS_ASSIGN_OR_RETURN(out.weight, Tensor::empty(dense.shape(), DType::kF32));
    std::memcpy(out.weight.raw_data(), dense.raw_data(), dense.nbytes());
  } else {
    out.weight = std::move(dense);
  }
  if (host.bias.defined()) {
    LOCUS_ASSIGN_OR_RETURN(out.bias, do_prepare_weight(host.bias));
  }
  return out;
}

Expected<Tensor> CpuBackend::do_prepare_weight(const Tensor& host) {
  if (!host.is_contiguous()) {
    return invalid_argument(fmt::format("prepare_weight: {} is not contiguous", host.to_string()));
  }
  LOCUS_ASSIGN_OR_RETURN(Tensor out, Tensor::empty(host.shape(), DType::kF32));
  Tensor source = host;
  if (reinterpret_cast<uintptr_t>(host.raw_data()) % 8 != 0) {
    // Unaligned checkpoint view: copy the raw bytes first (see cpu::to_dense_f32).
    LOCUS_ASSIGN_OR_RETURN(source, Tensor::empty(host.shape(), host.dtype()));
    std::memcpy(source.raw_data(), host.raw_data(), host.nbytes());
  }
  LOCUS_RETURN_IF_ERROR(convert_to_f32(source.dtype(), source.raw_data(), out.data<float>(),
                                       static_cast<size_t>(host.numel())));
  return out;
}

Status CpuBackend::do_linear(const Tensor& x_in, const LinearWeight& w, Tensor& out) {
  const Tensor x = act(x_in);
  const int64_t rows = x.size(0);
  if (x.dtype() == DType::kF32) {
    return cpu::linear_rows(context(), x.data<float>(), x.stride(0), rows, w, out.data<float>());
  }
  // bf16 / f16 activations: widen exactly, then the same f32 GEMM.
  LOCUS_ASSIGN_OR_RETURN(Tensor wide, Tensor::empty(x.shape(), DType::kF32));
  for (int64_t r = 0; r < rows; ++r) {
    const auto* src = static_cast<const char*>(x.raw_data()) +
                      dtype_bytes(x.dtype(), static_cast<size_t>(r * x.stride(0)));
    LOCUS_RETURN_IF_ERROR(convert_to_f32(x.dtype(), src, wide.data<float>() + r * x.size(1),
                                         static_cast<size_t>(x.size(1))));
  }
  return cpu::linear_rows(context(), wide.data<float>(), x.size(1), rows, w, out.data<float>());
}

}  // namespace locus
