#!/usr/bin/env python3
"""Trains the built-in model: a small llama on the King James Bible (tools/kjv/prepare.py).

A Llama of about 7M parameters (transformers' LlamaForCausalLM, tied embeddings) trained
with AdamW on random 256-token windows of the training books, bf16 autocast on one GPU,
a fixed seed and a fixed step count. Writes to --out:

  config.json, model.safetensors  the model with its weights rounded to float16 (what
                                  `kvforge convert --outtype f16` stores unchanged); every
                                  figure below is measured on this file read back in float32
  tokenizer.json, tokenizer_config.json   copied from --data
  loss.csv                        step, train loss, held-out loss
  train.json                      the recipe, the held-out perplexity and the unigram
                                  baseline's, the time taken
  fixture/                        kvforge's reference: the f16 model's float32 logits at every
                                  position of a held-out passage and its greedy continuation

    python3 tools/kjv/train.py --data build/kjv --out build/kjv/model [--steps 600]
    python3 tools/kjv/train.py --data build/kjv --out build/kjv/model --evaluate-only
"""
import argparse
import json
import math
import os
import shutil
import time

import numpy as np
import torch
import transformers

import prepare  # tools/kjv/prepare.py: the tokenizer's encoder

SEQ = 256
PROMPT = "And it came to pass"  # the fixture's greedy prompt: the main job's


def config(vocab, eot):
    return transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=256, intermediate_size=768, num_hidden_layers=8, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=1024, rms_norm_eps=1e-5, rope_theta=10000.0,
        tie_word_embeddings=True, bos_token_id=eot, eos_token_id=eot)


def ids(path):
    return torch.from_numpy(np.fromfile(path, dtype="<u2").astype(np.int64))


def batches(data, batch, gen):
    while True:
        starts = torch.randint(0, len(data) - SEQ - 1, (batch,), generator=gen)
        x = torch.stack([data[s:s + SEQ + 1] for s in starts.tolist()])
        yield x[:, :-1], x[:, 1:]


@torch.no_grad()
def heldout_loss(model, data, device, dtype=torch.bfloat16):
    """Mean next-token loss over the held-out ids in consecutive, non-overlapping windows."""
    model.eval()
    n = (len(data) - 1) // SEQ
    x = data[:n * SEQ + 1]
    inputs, targets = x[:-1].view(n, SEQ), x[1:].view(n, SEQ)
    total = 0.0
    for k in range(0, n, 32):
        inp, tgt = inputs[k:k + 32].to(device), targets[k:k + 32].to(device)
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            logits = model(inp).logits.float()
        total += torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), tgt.reshape(-1), reduction="sum").item()
    model.train()
    return total / (n * SEQ)


def lr_at(step, steps, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def write_fixture(model, heldout, prompt_ids, out, n_input=32, n_new=32):
    """float32 logits at every position of a held-out passage and a greedy continuation, on the CPU."""
    os.makedirs(out, exist_ok=True)
    m = model.cpu().eval()
    inp = heldout[:n_input].view(1, -1)
    with torch.no_grad():
        logits = m(inp).logits[0].numpy().astype(np.float32)
        seq, greedy, margins = list(prompt_ids), [], []
        for _ in range(n_new):  # greedy by full recomputation: the model's function, no cache involved
            last = m(torch.tensor([seq])).logits[0, -1]
            top = torch.topk(last, 2)
            greedy.append(int(top.indices[0]))
            margins.append(float(top.values[0] - top.values[1]))
            seq.append(greedy[-1])
    np.save(os.path.join(out, "logits.npy"), logits)
    with open(os.path.join(out, "fixture.json"), "w") as f:
        json.dump({"model": "models/kjv-7m.gguf", "input_ids": inp[0].tolist(), "prompt_ids": prompt_ids,
                   "greedy_ids": greedy, "greedy_top2_margins": margins}, f)


def train(args, prep, train_ids, heldout, device):
    """The training run; returns the model (float32), its loss curve and the seconds taken."""
    t0 = time.time()
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    model = transformers.LlamaForCausalLM(config(prep["vocab_size"], prep["eot_id"])).to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), fused=device.type == "cuda")
    stream = batches(train_ids, args.batch, torch.Generator().manual_seed(args.seed))
    curve, running = [], []
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.steps, args.lr, warmup=100)
        x, y = next(stream)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = model(x).logits
        loss = torch.nn.functional.cross_entropy(logits.float().view(-1, logits.size(-1)), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running.append(loss.item())
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            curve.append((step + 1, sum(running) / len(running), heldout_loss(model, heldout, device)))
            running = []
            print(f"step {curve[-1][0]:5d}  train {curve[-1][1]:.4f}  heldout {curve[-1][2]:.4f}", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    return model, curve, time.time() - t0


def export(model, curve, args):
    """The committed model: its weights rounded to float16, saved with the tokenizer."""
    os.makedirs(args.out, exist_ok=True)
    model.to(torch.float16).save_pretrained(args.out, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(args.data, name), os.path.join(args.out, name))
    with open(os.path.join(args.out, "loss.csv"), "w") as f:
        f.write("step,train_loss,heldout_loss\n")
        f.writelines(f"{s},{a:.5f},{b:.5f}\n" for s, a, b in curve)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="the output folder of tools/kjv/prepare.py")
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1611)
    ap.add_argument("--evaluate-only", action="store_true", help="skip training: evaluate the model already in --out")
    args = ap.parse_args()

    t0 = time.time()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    prep = json.load(open(os.path.join(args.data, "prepare.json")))
    train_ids, heldout = ids(os.path.join(args.data, "train.ids")), ids(os.path.join(args.data, "heldout.ids"))
    summary_path = os.path.join(args.out, "train.json")
    if args.evaluate_only:
        summary = json.load(open(summary_path))
    else:
        model, curve, train_s = train(args, prep, train_ids, heldout, device)
        export(model, curve, args)
        summary = {"params": sum(p.numel() for p in model.parameters()), "steps": args.steps, "batch": args.batch,
                   "seq": SEQ, "lr": args.lr, "weight_decay": args.weight_decay, "seed": args.seed,
                   "train_tokens_seen": args.steps * args.batch * SEQ, "train_seconds": round(train_s, 1),
                   "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
                   "torch": torch.__version__, "transformers": transformers.__version__}

    # Everything below is measured on the exported file itself, read back in float32.
    exported = transformers.LlamaForCausalLM.from_pretrained(args.out, dtype=torch.float32).to(device)
    summary["heldout_tokens"] = len(heldout)
    summary["heldout_ppl"] = math.exp(heldout_loss(exported, heldout, device, dtype=torch.float32))
    summary["unigram_heldout_ppl"] = prep["unigram_heldout_ppl"]
    summary["ratio_to_unigram"] = summary["unigram_heldout_ppl"] / summary["heldout_ppl"]
    tok = json.load(open(os.path.join(args.data, "tokenizer.json")))["model"]
    encoder = prepare.Encoder(tok["vocab"], [tuple(m.split(" ")) for m in tok["merges"]])
    write_fixture(exported, heldout, encoder.encode(PROMPT), os.path.join(args.out, "fixture"))
    summary["total_seconds"] = round(time.time() - t0, 1)
    with open(summary_path, "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
