#!/usr/bin/env bash
# Builds libkernel_trace.so on the GPU machine: finds CUPTI (CUDA toolkit or the PyTorch wheel)
# and the newest kernel activity record its header defines. Usage: build.sh OUT_DIR
set -eu
out=${1:-.}
mkdir -p "$out"
here=$(dirname "$0")
inc=""; lib=""
for d in /usr/local/cuda/extras/CUPTI /usr/local/cuda/targets/x86_64-linux \
         $(ls -d /opt/torch/.venv/lib/python3*/site-packages/nvidia/cuda_cupti 2>/dev/null) \
         $(ls -d /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13 2>/dev/null); do
  if [ -f "$d/include/cupti.h" ]; then
    inc=$d/include
    lib=$(dirname "$(find "$d" /usr/local/cuda -name 'libcupti.so*' 2>/dev/null | head -1)")
    break
  fi
done
[ -n "$inc" ] || { echo "no cupti.h found" >&2; exit 1; }
krec=$(grep -ho "CUpti_ActivityKernel[0-9]*" "$inc"/cupti_activity*.h | sort -V | tail -1)
echo "CUPTI: $inc ($krec), lib $lib" >&2
g++ -std=c++17 -O2 -shared -fPIC -DKREC="$krec" -I"$inc" "$here/kernel_trace.cc" \
    -L"$lib" -Wl,-rpath,"$lib" -lcupti -o "$out/libkernel_trace.so"
