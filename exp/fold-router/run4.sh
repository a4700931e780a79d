#!/usr/bin/env bash
# Folded router (production wiring): priority order, the device budget is short.
cd "$(dirname "$0")/../.."
D=.device/fr
tar xJf $D/b.tar.xz -C $D
B=$D/b/run
M=tests/fixtures/configs/qwen3-30b-a3b
nvidia-smi --query-gpu=name --format=csv,noheader
t() { local name=$1; shift; env "$@" timeout 60 $B $name > $OUT/$name.log 2>&1; echo "== $name $* rc=$? $(grep -E '^\[ +(PASSED|FAILED|SKIPPED) ' $OUT/$name.log | tr '\n' ' ')"; grep -E "Failure|Expected|Which is|error" $OUT/$name.log | head -8; }
b() { timeout 40 $B locus bench latency $M --load-format dummy --input-len 1024 --output-len 128 --num-iters 1 --batch-size 1,2,4 "$@" 2>&1 | grep -E "^ +[0-9]+ |rror" | awk '{printf "%s | ", $3}'; echo; }
t gemv_gpu_test
echo "off: $(LOCUS_CUDA_FOLD_ROUTER=0 b)"
echo "default: $(b)"
echo "fold<=4: $(LOCUS_EXP_FOLD_MAX=4 b)"
echo "fold<=4 early: $(LOCUS_EXP_FOLD_MAX=4 LOCUS_EXP_FOLD_EARLY=1 b)"
t cuda_ops_gpu_test
t cuda_model_gpu_test
echo "off: $(LOCUS_CUDA_FOLD_ROUTER=0 b)"
echo "default: $(b)"
echo "fold<=4: $(LOCUS_EXP_FOLD_MAX=4 b)"
echo "fold<=4 early: $(LOCUS_EXP_FOLD_MAX=4 LOCUS_EXP_FOLD_EARLY=1 b)"
IDS=$(seq -s, 3 302)
g() { timeout 30 $B locus generate $M --prompt-ids $IDS --max-tokens 40 --ignore-eos --skip-tokenizer-init --load-format dummy --request-seed 5 --device cuda --temperature 0 2>&1 | grep -E '^\[|rror'; }
g > $OUT/g_on.txt; LOCUS_CUDA_FOLD_ROUTER=0 g > $OUT/g_off.txt
echo "greedy fold on/off diff lines: $(diff $OUT/g_on.txt $OUT/g_off.txt | wc -l), bytes $(wc -c < $OUT/g_on.txt)"
