#!/usr/bin/env python3
"""Writes a vocab-only GGUF of N tokens for models without a tokenizer of their own (the
transformers fixtures): byte-level BPE with no merges, <|endoftext|> and then single
characters of GPT-2's byte alphabet (newline, space, '!'...). llama.cpp needs some
tokenizer.ggml.* to load a model; the interop tests feed it token ids.
usage: byte_vocab.py N OUT.gguf"""
import struct
import sys

STRING, ARRAY, U32, I32 = 8, 9, 4, 5


def string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return string(key) + struct.pack("<I", vtype) + payload


def array(etype, items):
    return struct.pack("<IQ", etype, len(items)) + b"".join(items)


def byte_alphabet():
    """GPT-2's printable stand-in for each byte."""
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    table, extra = {b: chr(b) for b in printable}, 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def main():
    n, out = int(sys.argv[1]), sys.argv[2]
    if not 3 <= n <= 257:
        sys.exit("byte_vocab.py: N must be 3..257")
    alphabet = byte_alphabet()
    order = [10, 32] + [b for b in range(256) if b not in (10, 32)]
    tokens = ["<|endoftext|>"] + [alphabet[b] for b in order[: n - 1]]
    types = [3] + [1] * (n - 1)
    kvs = [
        kv("general.architecture", STRING, string("llama")),
        kv("tokenizer.ggml.model", STRING, string("gpt2")),
        kv("tokenizer.ggml.pre", STRING, string("gpt-2")),
        kv("tokenizer.ggml.tokens", ARRAY, array(STRING, [string(t) for t in tokens])),
        kv("tokenizer.ggml.token_type", ARRAY, array(I32, [struct.pack("<i", t) for t in types])),
        kv("tokenizer.ggml.merges", ARRAY, array(STRING, [])),
        kv("tokenizer.ggml.bos_token_id", U32, struct.pack("<I", 0)),
        kv("tokenizer.ggml.eos_token_id", U32, struct.pack("<I", 0)),
    ]
    with open(out, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs))


main()
