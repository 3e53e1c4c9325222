#!/usr/bin/python3
"""`kvforge serve` without -m serves the built-in model: /v1/models lists kjv-7m, and a greedy
completion of "And it came to pass" is the text `kvforge generate` (also without -m) gives.
    default_model.py KVFORGE
"""
import json
import re
import sys
import urllib.request

import serve_process

PROMPT, N = "And it came to pass", 24


def main():
    kvforge = sys.argv[1]
    with serve_process.serving(kvforge, "--no-warm-up") as (base, _):
        if base is None:
            sys.exit("FAIL: the server did not start")
        models = json.load(urllib.request.urlopen(base + "/v1/models"))
        ids = [m["id"] for m in models["data"]]
        print("models:", ids)
        if ids != ["kjv-7m.gguf"]:
            sys.exit(f"FAIL: /v1/models lists {ids}, not the built-in model")
        served = serve_process.greedy_completion(base, PROMPT, N)
        local = serve_process.generate_text(kvforge, "-p", PROMPT, "-n", str(N))
        print("served:", repr(served))
        print("generate:", repr(local))
        if served != local:
            sys.exit("FAIL: the server's completion differs from generate's")
        # Readable English from the trained model, not ids from random weights.
        words = re.findall(r"[A-Za-z]+", served)
        if len(words) < N // 3 or not {"the", "and", "of", "unto"} & set(words):
            sys.exit("FAIL: the completion does not read as English")
    print("ok")


if __name__ == "__main__":
    main()
