#!/usr/bin/env bash
# Per-kernel +end of one batch-1 layer, off / folded / folded with the early pick (after
# run4.sh, same bundle). Summaries print; the CSVs land in $OUT.
cd "$(dirname "$0")/../.."
D=.device/fr
[ -d $D/b ] || tar xJf $D/b.tar.xz -C $D
B=$D/b/run
M=tests/fixtures/configs/qwen3-30b-a3b
bash tools/kernel_trace/build.sh $D/kt >/dev/null 2>&1 || echo "trace build failed"
tr() { local tag=$1; shift; env "$@" CUDA_INJECTION64_PATH=$PWD/$D/kt/libkernel_trace.so KERNEL_TRACE_OUT=$OUT/t_$tag.csv timeout 60 $B locus bench latency $M --load-format dummy --input-len 1024 --output-len 24 --batch-size 1 --num-iters 1 2>&1 | grep -E "^ +[0-9]+ "; python3 tools/kernel_trace/summarize.py $OUT/t_$tag.csv --step-gap-us 4 --window 142 14 | tail -15; }
tr off LOCUS_CUDA_FOLD_ROUTER=0
tr fold
tr early LOCUS_EXP_FOLD_EARLY=1
