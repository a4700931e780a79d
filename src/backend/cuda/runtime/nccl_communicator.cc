#include "backend/cuda/runtime/nccl_communicator.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <nccl.h>

#include <cstdlib>
#include <mutex>

namespace locus {

// The entry points locus uses, resolved from libnccl.so.2 (types from nccl.h).
struct NcclApi {
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclCommInitAll) comm_init_all = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
};

namespace {

Expected<const NcclApi*> load_nccl() {
  static std::once_flag once;
  static NcclApi api;
  static Status failure;
  std::call_once(once, [] {
    const char* env = std::getenv("LOCUS_NCCL_LIBRARY");
    const std::string name = env != nullptr && *env != '\0' ? env : "libnccl.so.2";
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      failure = unsupported(
          fmt::format("NCCL could not be loaded ({}): install NCCL or point LOCUS_NCCL_LIBRARY at "
                      "libnccl.so.2 (PyTorch wheels carry one in nvidia/nccl/lib)",
                      dlerror()));
      return;
    }
    auto resolve = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol));
      if (fn == nullptr && failure.is_ok()) {
        failure = unsupported(fmt::format("{} has no {}", name, symbol));
      }
    };
    resolve(api.get_version, "ncclGetVersion");
    resolve(api.error_string, "ncclGetErrorString");
    resolve(api.comm_init_all, "ncclCommInitAll");
    resolve(api.comm_destroy, "ncclCommDestroy");
    resolve(api.all_reduce, "ncclAllReduce");
    resolve(api.all_gather, "ncclAllGather");
    resolve(api.reduce_scatter, "ncclReduceScatter");
    resolve(api.broadcast, "ncclBroadcast");
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

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) api_->comm_destroy(static_cast<ncclComm_t>(comm_));
}

std::string NcclCommunicator::description() const {
  return fmt::format("NCCL group of {} (rank {} on {})", size_, rank_,
                     backend_->device().to_string());
}

Status NcclCommunicator::check_tensor(const char* op, const Tensor& t) const {
  if (!t.defined() || t.device() != backend_->device() || !t.is_contiguous()) {
    return invalid_argument(fmt::format("{}: rank {} needs a contiguous tensor on {}, got {}", op,
                                        rank_, backend_->device().to_string(),
                                        t.defined() ? t.to_string() : std::string("undefined")));
  }
  return Status::ok();
}

Status NcclCommunicator::all_reduce_sum(Tensor& t) {
  LOCUS_RETURN_IF_ERROR(check_tensor("all_reduce_sum", t));
  LOCUS_ASSIGN_OR_RETURN(ncclDataType_t type, nccl_type("all_reduce_sum", t.dtype(), true));
  LOCUS_RETURN_IF_ERROR(cuda_ok("cudaSetDevice", cudaSetDevice(backend_->device().index)));
  return nccl_status(
      api_, "ncclAllReduce",
      api_->all_reduce(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), type, ncclSum,
                       static_cast<ncclComm_t>(comm_), backend_->stream()));
}

Status NcclCommunicator::all_gather(const Tensor& in, Tensor& out, int dim) {
  LOCUS_RETURN_IF_ERROR(check_tensor("all_gather", in));
  LOCUS_RETURN_IF_ERROR(check_tensor("all_gather", out));
  const int nd = dim < 0 ? dim + in.ndim() : dim;
  if (nd < 0 || nd >= in.ndim()) {
    return invalid_argument(
        fmt::format("all_gather: dim {} is not a dimension of {}", dim, in.to_string()));
  }
  Dims want = in.shape();
  want[nd] = in.size(nd) * size_;
  if (out.shape() != want || out.dtype() != in.dtype()) {
    return invalid_argument(fmt::format("all_gather: out is {}, want {} {}", out.to_string(),
                                        dtype_name(in.dtype()), want.to_string()));
  }
  LOCUS_ASSIGN_OR_RETURN(ncclDataType_t type, nccl_type("all_gather", in.dtype(), false));
  LOCUS_RETURN_IF_ERROR(cuda_ok("cudaSetDevice", cudaSetDevice(backend_->device().index)));
  const auto count = static_cast<size_t>(in.numel());
  if (nd == 0) {
    return nccl_status(api_, "ncclAllGather",
                       api_->all_gather(in.raw_data(), out.raw_data(), count, type,
                                        static_cast<ncclComm_t>(comm_), backend_->stream()));
  }
  // NCCL concatenates along the outermost dim: gather into [size, in...], then move rank r's
  // [outer, chunk] block to columns [r * chunk, (r + 1) * chunk) of out's [outer, size * chunk].
  if (gather_scratch_.numel() < out.numel() || gather_scratch_.dtype() != in.dtype()) {
    LOCUS_ASSIGN_OR_RETURN(gather_scratch_, backend_->empty({out.numel()}, in.dtype()));
  }
  LOCUS_RETURN_IF_ERROR(
      nccl_status(api_, "ncclAllGather",
                  api_->all_gather(in.raw_data(), gather_scratch_.raw_data(), count, type,
                                   static_cast<ncclComm_t>(comm_), backend_->stream())));
  size_t outer = 1;
  for (int i = 0; i < nd; ++i)
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

Status NcclCommunicator::reduce_scatter_sum(const Tensor& in, Tensor& out) {
  LOCUS_RETURN_IF_ERROR(check_tensor("reduce_scatter_sum", in));
  LOCUS_RETURN_IF_ERROR(check_tensor("reduce_scatter_sum", out));
  if (out.numel() * size_ != in.numel() || out.dtype() != in.dtype()) {
    return invalid_argument(fmt::format("reduce_scatter_sum: out {} is not 1/{} of in {}",
                                        out.to_string(), size_, in.to_string()));
  }
  LOCUS_ASSIGN_OR_RETURN(ncclDataType_t type, nccl_type("reduce_scatter_sum", in.dtype(), true));
  LOCUS_RETURN_IF_ERROR(cuda_ok("cudaSetDevice", cudaSetDevice(backend_->device().index)));
  return nccl_status(
      api_, "ncclReduceScatter",
      api_->reduce_scatter(in.raw_data(), out.raw_data(), static_cast<size_t>(out.numel()), type,
                           ncclSum, static_cast<ncclComm_t>(comm_), backend_->stream()));
}

Status NcclCommunicator::broadcast(Tensor& t, int root) {
  LOCUS_RETURN_IF_ERROR(check_tensor("broadcast", t));
  if (root < 0 || root >= size_) {
    return invalid_argument(
        fmt::format("broadcast: root {} is not a rank of a group of {}", root, size_));
  }
  LOCUS_ASSIGN_OR_RETURN(ncclDataType_t type, nccl_type("broadcast", t.dtype(), false));
  LOCUS_RETURN_IF_ERROR(cuda_ok("cudaSetDevice", cudaSetDevice(backend_->device().index)));
  return nccl_status(
      api_, "ncclBroadcast",
      api_->broadcast(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), type, root,
                      static_cast<ncclComm_t>(comm_), backend_->stream()));
}

}  // namespace locus
