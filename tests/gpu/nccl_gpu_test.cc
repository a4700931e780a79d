// The NCCL communicator on every GPU of the machine (one rank per GPU, one thread per rank, as
// ParallelModelRunner drives them): each collective's result against the host arithmetic,
// including the all-gather along the last dim that the vocab-parallel logits use and the
// all-to-all of uneven row counts that the naive MoE exchange uses. With one GPU
// the group has one rank (the calls and copies still run). SKIPPED without a GPU or without
// libnccl.so.2 (LOCUS_NCCL_LIBRARY names it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "backend/device.h"
#include "core/float_convert.h"

#ifdef LOCUS_HAS_CUDA
#include "backend/cuda/runtime/nccl_communicator.h"
#endif
#include "gpu/gpu_test_util.h"

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

// The loader's errors need no GPU. NCCL is opened once per process, so each case runs in a
// child (a death test) with its own LOCUS_NCCL_LIBRARY; the child exits 0 when the message says
// what the case expects.
void expect_load_error(const char* library, const std::string& want1, const std::string& want2) {
  ::testing::GTEST_FLAG(death_test_style) = "threadsafe";
  EXPECT_EXIT(
      {
        setenv("LOCUS_NCCL_LIBRARY", library, 1);
        auto version = NcclCommunicator::library_version();
        const std::string message = version ? "" : version.status().to_string();
        std::fprintf(stderr, "%s\n", message.c_str());
        std::exit(!version && message.find(want1) != std::string::npos &&
                          message.find(want2) != std::string::npos
                      ? 0
                      : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(NcclLoader, MissingLibraryNamesItAndTheVariable) {
  expect_load_error("/nonexistent/libnccl.so.2", "/nonexistent/libnccl.so.2",
                    "point LOCUS_NCCL_LIBRARY at");
}

TEST(NcclLoader, WrongLibraryNamesTheMissingEntryPoint) {
  expect_load_error("libm.so.6", "libm.so.6 has no ncclGetVersion", "libm.so.6");
}

// One NCCL group over every GPU of the machine (up to 8), rank r on cuda:r.
class GpuNccl : public ::testing::Test {
 protected:
  void SetUp() override {
    const DeviceReport report = query_devices();
    if (report.gpus.empty()) GTEST_SKIP() << "no GPU: " << report.cuda_unavailable_reason;
    auto version = NcclCommunicator::library_version();
    if (!version) GTEST_SKIP() << version.status().to_string();
    n_ = std::min<int>(static_cast<int>(report.gpus.size()), 8);
    std::printf("[nccl] NCCL %s, %d rank(s)\n", version->c_str(), n_);
    auto group = testing::GpuGroup::create(n_);
    ASSERT_TRUE(group.has_value()) << group.status().to_string();
    group_ = std::move(*group);
    auto comms = NcclCommunicator::create_local_group(group_.gpus);
    ASSERT_TRUE(comms.has_value()) << comms.status().to_string();
    comms_ = std::move(*comms);
  }

  int n_ = 0;
  testing::GpuGroup group_;
  std::vector<std::unique_ptr<NcclCommunicator>> comms_;  // destroyed before group_
};

TEST_F(GpuNccl, CollectivesOnEveryGpu) {
  const int n = n_;

  const int64_t rows = 3;
  const int64_t cols = 40;
  std::vector<std::string> failures(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      CudaBackend& b = *group_.gpus[static_cast<size_t>(r)];
      Communicator& c = *comms_[static_cast<size_t>(r)];
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
      // all_to_all: rank s sends (s + d) % 3 rows of 5 values to rank d, some none; bf16 rows
      // (moved as bytes) whose values name the sender, the receiver and the row.
      {
        auto count = [](int s, int d) { return static_cast<int64_t>((s + d) % 3); };
        std::vector<int64_t> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
        int64_t sent = 0, received = 0;
        for (int q = 0; q < n; ++q) {
          send[static_cast<size_t>(q)] = count(r, q);
          recv[static_cast<size_t>(q)] = count(q, r);
          sent += count(r, q);
          received += count(q, r);
        }
        auto value = [](int s, int d, int64_t i, int64_t j) {
          return static_cast<float>(16 * s + 4 * d + i) + 0.5f * static_cast<float>(j % 2);
        };
        Tensor h = Tensor::empty({sent, 5}, DType::kBF16).value();
        int64_t row = 0;
        for (int d = 0; d < n; ++d) {
          for (int64_t i = 0; i < count(r, d); ++i, ++row) {
            for (int64_t j = 0; j < 5; ++j)
              h.data<uint16_t>()[row * 5 + j] = f32_to_bf16_bits(value(r, d, i, j));
          }
        }
        Tensor in_rows = b.to_device(h).value();
        Tensor out_rows = b.empty({received, 5}, DType::kBF16).value();
        if (!expect_ok(c.all_to_all(in_rows, send, out_rows, recv), "all_to_all")) return;
        Tensor oh = b.to_host(out_rows).value();
        row = 0;
        for (int src = 0; src < n; ++src) {
          for (int64_t i = 0; i < count(src, r); ++i, ++row) {
            for (int64_t j = 0; j < 5; ++j) {
              if (bf16_bits_to_f32(oh.data<uint16_t>()[row * 5 + j]) != value(src, r, i, j)) {
                fail("all_to_all row " + std::to_string(row) + " from rank " + std::to_string(src));
                return;
              }
            }
          }
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

// A failed rank aborts the group (ncclCommAbort): later collectives on every rank fail with the
// reason instead of waiting, and destroying an aborted communicator is safe.
TEST_F(GpuNccl, AbortFailsLaterCollectives) {
  const int n = n_;
  for (auto& c : comms_)
    c->abort("rank 0 failed to load");
  comms_[0]->abort("a second abort is a no-op");
  for (int r = 0; r < n; ++r) {
    CudaBackend& b = *group_.gpus[static_cast<size_t>(r)];
    ASSERT_TRUE(b.make_current().is_ok());
    Tensor t = b.to_device(host_values({4}, 1.0f)).value();
    const Status s = comms_[static_cast<size_t>(r)]->all_reduce_sum(t);
    EXPECT_FALSE(s.is_ok()) << "rank " << r;
    EXPECT_NE(s.to_string().find("rank 0 failed to load"), std::string::npos) << s.to_string();
    std::vector<int64_t> none(static_cast<size_t>(n), 0);
    Tensor empty_rows = b.empty({0, 4}, DType::kF32).value();
    EXPECT_FALSE(
        comms_[static_cast<size_t>(r)]->all_to_all(empty_rows, none, empty_rows, none).is_ok());
  }
  comms_.clear();  // no ncclCommDestroy on aborted communicators
}

#endif

}  // namespace
}  // namespace locus
