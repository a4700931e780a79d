// cuBLAS and cuBLASLt, opened at run time (dlopen) instead of linked. Loading libcublasLt runs
// about 0.6 s of its own initializers per process, which every program of a CUDA build paid even
// without a GPU (each test process, `locus --help`, a CPU-backend server); opened on first use,
// only a CudaBackend pays it, and a CUDA build also starts where cuBLAS is not installed.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

#include <string>

#include "core/status.h"

namespace locus::cuda {

// The entry points locus uses (types from the headers this binary was built with).
struct CublasApi {
  decltype(&cublasLtGetVersion) lt_get_version = nullptr;
  decltype(&cublasLtCreate) lt_create = nullptr;
  decltype(&cublasLtDestroy) lt_destroy = nullptr;
  decltype(&cublasLtMatmul) lt_matmul = nullptr;
  decltype(&cublasLtMatmulDescCreate) lt_desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) lt_desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) lt_desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) lt_layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) lt_layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) lt_pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) lt_pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) lt_pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) lt_heuristic = nullptr;
  decltype(&cublasCreate) create = nullptr;
  decltype(&cublasDestroy) destroy = nullptr;
  decltype(&cublasSetStream) set_stream = nullptr;
  decltype(&cublasSetWorkspace) set_workspace = nullptr;
  // The exported overload (compute type cublasComputeType_t), not the header's inline
  // cudaDataType one.
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                            int, int, int, const void*, const void*, cudaDataType,
                                            int, long long, const void*, cudaDataType, int,
                                            long long, const void*, void*, cudaDataType, int,
                                            long long, int, cublasComputeType_t,
                                            cublasGemmAlgo_t) = nullptr;
};

// The process's API, opened once: LOCUS_CUBLASLT_LIBRARY and LOCUS_CUBLAS_LIBRARY when set, else
// libcublasLt.so.N and libcublas.so.N (N: the major version built against) from the loader's
// search path, then from the CUDA toolkit this binary was built with.
Expected<const CublasApi*> cublas_api();

// Opens the two libraries given by path or file name and resolves every entry point; what
// cublas_api() does once, without caching (tests use it). Fails naming the library and symbol,
// or when the library's major version differs from the headers'.
Expected<CublasApi> load_cublas_api(const std::string& lt_library, const std::string& blas_library);

}  // namespace locus::cuda
