#include "model/dummy_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/convert.h"
#include "core/counter_rng.h"
#include "core/float_convert.h"

namespace locus {
namespace {

struct Range {
  float low;
  float high;
};

float linear_bound(int64_t fan_in) {
  return std::sqrt(3.0f / static_cast<float>(std::max<int64_t>(fan_in, 1)));
}

bool is_fp8_payload(const WeightSpec& s) {
  return s.role == WeightRole::kLinear && s.dtype == DType::kF8E4M3;
}
bool is_nvfp4_payload(const WeightSpec& s) {
  return s.role == WeightRole::kLinear && s.dtype == DType::kU8;
}

// The value range of a tensor's elements before conversion to its dtype. `owner_fan_in` is the
// fan-in of the quantized weight a scale belongs to.
Range value_range(const WeightSpec& spec, int64_t owner_fan_in) {
  switch (spec.role) {
    case WeightRole::kEmbedding:
      return {-0.05f, 0.05f};
    case WeightRole::kNorm:
      return {0.9f, 1.1f};
    case WeightRole::kBias:
    case WeightRole::kCorrectionBias:
      return {-0.02f, 0.02f};
    case WeightRole::kLinear:
    case WeightRole::kRouter:
    case WeightRole::kLmHead: {
      if (is_fp8_payload(spec)) return {-448.0f, 448.0f};
      if (is_nvfp4_payload(spec)) return {-6.0f, 6.0f};
      float a = linear_bound(spec.fan_in);
      return {-a, a};
    }
    case WeightRole::kWeightScale: {
      if (spec.dtype == DType::kF8E4M3) return {224.0f, 448.0f};  // NVFP4 group scales
      float base = linear_bound(owner_fan_in) / 448.0f;           // fp8 block inverse scales
      return {0.75f * base, 1.25f * base};
    }
    case WeightRole::kGlobalScale: {
      if (spec.name.ends_with(".input_scale")) return {1.0f, 1.0f};
      float v = linear_bound(owner_fan_in) / (6.0f * 448.0f);
      return {v, v};
    }
  }
  return {0.0f, 0.0f};
}

}  // namespace

DummyWeights::DummyWeights(WeightLayout layout, uint64_t seed)
    : layout_(std::move(layout)), seed_(seed) {
  for (size_t i = 0; i < layout_.specs.size(); ++i)
    index_.emplace(layout_.specs[i].name, i);
}

const WeightSpec* DummyWeights::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &layout_.specs[it->second];
}

std::vector<std::string> DummyWeights::names() const {
  std::vector<std::string> out;
  out.reserve(layout_.specs.size());
  for (const auto& spec : layout_.specs)
    out.push_back(spec.name);
  std::sort(out.begin(), out.end());
  return out;
}

bool DummyWeights::contains(std::string_view name) const {
  return find(name) != nullptr;
}

Expected<WeightInfo> DummyWeights::info(std::string_view name) const {
  const WeightSpec* spec = find(name);
  if (spec == nullptr) return not_found(fmt::format("dummy weights: no tensor '{}'", name));
  return WeightInfo{spec->name, spec->dtype, spec->shape};
}

Expected<Tensor> DummyWeights::tensor(std::string_view name) const {
  const WeightSpec* spec = find(name);
  if (spec == nullptr) return not_found(fmt::format("dummy weights: no tensor '{}'", name));
  LOCUS_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(spec->shape, spec->dtype));
  int64_t owner_fan_in = 0;
  if (!spec->scale_of.empty()) {
    if (const WeightSpec* owner = find(spec->scale_of)) owner_fan_in = owner->fan_in;
  }
  LOCUS_RETURN_IF_ERROR(fill(*spec, owner_fan_in, seed_, t.raw_data()));
  return t;
}

std::optional<DummyWeights::UniformFill> DummyWeights::uniform_fill(std::string_view name) const {
  const WeightSpec* spec = find(name);
  if (spec == nullptr || is_fp8_payload(*spec) || is_nvfp4_payload(*spec) ||
      spec->role == WeightRole::kWeightScale || spec->role == WeightRole::kGlobalScale ||
      (spec->dtype != DType::kBF16 && spec->dtype != DType::kF32)) {
    return std::nullopt;
  }
  const Range range = value_range(*spec, 0);
  return UniformFill{spec->shape, spec->dtype,
                     stream_key(seed_, fnv1a64(spec->name.data(), spec->name.size())), range.low,
                     range.high};
}

std::string DummyWeights::description() const {
  return fmt::format("dummy weights (seed {}, {} tensors, {:.2f} GB)", seed_, layout_.specs.size(),
                     static_cast<double>(layout_.total_bytes()) / 1e9);
}

Status DummyWeights::fill(const WeightSpec& spec, int64_t owner_fan_in, uint64_t seed, void* dst) {
  const int64_t numel = shape_numel(spec.shape);
  if (numel < 0) return invalid_argument(fmt::format("dummy weight '{}': bad shape", spec.name));
  const Range range = value_range(spec, owner_fan_in);
  const uint64_t stream = stream_key(seed, fnv1a64(spec.name.data(), spec.name.size()));
  auto value = [&](int64_t i) {
    float u = counter_uniform(stream, static_cast<uint64_t>(i));
    return range.low + (range.high - range.low) * u;
  };

  // Packed NVFP4 payload: byte j holds elements 2j (low nibble) and 2j+1.
  if (is_nvfp4_payload(spec)) {
    auto* out = static_cast<uint8_t*>(dst);
    for (int64_t j = 0; j < numel; ++j) {
      out[j] = pack_e2m1x2(f32_to_e2m1(value(2 * j)), f32_to_e2m1(value(2 * j + 1)));
    }
    return Status::ok();
  }
  // Everything else: draw f32 values in chunks and convert to the tensor's dtype.
  constexpr int64_t kChunk = 1 << 16;
  std::vector<float> buffer(static_cast<size_t>(std::min(numel, kChunk)));
  auto* out = static_cast<uint8_t*>(dst);
  const size_t element_bits = static_cast<size_t>(dtype_bits(spec.dtype));
  for (int64_t begin = 0; begin < numel; begin += kChunk) {
    int64_t n = std::min(kChunk, numel - begin);
    for (int64_t i = 0; i < n; ++i)
      buffer[static_cast<size_t>(i)] = value(begin + i);
    LOCUS_RETURN_IF_ERROR(convert_from_f32(buffer.data(), spec.dtype,
                                           out + static_cast<size_t>(begin) * element_bits / 8,
                                           static_cast<size_t>(n))
                              .with_context(fmt::format("dummy weight '{}'", spec.name)));
  }
  return Status::ok();
}

}  // namespace locus
