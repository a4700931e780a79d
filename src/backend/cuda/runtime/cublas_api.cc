#include "backend/cuda/runtime/cublas_api.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

#include "backend/cuda/runtime/shared_library.h"

// The exported name of an entry point after cublas_v2.h's renames (cublasCreate is
// cublasCreate_v2): stringized after macro expansion.
#define LOCUS_CUBLAS_STR(sym) #sym
#define LOCUS_CUBLAS_NAME(sym) LOCUS_CUBLAS_STR(sym)

namespace locus::cuda {
namespace {

// The environment's choice alone, else the soname from the search path (LD_LIBRARY_PATH,
// ld.so.cache, RUNPATH), then the same file in the build's CUDA toolkit.
std::vector<std::string> candidates(const char* env_var, const std::string& soname) {
  const char* env = std::getenv(env_var);
  if (env != nullptr && *env != '\0') return {env};
  std::vector<std::string> names{soname};
#ifdef LOCUS_CUDA_LIBRARY_DIR
  names.push_back((std::filesystem::path(LOCUS_CUDA_LIBRARY_DIR) / soname).string());
#endif
  return names;
}

Expected<CublasApi> load_from(const std::vector<std::string>& lt_names,
                              const std::vector<std::string>& blas_names) {
  CublasApi api;
  const std::string hint =
      "install cuBLAS (the CUDA toolkit's, or the nvidia-cublas wheel's) or point "
      "LOCUS_CUBLASLT_LIBRARY and LOCUS_CUBLAS_LIBRARY at its libraries";
  // RTLD_GLOBAL: libcublas finds this libcublasLt by its soname, also when it was opened from
  // the toolkit directory rather than the search path.
  auto lt = SharedLibrary::open_first(lt_names, RTLD_NOW | RTLD_GLOBAL);
  if (!lt) {
    return unsupported(
        fmt::format("cuBLASLt could not be loaded ({}): {}", lt.error().message(), hint));
  }
  auto blas = SharedLibrary::open_first(blas_names, RTLD_NOW | RTLD_GLOBAL);
  if (!blas) {
    return unsupported(
        fmt::format("cuBLAS could not be loaded ({}): {}", blas.error().message(), hint));
  }
  SymbolResolver lt_fn(*lt, hint);
  SymbolResolver blas_fn(*blas, hint);
  lt_fn(api.lt_get_version, "cublasLtGetVersion");
  lt_fn(api.lt_create, "cublasLtCreate");
  lt_fn(api.lt_destroy, "cublasLtDestroy");
  lt_fn(api.lt_matmul, "cublasLtMatmul");
  lt_fn(api.lt_desc_create, "cublasLtMatmulDescCreate");
  lt_fn(api.lt_desc_destroy, "cublasLtMatmulDescDestroy");
  lt_fn(api.lt_desc_set, "cublasLtMatmulDescSetAttribute");
  lt_fn(api.lt_layout_create, "cublasLtMatrixLayoutCreate");
  lt_fn(api.lt_layout_destroy, "cublasLtMatrixLayoutDestroy");
  lt_fn(api.lt_pref_create, "cublasLtMatmulPreferenceCreate");
  lt_fn(api.lt_pref_destroy, "cublasLtMatmulPreferenceDestroy");
  lt_fn(api.lt_pref_set, "cublasLtMatmulPreferenceSetAttribute");
  lt_fn(api.lt_heuristic, "cublasLtMatmulAlgoGetHeuristic");
  blas_fn(api.create, LOCUS_CUBLAS_NAME(cublasCreate));
  blas_fn(api.destroy, LOCUS_CUBLAS_NAME(cublasDestroy));
  blas_fn(api.set_stream, LOCUS_CUBLAS_NAME(cublasSetStream));
  blas_fn(api.set_workspace, LOCUS_CUBLAS_NAME(cublasSetWorkspace));
  blas_fn(api.gemm_strided_batched_ex, "cublasGemmStridedBatchedEx");
  if (!lt_fn.status().is_ok()) return lt_fn.status();
  if (!blas_fn.status().is_ok()) return blas_fn.status();
  // Entry points keep their names across major versions while their structs change size.
  const size_t version = api.lt_get_version();
  if (version / 10000 != CUBLAS_VER_MAJOR) {
    return unsupported(
        fmt::format("{} is cuBLASLt {}.{}, but locus was built against cuBLAS {}: {}", lt->name,
                    version / 10000, version / 100 % 100, CUBLAS_VER_MAJOR, hint));
  }
  return api;
}

}  // namespace

Expected<CublasApi> load_cublas_api(const std::string& lt_library,
                                    const std::string& blas_library) {
  return load_from({lt_library}, {blas_library});
}

Expected<const CublasApi*> cublas_api() {
  static std::once_flag once;
  static CublasApi api;
  static Status failure = Status::ok();
  std::call_once(once, [] {
    const std::string major = std::to_string(CUBLAS_VER_MAJOR);
    auto loaded = load_from(candidates("LOCUS_CUBLASLT_LIBRARY", "libcublasLt.so." + major),
                            candidates("LOCUS_CUBLAS_LIBRARY", "libcublas.so." + major));
    if (loaded) {
      api = *loaded;
    } else {
      failure = loaded.status();
    }
  });
  if (!failure.is_ok()) return failure;
  return &api;
}

}  // namespace locus::cuda
