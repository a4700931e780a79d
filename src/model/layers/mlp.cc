#include "model/layers/mlp.h"

namespace locus {

Expected<Tensor> gated_mlp_forward(Ops& ops, const ExpertWeights& mlp, const Tensor& x) {
  const int64_t tokens = x.size(0);
  const int64_t width = mlp.gate.out_features();
  const DType dtype = ops.activation_dtype();
  LOCUS_ASSIGN_OR_RETURN(Tensor gate, ops.empty({tokens, width}, dtype));
  LOCUS_ASSIGN_OR_RETURN(Tensor up, ops.empty({tokens, width}, dtype));
  LOCUS_RETURN_IF_ERROR(ops.linear(x, mlp.gate, gate));
  LOCUS_RETURN_IF_ERROR(ops.linear(x, mlp.up, up));
  LOCUS_ASSIGN_OR_RETURN(Tensor act, ops.empty({tokens, width}, dtype));
  LOCUS_RETURN_IF_ERROR(ops.silu_and_mul(gate, up, act));
  LOCUS_ASSIGN_OR_RETURN(Tensor out, ops.empty({tokens, mlp.down.out_features()}, dtype));
  LOCUS_RETURN_IF_ERROR(ops.linear(act, mlp.down, out));
  return out;
}

}  // namespace locus
