// CUDA runtime errors as locus Status values, and the argument checks the runtime's host files
// share.
#pragma once

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <string_view>

#include "core/status.h"
#include "core/tensor.h"

namespace locus {

inline Status cuda_status(const char* what, cudaError_t err) {
  if (err == cudaSuccess) return Status::ok();
  return internal_error(
      fmt::format("{}: {} ({})", what, cudaGetErrorString(err), cudaGetErrorName(err)));
}

inline bool on_cuda(const Tensor& t) {
  return t.defined() && t.device().type == DeviceType::kCuda;
}

// Activations on the CUDA backend are bf16 tensors on the GPU; anything else is a caller error.
inline Status need_bf16(std::string_view op, std::string_view arg, const Tensor& t) {
  if (t.dtype() != DType::kBF16) {
    return unsupported(fmt::format("{} on cuda: {} {} must be bf16 (the activation dtype)", op, arg,
                                   t.to_string()));
  }
  if (!on_cuda(t)) {
    return invalid_argument(
        fmt::format("{} on cuda: {} {} is not on the GPU", op, arg, t.to_string()));
  }
  return Status::ok();
}

}  // namespace locus

#define LOCUS_CUDA_OK(what, call) LOCUS_RETURN_IF_ERROR(::locus::cuda_status(what, (call)))
