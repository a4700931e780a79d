#!/usr/bin/env python3
"""Golden token ids from the Python `tokenizers` library (Rust), in the format of golden_js.mjs.

The JS goldens committed under tests/fixtures/tokenizers/golden/ come from Hugging Face's JS port
(@huggingface/tokenizers). This script computes the same corpus with the Rust library, to
cross-check the port, and also encodes the corpus's js_divergent strings (where the port is known
to differ from Rust), marked "js_divergent": true.

    pip install tokenizers            # any recent version; the script prints the one it used
    scripts/fetch_test_data.sh
    python3 tools/golden/tokenizer/golden_python.py --out /tmp/golden_python
    python3 tools/golden/tokenizer/golden_python.py --compare   # diff against the JS goldens

With --out tests/fixtures/tokenizers/golden the Python results replace the JS ones (the C++
golden test reads either; js_divergent cases then become part of the test).
"""
import argparse
import json
import os
import pathlib
import sys

import tokenizers
from tokenizers import Tokenizer

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]
NAMES = ["qwen3", "deepseek_v3", "llama3_1", "gptoss", "llama2", "llama2_metaspace"]


def text_of(entry):
    if "bytes_hex" in entry:
        # Python's "replace" substitutes maximal subparts, like Rust's from_utf8_lossy.
        return bytes.fromhex(entry["bytes_hex"]).decode("utf-8", errors="replace")
    return entry["text"]


def content_of(token):
    if isinstance(token, dict):
        return token.get("content")
    return token


def golden_for(name, data_dir, corpus):
    directory = data_dir / name
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    config = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8"))
    # transformers replaces the post-processor with "[bos] $A [eos]" when tokenizer_config.json
    # sets add_bos_token / add_eos_token; the bare tokenizers library does not, so mirror it.
    config_template = "add_bos_token" in config or "add_eos_token" in config
    bos = tokenizer.token_to_id(content_of(config.get("bos_token"))) if config.get("add_bos_token") else None
    eos = tokenizer.token_to_id(content_of(config.get("eos_token"))) if config.get("add_eos_token") else None

    entries = [(entry, False) for entry in corpus["cases"]]
    entries += [(entry, True) for entry in corpus.get("js_divergent", [])]
    cases = []
    for index, (entry, divergent) in enumerate(entries):
        text = text_of(entry)
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        if config_template:
            ids_special = ([bos] if bos is not None else []) + ids + ([eos] if eos is not None else [])
        else:
            ids_special = tokenizer.encode(text, add_special_tokens=True).ids
        case = {"index": index, "text": text}
        if "bytes_hex" in entry:
            case["bytes_hex"] = entry["bytes_hex"]
        case["ids"] = ids
        case["ids_special"] = ids_special
        decoded = tokenizer.decode(ids_special, skip_special_tokens=False)
        decoded_skip = tokenizer.decode(ids_special, skip_special_tokens=True)
        if decoded != text:
            case["decoded"] = decoded
        if decoded_skip != text:
            case["decoded_skip"] = decoded_skip
        if divergent:
            case["js_divergent"] = True
        cases.append(case)
    source_file = directory / ".source"
    header = {
        "tokenizer": name,
        "source": source_file.read_text().strip() if source_file.exists() else "",
        "engine": f"tokenizers (Python) {tokenizers.__version__}",
        "special_tokens": (
            f"tokenizer_config.json add_bos_token/add_eos_token template (bos {bos}, eos {eos})"
            if config_template
            else "tokenizer.json post_processor"
        ),
        "note": "decoded / decoded_skip: decode(ids_special) without / with skip_special_tokens, "
        "omitted when equal to text",
    }
    return header, cases


def write(path, header, cases):
    dump = lambda value: json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    body = "{\n" + "".join(f"{dump(k)}: {dump(v)},\n" for k, v in header.items())
    body += '"cases": [\n' + ",\n".join(dump(case) for case in cases) + "\n]\n}\n"
    path.write_text(body, encoding="utf-8")


def compare(name, cases):
    golden = json.loads((ROOT / "tests/fixtures/tokenizers/golden" / f"{name}.json").read_text(encoding="utf-8"))
    by_index = {case["index"]: case for case in golden["cases"]}
    differences = 0
    for case in cases:
        if case.get("js_divergent"):
            continue
        js = by_index.get(case["index"])
        fields = ["ids", "ids_special", "decoded", "decoded_skip"]
        if js is None or any(js.get(field) != case.get(field) for field in fields):
            differences += 1
            if differences <= 5:
                print(f"  {name} case {case['index']} {case['text']!r}:")
                for field in fields:
                    if js is None or js.get(field) != case.get(field):
                        print(f"    {field}: python {case.get(field)!r}\n    {' ' * len(field)}  js     {js and js.get(field)!r}")
    print(f"{name}: {len(cases)} cases, {differences} differ from the JS golden")
    return differences


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=pathlib.Path,
                        default=pathlib.Path(os.environ.get("LOCUS_TOKENIZER_DATA_DIR", ROOT / "build/test-data/tokenizers")))
    parser.add_argument("--out", type=pathlib.Path, help="folder to write <name>.json into")
    parser.add_argument("--compare", action="store_true", help="compare with the committed JS goldens")
    args = parser.parse_args()
    corpus = json.loads((HERE / "corpus.json").read_text(encoding="utf-8"))
    print(f"tokenizers {tokenizers.__version__}")
    total_differences = 0
    for name in NAMES:
        header, cases = golden_for(name, args.data_dir, corpus)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            write(args.out / f"{name}.json", header, cases)
            print(f"{name}: {len(cases)} cases -> {args.out / (name + '.json')}")
        if args.compare:
            total_differences += compare(name, cases)
    return 1 if total_differences else 0


if __name__ == "__main__":
    sys.exit(main())
