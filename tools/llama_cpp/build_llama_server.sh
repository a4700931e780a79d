#!/usr/bin/env bash
# Builds llama.cpp's llama-server (CPU) from the source that the npm package node-llama-cpp
# ships as a git bundle (PyPI and GitHub are out of reach here; npm is not), so `locus bench
# sweep` can put llama.cpp's curve beside locus's on the same machine (tools/llama_cpp/README.md).
#   tools/llama_cpp/build_llama_server.sh [DIR]      # default build/llama_cpp; prints the binary
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build/llama_cpp}
version=3.22.1  # node-llama-cpp; its llama/llama.cpp.info.json names the llama.cpp release
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ ! -d "$dir/llama.cpp" ]; then
  (cd "$dir" && npm pack --silent "node-llama-cpp@$version" >/dev/null)
  tar xzf "$dir/node-llama-cpp-$version.tgz" -C "$dir" package/llama/gitRelease.bundle \
    package/llama/llama.cpp.info.json
  git -c advice.detachedHead=false clone -q "$dir/package/llama/gitRelease.bundle" "$dir/llama.cpp"
fi
cmake -S "$dir/llama.cpp" -B "$dir/llama.cpp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=ON -DGGML_NATIVE=ON >/dev/null
ninja -C "$dir/llama.cpp/build" llama-server >/dev/null
echo "$dir/llama.cpp/build/bin/llama-server"
