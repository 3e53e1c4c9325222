"""PyTorch's scaled_dot_product_attention on the decode shapes of bench/cuda/decode_bench.cpp.

Same shapes and counting as the C++ bench: B 1/8/32, Hq/Hkv 32/8, D 128, one query row,
contexts 8k/32k/128k, bf16; effective TB/s of the unique K/V bytes; CUDA events, median of
repeats, input sets rotated so each launch reads at least 4x the L2. Decode times are a CUDA
graph of back-to-back calls divided by their count, as the C++ bench does (us_launch: one
eager call between two events, which adds Python's dispatch and the launch latency). GQA goes through
enable_gqa=True; where a backend refuses it, the group's 4 query heads are packed as 4 query
rows of the KV head (same bytes, same result), and the line says form=packed.
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 30
HQ, HKV, D = 32, 8, 128


def time_fn(fn, sets, reps):
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for i in range(reps + 3):
        s = sets[i % len(sets)]
        e0.record()
        fn(*s)
        e1.record()
        e1.synchronize()
        if i >= 3:
            ms.append(e0.elapsed_time(e1))
    ms.sort()
    return ms[len(ms) // 2]


def time_graph(fn, sets, reps, per_call_ms):
    """Median over reps of one replay of a graph of back-to-back fn calls, per call (ms)."""
    n = max(len(sets), min(64, int(2.0 / per_call_ms) + 1))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture, as torch.cuda.graph asks
        for s in sets[:2]:
            fn(*s)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(n):
            fn(*sets[i % len(sets)])
    return time_fn(lambda: g.replay(), [()], reps) / n


def time_first_form(forms, label):
    """(name, eager µs) of the first of the (name, fn) forms that runs (median of REPS launches
    between two events); the ones before it report why they did not. (None, None) if none runs."""
    for fname, fn in forms:
        try:
            fn()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - report and try the next form
            print(f"# {label} {fname}: {type(e).__name__}: {str(e)[:160]}", flush=True)
            continue
        return fname, time_fn(lambda: fn(), [()], REPS) * 1e3
    return None, None


def run(backend, name):
    for b in (1, 8, 32):
        for ctx in (8192, 32768, 131072):
            kv_bytes = 2 * b * HKV * ctx * D * 2
            nsets = max(1, -(-(240 << 20) // kv_bytes))
            q = torch.randn(b, HQ, 1, D, device="cuda", dtype=torch.bfloat16)
            sets = [(q, torch.randn(b, HKV, ctx, D, device="cuda", dtype=torch.bfloat16),
                     torch.randn(b, HKV, ctx, D, device="cuda", dtype=torch.bfloat16)) for _ in range(nsets)]

            def gqa(q, k, v):
                return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

            def packed(q, k, v):
                return F.scaled_dot_product_attention(q.view(b, HKV, HQ // HKV, D), k, v)

            form, us, us1 = None, None, None
            with sdpa_kernel(backend):
                for fname, fn in (("gqa", gqa), ("packed", packed)):
                    try:
                        fn(*sets[0])
                        torch.cuda.synchronize()
                    except Exception as e:  # noqa: BLE001 - report and try the next form
                        print(f"# {name} {fname} B={b} ctx={ctx}: {type(e).__name__}: {str(e)[:160]}", flush=True)
                        continue
                    form, us1 = fname, time_fn(fn, sets, REPS) * 1e3
                    try:
                        us = time_graph(fn, sets, REPS, us1 * 1e-3) * 1e3
                    except Exception as e:  # noqa: BLE001 - report, keep the eager time
                        print(f"# {name} {fname} B={b} ctx={ctx} graph: {type(e).__name__}: {str(e)[:160]}", flush=True)
                        us, form = us1, fname + "+eager"
                    break
            if us is None:
                print(f"decode impl=torch_{name} B={b} ctx={ctx} layout=dense us=nan TBps=nan form=none", flush=True)
            else:
                print(f"decode impl=torch_{name} B={b} ctx={ctx} layout=dense us={us:.2f} "
                      f"TBps={kv_bytes / (us * 1e-6) / 1e12:.3f} us_launch={us1:.2f} form={form}", flush=True)
            del sets, q
            torch.cuda.empty_cache()


def prefill_shapes():
    """(causal, L, head dim, dtype, impl suffix): the standard shapes, then bench_cuda_prefill's
    "extra" ones that SDPA takes as one sequence (f16, head dims 64 and 256; the varlen batch
    is run_prefill_varlen's)."""
    for causal in (True, False):
        for L in (4096, 16384):
            yield causal, L, D, torch.bfloat16, ""
    yield True, 16384, D, torch.float16, "-f16"
    yield True, 16384, 64, torch.bfloat16, "-d64"
    yield True, 16384, 256, torch.bfloat16, "-d256"


def run_prefill(backend, name):
    """Prefill B=1, Hq/Hkv 32/8, causal and not; TFLOP/s as 4*B*H*L^2*D (/2 causal).
    GQA through enable_gqa=True; where refused, K/V repeated to 32 heads (form=repeat)."""
    for causal, L, hd, dtype, suffix in prefill_shapes():
        q = torch.randn(1, HQ, L, hd, device="cuda", dtype=dtype)
        k = torch.randn(1, HKV, L, hd, device="cuda", dtype=dtype)
        v = torch.randn(1, HKV, L, hd, device="cuda", dtype=dtype)
        kr, vr = k.repeat_interleave(HQ // HKV, 1), v.repeat_interleave(HQ // HKV, 1)
        forms = (("gqa", lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)),
                 ("repeat", lambda: F.scaled_dot_product_attention(q, kr, vr, is_causal=causal)))
        with sdpa_kernel(backend):
            form, us = time_first_form(forms, f"{name} L={L}")
        flops = 4.0 * HQ * L * L * hd / (2 if causal else 1)
        tf = flops / (us * 1e-6) / 1e12 if us else float("nan")
        dt = "f16" if dtype == torch.float16 else "bf16"
        print(f"prefill impl=torch_{name}{suffix} L={L} causal={int(causal)} B=1 D={hd} dtype={dt} "
              f"us={us if us else float('nan'):.1f} TFLOPs={tf:.1f} form={form}", flush=True)
        del q, k, v, kr, vr
        torch.cuda.empty_cache()


VARLEN = [512, 3584, 1024, 3072, 1536, 2560, 2048, 2048]  # bench_cuda_prefill's "-varlen" batch


def varlen_forms(q, k, v, cu, max_len):
    """Flash's varlen forward, causal, GQA native: torch.nn.attention.varlen.varlen_attn in the
    spellings torch releases have had, then the aten op beneath it."""
    forms = []
    try:
        from torch.nn.attention.varlen import varlen_attn
        forms += [("varlen_attn-gqa", lambda: varlen_attn(q, k, v, cu, cu, max_len, max_len, window_size=(-1, 0),
                                                          enable_gqa=True)),
                  ("varlen_attn-window", lambda: varlen_attn(q, k, v, cu, cu, max_len, max_len, window_size=(-1, 0))),
                  ("varlen_attn-causal", lambda: varlen_attn(q, k, v, cu, cu, max_len, max_len, is_causal=True))]
    except ImportError as e:
        print(f"# flash varlen: {e}", flush=True)
    forms.append(("aten", lambda: torch.ops.aten._flash_attention_forward(q, k, v, cu, cu, max_len, max_len, 0.0, True,
                                                                          False)))
    return forms


def run_prefill_varlen():
    """The varlen batch on flash (SDPA has no varlen form; cuDNN's is not exposed): q [T, 32,
    128], k/v [T, 8, 128], causal; TFLOP/s summed per sequence as bench_cuda_prefill does."""
    total = sum(VARLEN)
    cu = torch.tensor([sum(VARLEN[:i]) for i in range(len(VARLEN) + 1)], device="cuda", dtype=torch.int32)
    q = torch.randn(total, HQ, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(total, HKV, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(total, HKV, D, device="cuda", dtype=torch.bfloat16)
    form, us = time_first_form(varlen_forms(q, k, v, cu, max(VARLEN)), "flash varlen")
    flops = sum(4.0 * HQ * n * n * D / 2 for n in VARLEN)
    tf = flops / (us * 1e-6) / 1e12 if us else float("nan")
    print(f"prefill impl=torch_flash-varlen L={total} causal=1 B={len(VARLEN)} D={D} dtype=bf16 "
          f"us={us if us else float('nan'):.1f} TFLOPs={tf:.1f} form={form}", flush=True)


if __name__ == "__main__":
    print(f"# torch {torch.__version__} {torch.cuda.get_device_name()}", flush=True)
    what = sys.argv[2] if len(sys.argv) > 2 else "all"
    if what in ("all", "prefill"):
        run_prefill(SDPBackend.FLASH_ATTENTION, "flash")
        run_prefill(SDPBackend.CUDNN_ATTENTION, "cudnn")
        run_prefill_varlen()
    if what in ("all", "decode"):
        run(SDPBackend.FLASH_ATTENTION, "flash")
        run(SDPBackend.CUDNN_ATTENTION, "cudnn")
