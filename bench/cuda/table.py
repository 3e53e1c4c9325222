"""Reads the key=value lines of decode_bench and torch_peer and prints the decode table."""
import sys


def parse(path):
    rows = []
    for line in open(path):
        w = line.split()
        if not w or w[0] not in ("decode", "copy"):
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
