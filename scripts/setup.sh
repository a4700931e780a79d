#!/usr/bin/env bash
# One command from a fresh clone to a working locus: installs dependencies (apt), builds with the
# CUDA backend when nvcc exists (else CPU only), and runs `locus info`.
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
