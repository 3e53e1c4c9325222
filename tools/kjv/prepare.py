#!/usr/bin/env python3
"""The built-in model's data and tokenizer: the King James Bible and a byte-level BPE.

Dumps every verse with the `bible` command of Debian's bible-kjv package (the text is in the
public domain), one verse per line, books in canon order. The last nine books (Hebrews to
Revelation) are held out for evaluation. Trains a GPT-2-style byte-level BPE on the training
books, writes it as a Hugging Face tokenizer.json (+ tokenizer_config.json), and encodes both
splits to little-endian uint16 token ids, books separated by <|endoftext|>.

    python3 tools/kjv/prepare.py --out build/kjv [--vocab 4096]

Outputs in --out: train.txt, heldout.txt, tokenizer.json, tokenizer_config.json,
train.ids, heldout.ids, prepare.json (sizes and the unigram baseline's held-out
perplexity), and tokenizer_fixture.json (a held-out passage and a few edge cases with the ids
this script's encoder gives them: tests/fixtures/kjv/ holds a copy). Needs only Debian's python3 and bible-kjv (scripts/install-deps.sh --train).
"""
import argparse
import collections
import json
import math
import os
import re
import subprocess
import sys
from array import array

HELD_OUT_FROM = "Hebrews"
EOT = "<|endoftext|>"

# GPT-2's pre-tokenizer split. The corpus is checked to be printable ASCII, where \p{L} is
# [A-Za-z] and \p{N} is [0-9], so Python's re (no \p classes) splits it as GPT-2's regex does.
SPLIT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")


def books():
    """[(book name, [verse text])] in canon order, from `bible` (one verse per line)."""
    out = subprocess.run(["bible", "-l100000", "Gen1:1-Rev22:21"], check=True, capture_output=True, text=True).stdout
    result, name = [], None
    heading = re.compile(r"^([1-3]? ?[A-Z][A-Za-z ]*?) (\d+)$")
    verse = re.compile(r"^\s+\d+ (.*)$")
    for line in out.splitlines():
        if not line.strip():
            continue
        h = heading.match(line)
        if h:
            if h.group(1) != name:
                name = h.group(1)
                result.append((name, []))
            continue
        v = verse.match(line)
        if not v:
            sys.exit(f"prepare: unexpected line from bible: {line!r}")
        text = v.group(1).strip()
        if not all(32 <= ord(c) < 127 for c in text):
            sys.exit(f"prepare: non-ASCII verse: {text!r}")
        result[-1][1].append(text)
    return result


def byte_alphabet():
    """GPT-2's byte -> printable unicode character map (bytes that print stand for themselves)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def train_bpe(texts, n_merges):
    """Merges in rank order: each time the most frequent adjacent pair (ties: the smaller pair)."""
    alphabet = byte_alphabet()
    counts = collections.Counter()
    for t in texts:
        counts.update(SPLIT.findall(t))
    words = [[alphabet[b] for b in w.encode()] for w in counts]
    freq = list(counts.values())
    pairs = collections.Counter()
    where = collections.defaultdict(set)
    for i, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pairs[a, b] += freq[i]
            where[a, b].add(i)
    merges = []
    for _ in range(n_merges):
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        if pairs[best] < 2:
            break
        merges.append(best)
        joined = best[0] + best[1]
        for i in sorted(where.pop(best, ())):
            w = words[i]
            for a, b in zip(w, w[1:]):
                pairs[a, b] -= freq[i]
                if pairs[a, b] <= 0:
                    del pairs[a, b]
            out, k = [], 0
            while k < len(w):
                if k + 1 < len(w) and (w[k], w[k + 1]) == best:
                    out.append(joined)
                    k += 2
                else:
                    out.append(w[k])
                    k += 1
            words[i] = out
            for a, b in zip(out, out[1:]):
                pairs[a, b] += freq[i]
                where[a, b].add(i)
    return merges


class Encoder:
    """Byte-level BPE by merge rank, as tokenizers' BPE model applies it."""

    def __init__(self, vocab, merges):
        self.vocab = vocab
        self.rank = {m: r for r, m in enumerate(merges)}
        self.alphabet = byte_alphabet()
        self.cache = {}

    def word(self, w):
        if w in self.cache:
            return self.cache[w]
        parts = [self.alphabet[b] for b in w.encode()]
        while len(parts) > 1:
            ranked = [(self.rank.get((a, b), math.inf), k) for k, (a, b) in enumerate(zip(parts, parts[1:]))]
            r, k = min(ranked)
            if r == math.inf:
                break
            parts[k:k + 2] = [parts[k] + parts[k + 1]]
        ids = [self.vocab[p] for p in parts]
        self.cache[w] = ids
        return ids

    def encode(self, text):
        return [i for w in SPLIT.findall(text) for i in self.word(w)]


def tokenizer_json(vocab, merges, eot_id):
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": eot_id, "content": EOT, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": dict(byte_level, trim_offsets=False),
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }


def encode_split(enc, split, eot_id):
    ids = []
    for _, verses in split:
        ids += enc.encode("\n".join(verses) + "\n")
        ids.append(eot_id)
    return ids


def tokenizer_fixture(enc, heldout):
    """Texts and this encoder's ids for them: two held-out chapters and whitespace, digit and
    contraction cases of GPT-2's split."""
    passage = "\n".join(heldout[0][1][:30]) + "\n"
    edges = ["  two spaces,   three\n\n\ttab and 1611 or 123456 it's they'll O'Neil's ",
             "LORD GOD!!! ... (selah) -- 3:16;", "\n", " ", ""]
    return {"cases": [{"text": t, "ids": enc.encode(t)} for t in [passage] + edges]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=4096, help="vocabulary size, the end-of-text token included")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    all_books = books()
    cut = [n for n, _ in all_books].index(HELD_OUT_FROM)
    train, heldout = all_books[:cut], all_books[cut:]
    for name, split in (("train", train), ("heldout", heldout)):
        with open(os.path.join(args.out, f"{name}.txt"), "w") as f:
            f.write("\n\n".join("\n".join(v) for _, v in split) + "\n")

    merges = train_bpe(["\n".join(v) + "\n" for _, v in train], args.vocab - 256 - 1)
    alphabet = byte_alphabet()
    pieces = [alphabet[b] for b in range(256)] + [a + b for a, b in merges]
    vocab = {p: i for i, p in enumerate(pieces)}
    eot_id = len(pieces)
    with open(os.path.join(args.out, "tokenizer.json"), "w") as f:
        json.dump(tokenizer_json(vocab, merges, eot_id), f, ensure_ascii=False)
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": EOT, "eos_token": EOT,
                   "add_bos_token": False, "add_eos_token": False, "model_max_length": 1024}, f, indent=1)

    enc = Encoder(vocab, merges)
    summary = {"vocab_size": eot_id + 1, "eot_id": eot_id, "merges": len(merges),
               "train_books": len(train), "heldout_books": len(heldout)}
    counts = None
    for name, split in (("train", train), ("heldout", heldout)):
        ids = encode_split(enc, split, eot_id)
        array("H", ids).tofile(open(os.path.join(args.out, f"{name}.ids"), "wb"))
        summary[f"{name}_tokens"] = len(ids)
        if name == "train":
            counts = collections.Counter(ids)
        else:
            # The unigram baseline: train-split token frequencies, add-one smoothed.
            total = sum(counts.values()) + summary["vocab_size"]
            nll = -sum(math.log((counts[i] + 1) / total) for i in ids) / len(ids)
            summary["unigram_heldout_ppl"] = math.exp(nll)
    with open(os.path.join(args.out, "tokenizer_fixture.json"), "w") as f:
        json.dump(tokenizer_fixture(enc, heldout), f, indent=0)
    with open(os.path.join(args.out, "prepare.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
