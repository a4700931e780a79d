// A CUPTI injection library that records every kernel's start and end on the GPU, CUDA graph
// replays included, and writes them as CSV when the process exits:
//   CUDA_INJECTION64_PATH=libkernel_trace.so KERNEL_TRACE_OUT=trace.csv locus bench latency ...
// Columns: start_ns,end_ns,graph_node,grid,block,name (mangled). tools/kernel_trace/summarize.py
// turns it into per-kernel time and the idle gaps between kernels of one decode step.
// Built on the GPU machine against its CUPTI (see build.sh), since CUPTI is not part of the
// toolkit on the build machine. KREC is the newest CUpti_ActivityKernelN the header defines.
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

constexpr size_t kBufferBytes = 8u << 20;
std::mutex g_mutex;
std::vector<std::string> g_rows;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  std::lock_guard<std::mutex> lock(g_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
        record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
      continue;
    const auto* k = reinterpret_cast<const KREC*>(record);
    char line[512];
    std::snprintf(line, sizeof(line), "%llu,%llu,%llu,%d,%d,%s",
                  static_cast<unsigned long long>(k->start),
                  static_cast<unsigned long long>(k->end),
                  static_cast<unsigned long long>(k->graphNodeId), k->gridX * k->gridY * k->gridZ,
                  k->blockX * k->blockY * k->blockZ, k->name != nullptr ? k->name : "?");
    g_rows.emplace_back(line);
  }
  free(buffer);
}

void write_trace() {
  cuptiActivityFlushAll(1);
  const char* path = std::getenv("KERNEL_TRACE_OUT");
  FILE* f = std::fopen(path != nullptr ? path : "kernel_trace.csv", "w");
  if (f == nullptr) return;
  std::fprintf(f, "start_ns,end_ns,graph_node,grid,block,name\n");
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const std::string& row : g_rows)
    std::fprintf(f, "%s\n", row.c_str());
  std::fclose(f);
}

}  // namespace

extern "C" int InitializeInjection(void) {
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) return 0;
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  std::atexit(write_trace);
  return 1;
}
