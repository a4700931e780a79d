// CUDA runtime errors as locus Status values, for the runtime's host files.
#pragma once

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "core/status.h"

namespace locus {

inline Status cuda_status(const char* what, cudaError_t err) {
  if (err == cudaSuccess) return Status::ok();
  return internal_error(
      fmt::format("{}: {} ({})", what, cudaGetErrorString(err), cudaGetErrorName(err)));
}

}  // namespace locus

#define LOCUS_CUDA_OK(what, call) LOCUS_RETURN_IF_ERROR(::locus::cuda_status(what, (call)))
