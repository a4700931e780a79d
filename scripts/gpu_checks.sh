#!/usr/bin/env bash
# The GPU evidence issues #7 and #10 still owe, in one call on a lent device machine. Run from
# the repository root (its fixtures are the tests' data) with a bundle made by
# shared/tools/device-bundle from build/cuda/locus and build/cuda/tests/*_gpu_test:
#   scripts/gpu_checks.sh BUNDLE_RUN OUT_DIR [quick]
# BUNDLE_RUN is the bundle's `run` wrapper. What runs depends on the GPUs present: every GPU
# test binary (multi-GPU cases skip below their count), then `locus bench latency` on the
# qwen3-30b-a3b shape at TP1, and with 2+ GPUs TP2, EP2, DP2 and DP2+EP (each exchange), with
# 4+ GPUs TP4, EP4 and DP4+EP; `quick` stops after the tests. Logs and JSON land in OUT_DIR.
set -uo pipefail
run=$1
out=$2
quick=${3:-}
mkdir -p "$out"
gpus=$(nvidia-smi -L | wc -l)
if [ -z "${LOCUS_NCCL_LIBRARY:-}" ]; then
  LOCUS_NCCL_LIBRARY=$(ls /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2 \
    2>/dev/null | head -1)
  export LOCUS_NCCL_LIBRARY
fi
echo "gpus $gpus, NCCL ${LOCUS_NCCL_LIBRARY:-none}, commit $(git rev-parse --short HEAD 2>/dev/null)"

# step NAME SECONDS COMMAND...: its output to OUT_DIR/NAME.log, the exit code and tail here.
step() {
  local name=$1 limit=$2
  shift 2
  echo "== $name: $*"
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "rc $?" | tee -a "$out/$name.log"
  grep -E "PASSED|FAILED|SKIPPED|\[engine-gpu\]|\[tp-gpu\]|tokens/s|TPOT|error" "$out/$name.log" |
    tail -12
}

for t in nccl_gpu_test parallel_gpu_test engine_parallel_gpu_test cuda_model_gpu_test \
  cuda_ops_gpu_test qkv_rope_gpu_test moe_gpu_test paged_attention_gpu_test sampling_gpu_test \
  gemv_gpu_test float_convert_gpu_test; do
  step "$t" 600 "$run" "$t"
done
[ "$quick" = quick ] && exit 0

shape=tests/fixtures/configs/qwen3-30b-a3b
bench() {
  local name=$1
  shift
  step "bench_$name" 600 "$run" locus bench latency "$shape" --load-format dummy --input-len 1024 \
    --output-len 128 --batch-size 1,8,64,256 --num-iters 1 --output-json "$out/$name.json" "$@"
}
bench tp1
if [ "$gpus" -ge 2 ]; then
  bench tp2 -tp 2
  bench tp2_graphs -tp 2 --experimental-tp-cuda-graphs
  bench ep2 -tp 2 --enable-expert-parallel
  bench dp2 -dp 2
  for a2a in allgather_reducescatter naive low_latency; do
    bench "dp2_ep_$a2a" -dp 2 --enable-expert-parallel --all2all-backend "$a2a"
  done
fi
if [ "$gpus" -ge 4 ]; then
  bench tp4 -tp 4
  bench ep4 -tp 4 --enable-expert-parallel
  bench dp4_ep -dp 4 --enable-expert-parallel --all2all-backend low_latency
  bench dp2_tp2_ep -dp 2 -tp 2 --enable-expert-parallel --all2all-backend low_latency
fi
