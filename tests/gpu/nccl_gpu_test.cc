// The NCCL communicator on every GPU of the machine (one rank per GPU, one thread per rank, as
// ParallelModelRunner drives them): each collective's result against the host arithmetic,
// including the all-gather along the last dim that the vocab-parallel logits use. With one GPU
// the group has one rank (the calls and copies still run). SKIPPED without a GPU or without
// libnccl.so.2 (LOCUS_NCCL_LIBRARY names it).
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "backend/device.h"

#ifdef LOCUS_HAS_CUDA
#include "backend/cuda/runtime/nccl_communicator.h"
#endif

namespace locus {
namespace {

#ifndef LOCUS_HAS_CUDA

TEST(GpuNccl, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#else

Tensor host_values(const Dims& shape, float base) {
  Tensor t = Tensor::empty(shape, DType::kF32).value();
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = base + static_cast<float>(i % 97) * 0.25f;
  return t;
}

TEST(GpuNccl, CollectivesOnEveryGpu) {
  DeviceReport report = query_devices();
  if (report.gpus.empty()) GTEST_SKIP() << "no GPU: " << report.cuda_unavailable_reason;
  auto version = NcclCommunicator::library_version();
  if (!version) GTEST_SKIP() << version.status().to_string();
  const int n = std::min<int>(static_cast<int>(report.gpus.size()), 8);
  std::printf("[nccl] NCCL %s, %d rank(s)\n", version->c_str(), n);

  std::vector<std::unique_ptr<CudaBackend>> backends;
  std::vector<CudaBackend*> raw;
  for (int d = 0; d < n; ++d) {
    CudaBackendOptions o;
    o.device_index = d;
    o.gpu_memory_utilization = 0.2;
    auto b = CudaBackend::create(o);
    ASSERT_TRUE(b.has_value()) << b.status().to_string();
    raw.push_back(b->get());
    backends.push_back(std::move(*b));
  }
  auto comms = NcclCommunicator::create_local_group(raw);
  ASSERT_TRUE(comms.has_value()) << comms.status().to_string();

  const int64_t rows = 3;
  const int64_t cols = 40;
  std::vector<std::string> failures(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      CudaBackend& b = *backends[static_cast<size_t>(r)];
      Communicator& c = *(*comms)[static_cast<size_t>(r)];
      auto fail = [&](const std::string& what) { failures[static_cast<size_t>(r)] += what + "\n"; };
      if (const Status s = b.make_current(); !s.is_ok()) return fail(s.to_string());
      auto expect_ok = [&](const Status& s, const char* what) {
        if (!s.is_ok()) fail(std::string(what) + ": " + s.to_string());
        return s.is_ok();
      };
      // all_reduce (f32): sum over ranks of base r.
      Tensor x = b.to_device(host_values({rows, cols}, static_cast<float>(r))).value();
      if (!expect_ok(c.all_reduce_sum(x), "all_reduce_sum")) return;
      Tensor xs = b.to_host(x).value();
      for (int64_t i = 0; i < xs.numel(); ++i) {
        float want = 0.0f;
        for (int q = 0; q < n; ++q)
          want += static_cast<float>(q) + static_cast<float>(i % 97) * 0.25f;
        if (xs.data<float>()[i] != want) {
          fail("all_reduce_sum element " + std::to_string(i));
          break;
        }
      }
      // all_gather along dim 0 and along the last dim.
      Tensor in = b.to_device(host_values({rows, cols}, 100.0f * static_cast<float>(r))).value();
      Tensor rows_out = b.empty({rows * n, cols}, DType::kF32).value();
      Tensor cols_out = b.empty({rows, cols * n}, DType::kF32).value();
      if (!expect_ok(c.all_gather(in, rows_out, 0), "all_gather dim 0")) return;
      if (!expect_ok(c.all_gather(in, cols_out, -1), "all_gather dim -1")) return;
      Tensor ro = b.to_host(rows_out).value();
      Tensor co = b.to_host(cols_out).value();
      for (int q = 0; q < n; ++q) {
        for (int64_t i = 0; i < rows; ++i) {
          for (int64_t j = 0; j < cols; ++j) {
            const float want =
                100.0f * static_cast<float>(q) + static_cast<float>((i * cols + j) % 97) * 0.25f;
            if (ro.data<float>()[(q * rows + i) * cols + j] != want ||
                co.data<float>()[i * cols * n + q * cols + j] != want) {
              fail("all_gather rank " + std::to_string(q));
              return;
            }
          }
        }
      }
      // reduce_scatter: rank r gets rows [r * rows, (r + 1) * rows) of the sum.
      Tensor big = b.to_device(host_values({rows * n, cols}, static_cast<float>(r))).value();
      Tensor part = b.empty({rows, cols}, DType::kF32).value();
      if (!expect_ok(c.reduce_scatter_sum(big, part), "reduce_scatter_sum")) return;
      Tensor ph = b.to_host(part).value();
      for (int64_t i = 0; i < ph.numel(); ++i) {
        const int64_t k = r * rows * cols + i;
        float want = 0.0f;
        for (int q = 0; q < n; ++q)
          want += static_cast<float>(q) + static_cast<float>(k % 97) * 0.25f;
        if (ph.data<float>()[i] != want) {
          fail("reduce_scatter_sum element " + std::to_string(i));
          break;
        }
      }
      // broadcast from the last rank.
      Tensor t = b.to_device(host_values({7}, static_cast<float>(r))).value();
      if (!expect_ok(c.broadcast(t, n - 1), "broadcast")) return;
      Tensor th = b.to_host(t).value();
      for (int64_t i = 0; i < 7; ++i) {
        if (th.data<float>()[i] != static_cast<float>(n - 1) + static_cast<float>(i) * 0.25f) {
          fail("broadcast element " + std::to_string(i));
          break;
        }
      }
      // A host tensor is refused with a message, not a crash.
      Tensor host = host_values({2}, 0.0f);
      if (c.all_reduce_sum(host).is_ok()) fail("a host tensor was accepted");
    });
  }
  for (auto& t : threads)
    t.join();
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(failures[static_cast<size_t>(r)], "") << "rank " << r;
}

#endif

}  // namespace
}  // namespace locus
