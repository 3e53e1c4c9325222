"""Turns bench/serve/run.sh's results.jsonl into table.md (kvforge against llama-server per
concurrency, with ratios) and serve.png (gnuplot: output tokens/s and TTFT p50 against
concurrency).   table.py RESULTS.jsonl OUT_DIR"""
import json
import subprocess
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
out = sys.argv[2]
by = {(r["server"], r["concurrency"]): r for r in rows}
lines = ["| concurrency | kvforge tok/s | llama-server tok/s | × | kvforge TTFT p50 / p99 ms | llama-server TTFT p50 / p99 ms "
         "| kvforge ITL p50 ms | llama-server ITL p50 ms |", "|---|---|---|---|---|---|---|---|"]
data = []
for c in sorted({r["concurrency"] for r in rows if r["server"] == "kvforge"}):
    k, l = by.get(("kvforge", c)), by.get(("llama-server", c))
    if not k or not l:
        continue
    lines.append(f"| {c} | {k['output_tokens_per_s']:.1f} | {l['output_tokens_per_s']:.1f} | "
                 f"{k['output_tokens_per_s'] / l['output_tokens_per_s']:.2f} | {k['ttft_p50_ms']:.0f} / {k['ttft_p99_ms']:.0f} | "
                 f"{l['ttft_p50_ms']:.0f} / {l['ttft_p99_ms']:.0f} | {k['itl_p50_ms']:.1f} | {l['itl_p50_ms']:.1f} |")
    data.append(f"{c} {k['output_tokens_per_s']} {l['output_tokens_per_s']} {k['ttft_p50_ms']} {l['ttft_p50_ms']}")
on, off = by.get(("kvforge-prefix-cache", 1)), by.get(("kvforge-no-prefix-cache", 1))
if on and off:
    lines += ["", "| 90% shared prefix, concurrency 1 | TTFT p50 ms |", "|---|---|",
              f"| prefix cache on | {on['ttft_p50_ms']:.1f} |", f"| prefix cache off | {off['ttft_p50_ms']:.1f} |",
              f"| × | {off['ttft_p50_ms'] / on['ttft_p50_ms']:.2f} |"]
open(f"{out}/table.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
open(f"{out}/serve.dat", "w").write("\n".join(data) + "\n")
plot = f"""set terminal pngcairo size 900,400
set output '{out}/serve.png'
set multiplot layout 1,2
set logscale x 2
set xlabel 'concurrency'
set key top left
set ylabel 'output tokens/s'
plot '{out}/serve.dat' u 1:2 w lp t 'kvforge', '' u 1:3 w lp t 'llama-server'
set ylabel 'TTFT p50 (ms)'
plot '{out}/serve.dat' u 1:4 w lp t 'kvforge', '' u 1:5 w lp t 'llama-server'
"""
subprocess.run(["gnuplot"], input=plot.encode(), check=True)
