// NCCL collectives for ranks on GPUs of this process, one CudaBackend per GPU (thread per GPU,
// engine/parallel_model_runner.h). libnccl.so.2 is loaded at run time (dlopen, as vLLM's
// pynccl does), so a locus binary starts and serves one GPU without NCCL; LOCUS_NCCL_LIBRARY
// names the library where the loader would not find it (e.g. PyTorch's nvidia/nccl/lib).
// Each collective is enqueued on the rank's backend stream, ordered with its kernels, and may
// be captured into a CUDA graph.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cuda/runtime/cuda_backend.h"
#include "dist/communicator.h"

namespace locus {

struct NcclApi;

class NcclCommunicator final : public Communicator {
 public:
  // One communicator per backend, rank r on backends[r]'s GPU (ncclCommInitAll); the GPUs must
  // differ. The backends must outlive the communicators.
  static Expected<std::vector<std::unique_ptr<NcclCommunicator>>> create_local_group(
      std::span<CudaBackend* const> backends);
  // Groups that span processes (nodes): one process makes the unique id (ncclGetUniqueId's
  // bytes) and sends it to the others, whose ranks [first_rank, first_rank + backends.size())
  // of the world_size join with it (ncclCommInitRank, one group call per process).
  static Expected<std::string> unique_id();
  static Expected<std::vector<std::unique_ptr<NcclCommunicator>>> create_ranks(
      std::string_view unique_id, int world_size, int first_rank,
      std::span<CudaBackend* const> backends);
  // "2.28.9" when the library loads, else the reason it does not.
  static Expected<std::string> library_version();
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string description() const override;
  Device device() const override { return backend_->device(); }

  // A rank failed: ncclCommAbort releases this rank's NCCL kernels that wait for peers (a
  // stream synchronize stuck behind them returns), and every later collective fails with
  // `reason`. Callable from any thread, once or more; the communicator is then unusable.
  void abort(const std::string& reason);

 protected:
  Status do_all_reduce_sum(Tensor& t) override;
  Status do_all_gather(const Tensor& in, Tensor& out, int dim) override;
  Status do_reduce_scatter_sum(const Tensor& in, Tensor& out) override;
  Status do_broadcast(Tensor& t, int root) override;
  // One ncclSend and one ncclRecv per peer with rows to move, in one NCCL group.
  Status do_all_to_all(const Tensor& in, std::span<const int64_t> send_counts, Tensor& out,
                       std::span<const int64_t> recv_counts) override;

 private:
  NcclCommunicator(const NcclApi* api, void* comm, CudaBackend* backend, int rank, int size)
      : api_(api), comm_(comm), backend_(backend), rank_(rank), size_(size) {}
  // The NCCL type of `dtype` (sums: floating types only) after selecting this rank's GPU;
  // fails once the communicator is aborted.
  Expected<int> begin(const char* op, DType dtype, bool summed) const;
  Status check_not_aborted(const char* op) const;

  const NcclApi* api_;
  void* comm_;  // ncclComm_t
  CudaBackend* backend_;
  int rank_;
  int size_;
  Tensor gather_scratch_;  // all_gather along an inner dim: [size, ...] before the transpose
  std::atomic<bool> aborted_{false};
  mutable std::mutex abort_mutex_;
  std::string abort_reason_;  // under abort_mutex_
};

}  // namespace locus
