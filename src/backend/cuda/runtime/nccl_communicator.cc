#include "backend/cuda/runtime/nccl_communicator.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "backend/cuda/runtime/shared_library.h"

namespace locus {

// The entry points locus uses, resolved from libnccl.so.2 (types from nccl.h).
struct NcclApi {
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclCommInitAll) comm_init_all = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
};

namespace {

Expected<const NcclApi*> load_nccl() {
  static std::once_flag once;
  static NcclApi api;
  static Status failure;
  std::call_once(once, [] {
    const char* env = std::getenv("LOCUS_NCCL_LIBRARY");
    const std::string name = env != nullptr && *env != '\0' ? env : "libnccl.so.2";
    auto lib = cuda::SharedLibrary::open_first({name}, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      failure = unsupported(
          fmt::format("NCCL could not be loaded ({}): install NCCL or point LOCUS_NCCL_LIBRARY at "
                      "libnccl.so.2 (PyTorch wheels carry one in nvidia/nccl/lib)",
                      lib.error().message()));
      return;
    }
    cuda::SymbolResolver resolve(*lib, "");
    resolve(api.get_version, "ncclGetVersion");
    resolve(api.error_string, "ncclGetErrorString");
    resolve(api.comm_init_all, "ncclCommInitAll");
    resolve(api.get_unique_id, "ncclGetUniqueId");
    resolve(api.comm_init_rank, "ncclCommInitRank");
    resolve(api.comm_destroy, "ncclCommDestroy");
    resolve(api.comm_abort, "ncclCommAbort");
    resolve(api.all_reduce, "ncclAllReduce");
    resolve(api.all_gather, "ncclAllGather");
    resolve(api.reduce_scatter, "ncclReduceScatter");
    resolve(api.broadcast, "ncclBroadcast");
    resolve(api.send, "ncclSend");
    resolve(api.recv, "ncclRecv");
    resolve(api.group_start, "ncclGroupStart");
    resolve(api.group_end, "ncclGroupEnd");
    failure = resolve.status();
  });
  if (!failure.is_ok()) return failure;
  return &api;
}

Status nccl_status(const NcclApi* api, const char* what, ncclResult_t r) {
  if (r == ncclSuccess) return Status::ok();
  return internal_error(fmt::format("{}: {}", what, api->error_string(r)));
}

Status cuda_ok(const char* what, cudaError_t e) {
  if (e == cudaSuccess) return Status::ok();
  return internal_error(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}

Expected<ncclDataType_t> nccl_type(const char* op, DType dtype, bool summed) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kF16:
      return ncclFloat16;
    case DType::kI32:
      if (!summed) return ncclInt32;
      break;
    case DType::kI64:
      if (!summed) return ncclInt64;
      break;
    default:
      break;
  }
  return invalid_argument(fmt::format("{}: {} tensors are not supported", op, dtype_name(dtype)));
}

}  // namespace

Expected<std::string> NcclCommunicator::library_version() {
  LOCUS_ASSIGN_OR_RETURN(const NcclApi* api, load_nccl());
  int v = 0;
  LOCUS_RETURN_IF_ERROR(nccl_status(api, "ncclGetVersion", api->get_version(&v)));
  // NCCL_VERSION(X,Y,Z) = X * 10000 + Y * 100 + Z since 2.9.
  return fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

Expected<std::vector<std::unique_ptr<NcclCommunicator>>> NcclCommunicator::create_local_group(
    std::span<CudaBackend* const> backends) {
  LOCUS_ASSIGN_OR_RETURN(const NcclApi* api, load_nccl());
  const int n = static_cast<int>(backends.size());
  std::vector<int> devices;
  for (CudaBackend* b : backends) {
    const int d = b->device().index;
    for (int other : devices) {
      if (other == d) {
        return invalid_argument(
            fmt::format("NCCL group: two ranks on cuda:{}; each rank needs its own GPU", d));
      }
    }
    devices.push_back(d);
  }
  std::vector<ncclComm_t> comms(static_cast<size_t>(n), nullptr);
  LOCUS_RETURN_IF_ERROR(
      nccl_status(api, "ncclCommInitAll", api->comm_init_all(comms.data(), n, devices.data())));
  std::vector<std::unique_ptr<NcclCommunicator>> out;
  for (int r = 0; r < n; ++r) {
    out.push_back(std::unique_ptr<NcclCommunicator>(new NcclCommunicator(
        api, comms[static_cast<size_t>(r)], backends[static_cast<size_t>(r)], r, n)));
  }
  return out;
}

Expected<std::string> NcclCommunicator::unique_id() {
  LOCUS_ASSIGN_OR_RETURN(const NcclApi* api, load_nccl());
  ncclUniqueId id;
  LOCUS_RETURN_IF_ERROR(nccl_status(api, "ncclGetUniqueId", api->get_unique_id(&id)));
  return std::string(id.internal, sizeof id.internal);
}

Expected<std::vector<std::unique_ptr<NcclCommunicator>>> NcclCommunicator::create_ranks(
    std::string_view unique_id, int world_size, int first_rank,
    std::span<CudaBackend* const> backends) {
  LOCUS_ASSIGN_OR_RETURN(const NcclApi* api, load_nccl());
  ncclUniqueId id;
  if (unique_id.size() != sizeof id.internal) {
    return invalid_argument(
        fmt::format("NCCL unique id of {} bytes, want {}", unique_id.size(), sizeof id.internal));
  }
  const int n = static_cast<int>(backends.size());
  if (first_rank < 0 || first_rank + n > world_size) {
    return invalid_argument(fmt::format("NCCL ranks [{}, {}) are not in a group of {}", first_rank,
                                        first_rank + n, world_size));
  }
  std::copy(unique_id.begin(), unique_id.end(), id.internal);
  std::vector<ncclComm_t> comms(static_cast<size_t>(n), nullptr);
  // One thread joins several ranks: a group, with each rank's GPU current at its init.
  LOCUS_RETURN_IF_ERROR(nccl_status(api, "ncclGroupStart", api->group_start()));
  Status failed;
  for (int i = 0; i < n && failed.is_ok(); ++i) {
    failed = backends[static_cast<size_t>(i)]->make_current();
    if (failed.is_ok()) {
      failed = nccl_status(
          api, "ncclCommInitRank",
          api->comm_init_rank(&comms[static_cast<size_t>(i)], world_size, id, first_rank + i));
    }
  }
  const Status ended = nccl_status(api, "ncclGroupEnd", api->group_end());
  if (!failed.is_ok()) return failed;
  LOCUS_RETURN_IF_ERROR(ended);
  std::vector<std::unique_ptr<NcclCommunicator>> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(std::unique_ptr<NcclCommunicator>(
        new NcclCommunicator(api, comms[static_cast<size_t>(i)], backends[static_cast<size_t>(i)],
                             first_rank + i, world_size)));
  }
  return out;
}

NcclCommunicator::~NcclCommunicator() {
  // An aborted communicator's resources were freed by ncclCommAbort.
  if (comm_ != nullptr && !aborted_.load()) api_->comm_destroy(static_cast<ncclComm_t>(comm_));
}

void NcclCommunicator::abort(const std::string& reason) {
  std::lock_guard lock(abort_mutex_);
  if (aborted_.load()) return;
  abort_reason_ = reason;
  aborted_.store(true);
  if (comm_ != nullptr) api_->comm_abort(static_cast<ncclComm_t>(comm_));
}

Status NcclCommunicator::check_not_aborted(const char* op) const {
  if (!aborted_.load()) return Status::ok();
  std::lock_guard lock(abort_mutex_);
  return internal_error(
      fmt::format("{}: rank {}'s NCCL group was aborted: {}", op, rank_, abort_reason_));
}

std::string NcclCommunicator::description() const {
  return fmt::format("NCCL group of {} (rank {} on {})", size_, rank_,
                     backend_->device().to_string());
}

Expected<int> NcclCommunicator::begin(const char* op, DType dtype, bool summed) const {
  LOCUS_RETURN_IF_ERROR(check_not_aborted(op));
  LOCUS_ASSIGN_OR_RETURN(ncclDataType_t type, nccl_type(op, dtype, summed));
  LOCUS_RETURN_IF_ERROR(cuda_ok("cudaSetDevice", cudaSetDevice(backend_->device().index)));
  return static_cast<int>(type);
}

Status NcclCommunicator::do_all_reduce_sum(Tensor& t) {
  LOCUS_ASSIGN_OR_RETURN(int type, begin("all_reduce_sum", t.dtype(), true));
  return nccl_status(api_, "ncclAllReduce",
                     api_->all_reduce(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()),
                                      static_cast<ncclDataType_t>(type), ncclSum,
                                      static_cast<ncclComm_t>(comm_), backend_->stream()));
}

Status NcclCommunicator::do_all_gather(const Tensor& in, Tensor& out, int dim) {
  LOCUS_ASSIGN_OR_RETURN(int type, begin("all_gather", in.dtype(), false));
  const auto count = static_cast<size_t>(in.numel());
  if (dim == 0) {
    return nccl_status(
        api_, "ncclAllGather",
        api_->all_gather(in.raw_data(), out.raw_data(), count, static_cast<ncclDataType_t>(type),
                         static_cast<ncclComm_t>(comm_), backend_->stream()));
  }
  // NCCL concatenates along the outermost dim: gather into [size, in...], then move rank r's
  // [outer, chunk] block to columns [r * chunk, (r + 1) * chunk) of out's [outer, size * chunk].
  if (gather_scratch_.numel() < out.numel() || gather_scratch_.dtype() != in.dtype()) {
    LOCUS_ASSIGN_OR_RETURN(gather_scratch_, backend_->empty({out.numel()}, in.dtype()));
  }
  LOCUS_RETURN_IF_ERROR(
      nccl_status(api_, "ncclAllGather",
                  api_->all_gather(in.raw_data(), gather_scratch_.raw_data(), count,
                                   static_cast<ncclDataType_t>(type),
                                   static_cast<ncclComm_t>(comm_), backend_->stream())));
  size_t outer = 1;
  for (int i = 0; i < dim; ++i)
    outer *= static_cast<size_t>(in.size(i));
  const size_t chunk = in.nbytes() / outer;
  const auto* src = static_cast<const char*>(gather_scratch_.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  for (int r = 0; r < size_; ++r) {
    LOCUS_RETURN_IF_ERROR(cuda_ok(
        "cudaMemcpy2DAsync",
        cudaMemcpy2DAsync(dst + static_cast<size_t>(r) * chunk, chunk * static_cast<size_t>(size_),
                          src + static_cast<size_t>(r) * in.nbytes(), chunk, chunk, outer,
                          cudaMemcpyDeviceToDevice, backend_->stream())));
  }
  return Status::ok();
}

Status NcclCommunicator::do_reduce_scatter_sum(const Tensor& in, Tensor& out) {
  LOCUS_ASSIGN_OR_RETURN(int type, begin("reduce_scatter_sum", in.dtype(), true));
  return nccl_status(
      api_, "ncclReduceScatter",
      api_->reduce_scatter(in.raw_data(), out.raw_data(), static_cast<size_t>(out.numel()),
                           static_cast<ncclDataType_t>(type), ncclSum,
                           static_cast<ncclComm_t>(comm_), backend_->stream()));
}

Status NcclCommunicator::do_broadcast(Tensor& t, int root) {
  LOCUS_ASSIGN_OR_RETURN(int type, begin("broadcast", t.dtype(), false));
  return nccl_status(api_, "ncclBroadcast",
                     api_->broadcast(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()),
                                     static_cast<ncclDataType_t>(type), root,
                                     static_cast<ncclComm_t>(comm_), backend_->stream()));
}

Status NcclCommunicator::do_all_to_all(const Tensor& in, std::span<const int64_t> send_counts,
                                       Tensor& out, std::span<const int64_t> recv_counts) {
  LOCUS_RETURN_IF_ERROR(check_not_aborted("all_to_all"));
  // Rows move as bytes: any dtype, counted in ncclInt8 elements.
  LOCUS_RETURN_IF_ERROR(cuda_ok("cudaSetDevice", cudaSetDevice(backend_->device().index)));
  // From the row shape (in and out share it), not from the bytes: either may have no rows.
  Dims row = in.shape();
  row[0] = 1;
  const size_t in_row = dtype_bytes(in.dtype(), static_cast<size_t>(shape_numel(row)));
  const size_t out_row = in_row;
  const auto comm = static_cast<ncclComm_t>(comm_);
  LOCUS_RETURN_IF_ERROR(nccl_status(api_, "ncclGroupStart", api_->group_start()));
  Status status = Status::ok();
  size_t sent = 0;
  size_t received = 0;
  for (int r = 0; r < size_ && status.is_ok(); ++r) {
    const auto send_bytes = static_cast<size_t>(send_counts[static_cast<size_t>(r)]) * in_row;
    const auto recv_bytes = static_cast<size_t>(recv_counts[static_cast<size_t>(r)]) * out_row;
    if (send_bytes > 0) {
      status = nccl_status(api_, "ncclSend",
                           api_->send(static_cast<const char*>(in.raw_data()) + sent, send_bytes,
                                      ncclInt8, r, comm, backend_->stream()));
    }
    if (status.is_ok() && recv_bytes > 0) {
      status = nccl_status(api_, "ncclRecv",
                           api_->recv(static_cast<char*>(out.raw_data()) + received, recv_bytes,
                                      ncclInt8, r, comm, backend_->stream()));
    }
    sent += send_bytes;
    received += recv_bytes;
  }
  // The group is closed even after a failed call, so the communicator stays usable.
  const Status end = nccl_status(api_, "ncclGroupEnd", api_->group_end());
  LOCUS_RETURN_IF_ERROR(status);
  return end;
}

}  // namespace locus
