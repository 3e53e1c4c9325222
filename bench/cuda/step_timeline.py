#!/usr/bin/env python3
"""Where a decode step's time goes, from an nsys timeline of `kvforge bench e2e --device cuda`.

  nsys profile --cuda-graph-trace=node -t cuda -o run kvforge bench e2e ... --pp 0 --tg 24
  nsys stats --report cuda_gpu_trace --format csv -o run run.nsys-rep
  step_timeline.py run_cuda_gpu_trace.csv [SKIP]

Kernels launched as programmatic dependents start before the kernel in front ends, so a
kernel's duration is not what it adds to the step. What it adds is how far it moves the
step's end: its end minus the latest end of the kernels before it (0 when it ends inside
them). Steps are the runs of kernels with no idle gap of 3 us or more, the gaps between them
the host's share (the step's staging, launch and the wait for its outputs). The first SKIP
steps (default 4: the warm-up's) are left out. Prints, per kernel name, the median over
steps of its summed share of the step and its launches a step, largest first; then the
median step, its gap, and the sum of the shares.
"""
import csv
import lzma
import statistics
import sys
from collections import defaultdict

from kernel_times import short  # a kernel's name without its namespaces and template arguments

GAP_NS = 3000


def kernels(path):
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt") as f:
        for r in csv.DictReader(f):
            name = r.get("Name", "")
            if not name or name.startswith("[CUDA"):  # memcpy / memset rows
                continue
            start = int(r["Start (ns)"])
            yield start, start + int(r["Duration (ns)"]), short(name)


def steps(ks):
    out, end = [], None
    for k in sorted(ks):
        if end is None or k[0] - end >= GAP_NS:
            out.append([])
        out[-1].append(k)
        end = k[1] if end is None else max(end, k[1])
    return out


def main():
    path = sys.argv[1]
    skip = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    all_steps = steps(kernels(path))
    kept = all_steps[skip:]
    if len(kept) < 2:
        sys.exit(f"{len(all_steps)} steps in {path}: too few after skipping {skip}")
    share, launches = defaultdict(list), defaultdict(list)
    spans, gaps = [], []
    for i, st in enumerate(kept):
        mine, count, reach = defaultdict(int), defaultdict(int), st[0][0]
        for start, end, name in st:
            mine[name] += max(0, end - reach)
            count[name] += 1
            reach = max(reach, end)
        spans.append(reach - st[0][0])
        if i + 1 < len(kept):
            gaps.append(kept[i + 1][0][0] - reach)
        for name in set(mine) | set(share):
            share[name].append(mine.get(name, 0))
            launches[name].append(count.get(name, 0))
    rows = sorted(share, key=lambda n: -statistics.median(share[n]))
    print(f"{len(kept)} steps ({skip} skipped); us a step by kernel: its share of the step's span, launches")
    for n in rows:
        print(f"{statistics.median(share[n]) / 1e3:9.1f} {statistics.median(launches[n]):6.0f}  {n}")
    span, gap = statistics.median(spans) / 1e3, statistics.median(gaps) / 1e3
    print(f"step span {span:.1f} us, gap to the next step {gap:.1f} us ({100 * gap / (span + gap):.1f}% of the step)")


if __name__ == "__main__":
    main()
