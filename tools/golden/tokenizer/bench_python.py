#!/usr/bin/env python3
"""Single-threaded encode/decode MB/s of the Python `tokenizers` library (Rust), on the exact text
bench/tokenizer_bench.cc measures locus on, for a side-by-side number:

    LOCUS_BENCH_TEXT_OUT=/tmp/bench_text.txt build/<dir>/bench/tokenizer_bench
    python3 tools/golden/tokenizer/bench_python.py /tmp/bench_text.txt
"""
import os
import pathlib
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # encode() of one text is sequential anyway
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import tokenizers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
NAMES = ["qwen3", "deepseek_v3", "llama3_1", "gptoss", "llama2"]


def best_of(fn, repeats=5):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main():
    text = pathlib.Path(sys.argv[1]).read_text(encoding="utf-8")
    data = pathlib.Path(os.environ.get("LOCUS_TOKENIZER_DATA_DIR", ROOT / "build/test-data/tokenizers"))
    megabytes = len(text.encode("utf-8")) / (1 << 20)
    print(f"tokenizers {tokenizers.__version__}, {megabytes:.2f} MiB of text")
    for name in NAMES:
        tokenizer = Tokenizer.from_file(str(data / name / "tokenizer.json"))
        ids = tokenizer.encode(text, add_special_tokens=False).ids  # also warms the word cache
        encode = best_of(lambda: tokenizer.encode(text, add_special_tokens=False))
        decode = best_of(lambda: tokenizer.decode(ids, skip_special_tokens=False))
        print(f"{name:12s} encode {megabytes / encode:8.2f} MiB/s   decode {megabytes / decode:8.2f} MiB/s   "
              f"{len(ids)} tokens")


if __name__ == "__main__":
    main()
