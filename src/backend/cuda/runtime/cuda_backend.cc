#include "backend/cuda/runtime/cuda_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cuda/kernels/attention/attention_launch.h"
#include "backend/cuda/kernels/elementwise/elementwise_launch.h"
#include "backend/cuda/kernels/gemv/gemv_launch.h"
#include "backend/cuda/kernels/moe/moe_launch.h"
#include "backend/cuda/runtime/cuda_status.h"
#include "core/convert.h"

namespace locus {
namespace {

constexpr size_t kGemmWorkspaceBytes = 32u << 20;
// Widest linear the GEMV path takes (above it: the vocabulary projection, on cuBLASLt).
constexpr int64_t kGemvMaxColumns = 32768;

cuda::RowView row_view(const Tensor& x) {
  cuda::RowView v;
  v.data = x.raw_data();
  v.n = x.size(-1);
  if (x.ndim() == 1) {
    v.dim0 = 1;
  } else if (x.ndim() == 2) {
    v.dim0 = x.size(0);
    v.stride0 = x.stride(0);
  } else {
    v.dim0 = x.size(0);
    v.dim1 = x.size(1);
    v.stride0 = x.stride(0);
    v.stride1 = x.stride(1);
  }
  return v;
}

}  // namespace

struct CudaBackend::Slab {
  void* base = nullptr;
  size_t size = 0;
  size_t used = 0;
  ~Slab() {
    if (base != nullptr) cudaFree(base);
  }
};

CudaGraph::~CudaGraph() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) cudaGraphDestroy(graph_);
}

Status CudaGraph::replay() {
  auto timer = profiler_ != nullptr ? cuda::OpProfiler::Scope(profiler_, "cuda graph replay")
                                    : cuda::OpProfiler::Scope();
  return cuda_status("cudaGraphLaunch", cudaGraphLaunch(exec_, stream_));
}

Expected<std::unique_ptr<CudaBackend>> CudaBackend::create(const CudaBackendOptions& options) {
  std::unique_ptr<CudaBackend> b(new CudaBackend(options));
  LOCUS_RETURN_IF_ERROR(b->initialize());
  return b;
}

Status CudaBackend::initialize() {
  const CudaBackendOptions& options = options_;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    cudaGetLastError();
    return unsupported(fmt::format("the CUDA backend needs a GPU: {}",
                                   err != cudaSuccess ? cudaGetErrorString(err) : "none found"));
  }
  if (options.device_index < 0 || options.device_index >= count) {
    return invalid_argument(
        fmt::format("cuda:{} does not exist ({} GPU(s))", options.device_index, count));
  }
  if (!(options.gpu_memory_utilization > 0.0 && options.gpu_memory_utilization <= 1.0)) {
    return invalid_argument(fmt::format("--gpu-memory-utilization {} must be in (0, 1]",
                                        options.gpu_memory_utilization));
  }
  LOCUS_CUDA_OK("cudaSetDevice", cudaSetDevice(options.device_index));
  cudaDeviceProp prop{};
  LOCUS_CUDA_OK("cudaGetDeviceProperties", cudaGetDeviceProperties(&prop, options.device_index));
  if (prop.major < 9) {
    return unsupported(
        fmt::format("cuda:{} is {} (sm_{}{}); this build targets Hopper (sm_90a) and newer",
                    options.device_index, prop.name, prop.major, prop.minor));
  }
  device_name_ = prop.name;
  total_memory_ = prop.totalGlobalMem;
  LOCUS_CUDA_OK("cudaStreamCreate", cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  allocator_ = std::make_shared<cuda::DeviceAllocator>(options.device_index);
  LOCUS_ASSIGN_OR_RETURN(gemm_workspace_,
                         do_empty({static_cast<int64_t>(kGemmWorkspaceBytes)}, DType::kU8));
  LOCUS_ASSIGN_OR_RETURN(
      gemm_, cuda::CublasGemm::create(stream_, gemm_workspace_.raw_data(), kGemmWorkspaceBytes));
  if (const char* env = std::getenv("LOCUS_CUDA_GEMV"); env != nullptr && env[0] == '0') {
    options_.small_batch_gemv = false;
  }
  if (const char* env = std::getenv("LOCUS_CUDA_FOLD_ROUTER"); env != nullptr) {
    options_.fold_router = env[0] != '0';
  }
  if (const char* env = std::getenv("LOCUS_CUDA_OP_PROFILE"); env != nullptr && env[0] == '1') {
    profiler_ = std::make_unique<cuda::OpProfiler>(stream_);
  }
  return Status::ok();
}

cuda::OpProfiler::Scope CudaBackend::profile(const char* op, int64_t rows, int64_t cols) {
  if (!profiler_) return {};
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  cudaStreamIsCapturing(stream_, &capturing);
  if (capturing != cudaStreamCaptureStatusNone) return {};
  // Rows bucketed to powers of two so decode and prefill steps report apart.
  int64_t bucket = 1;
  while (bucket < rows)
    bucket *= 2;
  return {profiler_.get(), cols > 0 ? fmt::format("{} [T<={}, N={}]", op, bucket, cols)
                                    : fmt::format("{} [T<={}]", op, bucket)};
}

std::string CudaBackend::take_op_profile() {
  if (!profiler_) return {};
  profiler_->collect();
  std::string out = profiler_->report();
  profiler_->clear();
  return out;
}

CudaBackend::~CudaBackend() {
  profiler_.reset();
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  gemm_.reset();
  rope_tables_.clear();
  expert_tables_.clear();
  gemm_workspace_ = Tensor();
  slab_.reset();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

std::string CudaBackend::name() const {
  return fmt::format("cuda:{} ({})", options_.device_index, device_name_);
}

uint64_t CudaBackend::free_memory_bytes() const {
  size_t free_b = 0, total_b = 0;
  cudaSetDevice(options_.device_index);
  cudaMemGetInfo(&free_b, &total_b);
  return free_b;
}

uint64_t CudaBackend::weight_memory_budget_bytes() const {
  // What the utilization allows, less what is already taken (by us or other processes).
  const auto allowed =
      static_cast<uint64_t>(options_.gpu_memory_utilization * static_cast<double>(total_memory_));
  const uint64_t used_elsewhere = total_memory_ - free_memory_bytes();
  return allowed > used_elsewhere ? allowed - used_elsewhere : 0;
}

uint64_t CudaBackend::prepared_weight_bytes(DType dtype, int64_t numel) const {
  (void)dtype;  // every weight is stored as bf16 (fp8 is dequantized at load for now)
  return static_cast<uint64_t>(numel) * 2;
}

Status CudaBackend::make_current() {
  return cuda_status("cudaSetDevice", cudaSetDevice(options_.device_index));
}

Status CudaBackend::synchronize() {
  if (profiler_) profiler_->collect();
  return cuda_status("cudaStreamSynchronize", cudaStreamSynchronize(stream_));
}

Expected<std::unique_ptr<Ops::Graph>> CudaBackend::capture_graph(
    const std::function<Status()>& body) {
  LOCUS_CUDA_OK("cudaStreamBeginCapture",
                cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  Status body_status = body();
  cudaGraph_t graph = nullptr;
  cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (!body_status.is_ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    return body_status;
  }
  LOCUS_CUDA_OK("cudaStreamEndCapture", end);
  cudaGraphExec_t exec = nullptr;
  cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  if (inst != cudaSuccess) {
    cudaGraphDestroy(graph);
    return cuda_status("cudaGraphInstantiate", inst);
  }
  return std::unique_ptr<Ops::Graph>(
      std::make_unique<CudaGraph>(graph, exec, stream_, profiler_.get()));
}

Expected<double> CudaBackend::measure_copy_bandwidth(size_t bytes) {
  LOCUS_ASSIGN_OR_RETURN(Tensor src, do_empty({static_cast<int64_t>(bytes)}, DType::kU8));
  LOCUS_ASSIGN_OR_RETURN(Tensor dst, do_empty({static_cast<int64_t>(bytes)}, DType::kU8));
  // Non-zero contents (METHOD.md: never time zeros).
  LOCUS_CUDA_OK("memset", cudaMemsetAsync(src.raw_data(), 0x5A, bytes, stream_));
  cudaEvent_t a = nullptr, b = nullptr;
  LOCUS_CUDA_OK("cudaEventCreate", cudaEventCreate(&a));
  LOCUS_CUDA_OK("cudaEventCreate", cudaEventCreate(&b));
  std::vector<double> gbps;
  for (int i = 0; i < 13; ++i) {
    cudaEventRecord(a, stream_);
    cudaMemcpyAsync(dst.raw_data(), src.raw_data(), bytes, cudaMemcpyDeviceToDevice, stream_);
    cudaEventRecord(b, stream_);
    cudaError_t err = cudaEventSynchronize(b);
    if (err != cudaSuccess) {
      cudaEventDestroy(a);
      cudaEventDestroy(b);
      return cuda_status("copy bandwidth", err);
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    if (i >= 3) gbps.push_back(2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(gbps.begin(), gbps.end());
  return gbps[gbps.size() / 2];
}

Status CudaBackend::copy_into(const void* host, Tensor& dst, size_t bytes) {
  if (bytes > dst.nbytes()) return invalid_argument("copy_to_device: too many bytes");
  return cuda_status("cudaMemcpyAsync H2D",
                     cudaMemcpyAsync(dst.raw_data(), host, bytes, cudaMemcpyHostToDevice, stream_));
}

// ---- memory ----------------------------------------------------------------------------------

Expected<Tensor> CudaBackend::do_empty(const Dims& shape, DType dtype) {
  const int64_t numel = shape_numel(shape);
  if (numel < 0) return invalid_argument("empty: shape overflows");
  const size_t bytes = dtype_bytes(dtype, static_cast<size_t>(numel));
  LOCUS_ASSIGN_OR_RETURN(void* ptr, allocator_->allocate(bytes));
  std::shared_ptr<cuda::DeviceAllocator> alloc = allocator_;
  auto storage = Storage::adopt(ptr, bytes, device(), [alloc](void* p) { alloc->free(p); });
  return Tensor::from_storage(std::move(storage), shape, dtype);
}

Status CudaBackend::do_fill_zero(Tensor& t) {
  if (!t.is_contiguous()) return invalid_argument("fill_zero: tensor must be contiguous");
  return cuda_status("cudaMemsetAsync", cudaMemsetAsync(t.raw_data(), 0, t.nbytes(), stream_));
}

Expected<Tensor> CudaBackend::empty_weight(const Dims& shape, DType dtype) {
  constexpr size_t kSlab = size_t{256} << 20;
  const int64_t numel = shape_numel(shape);
  if (numel < 0) return invalid_argument("empty_weight: shape overflows");
  const size_t bytes = (dtype_bytes(dtype, static_cast<size_t>(numel)) + 255) / 256 * 256;
  if (!slab_ || slab_->used + bytes > slab_->size) {
    auto slab = std::make_shared<Slab>();
    slab->size = std::max(kSlab, bytes);
    cudaError_t err = cudaMalloc(&slab->base, slab->size);
    if (err != cudaSuccess) {
      cudaGetLastError();
      slab->base = nullptr;
      return resource_exhausted(
          fmt::format("cuda:{}: no room for {:.0f} MiB more weights after {:.2f} GiB ({})",
                      options_.device_index, static_cast<double>(slab->size) / (1 << 20),
                      static_cast<double>(weight_bytes_) / (1ull << 30), cudaGetErrorString(err)));
    }
    weight_bytes_ += slab->size;
    slab_ = std::move(slab);
  }
  void* ptr = static_cast<char*>(slab_->base) + slab_->used;
  slab_->used += bytes;
  std::shared_ptr<Slab> keep = slab_;
  auto storage = Storage::adopt(ptr, bytes, device(), [keep](void*) {});
  return Tensor::from_storage(std::move(storage), shape, dtype);
}

Expected<Tensor> CudaBackend::do_to_device(const Tensor& host) {
  return upload(host, /*weight=*/false);
}

Expected<Tensor> CudaBackend::upload(const Tensor& host, bool weight) {
  if (!host.is_contiguous()) {
    return invalid_argument(fmt::format("to_device: {} must be contiguous", host.to_string()));
  }
  Tensor out;
  if (weight) {
    LOCUS_ASSIGN_OR_RETURN(out, empty_weight(host.shape(), host.dtype()));
  } else {
    LOCUS_ASSIGN_OR_RETURN(out, do_empty(host.shape(), host.dtype()));
  }
  LOCUS_CUDA_OK("cudaMemcpyAsync H2D",
                cudaMemcpyAsync(out.raw_data(), host.raw_data(), host.nbytes(),
                                cudaMemcpyHostToDevice, stream_));
  return out;
}

Expected<Tensor> CudaBackend::do_to_host(const Tensor& tensor) {
  if (tensor.device().is_cpu()) return tensor;
  if (!tensor.is_contiguous()) {
    return invalid_argument(fmt::format("to_host: {} must be contiguous", tensor.to_string()));
  }
  LOCUS_ASSIGN_OR_RETURN(Tensor out, Tensor::empty(tensor.shape(), tensor.dtype()));
  LOCUS_CUDA_OK("cudaMemcpyAsync D2H",
                cudaMemcpyAsync(out.raw_data(), tensor.raw_data(), tensor.nbytes(),
                                cudaMemcpyDeviceToHost, stream_));
  LOCUS_RETURN_IF_ERROR(synchronize());
  return out;
}

// A host tensor of any float dtype as a device tensor of `dtype` (bf16 or f32).
Expected<Tensor> CudaBackend::ensure_device(const Tensor& t, DType dtype, bool weight) {
  if (on_cuda(t) && t.dtype() == dtype) return t;
  LOCUS_ASSIGN_OR_RETURN(Tensor host, do_to_host(t));
  if (host.dtype() == dtype && host.is_contiguous()) return upload(host, weight);
  if (!host.is_contiguous()) {
    return invalid_argument(fmt::format("{} must be contiguous", host.to_string()));
  }
  const auto n = static_cast<size_t>(host.numel());
  std::vector<float> wide(n);
  LOCUS_RETURN_IF_ERROR(convert_to_f32(host.dtype(), host.raw_data(), wide.data(), n));
  LOCUS_ASSIGN_OR_RETURN(Tensor staged, Tensor::empty(host.shape(), dtype));
  LOCUS_RETURN_IF_ERROR(convert_from_f32(wide.data(), dtype, staged.raw_data(), n));
  return upload(staged, weight);
}

Expected<LinearWeight> CudaBackend::do_prepare_linear(const LinearWeight& host) {
  LinearWeight out;
  if (host.weight.dtype() == DType::kBF16 || on_cuda(host.weight)) {
    LOCUS_ASSIGN_OR_RETURN(out.weight, ensure_device(host.weight, DType::kBF16, true));
  } else {
    // f32 / f16 / block-scaled fp8: dequantize on the host (the CPU reference's code), then
    // store bf16. fp8 GEMMs on the tensor cores are future work.
    LOCUS_ASSIGN_OR_RETURN(Tensor dense, cpu::dense_weight(host));
    LOCUS_ASSIGN_OR_RETURN(out.weight, ensure_device(dense, DType::kBF16, true));
  }
  if (host.bias.defined()) {
    LOCUS_ASSIGN_OR_RETURN(out.bias, ensure_device(host.bias, DType::kF32, true));
  }
  return out;
}

Expected<Tensor> CudaBackend::do_prepare_weight(const Tensor& host) {
  // 1-d weights (norms, correction biases) stay f32: the kernels read them in f32. Tables bf16.
  return ensure_device(host, host.ndim() == 1 ? DType::kF32 : DType::kBF16, true);
}

Expected<std::optional<Tensor>> CudaBackend::random_uniform_weight(const Dims& shape, DType dtype,
                                                                   uint64_t stream, float low,
                                                                   float high) {
  if (dtype != DType::kBF16 && dtype != DType::kF32) return std::optional<Tensor>();
  // The dtypes prepare_weight / prepare_linear would produce: 1-d f32, else bf16.
  const bool store_f32 = shape.size() == 1;
  LOCUS_ASSIGN_OR_RETURN(Tensor t, empty_weight(shape, store_f32 ? DType::kF32 : DType::kBF16));
  LOCUS_RETURN_IF_ERROR(
      cuda_status("random_uniform_weight",
                  cuda::launch_random_uniform(t.raw_data(), t.numel(), stream, low, high,
                                              dtype == DType::kBF16, store_f32, stream_)));
  return std::optional<Tensor>(std::move(t));
}

Expected<LinearWeight> CudaBackend::ensure_prepared(const LinearWeight& w) {
  if (on_cuda(w.weight) && w.weight.dtype() == DType::kBF16 && w.weight.is_contiguous() &&
      (!w.bias.defined() || (on_cuda(w.bias) && w.bias.dtype() == DType::kF32))) {
    return w;
  }
  return do_prepare_linear(w);
}

// ---- compute ---------------------------------------------------------------------------------

Status CudaBackend::do_embedding(const Tensor& table, const Tensor& token_ids, Tensor& out) {
  auto timer = profile("embedding", token_ids.numel());
  LOCUS_RETURN_IF_ERROR(need_bf16("embedding", "out", out));
  LOCUS_ASSIGN_OR_RETURN(Tensor t, ensure_device(table, DType::kBF16));
  LOCUS_ASSIGN_OR_RETURN(Tensor ids, ensure_device(token_ids, DType::kI32));
  return cuda_status("embedding", cuda::launch_embedding(t.raw_data(), t.size(0), t.size(1), 2,
                                                         ids.data<int32_t>(), ids.numel(),
                                                         out.raw_data(), stream_));
}

Status CudaBackend::do_embedding_rms_norm(const Tensor& table, const Tensor& token_ids,
                                          const Tensor& weight, float eps, Tensor& residual,
                                          Tensor& normed) {
  auto timer = profile("embedding_rms_norm", token_ids.numel(), table.size(1));
  LOCUS_RETURN_IF_ERROR(need_bf16("embedding_rms_norm", "residual", residual));
  LOCUS_RETURN_IF_ERROR(need_bf16("embedding_rms_norm", "normed", normed));
  LOCUS_ASSIGN_OR_RETURN(Tensor t, ensure_device(table, DType::kBF16));
  LOCUS_ASSIGN_OR_RETURN(Tensor ids, ensure_device(token_ids, DType::kI32));
  LOCUS_ASSIGN_OR_RETURN(Tensor wt, ensure_device(weight, DType::kF32));
  return cuda_status("embedding_rms_norm",
                     cuda::launch_embedding_rms_norm(
                         t.raw_data(), t.size(0), t.size(1), ids.data<int32_t>(), ids.numel(),
                         wt.data<float>(), eps, residual.raw_data(), normed.raw_data(), stream_));
}

Status CudaBackend::do_linear(const Tensor& x_in, const LinearWeight& w_in, Tensor& out) {
  auto timer = profile("linear", x_in.size(0), w_in.out_features());
  LOCUS_ASSIGN_OR_RETURN(LinearWeight w, ensure_prepared(w_in));
  Tensor x = x_in;
  if (x.dtype() != DType::kBF16 || !on_cuda(x)) {
    LOCUS_ASSIGN_OR_RETURN(Tensor host, do_to_host(x));
    LOCUS_ASSIGN_OR_RETURN(x, ensure_device(host, DType::kBF16));
  }
  const bool y_f32 = out.dtype() == DType::kF32;
  if (!y_f32) LOCUS_RETURN_IF_ERROR(need_bf16("linear", "out", out));
  const int64_t m = x.size(0), k = x.size(1), n = w.out_features();
  // Decode rows: a warp per output row streams the weights near the memory roofline, where
  // cuBLASLt's small-M kernels reach a fraction of it. The vocabulary projection stays on
  // cuBLASLt, which already streams it at full bandwidth.
  if (options_.small_batch_gemv && n <= kGemvMaxColumns && x.stride(0) % 8 == 0 &&
      cuda::gemv_supported(static_cast<int>(m), static_cast<int>(n), static_cast<int>(k))) {
    cuda::GemvSegments seg;
    seg.seg[0] = {w.weight.raw_data(), w.bias.defined() ? w.bias.data<float>() : nullptr,
                  static_cast<int>(n)};
    seg.count = 1;
    return cuda_status("linear (gemv)", cuda::launch_gemv_segments(
                                            x.raw_data(), x.stride(0), seg, out.raw_data(), y_f32,
                                            static_cast<int>(m), static_cast<int>(k), stream_));
  } else {
    LOCUS_RETURN_IF_ERROR(gemm_->linear(x.raw_data(), x.stride(0), w.weight.raw_data(),
                                        out.raw_data(), y_f32, m, n, k));
  }
  if (w.bias.defined()) {
    LOCUS_RETURN_IF_ERROR(cuda_status(
        "linear bias",
        cuda::launch_add_bias(out.raw_data(), n, w.bias.data<float>(), m, n, y_f32, stream_)));
  }
  return Status::ok();
}

Status CudaBackend::do_rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  auto timer = profile("rms_norm", x.numel() / x.size(-1), x.size(-1));
  LOCUS_RETURN_IF_ERROR(need_bf16("rms_norm", "x", x));
  LOCUS_RETURN_IF_ERROR(need_bf16("rms_norm", "out", out));
  if (x.ndim() > 3) return unsupported("rms_norm on cuda: x must have at most 3 dims");
  LOCUS_ASSIGN_OR_RETURN(Tensor wt, ensure_device(weight, DType::kF32));
  return cuda_status("rms_norm", cuda::launch_rms_norm(row_view(x), wt.data<float>(), eps,
                                                       out.raw_data(), stream_));
}

Status CudaBackend::do_sum_squares(const Tensor& x, Tensor& out) {
  auto timer = profile("sum_squares", x.size(0), x.size(1));
  LOCUS_RETURN_IF_ERROR(need_bf16("sum_squares", "x", x));
  return cuda_status("sum_squares",
                     cuda::launch_sum_squares(row_view(x), out.data<float>(), stream_));
}

Status CudaBackend::do_split_rms_norm(const Tensor& x, const Tensor& weight,
                                      const Tensor& sum_squares, int64_t width, float eps,
                                      Tensor& out) {
  auto timer = profile("split_rms_norm", x.size(0), x.size(1));
  LOCUS_RETURN_IF_ERROR(need_bf16("split_rms_norm", "x", x));
  LOCUS_RETURN_IF_ERROR(need_bf16("split_rms_norm", "out", out));
  LOCUS_ASSIGN_OR_RETURN(Tensor wt, ensure_device(weight, DType::kF32));
  LOCUS_ASSIGN_OR_RETURN(Tensor ss, ensure_device(sum_squares, DType::kF32));
  return cuda_status("split_rms_norm",
                     cuda::launch_split_rms_norm(row_view(x), wt.data<float>(), ss.data<float>(),
                                                 width, eps, out.raw_data(), stream_));
}

Status CudaBackend::do_add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& weight,
                                    float eps, Tensor& residual_out, Tensor& out) {
  auto timer = profile("add_rms_norm", x.size(0));
  LOCUS_RETURN_IF_ERROR(need_bf16("add_rms_norm", "residual", residual));
  LOCUS_RETURN_IF_ERROR(need_bf16("add_rms_norm", "x", x));
  LOCUS_RETURN_IF_ERROR(need_bf16("add_rms_norm", "residual_out", residual_out));
  LOCUS_RETURN_IF_ERROR(need_bf16("add_rms_norm", "out", out));
  LOCUS_ASSIGN_OR_RETURN(Tensor wt, ensure_device(weight, DType::kF32));
  return cuda_status("add_rms_norm",
                     cuda::launch_add_rms_norm(residual.raw_data(), x.raw_data(), x.size(0),
                                               x.size(1), wt.data<float>(), eps,
                                               residual_out.raw_data(), out.raw_data(), stream_));
}

Expected<Tensor> CudaBackend::rope_table(const RopeParams& params) {
  std::vector<uint64_t> bytes((params.inv_freq.nbytes() + 7) / 8, 0);
  std::memcpy(bytes.data(), params.inv_freq.raw_data(), params.inv_freq.nbytes());
  return cached_upload(rope_tables_, params.inv_freq.raw_data(), std::move(bytes), params.inv_freq);
}

Status CudaBackend::do_rope(Tensor& x, const Tensor& positions, const RopeParams& params) {
  auto timer = profile("rope", x.size(0));
  LOCUS_RETURN_IF_ERROR(need_bf16("rope", "x", x));
  LOCUS_ASSIGN_OR_RETURN(Tensor pos, ensure_device(positions, DType::kI32));
  LOCUS_ASSIGN_OR_RETURN(Tensor table, rope_table(params));
  return cuda_status(
      "rope", cuda::launch_rope(x.raw_data(), x.size(0), x.size(1), x.stride(0), x.stride(1),
                                pos.data<int32_t>(), table.data<float>(),
                                static_cast<int>(params.rotary_dim()), params.attention_factor,
                                params.layout == RopeLayout::kNeox, stream_));
}

Status CudaBackend::do_silu_and_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  auto timer = profile("silu_and_mul", gate.size(0));
  LOCUS_RETURN_IF_ERROR(need_bf16("silu_and_mul", "gate", gate));
  LOCUS_RETURN_IF_ERROR(need_bf16("silu_and_mul", "up", up));
  return cuda_status(
      "silu_and_mul",
      cuda::launch_silu_and_mul(gate.raw_data(), gate.stride(0), up.raw_data(), up.stride(0),
                                gate.size(0), gate.size(1), out.raw_data(), stream_));
}

Status CudaBackend::do_add(const Tensor& a, const Tensor& b, Tensor& out) {
  auto timer = profile("add", a.size(0));
  if (!on_cuda(a) || !on_cuda(b) || !on_cuda(out)) {
    return invalid_argument("add on cuda: every tensor must be on the GPU");
  }
  if (a.dtype() != b.dtype() || a.dtype() != out.dtype() ||
      (a.dtype() != DType::kBF16 && a.dtype() != DType::kF32)) {
    return unsupported("add on cuda: a, b and out must all be bf16 or all f32");
  }
  return cuda_status("add", cuda::launch_add(a.raw_data(), b.raw_data(), out.raw_data(), a.numel(),
                                             a.dtype() == DType::kF32, stream_));
}

Status CudaBackend::do_gather_rows(const Tensor& x, const Tensor& indices, Tensor& out) {
  auto timer = profile("gather_rows", indices.numel());
  if (!on_cuda(x) || !on_cuda(out)) return invalid_argument("gather_rows on cuda: not on GPU");
  LOCUS_ASSIGN_OR_RETURN(Tensor idx, ensure_device(indices, DType::kI32));
  return cuda_status("gather_rows", cuda::launch_gather_rows(
                                        x.raw_data(), x.size(1), dtype_bytes(x.dtype(), 1),
                                        idx.data<int32_t>(), idx.numel(), out.raw_data(), stream_));
}

Status CudaBackend::do_gather_sum_rows(const Tensor& x, const Tensor& index, Tensor& out) {
  auto timer = profile("gather_sum_rows", index.size(1), x.size(1));
  LOCUS_RETURN_IF_ERROR(need_bf16("gather_sum_rows", "x", x));
  LOCUS_RETURN_IF_ERROR(need_bf16("gather_sum_rows", "out", out));
  LOCUS_ASSIGN_OR_RETURN(Tensor idx, ensure_device(index, DType::kI32));
  return cuda_status("gather_sum_rows",
                     cuda::launch_gather_sum_rows(x.raw_data(), idx.data<int32_t>(),
                                                  static_cast<int>(index.size(0)), index.size(1),
                                                  x.size(1), out.raw_data(), stream_));
}

Status CudaBackend::do_write_kv_cache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping,
                                      Tensor& k_cache, Tensor& v_cache) {
  auto timer = profile("write_kv_cache", k.size(0));
  LOCUS_RETURN_IF_ERROR(need_bf16("write_kv_cache", "k", k));
  LOCUS_RETURN_IF_ERROR(need_bf16("write_kv_cache", "v", v));
  LOCUS_RETURN_IF_ERROR(need_bf16("write_kv_cache", "k_cache", k_cache));
  LOCUS_RETURN_IF_ERROR(need_bf16("write_kv_cache", "v_cache", v_cache));
  LOCUS_ASSIGN_OR_RETURN(Tensor slots, ensure_device(slot_mapping, DType::kI64));
  cuda::KvWriteArgs a;
  a.k = k.raw_data();
  a.k_stride_token = k.stride(0);
  a.k_stride_head = k.stride(1);
  a.v = v.raw_data();
  a.v_stride_token = v.stride(0);
  a.v_stride_head = v.stride(1);
  a.slot_mapping = slots.data<int64_t>();
  a.k_cache = k_cache.raw_data();
  a.v_cache = v_cache.raw_data();
  a.tokens = k.size(0);
  a.heads = k.size(1);
  a.head_dim = k.size(2);
  a.v_head_dim = v.size(2);
  return cuda_status("write_kv_cache", cuda::launch_write_kv_cache(a, stream_));
}

Expected<int*> CudaBackend::split_counters() {
  if (!split_counters_.defined()) {
    // Allocated and zeroed once, outside any capture; graphs keep its address. A launch that
    // needs more slots than this merges with the separate kernel.
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    LOCUS_CUDA_OK("cudaStreamIsCapturing", cudaStreamIsCapturing(stream_, &capturing));
    if (capturing != cudaStreamCaptureStatusNone) return static_cast<int*>(nullptr);
    LOCUS_ASSIGN_OR_RETURN(split_counters_,
                           do_empty({static_cast<int64_t>(kSplitCounterSlots)}, DType::kI32));
    LOCUS_CUDA_OK("cudaMemsetAsync", cudaMemsetAsync(split_counters_.raw_data(), 0,
                                                     split_counters_.nbytes(), stream_));
  }
  return split_counters_.data<int>();
}

Status CudaBackend::launch_attention(const Tensor& q, const Tensor& k_cache, int64_t k_block_stride,
                                     int64_t k_token_stride, int64_t k_head_stride,
                                     const void* v_data, int64_t v_block_stride,
                                     int64_t v_token_stride, int64_t v_head_stride,
                                     int64_t num_kv_heads, int64_t head_dim, int64_t v_head_dim,
                                     const AttentionMetadata& md, float scale,
                                     int64_t sliding_window, Tensor& out) {
  LOCUS_ASSIGN_OR_RETURN(Tensor qsl, ensure_device(md.query_start_loc, DType::kI32));
  LOCUS_ASSIGN_OR_RETURN(Tensor seq_lens, ensure_device(md.seq_lens, DType::kI32));
  LOCUS_ASSIGN_OR_RETURN(Tensor table, ensure_device(md.block_table, DType::kI32));
  int64_t max_q = md.max_query_len, max_s = md.max_seq_len;
  if (max_q <= 0 || max_s <= 0) {
    // No host bounds (direct op callers): read the lengths back once.
    LOCUS_ASSIGN_OR_RETURN(Tensor hq, do_to_host(qsl));
    LOCUS_ASSIGN_OR_RETURN(Tensor hs, do_to_host(seq_lens));
    max_q = 0;
    max_s = 0;
    for (int64_t s = 0; s + 1 < hq.numel(); ++s) {
      max_q = std::max<int64_t>(max_q, hq.data<int32_t>()[s + 1] - hq.data<int32_t>()[s]);
    }
    for (int64_t s = 0; s < hs.numel(); ++s)
      max_s = std::max<int64_t>(max_s, hs.data<int32_t>()[s]);
  }
  cuda::PagedAttentionArgs a;
  a.q = q.raw_data();
  a.q_token_stride = q.stride(0);
  a.q_head_stride = q.stride(1);
  a.k_cache = k_cache.raw_data();
  a.k_block_stride = k_block_stride;
  a.k_token_stride = k_token_stride;
  a.k_head_stride = k_head_stride;
  a.v_cache = v_data;
  a.v_block_stride = v_block_stride;
  a.v_token_stride = v_token_stride;
  a.v_head_stride = v_head_stride;
  a.out = out.raw_data();
  a.query_start_loc = qsl.data<int32_t>();
  a.seq_lens = seq_lens.data<int32_t>();
  a.block_table = table.data<int32_t>();
  a.block_table_stride = table.ndim() == 2 ? table.size(1) : 0;
  a.num_seqs = static_cast<int>(seq_lens.numel());
  a.num_tokens = static_cast<int>(q.size(0));
  a.num_q_heads = static_cast<int>(q.size(1));
  a.num_kv_heads = static_cast<int>(num_kv_heads);
  a.head_dim = static_cast<int>(head_dim);
  a.v_head_dim = static_cast<int>(v_head_dim);
  a.block_size = static_cast<int>(md.block_size);
  a.scale = scale;
  a.sliding_window = sliding_window;
  a.max_query_len = static_cast<int>(max_q);
  a.max_seq_len = static_cast<int>(max_s);
  const size_t ws = cuda::paged_attention_workspace_bytes(a);
  Tensor workspace;
  if (ws > 0) {
    LOCUS_ASSIGN_OR_RETURN(workspace, do_empty({static_cast<int64_t>(ws)}, DType::kU8));
    a.workspace = workspace.raw_data();
    a.workspace_bytes = ws;
  }
  if (cuda::paged_attention_counter_slots(a) > 0) {
    LOCUS_ASSIGN_OR_RETURN(a.split_counters, split_counters());
    a.split_counter_slots = a.split_counters != nullptr ? kRouterCounterSlot : 0;
  }
  const cudaError_t err = cuda::launch_paged_attention(a, stream_);
  if (err == cudaErrorInvalidValue) {
    cudaGetLastError();
    return unsupported(fmt::format(
        "paged_attention on cuda: unsupported shape (head_dim {}, v_head_dim {}, {} q / {} kv "
        "heads, block_size {})",
        head_dim, v_head_dim, q.size(1), num_kv_heads, md.block_size));
  }
  return cuda_status("paged_attention", err);
}

Status CudaBackend::do_paged_attention(const Tensor& q, const Tensor& k_cache,
                                       const Tensor& v_cache, const AttentionMetadata& metadata,
                                       const AttentionParams& params, Tensor& out) {
  auto timer = profile("paged_attention", q.size(0));
  LOCUS_RETURN_IF_ERROR(need_bf16("paged_attention", "q", q));
  LOCUS_RETURN_IF_ERROR(need_bf16("paged_attention", "k_cache", k_cache));
  LOCUS_RETURN_IF_ERROR(need_bf16("paged_attention", "v_cache", v_cache));
  LOCUS_RETURN_IF_ERROR(need_bf16("paged_attention", "out", out));
  return launch_attention(q, k_cache, k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
                          v_cache.raw_data(), v_cache.stride(0), v_cache.stride(1),
                          v_cache.stride(2), k_cache.size(2), k_cache.size(3), v_cache.size(3),
                          metadata, params.scale, params.sliding_window.value_or(0), out);
}

Status CudaBackend::do_write_mla_cache(const Tensor& latent, const Tensor& k_pe,
                                       const Tensor& slot_mapping, Tensor& cache) {
  auto timer = profile("write_mla_cache", latent.size(0));
  LOCUS_RETURN_IF_ERROR(need_bf16("write_mla_cache", "latent", latent));
  LOCUS_RETURN_IF_ERROR(need_bf16("write_mla_cache", "k_pe", k_pe));
  LOCUS_RETURN_IF_ERROR(need_bf16("write_mla_cache", "cache", cache));
  LOCUS_ASSIGN_OR_RETURN(Tensor slots, ensure_device(slot_mapping, DType::kI64));
  return cuda_status("write_mla_cache",
                     cuda::launch_write_mla_cache(latent.raw_data(), latent.stride(0),
                                                  latent.size(1), k_pe.raw_data(), k_pe.stride(0),
                                                  k_pe.size(1), slots.data<int64_t>(),
                                                  latent.size(0), cache.raw_data(), stream_));
}

// MLA with the weights absorbed (DeepSeek's decode form): q_nope of head h times W_UK[h] gives
// a query over the latent, attention runs as MQA over the cache entries [latent, k_pe] with V =
// the latent, and the latent output times W_UV[h]^T gives the head's value. kv_b_proj rows of
// head h: [h*(nope+v), h*(nope+v)+nope) are W_UK[h], the next v rows W_UV[h].
Status CudaBackend::do_mla_attention(const Tensor& q, const Tensor& cache,
                                     const LinearWeight& kv_b_proj,
                                     const AttentionMetadata& metadata, const MlaParams& p,
                                     Tensor& out) {
  auto timer = profile("mla_attention", q.size(0));
  LOCUS_RETURN_IF_ERROR(need_bf16("mla_attention", "q", q));
  LOCUS_RETURN_IF_ERROR(need_bf16("mla_attention", "cache", cache));
  LOCUS_RETURN_IF_ERROR(need_bf16("mla_attention", "out", out));
  LOCUS_ASSIGN_OR_RETURN(LinearWeight w, ensure_prepared(kv_b_proj));
  const int64_t tokens = q.size(0), heads = q.size(1);
  const int64_t rank = p.kv_lora_rank, nope = p.qk_nope_head_dim, rope = p.qk_rope_head_dim,
                vdim = p.v_head_dim;
  const int64_t per_head = nope + vdim;
  if (q.stride(0) != heads * q.stride(1) || !cache.is_contiguous()) {
    return unsupported("mla_attention on cuda: q rows and the cache must be contiguous");
  }
  LOCUS_ASSIGN_OR_RETURN(Tensor qa, do_empty({tokens, heads, rank + rope}, DType::kBF16));
  // qa[t, h, :rank] = q_nope[t, h] W_UK[h]: column-major C[rank, T] = A[rank, nope] B[nope, T].
  LOCUS_RETURN_IF_ERROR(gemm_->batched(false, false, rank, tokens, nope, w.weight.raw_data(), rank,
                                       per_head * rank, q.raw_data(), q.stride(0), q.stride(1),
                                       qa.raw_data(), heads * (rank + rope), rank + rope, heads));
  const auto* q_bytes = static_cast<const char*>(q.raw_data());
  LOCUS_RETURN_IF_ERROR(cuda_status(
      "mla q_pe copy", cuda::launch_copy_rows(q_bytes + nope * 2, q.stride(1),
                                              static_cast<char*>(qa.raw_data()) + rank * 2,
                                              rank + rope, tokens * heads, rope, stream_)));
  LOCUS_ASSIGN_OR_RETURN(Tensor latent_out, do_empty({tokens, heads, rank}, DType::kBF16));
  const int64_t entry = rank + rope;
  LOCUS_RETURN_IF_ERROR(launch_attention(qa, cache, cache.stride(0), cache.stride(1), 0,
                                         cache.raw_data(), cache.stride(0), cache.stride(1), 0, 1,
                                         entry, rank, metadata, p.scale, 0, latent_out));
  // out[t, h] = latent_out[t, h] W_UV[h]^T: column-major C[v, T] = A^T[v, rank] B[rank, T]
  // where A is W_UV[h] read as column-major [rank, v].
  const auto* w_bytes = static_cast<const char*>(w.weight.raw_data());
  return gemm_->batched(true, false, vdim, tokens, rank, w_bytes + nope * rank * 2, rank,
                        per_head * rank, latent_out.raw_data(), heads * rank, rank, out.raw_data(),
                        heads * vdim, vdim, heads);
}

}  // namespace locus
