#include "model/weight_loader.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "core/float_convert.h"
#include "model/dummy_weights.h"

namespace locus {
namespace {

// A contiguous host copy of [start, start + length) of t along dim.
Expected<Tensor> copy_slice(const Tensor& t, int dim, int64_t start, int64_t length,
                            const std::string& name) {
  if (dim >= t.ndim() || start < 0 || length <= 0 || start + length > t.size(dim)) {
    return invalid_argument(fmt::format("{} {}: no slice [{}, {}) along dim {}", name,
                                        t.to_string(), start, start + length, dim));
  }
  if (t.dtype() == DType::kF4E2M1 || !t.is_contiguous()) {
    return unsupported(
        fmt::format("{} {}: cannot be sliced for tensor parallelism", name, t.to_string()));
  }
  Dims shape = t.shape();
  shape[dim] = length;
  LOCUS_ASSIGN_OR_RETURN(Tensor out, Tensor::empty(shape, t.dtype()));
  size_t outer = 1;
  for (int i = 0; i < dim; ++i)
    outer *= static_cast<size_t>(t.size(i));
  size_t inner = dtype_bytes(t.dtype(), 1);
  for (int i = dim + 1; i < t.ndim(); ++i)
    inner *= static_cast<size_t>(t.size(i));
  const size_t src_row = static_cast<size_t>(t.size(dim)) * inner;
  const size_t chunk = static_cast<size_t>(length) * inner;
  const auto* src = static_cast<const char*>(t.raw_data()) + static_cast<size_t>(start) * inner;
  auto* dst = static_cast<char*>(out.raw_data());
  for (size_t o = 0; o < outer; ++o)
    std::memcpy(dst + o * chunk, src + o * src_row, chunk);
  return out;
}

// The scale blocks that cover features [start, start + length) with blocks of `block`, when the
// shard keeps the block grid: it starts on a block boundary or stays inside one block.
std::optional<ShardRange> scale_blocks(int64_t start, int64_t length, int64_t block) {
  if (start % block == 0) return ShardRange{start / block, (length + block - 1) / block};
  if (start / block == (start + length - 1) / block) return ShardRange{start / block, 1};
  return std::nullopt;
}

// An fp8 slice that cuts across scale blocks, dequantized to f32 (exactly: an e4m3 value times
// an f32 scale). `slice` holds [start, start + length) of the weight along `dim`; scale_inv is
// the whole weight's.
Expected<Tensor> dequantize_slice(const Tensor& slice, const Tensor& scale_inv, int64_t block_out,
                                  int64_t block_in, int dim, int64_t start) {
  LOCUS_ASSIGN_OR_RETURN(Tensor out, Tensor::empty(slice.shape(), DType::kF32));
  std::vector<float> scales(static_cast<size_t>(scale_inv.numel()));
  std::memcpy(scales.data(), scale_inv.raw_data(), scales.size() * sizeof(float));
  const int64_t rows = slice.size(0);
  const int64_t cols = slice.size(1);
  const int64_t scale_cols = scale_inv.size(1);
  const auto* q = static_cast<const uint8_t*>(slice.raw_data());
  float* w = out.data<float>();
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t row = dim == 0 ? i + start : i;
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t col = dim == 1 ? j + start : j;
      const float scale =
          scales[static_cast<size_t>((row / block_out) * scale_cols + col / block_in)];
      w[i * cols + j] = e4m3_to_f32(q[i * cols + j]) * scale;
    }
  }
  return out;
}

}  // namespace

Expected<std::optional<Tensor>> WeightLoader::device_dummy(
    const std::string& name, const std::optional<LinearShard>& shard) {
  const auto* dummy = dynamic_cast<const DummyWeights*>(&source_);
  if (dummy == nullptr) return std::optional<Tensor>();
  const auto fill = dummy->uniform_fill(name);
  if (!fill) return std::optional<Tensor>();
  Dims shape = fill->shape;
  uint64_t stream = fill->stream;
  if (shard) {
    shape[shard->dim] = shard->length;
    stream = stream * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(shard->start) + 1;
  }
  return ops_.random_uniform_weight(shape, fill->dtype, stream, fill->low, fill->high);
}

Expected<LinearWeight> WeightLoader::linear(const std::string& module, bool has_bias,
                                            const std::optional<LinearShard>& shard) {
  LinearWeight host;
  LOCUS_ASSIGN_OR_RETURN(std::optional<Tensor> on_device, device_dummy(module + ".weight", shard));
  if (on_device) {
    host.weight = std::move(*on_device);
  } else {
    LOCUS_ASSIGN_OR_RETURN(host.weight, source_.tensor(module + ".weight"));
    if (shard) {
      LOCUS_ASSIGN_OR_RETURN(host.weight, copy_slice(host.weight, shard->dim, shard->start,
                                                     shard->length, module + ".weight"));
    }
  }
  if (host.weight.dtype() == DType::kF8E4M3) {
    const auto& block = config_.quant.weight_block_size;
    if (config_.quant.method != QuantMethod::kFp8 || block.size() != 2) {
      return unsupported(
          fmt::format("{}: {}.weight is fp8 but the config has no 2-d fp8 "
                      "weight_block_size",
                      source_.description(), module));
    }
    if (config_.quant.scale_dtype != DType::kF32) {
      return unsupported(fmt::format("{}: {}.weight_scale_inv in {} is not supported (f32 only)",
                                     source_.description(), module,
                                     dtype_name(config_.quant.scale_dtype)));
    }
    LOCUS_ASSIGN_OR_RETURN(host.scale_inv, source_.tensor(module + ".weight_scale_inv"));
    host.block_out = block[0];
    host.block_in = block[1];
    if (shard) {
      const auto blocks =
          scale_blocks(shard->start, shard->length, block[static_cast<size_t>(shard->dim)]);
      if (blocks) {
        LOCUS_ASSIGN_OR_RETURN(host.scale_inv,
                               copy_slice(host.scale_inv, shard->dim, blocks->start, blocks->length,
                                          module + ".weight_scale_inv"));
      } else {
        // The slice has no block grid of its own: it is handed over dequantized (f32), which
        // every backend takes; fp8 weights are dequantized at load today anyway.
        if (host.weight.device() != Device::cpu() || host.scale_inv.ndim() != 2) {
          return unsupported(fmt::format("{}: cannot dequantize this fp8 slice", module));
        }
        LOCUS_ASSIGN_OR_RETURN(host.weight, dequantize_slice(host.weight, host.scale_inv, block[0],
                                                             block[1], shard->dim, shard->start));
        host.scale_inv = Tensor();
        host.block_out = 0;
        host.block_in = 0;
      }
    }
  }
  if (has_bias && (!shard || shard->keep_bias)) {
    LOCUS_ASSIGN_OR_RETURN(host.bias, source_.tensor(module + ".bias"));
    if (shard && shard->dim == 0) {
      LOCUS_ASSIGN_OR_RETURN(
          host.bias, copy_slice(host.bias, 0, shard->start, shard->length, module + ".bias"));
    }
  }
  for (const Tensor* t : {&host.weight, &host.scale_inv, &host.bias}) {
    if (t->defined()) bytes_read_ += t->nbytes();
  }
  auto prepared = ops_.prepare_linear(host);
  if (!prepared) return prepared.status().with_context(module);
  return prepared;
}

Expected<Tensor> WeightLoader::tensor(const std::string& name) {
  LOCUS_ASSIGN_OR_RETURN(std::optional<Tensor> on_device, device_dummy(name));
  if (on_device) {
    bytes_read_ += on_device->nbytes();
    return std::move(*on_device);
  }
  LOCUS_ASSIGN_OR_RETURN(Tensor host, source_.tensor(name));
  bytes_read_ += host.nbytes();
  auto prepared = ops_.prepare_weight(host);
  if (!prepared) return prepared.status().with_context(name);
  return prepared;
}

Expected<ExpertWeights> WeightLoader::gated_mlp(const std::string& prefix, const char* gate,
                                                const char* up, const char* down,
                                                const std::optional<ShardRange>& width) {
  std::optional<LinearShard> column;
  std::optional<LinearShard> row;
  if (width) {
    column = LinearShard{0, width->start, width->length, true};
    row = LinearShard{1, width->start, width->length, true};
  }
  ExpertWeights w;
  LOCUS_ASSIGN_OR_RETURN(w.gate, linear(prefix + "." + gate, false, column));
  LOCUS_ASSIGN_OR_RETURN(w.up, linear(prefix + "." + up, false, column));
  LOCUS_ASSIGN_OR_RETURN(w.down, linear(prefix + "." + down, false, row));
  return w;
}

}  // namespace locus
