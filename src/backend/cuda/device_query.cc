#include "backend/cuda/device_query.h"

#include <cuda_runtime_api.h>

namespace locus::cuda {

DeviceReport query_cuda_devices() {
  DeviceReport report;
  report.cuda_compiled = true;
  cudaRuntimeGetVersion(&report.cuda_runtime_version);
  // cudaDriverGetVersion reports 0 (and success) when no driver library can be loaded.
  if (cudaDriverGetVersion(&report.cuda_driver_version) != cudaSuccess ||
      report.cuda_driver_version == 0) {
    report.cuda_unavailable_reason = "no NVIDIA driver found";
    return report;
  }
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    report.cuda_unavailable_reason = cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky-free error so later queries start clean
    return report;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    GpuInfo gpu;
    gpu.index = i;
    gpu.name = prop.name;
    gpu.compute_major = prop.major;
    gpu.compute_minor = prop.minor;
    gpu.multiprocessors = prop.multiProcessorCount;
    gpu.total_memory_bytes = prop.totalGlobalMem;
    int previous = 0;
    if (cudaGetDevice(&previous) == cudaSuccess && cudaSetDevice(i) == cudaSuccess) {
      size_t free_bytes = 0, total_bytes = 0;
      if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
        gpu.free_memory_bytes = free_bytes;
      }
      cudaSetDevice(previous);
    }
    report.gpus.push_back(std::move(gpu));
  }
  if (report.gpus.empty()) report.cuda_unavailable_reason = "no CUDA device visible";
  return report;
}

}  // namespace locus::cuda
