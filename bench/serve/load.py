"""Streams completions at a fixed concurrency against an OpenAI-compatible server and
reports time to first token, inter-token latency and total output tokens per second.
Every client sends its requests one after another; each request streams, and the time of
each chunk that carries text is taken as a token's arrival.
   load.py BASE_URL CONCURRENCY REQUESTS_PER_CLIENT PROMPT_TOKENS MAX_TOKENS [SHARED_FRACTION]
Prints one JSON line: {"concurrency", "requests", "ttft_p50_ms", "ttft_p99_ms",
"itl_p50_ms", "itl_p99_ms", "output_tokens", "wall_s", "output_tokens_per_s"}.
With SHARED_FRACTION f, every prompt starts with the same f of its words (a shared system
prompt) and ends with words of its own."""
import json
import random
import sys
import threading
import time
import urllib.request

base, conc, per_client, prompt_words, max_tokens = sys.argv[1], *map(int, sys.argv[2:6])
shared = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
WORDS = ("the cat dog sun moon tree river house little big happy sad ran saw went said girl boy "
         "park ball red blue green day night time once upon a there was named lily tom").split()


def prompt(rng, head):
    own = prompt_words - len(head)
    return " ".join(head + [rng.choice(WORDS) for _ in range(own)])


def one(body, ttfts, itls, tokens):
    req = urllib.request.Request(base + "/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    start = time.perf_counter()
    last = None
    n = 0
    with urllib.request.urlopen(req, timeout=600) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if not chunk.get("choices") or not chunk["choices"][0].get("text"):
                continue
            now = time.perf_counter()
            if last is None:
                ttfts.append(now - start)
            else:
                itls.append(now - last)
            last = now
            n += 1
    tokens.append(n)


def client(i, ttfts, itls, tokens, head_words):
    rng = random.Random(1000 + i)
    for _ in range(per_client):
        body = {"prompt": prompt(rng, head_words), "max_tokens": max_tokens, "temperature": 0, "stream": True}
        one(body, ttfts, itls, tokens)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] * 1e3 if xs else float("nan")


head = [random.Random(7).choice(WORDS) for _ in range(int(shared * prompt_words))]
ttfts, itls, tokens = [], [], []
threads = [threading.Thread(target=client, args=(i, ttfts, itls, tokens, head)) for i in range(conc)]
t0 = time.perf_counter()
for t in threads:
    t.start()
for t in threads:
    t.join()
wall = time.perf_counter() - t0
print(json.dumps({"concurrency": conc, "requests": len(tokens), "ttft_p50_ms": pct(ttfts, 50), "ttft_p99_ms": pct(ttfts, 99),
                  "itl_p50_ms": pct(itls, 50), "itl_p99_ms": pct(itls, 99), "output_tokens": sum(tokens),
                  "wall_s": wall, "output_tokens_per_s": sum(tokens) / wall}))
