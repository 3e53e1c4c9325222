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
hdr = ("B", "ctx", "dense TB/s", "dense us", "paged TB/s", "paged/dense", "flash TB/s", "x flash",
       "cudnn TB/s", "x cudnn", "splits")
print("| " + " | ".join(hdr) + " |")
print("|" + "---|" * len(hdr))
f = lambda x: float(x) if x not in (None, "nan") else float("nan")
for b in (1, 8, 32):
    for ctx in (8192, 32768, 131072):
        d = get.get(("kvforge", "dense", b, ctx), {})
        p = get.get(("kvforge", "paged", b, ctx), {})
        fl = get.get(("torch_flash", "dense", b, ctx), {})
        cu = get.get(("torch_cudnn", "dense", b, ctx), {})
        dt, pt, ft, ct = f(d.get("TBps")), f(p.get("TBps")), f(fl.get("TBps")), f(cu.get("TBps"))
        print(f"| {b} | {ctx // 1024}k | {dt:.2f} | {f(d.get('us')):.1f} | {pt:.2f} | {pt / dt:.3f} | {ft:.2f} | "
              f"{dt / ft:.2f} | {ct:.2f} | {dt / ct:.2f} | {d.get('splits', '?')} |")

pre = {}
for r in rows:
    if r["kind"] == "prefill":
        pre[(r["impl"], int(r["causal"]), int(r["L"]))] = r
if pre:
    print()
    print("prefill B=1, Hq/Hkv 32/8, D 128, bf16; TFLOP/s = 4*B*H*L^2*D (/2 causal)")
    hdr = ("causal", "L", "kvforge us", "kvforge TFLOP/s", "flash TFLOP/s", "x flash", "cudnn TFLOP/s", "x cudnn")
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for c in (1, 0):
        for L in (4096, 16384):
            k = pre.get(("kvforge", c, L), {})
            fl = pre.get(("torch_flash", c, L), {})
            cu = pre.get(("torch_cudnn", c, L), {})
            kt, ft, ct = f(k.get("TFLOPs")), f(fl.get("TFLOPs")), f(cu.get("TFLOPs"))
            print(f"| {c} | {L // 1024}k | {f(k.get('us')):.0f} | {kt:.1f} | {ft:.1f} | {kt / ft:.2f} | {ct:.1f} | {kt / ct:.2f} |")
    variants = sorted({i for (i, _, _) in pre if i.startswith("kvforge-")})
    if variants:
        print()
        print("d128 prefill tile variants, TFLOP/s (x the default kernel)")
        print("| variant | causal 4k | causal 16k | full 4k | full 16k |")
        print("|---|---|---|---|---|")
        for i in variants:
            cells = []
            for c, L in ((1, 4096), (1, 16384), (0, 4096), (0, 16384)):
                t, base = f(pre.get((i, c, L), {}).get("TFLOPs")), f(pre.get(("kvforge", c, L), {}).get("TFLOPs"))
                cells.append(f"{t:.1f} ({t / base:.2f})")
            print(f"| {i[len('kvforge-'):]} | " + " | ".join(cells) + " |")
