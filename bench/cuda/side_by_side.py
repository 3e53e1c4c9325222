#!/usr/bin/env python3
"""The TinyLlama-shaped table of docs/benchmarks.md from one side_by_side.sh call: kvforge's
e2e.txt (models_run.sh) against llama.cpp's peer.txt (peer_run.sh), tokens/s, the ratio and
the issue's target.

  side_by_side.py e2e.txt peer.txt
"""
import json
import re
import sys

# (label, weights, test, depth, target); depth None: batched decode of `test` sequences.
ROWS = [
    ("pp512, F16", "f16", "pp512", 0, None),
    ("pp4096, F16", "f16", "pp4096", 0, 1.2),
    ("tg128, F16", "f16", "tg128", 0, 1.6),
    ("tg128 at depth 8192, F16", "f16", "tg128", 8192, None),
    ("tg128 at depth 32768, F16", "f16", "tg128", 32768, 2.0),
    ("tg128, Q8_0", "q8_0", "tg128", 0, 1.3),
    ("batched decode, 8 sequences", "f16", 8, None, None),
    ("batched decode, 32 sequences", "f16", 32, None, None),
    ("batched decode, 64 sequences", "f16", 64, None, 2.0),
]


def kvforge(path):
    got, batch = {}, None
    for line in open(path):
        m = re.match(r"\S*tinyllama-(\w+)\.gguf, cuda, depth (\d+), KV \w+: (.*)", line)
        if m:
            for test, rate in re.findall(r"(\w+) ([\d.]+) tok/s", m.group(3)):
                got[(m.group(1), test, int(m.group(2)))] = float(rate)
        m = re.match(r"batched decode, (\d+) requests", line)
        if m:
            batch = int(m.group(1))
        elif batch is not None and line.startswith("{"):
            got[("f16", batch, None)] = json.loads(line)["decode_tokens_per_s"]
            batch = None
    return got


def peer(path):
    got = {}
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 8 and cells[6].startswith(("pp", "tg")):  # llama-bench
            weights = "q8_0" if "Q8_0" in cells[0] else "f16"
            m = re.match(r"(\w+)(?: @ d(\d+))?", cells[6])
            got[(weights, m.group(1), int(m.group(2) or 0))] = float(cells[7].split()[0])
        elif len(cells) == 10 and cells[2].isdigit():  # llama-batched-bench: B, S_TG t/s
            got[("f16", int(cells[2]), None)] = float(cells[7])
    return got


def main():
    ours, theirs = kvforge(sys.argv[1]), peer(sys.argv[2])
    print(f"| test | kvforge (t/s) | llama.cpp CUDA (t/s) | ratio | target |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, weights, test, depth, target in ROWS:
        a, b = ours.get((weights, test, depth)), theirs.get((weights, test, depth))
        ratio = f"{a / b:.2f}" if a and b else "-"
        met = "" if target is None else f"≥ {target:g}" + (" (met)" if a and b and a / b >= target else "")
        fmt = lambda v: f"{v:,.1f}" if v else "-"
        print(f"| {label} | {fmt(a)} | {fmt(b)} | {ratio} | {met} |")


if __name__ == "__main__":
    main()
