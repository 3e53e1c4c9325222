#!/usr/bin/env python3
"""cuBLAS's decode products (torch.matmul of one f16 row by an f16 weight) on TinyLlama-1.1B's
linear shapes, 22 distinct weights per CUDA graph (nothing served from L2), as the peer of
bench_cuda_gemv; then plain reads (torch.sum) and a device-to-device copy for the bandwidth
the H200 gives short and long streams.

  python3 bench/cuda/gemv_peer.py        # on the GPU machine (torch with CUDA)
"""
import torch

LAYERS = 22
SHAPES = [("qkv", 2560, 2048), ("o", 2048, 2048), ("gate_up", 11264, 2048), ("down", 2048, 5632)]


def median_us(fn, reps=50):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    times.sort()
    return times[len(times) // 2]


def main():
    print("torch", torch.__version__, torch.cuda.get_device_name())
    for name, n, k in SHAPES:
        weights = [torch.randn(n, k, device="cuda", dtype=torch.float16) for _ in range(LAYERS)]
        x = torch.randn(1, k, device="cuda", dtype=torch.float16)

        def run():
            for w in weights:
                torch.matmul(x, w.t())

        run()  # cuBLAS starts outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
        us = median_us(graph.replay) / LAYERS
        print(f"cuBLAS f16 gemv {name:8s} n={n} k={k}: {us:7.2f} us  {2 * n * k / us / 1e6:.2f} TB/s")
        del weights
    for mb in (10.5, 46.1, 2200.0):
        t = torch.empty(int(mb * 1e6 / 2), device="cuda", dtype=torch.float16).normal_()
        us = median_us(lambda: t.sum())
        print(f"torch sum f16 {mb:7.1f} MB: {us:9.2f} us  {mb / us:.2f} TB/s")
        del t
    a = torch.empty(int(1e9), device="cuda", dtype=torch.uint8)
    b = torch.empty_like(a)
    us = median_us(lambda: b.copy_(a))
    print(f"D2D copy 1 GB: {us:.1f} us  {2e9 / us / 1e6:.2f} TB/s (read+write)")


if __name__ == "__main__":
    main()
