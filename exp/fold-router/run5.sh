#!/usr/bin/env bash
# Folded router, branch 6c0bc8c (shared loops) vs main 0eb2839 (locus_main).
cd "$(dirname "$0")/../.."
D=.device/fr
tar xJf $D/b.tar.xz -C $D
B=$D/b/run
M=tests/fixtures/configs/qwen3-30b-a3b
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
t() { local name=$1; shift; env "$@" timeout 90 $B $name > $OUT/$name.log 2>&1; echo "== $name $* rc=$? $(grep -E '^\[ +(PASSED|FAILED|SKIPPED) ' $OUT/$name.log | tr '\n' ' ')"; grep -E "Failure|Expected|Which is|error" $OUT/$name.log | head -8; }
b() { local bin=$1; shift; timeout 60 $B $bin bench latency $M --load-format dummy --input-len 1024 --output-len 128 --num-iters 1 --batch-size 1,2,4 "$@" 2>&1 | grep -E "^ +[0-9]+ |rror" | awk '{printf "%s | ", $3}'; echo; }
t gemv_gpu_test
for r in 1 2; do
  echo "main:      $(b locus_main)"
  echo "off:       $(LOCUS_CUDA_FOLD_ROUTER=0 b locus)"
  echo "fold<=1:   $(b locus)"
  echo "fold<=4:   $(LOCUS_EXP_FOLD_MAX=4 b locus)"
  [ $r = 1 ] && echo "fold<=4e:  $(LOCUS_EXP_FOLD_MAX=4 LOCUS_EXP_FOLD_EARLY=1 b locus)"
done
t cuda_ops_gpu_test
t cuda_model_gpu_test
IDS=$(seq -s, 3 302)
g() { timeout 30 $B locus generate $M --prompt-ids $IDS --max-tokens 40 --ignore-eos --skip-tokenizer-init --load-format dummy --request-seed 5 --device cuda --temperature 0 2>&1 | grep -E '^\[|rror'; }
g > $OUT/g_on.txt; LOCUS_CUDA_FOLD_ROUTER=0 g > $OUT/g_off.txt
echo "greedy fold on/off diff lines: $(diff $OUT/g_on.txt $OUT/g_off.txt | wc -l), bytes $(wc -c < $OUT/g_on.txt)"
echo "main:      $(b locus_main)"
echo "fold<=1:   $(b locus)"
