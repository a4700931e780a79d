#!/usr/bin/env bash
# One command from a fresh clone to a running server: installs dependencies (apt), builds with the
# CUDA backend when nvcc exists (else CPU only), prints `locus info`, and serves the demo model
# (scripts/make_demo_model.sh) with the OpenAI API on http://127.0.0.1:8000 until Ctrl-C.
# LOCUS_SETUP_NO_SERVE=1 stops after the build.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
preset=cpu
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then preset=cuda; fi
cmake --preset "$preset"
cmake --build --preset "$preset" --target locus -j "$(nproc)"
ln -sfn "build/$preset/locus" locus
echo
./locus info
[ "${LOCUS_SETUP_NO_SERVE:-0}" = 1 ] && exit 0
model=$(scripts/make_demo_model.sh)
echo
echo "Serving the demo model (random weights until issue #9) on http://127.0.0.1:8000; try:"
echo "  curl http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' \\"
echo "    -d '{\"model\": \"demo\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello!\"}], \"max_tokens\": 16}'"
exec ./locus serve "$model" --load-format dummy --served-model-name demo --host 127.0.0.1 --port 8000 \
  --max-model-len 2048 --max-num-seqs 64
