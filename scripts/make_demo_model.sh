#!/usr/bin/env bash
# A servable model folder without downloading a checkpoint: the tiny Qwen3-MoE architecture of the
# golden fixture widened to the real Qwen3 tokenizer (fetched by scripts/fetch_test_data.sh) and
# served with --load-format dummy, i.e. deterministic random weights. Its answers are noise; it
# exists so that the first command ends with a real server speaking the real API on any machine.
# (Issue #9 replaces it with a small trained model.)
#   scripts/make_demo_model.sh [DIR]     # default build/demo-model
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-build/demo-model}"
tokenizers="${LOCUS_TOKENIZER_DATA_DIR:-build/test-data/tokenizers}"
[ -f "$tokenizers/qwen3/tokenizer.json" ] || scripts/fetch_test_data.sh
mkdir -p "$dir"
sed -e 's/"vocab_size": 512/"vocab_size": 151936/' \
    -e 's/"hidden_size": 128/"hidden_size": 64/' \
    -e 's/"max_position_embeddings": 256/"max_position_embeddings": 4096/' \
    tests/fixtures/models/qwen3-moe/config.json > "$dir/config.json"
grep -q '"vocab_size": 151936' "$dir/config.json" || { echo "make_demo_model: config edit failed" >&2; exit 1; }
cp "$tokenizers/qwen3/tokenizer.json" "$tokenizers/qwen3/tokenizer_config.json" "$dir/"
cat > "$dir/generation_config.json" <<'JSON'
{"eos_token_id": [151645, 151643], "temperature": 0.7, "top_p": 0.8, "top_k": 20}
JSON
echo "$dir"
