#!/usr/bin/env python3
"""Kernel time per step from ncu's CSV (gpu__time_duration.sum for every kernel launched).

  ncu --metrics gpu__time_duration.sum --csv --log-file run.csv kvforge generate ... -n STEPS
  kernel_times.py run.csv STEPS

Groups launches by kernel (template arguments dropped), prints total microseconds per
step, launches per step and the mean, largest first. ncu serializes kernels, flushes the
caches and fixes the clocks before each one: the shares are what to read, not the sum.
"""
import csv
import re
import sys
from collections import defaultdict


def short(name):
    name = name.replace("(anonymous namespace)", "")
    name = re.sub(r"\(.*$", "", name)          # the argument list
    depth, out = 0, []
    for ch in name:                             # template arguments
        depth += ch == "<"
        if depth == 0:
            out.append(ch)
        depth -= ch == ">"
    return "".join(out).split("::")[-1]


def main():
    path, steps = sys.argv[1], float(sys.argv[2])
    total, count = defaultdict(float), defaultdict(int)
    with open(path, newline="") as f:
        rows = [line for line in f if line.startswith('"')]
    for row in csv.DictReader(rows):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[row["Metric Unit"]]
        k = short(row["Kernel Name"])
        total[k] += float(row["Metric Value"].replace(",", "")) * scale
        count[k] += 1
    grand = sum(total.values())
    print(f"{grand / steps:10.1f} us per step in {sum(count.values()) / steps:.0f} launches")
    for k in sorted(total, key=total.get, reverse=True):
        print(f"{total[k] / steps:10.1f} us {count[k] / steps:8.1f} x {total[k] / count[k]:8.2f} us  {k}")


if __name__ == "__main__":
    main()
