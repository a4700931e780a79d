#include "backend/device.h"

#include <fmt/format.h>

#ifdef LOCUS_HAS_CUDA
#include "backend/cuda/device_query.h"
#endif

namespace locus {

DeviceReport query_devices() {
#ifdef LOCUS_HAS_CUDA
  return cuda::query_cuda_devices();
#else
  DeviceReport report;
  report.cuda_unavailable_reason = "built without CUDA (LOCUS_CUDA=OFF or no nvcc at build time)";
  return report;
#endif
}

std::string describe(const DeviceReport& report) {
  if (!report.cuda_compiled) return "cpu only (" + report.cuda_unavailable_reason + ")";
  auto version = [](int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); };
  std::string out = fmt::format("CUDA runtime {}", version(report.cuda_runtime_version));
  if (report.gpus.empty()) {
    return out + ", no usable GPU (" + report.cuda_unavailable_reason + "): cpu backend";
  }
  out += fmt::format(", driver {}, {} GPU{}", version(report.cuda_driver_version),
                     report.gpus.size(), report.gpus.size() == 1 ? "" : "s");
  for (const auto& gpu : report.gpus) {
    out += fmt::format("\n  cuda:{} {} (sm_{}{}, {} SMs, {:.1f} GiB, {:.1f} GiB free)", gpu.index,
                       gpu.name, gpu.compute_major, gpu.compute_minor, gpu.multiprocessors,
                       static_cast<double>(gpu.total_memory_bytes) / (1ull << 30),
                       static_cast<double>(gpu.free_memory_bytes) / (1ull << 30));
  }
  return out;
}

}  // namespace locus
