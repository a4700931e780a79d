#!/usr/bin/env bash
# One command from a fresh clone to a running server: installs dependencies (apt), builds with the
# CUDA backend when nvcc exists (else CPU only), prints `locus info`, and serves the trained demo
# model (models/demo) with the OpenAI API on http://127.0.0.1:8000 until Ctrl-C.
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
echo
echo "Serving the demo model (models/demo: a small Qwen3-MoE trained on the King James Bible and"
echo "WordNet) on http://127.0.0.1:8000; try:"
echo "  curl http://127.0.0.1:8000/v1/completions -H 'Content-Type: application/json' \\"
echo "    -d '{\"model\": \"demo\", \"prompt\": \"And God said,\", \"max_tokens\": 32}'"
exec ./locus serve --host 127.0.0.1 --port 8000
