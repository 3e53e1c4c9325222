#!/usr/bin/python3
"""`kvforge serve --device cuda`: the greedy completion equals `kvforge generate` on the CPU,
a sampled completion (drawn on the GPU) is the same for the same seed, and with top_k 1 it
is the greedy one; 16 concurrent streams all finish with [DONE] and their usage, and
/metrics counts them.
Exits 77 (skip) when there is no usable GPU, unless KVF_REQUIRE_GPU=1 or KVF_REQUIRE_MODELS=1.
    cuda_serve.py KVFORGE MODEL
"""
import json
import os
import sys
import threading
import urllib.request

import serve_process

PROMPT, N, STREAMS = "And it came to pass", 32, 16


def stream(base, prompt, out, k):
    resp = serve_process.post(base, "/v1/completions", {"prompt": prompt, "max_tokens": N, "stream": True, "temperature": 0,
                                          "stream_options": {"include_usage": True}})
    lines = [l.decode().strip() for l in resp if l.strip()]
    chunks = [json.loads(l[6:]) for l in lines if l.startswith("data: {")]
    usage = [c["usage"] for c in chunks if c.get("usage")]
    text = "".join(ch["text"] for c in chunks for ch in c["choices"])
    out[k] = (lines[-1] == "data: [DONE]", usage[0]["completion_tokens"] if usage else None, text)


def sampled_completion(base, prompt, seed, top_k):
    body = {"prompt": prompt, "max_tokens": N, "temperature": 1.0, "top_k": top_k, "seed": seed}
    return json.load(serve_process.post(base, "/v1/completions", body))["choices"][0]["text"]


def main():
    kvforge, model = sys.argv[1], sys.argv[2]
    with serve_process.serving(kvforge, "-m", model, "--device", "cuda", stop_timeout=60) as (base, log):
        if base is None or not any("serving" in l for l in log):
            text = "".join(log)
            required = "1" in (os.environ.get("KVF_REQUIRE_GPU"), os.environ.get("KVF_REQUIRE_MODELS"))
            if "unsupported" in text and not required:
                print("SKIP: no usable GPU:", text.strip().splitlines()[-1])
                sys.exit(77)
            sys.exit("FAIL: the server did not start:\n" + text)
        print("".join(log), end="")
        served = serve_process.greedy_completion(base, PROMPT, N)
        cpu = serve_process.generate_text(kvforge, "-m", model, "-p", PROMPT, "-n", str(N))
        print("cuda serve:", repr(served))
        print("cpu generate:", repr(cpu))
        if served != cpu:
            sys.exit("FAIL: the GPU server's greedy completion differs from the CPU's")
        sampled = [sampled_completion(base, PROMPT, seed, top_k) for seed, top_k in ((5, 0), (5, 0), (6, 0), (5, 1))]
        print("cuda sampled (seeds 5, 5, 6; top_k 1):", [repr(t) for t in sampled])
        if sampled[0] != sampled[1]:
            sys.exit("FAIL: the same seed gave two completions")
        if sampled[3] != served:
            sys.exit("FAIL: top_k 1 at temperature 1 is not the greedy completion")
        if len({sampled[0], sampled[2], served}) < 2:
            sys.exit("FAIL: sampling at temperature 1 gives the greedy text for every seed")
        prompts = [f"{w} the LORD" for w in ("And", "For", "But", "Then")] * (STREAMS // 4)
        out = [None] * STREAMS
        threads = [threading.Thread(target=stream, args=(base, p, out, k)) for k, p in enumerate(prompts)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for k, (done, tokens, text) in enumerate(out):
            if not done or tokens != N or not text:
                sys.exit(f"FAIL: stream {k}: [DONE] {done}, {tokens} tokens, text {text!r}")
        # Equal prompts, greedy: equal texts, whatever else ran beside them.
        for k in range(4, STREAMS):
            if out[k][2] != out[k % 4][2]:
                print(f"note: stream {k} differs from stream {k % 4} (batch-dependent arithmetic)")
        metrics = urllib.request.urlopen(base + "/metrics").read().decode()
        finished = sum(float(l.split()[-1]) for l in metrics.splitlines() if l.startswith("kvforge_request_finished_total"))
        print(f"{STREAMS} streams done; kvforge_request_finished_total {finished:.0f}")
        if finished < STREAMS + 1:
            sys.exit("FAIL: /metrics does not count the requests")
    print("ok")


if __name__ == "__main__":
    main()
