// A stand-in for libcublasLt + libcublas of another major version, for the loader's version
// check (cublas_api_gpu_test): every entry point the loader resolves is exported, and
// cublasLtGetVersion reports FAKE_CUBLAS_VERSION. Nothing else is ever called. The names repeat
// the loader's list in cublas_api.cc (after cublas_v2.h's _v2 renames): an entry point added
// there and not here makes OtherMajorVersionIsRefused fail with "has no <name>", not pass.
#include <cstddef>

#define FAKE_ENTRY(name)                                         \
  extern "C" __attribute__((visibility("default"))) int name() { \
    return 1;                                                    \
  }

extern "C" __attribute__((visibility("default"))) size_t cublasLtGetVersion() {
  return FAKE_CUBLAS_VERSION;
}

FAKE_ENTRY(cublasLtCreate)
FAKE_ENTRY(cublasLtDestroy)
FAKE_ENTRY(cublasLtMatmul)
FAKE_ENTRY(cublasLtMatmulDescCreate)
FAKE_ENTRY(cublasLtMatmulDescDestroy)
FAKE_ENTRY(cublasLtMatmulDescSetAttribute)
FAKE_ENTRY(cublasLtMatrixLayoutCreate)
FAKE_ENTRY(cublasLtMatrixLayoutDestroy)
FAKE_ENTRY(cublasLtMatmulPreferenceCreate)
FAKE_ENTRY(cublasLtMatmulPreferenceDestroy)
FAKE_ENTRY(cublasLtMatmulPreferenceSetAttribute)
FAKE_ENTRY(cublasLtMatmulAlgoGetHeuristic)
FAKE_ENTRY(cublasCreate_v2)
FAKE_ENTRY(cublasDestroy_v2)
FAKE_ENTRY(cublasSetStream_v2)
FAKE_ENTRY(cublasSetWorkspace_v2)
FAKE_ENTRY(cublasGemmStridedBatchedEx)
