// The gated MLP every family uses for dense layers and shared experts:
// down(silu(gate(x)) * up(x)).
#pragma once

#include "backend/ops.h"

namespace locus {

// x [T, hidden] -> [T, hidden].
Expected<Tensor> gated_mlp_forward(Ops& ops, const ExpertWeights& mlp, const Tensor& x);

}  // namespace locus
