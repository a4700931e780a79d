#!/usr/bin/env bash
# Train the demo model on the GPU machine. Run from the repository root with $OUT set,
# after build/demo_data/ (from tools/demo_model/prepare_data.py) has been copied there.
# Extra arguments are passed to train.py (e.g. --steps 3000).
set -euo pipefail
: "${OUT:?set OUT to the output directory}"
PY=${PY:-/opt/torch/.venv/bin/python}
if [ ! -f build/demo_data/corpus_train.txt ]; then
  echo "run_on_device.sh: build/demo_data/corpus_train.txt missing (run prepare_data.py and carry build/demo_data)" >&2
  exit 1
fi
"$PY" tools/demo_model/train.py --data build/demo_data --out "$OUT/demo" --seed 0 "$@"
ls -la "$OUT/demo"
