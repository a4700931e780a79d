#!/usr/bin/env python3
"""Summarizes a kernel_trace CSV: splits graph replays into steps (a gap > --step-gap-us between
graph kernels starts a new step), keeps steps with the median kernel count, and prints per
kernel: launches per step, mean duration, the mean idle gap before it (negative = it started
before the previous kernel ended, as programmatic dependent launch allows), and how much later
it ends than every kernel before it ("+end": with PDL the durations overlap, and these
increments are what each kernel adds to the step; they sum to the step span)."""
import argparse, csv, statistics, subprocess, collections

p = argparse.ArgumentParser()
p.add_argument("csv")
p.add_argument("--step-gap-us", type=float, default=40.0)
p.add_argument("--top", type=int, default=30)
p.add_argument("--window", type=int, nargs=2, metavar=("FIRST", "COUNT"),
               help="also list kernels FIRST..FIRST+COUNT-1 of a step one by one (medians over "
                    "steps): start relative to the step, gap after the previous kernel's end, "
                    "duration, +end; tells apart kernels that share a name (the QKV and o "
                    "projections)")
a = p.parse_args()

rows = []
with open(a.csv) as f:
    for r in csv.DictReader(f):
        rows.append((int(r["start_ns"]), int(r["end_ns"]), int(r["graph_node"]), int(r["grid"]),
                     r["name"]))
rows.sort()
names = sorted({r[4] for r in rows})
try:
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout
    pretty = dict(zip(names, out.splitlines()))
except OSError:
    pretty = {n: n for n in names}

def short(n):
    s = pretty.get(n, n)
    for junk in ["void ", "locus::cuda::", "(anonymous namespace)::", "locus::"]:
        s = s.replace(junk, "")
    s = s.split("(")[0]
    return s[:70]

graph = [r for r in rows if r[2] != 0]
steps, cur = [], []
for r in graph:
    if cur and (r[0] - cur[-1][1]) / 1e3 > a.step_gap_us:
        steps.append(cur)
        cur = []
    cur.append(r)
if cur:
    steps.append(cur)
if not steps:
    raise SystemExit("no graph kernels in the trace")
# Between two graph replays the GPU runs only what the host launches outside the graphs
# (sampling, input copies); the rest of the gap is host time the step does not hide.
eager = [r for r in rows if r[2] == 0]
between, eager_us = [], []
for s0, s1 in zip(steps[1:], steps[2:]):
    end, start = max(r[1] for r in s0), s1[0][0]
    between.append((start - end) / 1e3)
    eager_us.append(sum(min(r[1], start) - max(r[0], end) for r in eager
                        if r[1] > end and r[0] < start) / 1e3)
counts = collections.Counter(len(s) for s in steps)
common = counts.most_common(1)[0][0]
steps = [s for s in steps if len(s) == common][1:]  # drop the first (warm) one
spans = [(s[-1][1] - s[0][0]) / 1e3 for s in steps]
busy = [sum(r[1] - r[0] for r in s) / 1e3 for s in steps]
print(f"{len(steps)} steps of {common} kernels; step span median {statistics.median(spans):.1f} us,"
      f" kernel time (sum) median {statistics.median(busy):.1f} us")
if between:
    print(f"between graph replays: median {statistics.median(between):.1f} us, of which kernels"
          f" launched outside the graphs run {statistics.median(eager_us):.1f} us")
agg = collections.defaultdict(lambda: [0, 0.0, 0.0, 0, 0.0])
for s in steps:
    prev_end = None
    max_end = s[0][0]
    for r in s:
        k = (short(r[4]), r[3])
        e = agg[k]
        e[0] += 1
        e[1] += (r[1] - r[0]) / 1e3
        if prev_end is not None:
            e[2] += (r[0] - prev_end) / 1e3
            e[3] += 1
        prev_end = r[1]
        e[4] += (r[1] - max_end) / 1e3
        max_end = max(max_end, r[1])
n = len(steps)
print(f"{'kernel':70s} {'grid':>6s} {'/step':>6s} {'mean us':>8s} {'us/step':>8s} {'gap us':>7s}"
      f" {'+end us':>8s}")
tot_gap = 0.0
for (name, grid), e in sorted(agg.items(), key=lambda kv: -kv[1][1])[: a.top]:
    gap = e[2] / e[3] if e[3] else 0.0
    tot_gap += e[2] / n
    print(f"{name:70s} {grid:6d} {e[0]/n:6.1f} {e[1]/e[0]:8.2f} {e[1]/n:8.1f} {gap:7.2f}"
          f" {e[4]/e[0]:8.2f}")
print(f"sum of gaps per step {sum(e[2] for e in agg.values())/n:.1f} us")
if a.window:
    first, count = a.window
    print(f"\n{'#':>4s} {'kernel':60s} {'start us':>9s} {'gap us':>7s} {'dur us':>7s} {'+end us':>8s}")
    for i in range(first, min(first + count, common)):
        starts, gaps, durs, ends = [], [], [], []
        for s in steps:
            t0 = s[0][0]
            max_end = max(r[1] for r in s[:i]) if i > 0 else t0
            r = s[i]
            starts.append((r[0] - t0) / 1e3)
            gaps.append((r[0] - s[i - 1][1]) / 1e3 if i > 0 else 0.0)
            durs.append((r[1] - r[0]) / 1e3)
            ends.append((r[1] - max_end) / 1e3)
        med = statistics.median
        print(f"{i:4d} {short(steps[0][i][4])[:60]:60s} {med(starts):9.2f} {med(gaps):7.2f}"
              f" {med(durs):7.2f} {med(ends):8.2f}")
