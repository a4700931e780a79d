// cuBLAS/cuBLASLt opened at run time (backend/cuda/runtime/cublas_api.h): a CUDA-build program
// starts without them, the loader finds the toolkit's copies on its own, and a missing or wrong
// library is an error that names it. Needs no GPU: it runs wherever the CUDA build does.
#include <gtest/gtest.h>

#ifdef LOCUS_HAS_CUDA
#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "backend/cuda/runtime/cublas_api.h"
#endif

namespace locus {
namespace {

#ifndef LOCUS_HAS_CUDA

TEST(CublasApi, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#else

const std::string kLtSoname = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);

// Whether libcublasLt was in the process when this file's initializers ran, that is after every
// library the program links had been loaded, before any test could open it.
const bool g_lt_loaded_at_start = [] {
  void* lib = dlopen(kLtSoname.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (lib != nullptr) dlclose(lib);
  return lib != nullptr;
}();

TEST(CublasApi, NotLoadedWhenTheProgramStarts) {
  EXPECT_FALSE(g_lt_loaded_at_start)
      << kLtSoname << " was loaded at startup: something links cuBLAS again";
}

TEST(CublasApi, FindsTheLibrariesOfTheToolkitItWasBuiltWith) {
  if (std::getenv("LOCUS_CUBLASLT_LIBRARY") != nullptr) {
    GTEST_SKIP() << "LOCUS_CUBLASLT_LIBRARY chooses the library here";
  }
  // The toolkit that compiled this program has cuBLAS (its headers did); no RUNPATH names it.
  auto api = cuda::cublas_api();
  ASSERT_TRUE(api) << api.error().message();
  const cuda::CublasApi& a = **api;
  EXPECT_EQ(a.lt_get_version() / 10000, static_cast<size_t>(CUBLAS_VER_MAJOR));
  for (const void* fn :
       {reinterpret_cast<const void*>(a.lt_create), reinterpret_cast<const void*>(a.lt_matmul),
        reinterpret_cast<const void*>(a.lt_heuristic), reinterpret_cast<const void*>(a.create),
        reinterpret_cast<const void*>(a.gemm_strided_batched_ex)}) {
    EXPECT_NE(fn, nullptr);
  }
  // Asked again, the same table (opened once per process).
  auto again = cuda::cublas_api();
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *api);
}

TEST(CublasApi, MissingLibraryNamesItAndTheVariables) {
  const std::string path = "/nonexistent/dir/" + kLtSoname;
  auto api = cuda::load_cublas_api(path, "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
  ASSERT_FALSE(api);
  const std::string& m = api.error().message();
  EXPECT_NE(m.find("cuBLASLt could not be loaded"), std::string::npos) << m;
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_NE(m.find("LOCUS_CUBLASLT_LIBRARY"), std::string::npos) << m;
  EXPECT_NE(m.find("LOCUS_CUBLAS_LIBRARY"), std::string::npos) << m;
}

TEST(CublasApi, WrongLibraryNamesTheMissingEntryPoint) {
  // A library that opens but is not cuBLASLt.
  auto api = cuda::load_cublas_api("libm.so.6", "libm.so.6");
  ASSERT_FALSE(api);
  const std::string& m = api.error().message();
  EXPECT_NE(m.find("libm.so.6 has no cublasLtGetVersion"), std::string::npos) << m;
}

TEST(CublasApi, OtherMajorVersionIsRefused) {
  // Every entry point resolves, but the structs behind them differ across major versions.
  auto api = cuda::load_cublas_api(LOCUS_FAKE_CUBLAS, LOCUS_FAKE_CUBLAS);
  ASSERT_FALSE(api);
  const std::string& m = api.error().message();
  EXPECT_NE(m.find(std::string(LOCUS_FAKE_CUBLAS) + " is cuBLASLt 11.9"), std::string::npos) << m;
  EXPECT_NE(m.find("built against cuBLAS " + std::to_string(CUBLAS_VER_MAJOR)), std::string::npos)
      << m;
  EXPECT_NE(m.find("LOCUS_CUBLASLT_LIBRARY"), std::string::npos) << m;
}

#endif

}  // namespace
}  // namespace locus
