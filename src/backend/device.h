// What compute devices this process can use, asked at run time. A binary built with CUDA still
// runs where no GPU or driver exists: query_devices() then reports none and the CPU backend serves.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace locus {

struct GpuInfo {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int multiprocessors = 0;
  size_t total_memory_bytes = 0;
  size_t free_memory_bytes = 0;
};

struct DeviceReport {
  bool cuda_compiled = false;  // this binary contains the CUDA backend
  int cuda_runtime_version = 0;
  int cuda_driver_version = 0;  // 0 when no driver is installed
  std::vector<GpuInfo> gpus;
  std::string cuda_unavailable_reason;  // why no GPU can be used, when gpus is empty
};

DeviceReport query_devices();

// "cpu only (built without CUDA)", "CUDA 13.0, 1 GPU: NVIDIA H200 (sm_90, 132 SMs, 140 GiB)", ...
std::string describe(const DeviceReport& report);

}  // namespace locus
