"""Reads the key=value lines of decode_bench, prefill_bench and torch_peer; prints the decode
and prefill tables."""
import sys


def parse(path):
    rows = []
    for line in open(path):
        w = line.split()
        if not w or w[0] not in ("decode", "copy", "prefill"):
            continue
        d = {"kind": w[0]}
        for x in w[1:]:
            if "=" in x:
                k, v = x.split("=", 1)
                d[k] = v
        rows.append(d)
    return rows


rows = [r for p in sys.argv[1:] for r in parse(p)]
copy = [r for r in rows if r["kind"] == "copy"]
get = {}
for r in rows:
    if r["kind"] == "decode":
        get[(r["impl"], r["layout"], int(r["B"]), int(r["ctx"]))] = r
if copy:
    print(f"device-to-device copy: {float(copy[0]['TBps']):.2f} TB/s (bytes read + written)")
f = lambda x: float(x) if x not in (None, "nan") else float("nan")
hdr = ("B", "ctx", "dense TB/s", "dense us", "paged TB/s", "paged/dense", "simt TB/s", "flash TB/s", "x flash",
       "cudnn TB/s", "x cudnn", "splits")
print("tensor-core kernel (kvforge) and the SIMT one; per decode in a CUDA graph (torch too)")
print("| " + " | ".join(hdr) + " |")
print("|" + "---|" * len(hdr))
for b in (1, 8, 32):
    for ctx in (8192, 32768, 131072):
        d = get.get(("kvforge", "dense", b, ctx), {})
        p = get.get(("kvforge", "paged", b, ctx), {})
        sm = get.get(("kvforge-simt", "dense", b, ctx), {})
        fl = get.get(("torch_flash", "dense", b, ctx), {})
        cu = get.get(("torch_cudnn", "dense", b, ctx), {})
        dt, pt, st, ft, ct = (f(x.get("TBps")) for x in (d, p, sm, fl, cu))
        print(f"| {b} | {ctx // 1024}k | {dt:.2f} | {f(d.get('us')):.1f} | {pt:.2f} | {pt / dt:.3f} | {st:.2f} | "
              f"{ft:.2f} | {dt / ft:.2f} | {ct:.2f} | {dt / ct:.2f} | {d.get('splits', '?')} |")
if any("us_launch" in r for r in get.values()):
    print()
    print("one launch between two events (adds the host's launch latency; torch: Python dispatch too), us")
    print("| B | ctx | kvforge | simt | flash | cudnn |")
    print("|---|---|---|---|---|---|")
    for b in (1, 8, 32):
        for ctx in (8192, 32768, 131072):
            cells = [f(get.get((i, "dense", b, ctx), {}).get("us_launch"))
                     for i in ("kvforge", "kvforge-simt", "torch_flash", "torch_cudnn")]
            print(f"| {b} | {ctx // 1024}k | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
variants = sorted({i for (i, _, _, _) in get if i.startswith("kvforge-") and i != "kvforge-simt"})
if variants:
    print()
    print("d128 decode variants, dense / paged TB/s (x the default kernel, dense)")
    shapes = sorted({(b, c) for (i, _, b, c) in get if i in variants})
    print("| variant | " + " | ".join(f"B{b} {c // 1024}k" for b, c in shapes) + " |")
    print("|---|" + "---|" * len(shapes))
    for i in variants:
        cells = []
        for b, c in shapes:
            t, base = f(get.get((i, "dense", b, c), {}).get("TBps")), f(get.get(("kvforge", "dense", b, c), {}).get("TBps"))
            tp = f(get.get((i, "paged", b, c), {}).get("TBps"))
            cells.append(f"{t:.2f}/{tp:.2f} ({t / base:.2f})")
        print(f"| {i[len('kvforge-'):]} | " + " | ".join(cells) + " |")
forced_rows = [r for r in rows if r["kind"] == "decode" and r.get("layout", "").endswith("-forced")]
for lay, b, c in sorted({(r["layout"], int(r["B"]), int(r["ctx"])) for r in forced_rows}):
    rs = sorted((r for r in forced_rows if (r["layout"], int(r["B"]), int(r["ctx"])) == (lay, b, c)),
                key=lambda r: int(r["splits"]))
    print(f"split sweep {lay.split('-')[0]} B={b} ctx={c // 1024}k, splits: TB/s: " +
          ", ".join(f"{r['splits']}: {f(r['TBps']):.2f}" for r in rs))

pre = {}
extra = []  # bench_cuda_prefill's "extra" shapes: f16, head dims 64/256, varlen
for r in rows:
    if r["kind"] == "prefill":
        if r["impl"].rsplit("-", 1)[-1] in ("f16", "d64", "d256", "varlen"):
            extra.append(r)
        else:
            pre[(r["impl"], int(r["causal"]), int(r["L"]))] = r
if pre:
    print()
    print("prefill B=1, Hq/Hkv 32/8, D 128, bf16; TFLOP/s = 4*B*H*L^2*D (/2 causal)")
    hdr = ("causal", "L", "kvforge us", "kvforge TFLOP/s", "mma.sync TFLOP/s", "flash TFLOP/s", "x flash",
           "cudnn TFLOP/s", "x cudnn")
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for c in (1, 0):
        for L in (4096, 16384):
            k = pre.get(("kvforge", c, L), {})
            fl = pre.get(("torch_flash", c, L), {})
            cu = pre.get(("torch_cudnn", c, L), {})
            ms = pre.get(("kvforge-mma.sync", c, L), {})
            kt, mt, ft, ct = (f(x.get("TFLOPs")) for x in (k, ms, fl, cu))
            print(f"| {c} | {L // 1024}k | {f(k.get('us')):.0f} | {kt:.1f} | {mt:.1f} | {ft:.1f} | {kt / ft:.2f} | "
                  f"{ct:.1f} | {kt / ct:.2f} |")
    variants = sorted({i for (i, _, _) in pre if i.startswith("kvforge-mma.sync-")})
    if variants:
        print()
        print("d128 mma.sync prefill tile variants, TFLOP/s (x the default mma.sync tile)")
        print("| variant | causal 4k | causal 16k | full 4k | full 16k |")
        print("|---|---|---|---|---|")
        for i in variants:
            cells = []
            for c, L in ((1, 4096), (1, 16384), (0, 4096), (0, 16384)):
                t, base = f(pre.get((i, c, L), {}).get("TFLOPs")), f(pre.get(("kvforge-mma.sync", c, L), {}).get("TFLOPs"))
                cells.append(f"{t:.1f} ({t / base:.2f})")
            print(f"| {i[len('kvforge-mma.sync-'):]} | " + " | ".join(cells) + " |")
if extra:
    print()
    print("prefill beyond the issue's shapes (Hq/Hkv 32/8, causal; L = total tokens; TFLOP/s summed per sequence)")
    print("| shape | B | L | D | dtype | kvforge kernel | kvforge TFLOP/s | mma.sync TFLOP/s | flash TFLOP/s | x flash | "
          "cudnn TFLOP/s | x cudnn |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    by = {}
    for r in extra:
        impl, shape = r["impl"].rsplit("-", 1)
        by.setdefault(shape, {})[impl] = r
    variants = sorted({i for g in by.values() for i in g if i.startswith("kvforge-") and i != "kvforge-mma.sync"})
    for shape, g in by.items():
        k = g.get("kvforge", g.get("kvforge-mma.sync"))  # the default kernel's row
        if k is None:
            continue
        kt = f(k["TFLOPs"])
        mt, ft, ct = (f(g.get(x, {}).get("TFLOPs")) for x in ("kvforge-mma.sync", "torch_flash", "torch_cudnn"))
        kernel = k["impl"][: -len(shape) - 1]
        print(f"| {shape} | {k.get('B', '1')} | {k['L']} | {k.get('D', '128')} | {k.get('dtype', 'bf16')} | {kernel} | "
              f"{kt:.1f} | {mt:.1f} | {ft:.1f} | {kt / ft:.2f} | {ct:.1f} | {kt / ct:.2f} |")
    if variants:
        print()
        print("wgmma prefill variants on the extra shapes, TFLOP/s (x the default kernel)")
        shapes = list(by)
        print("| variant | " + " | ".join(shapes) + " |")
        print("|---|" + "---|" * len(shapes))
        for i in variants:
            cells = []
            for shape in shapes:
                t, base = f(by[shape].get(i, {}).get("TFLOPs")), f(by[shape].get("kvforge", {}).get("TFLOPs"))
                cells.append(f"{t:.1f} ({t / base:.2f})")
            print(f"| {i[len('kvforge-'):]} | " + " | ".join(cells) + " |")
