#!/usr/bin/env python3
"""Prepare the training corpus for the locus demo MoE model (stdlib only).

Sources (Debian packages, installed on this machine):
  * bible-kjv-text (+ bible-kjv for the `bible` reader): King James Version, public domain.
  * wordnet-base: WordNet 3.0 database, WordNet 3.0 license (BSD-style, permissive).

Outputs (default --out build/demo_data):
  corpus_train.txt, corpus_val.txt  documents, each followed by <|endoftext|>
  SOURCES.md                        provenance, versions, licenses, byte counts

Install the inputs first:
  apt-get install -y bible-kjv bible-kjv-text wordnet-base

Everything is deterministic for a given --seed and package versions.
"""

import argparse
import hashlib
import os
import random
import re
import shutil
import subprocess
import sys

EOT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIALS = (EOT, IM_START, IM_END)

WORDNET_DIR = "/usr/share/wordnet"
WORDNET_LICENSE = "/usr/share/doc/wordnet-base/copyright"
KJV_COPYRIGHT = "/usr/share/doc/bible-kjv-text/copyright"
KJV_DATA = "/usr/lib/bible.data"
POS_FILES = (("noun", "n"), ("verb", "v"), ("adj", "a"))  # order = tie-break priority

VERSE_RE = re.compile(r"^([1-3]?[A-Za-z]+)(\d+):(\d+) (.*)$")


def die(msg):
    sys.stderr.write("prepare_data.py: error: " + msg + "\n")
    sys.exit(1)


def pkg_version(pkg):
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg],
                             check=True, capture_output=True, text=True).stdout.strip()
        return out or "unknown"
    except (OSError, subprocess.CalledProcessError):
        return "not installed"


# --------------------------------------------------------------------------- KJV
def load_kjv():
    """Return list of chapters; each chapter is a list of verse strings (no references)."""
    bible = shutil.which("bible")
    if bible is None or not os.path.exists(KJV_DATA):
        die("need the `bible` reader and %s: apt-get install -y bible-kjv bible-kjv-text" % KJV_DATA)
    # -f: one verse per line as "<Book><chap>:<verse> <text>"; wide line so nothing wraps.
    env = dict(os.environ, COLUMNS="100000")
    res = subprocess.run([bible, "-f", "Gen1:1-Rev22:21"], capture_output=True, text=True, env=env)
    if res.returncode != 0:
        die("`bible` failed: " + res.stderr.strip())
    chapters = []
    key = None
    nverses = 0
    for line in res.stdout.splitlines():
        if not line.strip():
            continue
        m = VERSE_RE.match(line)
        if not m:
            die("unexpected line from `bible`: %r" % line[:120])
        book, chap, _verse, text = m.groups()
        text = " ".join(text.split())
        if (book, chap) != key:
            chapters.append([])
            key = (book, chap)
        chapters[-1].append(text)
        nverses += 1
    if nverses < 31000:
        die("expected ~31102 KJV verses, got %d" % nverses)
    return chapters, nverses


def kjv_documents(chapters, rng):
    """Split each chapter into paragraphs of 2..6 consecutive verses (one document each)."""
    docs = []
    for verses in chapters:
        i = 0
        while i < len(verses):
            n = rng.randint(2, 6)
            docs.append(" ".join(verses[i:i + n]) + "\n")
            i += n
    return docs


# ----------------------------------------------------------------------- WordNet
def load_wordnet_data(name):
    """offset -> (words, gloss) from data.<name>; words have underscores->spaces and
    adjective markers like "(a)", "(p)", "(ip)" removed."""
    path = os.path.join(WORDNET_DIR, "data." + name)
    synsets = {}
    with open(path, "r", encoding="ascii", errors="strict") as f:
        for line in f:
            if line.startswith("  "):  # license header
                continue
            head, sep, gloss = line.partition("| ")
            if not sep:
                continue
            parts = head.split()
            offset = parts[0]
            w_cnt = int(parts[3], 16)
            words = []
            for k in range(w_cnt):
                w = parts[4 + 2 * k]
                w = re.sub(r"\((a|p|ip)\)$", "", w)
                words.append(w.replace("_", " "))
            synsets[offset] = (words, gloss.strip())
    return synsets


def clean_gloss(gloss):
    """First definition part, before any `; "example"` quotes."""
    g = gloss.split('; "')[0].strip()
    if g.startswith('"'):
        return ""
    g = g.rstrip(";").strip()
    return " ".join(g.split())


def wordnet_entries():
    """One entry per lemma: (tagsense_cnt, pos_rank, display_word, gloss), sense 1 of the
    part of speech whose first sense is most frequent in the SemCor tag counts."""
    best = {}
    for rank, (name, _pos) in enumerate(POS_FILES):
        data = load_wordnet_data(name)
        with open(os.path.join(WORDNET_DIR, "index." + name), "r", encoding="ascii") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                parts = line.split()
                lemma = parts[0]
                p_cnt = int(parts[3])
                tagsense = int(parts[5 + p_cnt])
                offsets = parts[6 + p_cnt:]
                if not offsets or offsets[0] not in data:
                    continue
                words, gloss = data[offsets[0]]
                gloss = clean_gloss(gloss)
                if not gloss:
                    continue
                plain = lemma.replace("_", " ")
                display = plain
                for w in words:  # case-preserving form from the data line
                    if w.lower() == plain.lower():
                        display = w
                        break
                cand = (tagsense, -rank, display, gloss)
                cur = best.get(lemma)
                if cur is None or cand[:2] > cur[:2]:
                    best[lemma] = cand
    return best


def dialogue(word, gloss):
    return ("%suser\nWhat does \"%s\" mean?%s\n%sassistant\n%s: %s%s\n"
            % (IM_START, word, IM_END, IM_START, word, gloss, IM_END))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="build/demo_data")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--val-every", type=int, default=50, help="every Nth shuffled document goes to val (2%%)")
    args = ap.parse_args()

    rng = random.Random(args.seed)

    chapters, nverses = load_kjv()
    bible_docs = kjv_documents(chapters, rng)
    bible_bytes = sum(len(d.encode()) for d in bible_docs)

    entries = wordnet_entries()
    lemmas = sorted(entries)
    tiebreak = {lem: rng.random() for lem in lemmas}
    # most frequent words first (SemCor tagged-sense count), random order among ties
    lemmas.sort(key=lambda lem: (-entries[lem][0], tiebreak[lem]))
    dict_docs = []
    dict_bytes = 0
    for lem in lemmas:
        if dict_bytes >= bible_bytes:
            break
        _t, _r, word, gloss = entries[lem]
        d = dialogue(word, gloss)
        dict_docs.append(d)
        dict_bytes += len(d.encode())
    for must in ("river", "happy", "bread"):
        if not any(d.startswith(IM_START + 'user\nWhat does "%s" mean?' % must) for d in dict_docs):
            die("expected a dialogue for %r in the selection" % must)

    docs = [("kjv", d) for d in bible_docs] + [("wordnet", d) for d in dict_docs]
    for _src, d in docs:
        for s in (EOT,):
            if s in d:
                die("document contains %s" % s)
    rng.shuffle(docs)
    train, val = [], []
    for i, item in enumerate(docs):
        (val if i % args.val_every == args.val_every - 1 else train).append(item)

    os.makedirs(args.out, exist_ok=True)
    stats = {}
    for name, split in (("train", train), ("val", val)):
        text = "".join(d + EOT for _s, d in split)
        data = text.encode("utf-8")
        path = os.path.join(args.out, "corpus_%s.txt" % name)
        with open(path, "wb") as f:
            f.write(data)
        by_src = {}
        for s, d in split:
            n, b = by_src.get(s, (0, 0))
            by_src[s] = (n + 1, b + len(d.encode()))
        stats[name] = (len(data), len(split), by_src, hashlib.sha256(data).hexdigest())

    with open(WORDNET_LICENSE, "r", encoding="utf-8") as f:
        lic = f.read()
    m = re.search(r"License: WordNet3.0\n(.*?)\n\n", lic, re.S)
    wn_license_text = m.group(1) if m else "(see %s)" % WORDNET_LICENSE

    lines = []
    lines.append("# Demo model training data: sources and licenses\n")
    lines.append("Generated by `tools/demo_model/prepare_data.py --seed %d` (deterministic).\n" % args.seed)
    lines.append("## Packages\n")
    lines.append("| Package | Version | Content | License |")
    lines.append("|---|---|---|---|")
    lines.append("| bible-kjv-text | %s | King James Version text (`%s`) | Public domain (KJV text, 1611; see `%s`) |"
                 % (pkg_version("bible-kjv-text"), KJV_DATA, KJV_COPYRIGHT))
    lines.append("| bible-kjv | %s | `bible` reader used only to decompress the text | GPL-2+ (tool only; not part of the data) |"
                 % pkg_version("bible-kjv"))
    lines.append("| wordnet-base | %s | WordNet 3.0 database (`%s/data.{noun,verb,adj}`, `index.*`) | WordNet 3.0 license (BSD-style permissive), `%s` |"
                 % (pkg_version("wordnet-base"), WORDNET_DIR, WORDNET_LICENSE))
    lines.append("")
    lines.append("## How the corpus is built\n")
    lines.append("* KJV: %d verses from `bible -f Gen1:1-Rev22:21`; verse references (e.g. `Ge1:1`) are stripped; "
                 "each chapter is split into paragraphs of 2-6 consecutive verses, one paragraph per document." % nverses)
    lines.append("* WordNet: one dialogue per lemma (sense 1 of the part of speech whose first sense has the highest "
                 "SemCor tag count), most frequent lemmas first, until its bytes match the KJV bytes. The gloss is the "
                 "text after `| ` up to the first `; \"` example. Format:")
    lines.append("  `<|im_start|>user\\nWhat does \"WORD\" mean?<|im_end|>\\n<|im_start|>assistant\\nWORD: GLOSS<|im_end|>\\n`")
    lines.append("* Documents from both sources are shuffled together (seed %d), each is followed by `<|endoftext|>`; "
                 "every %dth document is held out for validation." % (args.seed, args.val_every))
    lines.append("")
    lines.append("## Byte counts\n")
    lines.append("| File | Bytes | Documents | KJV docs / bytes | WordNet docs / bytes | sha256 |")
    lines.append("|---|---|---|---|---|---|")
    for name in ("train", "val"):
        nbytes, ndocs, by_src, sha = stats[name]
        k = by_src.get("kjv", (0, 0))
        w = by_src.get("wordnet", (0, 0))
        lines.append("| corpus_%s.txt | %d | %d | %d / %d | %d / %d | `%s` |"
                     % (name, nbytes, ndocs, k[0], k[1], w[0], w[1], sha))
    lines.append("")
    lines.append("## WordNet 3.0 license (from `%s`)\n" % WORDNET_LICENSE)
    lines.append("```")
    lines.append("\n".join(l[1:] if l.startswith(" ") else l for l in wn_license_text.splitlines()).replace("\n.\n", "\n\n"))
    lines.append("```")
    lines.append("")
    with open(os.path.join(args.out, "SOURCES.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))

    for name in ("train", "val"):
        nbytes, ndocs, by_src, sha = stats[name]
        print("corpus_%s.txt: %d bytes, %d docs, %s" % (name, nbytes, ndocs,
              ", ".join("%s %d docs/%d bytes" % (s, n, b) for s, (n, b) in sorted(by_src.items()))))
    print("wrote", os.path.join(args.out, "SOURCES.md"))


if __name__ == "__main__":
    main()
