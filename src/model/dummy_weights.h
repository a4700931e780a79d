// `--load-format dummy`: every tensor of a model's layout, made on demand with deterministic
// random values and no file. Nothing is stored up front, so a 48-layer full-size model can be
// listed, checked and streamed to a device one tensor at a time on a machine with less memory.
//
// Element i of tensor NAME is a pure function of (seed, fnv1a64(NAME), i) through
// core/counter_rng.h, so a GPU fill kernel can produce identical values in place.
// Ranges keep a forward pass numerically sane (activations near unit scale, routing not
// degenerate): linear and router weights U(-a, a) with a = sqrt(3 / fan_in), norms
// 1 + U(-0.1, 0.1), embeddings and lm_head U(-0.05, 0.05) and a = sqrt(3/hidden) respectively,
// biases and correction biases U(-0.02, 0.02). Quantized weights draw codes over the format's
// range and scales so that dequantized values fall in U(-a, a) (fp8: codes from U(-448, 448),
// block scales a/448 · U(0.75, 1.25); NVFP4: codes from U(-6, 6), group scales e4m3 of
// 448 · U(0.5, 1), weight_scale_2 = a / (6 · 448), input_scale 1).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "model/weight_layout.h"
#include "model/weight_source.h"

namespace locus {

class DummyWeights final : public WeightSource {
 public:
  DummyWeights(WeightLayout layout, uint64_t seed);

  std::vector<std::string> names() const override;
  bool contains(std::string_view name) const override;
  Expected<WeightInfo> info(std::string_view name) const override;
  // Allocates and fills a new host tensor each call.
  Expected<Tensor> tensor(std::string_view name) const override;
  std::string description() const override;

  const WeightLayout& layout() const { return layout_; }

  // How element i of NAME is made, for backends that fill weights in place: low + (high - low)
  // * counter_uniform(stream, i), rounded to dtype. nullopt for quantized payloads and scales
  // (those are made on the host).
  struct UniformFill {
    Dims shape;
    DType dtype = DType::kBF16;
    uint64_t stream = 0;
    float low = 0.0f;
    float high = 0.0f;
  };
  std::optional<UniformFill> uniform_fill(std::string_view name) const;
  uint64_t seed() const { return seed_; }

  // Writes the values of `spec` (dtype_bytes(spec.dtype, numel) bytes) to `dst`. Scales need
  // the fan-in of the weight they scale (`owner_fan_in`); other tensors ignore it.
  static Status fill(const WeightSpec& spec, int64_t owner_fan_in, uint64_t seed, void* dst);

 private:
  const WeightSpec* find(std::string_view name) const;
  WeightLayout layout_;
  uint64_t seed_;
  std::unordered_map<std::string_view, size_t> index_;  // keys point into layout_.specs
};

}  // namespace locus
