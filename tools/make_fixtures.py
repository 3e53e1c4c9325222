#!/usr/bin/env python3
"""Builds the tiny random-init transformers fixtures kvforge's family tests compare against.

For every family: a small config of our own, weights drawn from a fixed seed, saved with
save_pretrained (config.json + model.safetensors); float32 eager-attention logits at every
position of a 48-token input (logits.npy); and transformers' greedy continuation with
use_cache=True plus each step's top-2 logit margin (fixture.json). Run on a machine with
torch and transformers (the GPU machine); the outputs are committed under tests/fixtures/.

    python3 tools/make_fixtures.py --out tests/fixtures [--only llama,gpt2]
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import transformers

VOCAB, HIDDEN, FFN, HEADS, KV_HEADS, LAYERS, MAX_POS = 128, 64, 96, 4, 2, 2, 128
N_INPUT, N_PROMPT, N_NEW = 48, 12, 40


def base(**kw):
    args = dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
                num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, max_position_embeddings=MAX_POS,
                rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    args.update(kw)
    return args


def configs():
    t = transformers
    out = {
        "llama": lambda: t.LlamaConfig(**base(rope_theta=10000.0)),
        "llama3_scaled": lambda: t.LlamaConfig(**base(
            head_dim=32, num_attention_heads=2, num_key_value_heads=1, rope_theta=500000.0, tie_word_embeddings=True,
            rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 16})),
        "mistral": lambda: t.MistralConfig(**base(sliding_window=16, head_dim=16)),
        "qwen2": lambda: t.Qwen2Config(**base(use_sliding_window=False, rope_theta=1000000.0)),
        "qwen3": lambda: t.Qwen3Config(**base(head_dim=32, use_sliding_window=False)),
        "gemma2": lambda: t.Gemma2Config(**base(
            num_hidden_layers=4, head_dim=16, query_pre_attn_scalar=24, sliding_window=16,
            attn_logit_softcapping=50.0, final_logit_softcapping=30.0, hidden_activation="gelu_pytorch_tanh",
            tie_word_embeddings=True)),
        "gpt2": lambda: t.GPT2Config(vocab_size=VOCAB, n_positions=MAX_POS, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS,
                                     bos_token_id=1, eos_token_id=2),
        "bloom": lambda: t.BloomConfig(vocab_size=VOCAB, hidden_size=HIDDEN, n_layer=LAYERS, n_head=HEADS,
                                       bos_token_id=1, eos_token_id=2, pad_token_id=0),
    }
    if hasattr(t, "DeepseekV2Config"):
        def deepseek(**kw):
            args = dict(num_key_value_heads=HEADS, q_lora_rank=None, kv_lora_rank=32, qk_nope_head_dim=16,
                        qk_rope_head_dim=8, v_head_dim=24, first_k_dense_replace=LAYERS, moe_intermediate_size=32,
                        n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1)
            args.update(kw)
            return t.DeepseekV2Config(**base(**args))
        out["deepseek_v2"] = lambda: deepseek()
        out["deepseek_v2_qlora"] = lambda: deepseek(q_lora_rank=16)  # compressed queries
        out["deepseek_v2_moe"] = lambda: deepseek(first_k_dense_replace=1)  # layer 1 is routed MoE
    # Mixture-of-experts families (after the others, so that their seeds stay as they were).
    if hasattr(t, "Qwen3MoeConfig"):  # layer 0 dense (mlp_only_layers), layer 1 routed
        out["qwen3_moe"] = lambda: t.Qwen3MoeConfig(**base(
            head_dim=32, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=1,
            norm_topk_prob=True, mlp_only_layers=[0], use_sliding_window=False))
    if hasattr(t, "MixtralConfig"):
        out["mixtral"] = lambda: t.MixtralConfig(**base(num_local_experts=4, num_experts_per_tok=2, sliding_window=None))
    # More families (appended, so that the seeds above stay as they were).
    if hasattr(t, "DeepseekV3Config"):  # layer 1 routed: sigmoid scores, a correction bias, grouped top-k
        out["deepseek_v3"] = lambda: t.DeepseekV3Config(**base(
            num_key_value_heads=HEADS, q_lora_rank=16, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
            v_head_dim=24, first_k_dense_replace=1, moe_intermediate_size=32, n_routed_experts=4,
            num_experts_per_tok=2, n_shared_experts=1, n_group=2, topk_group=1, routed_scaling_factor=2.5,
            norm_topk_prob=True))
    if hasattr(t, "Qwen2MoeConfig"):  # layer 0 dense, layer 1 routed with a gated shared expert
        out["qwen2_moe"] = lambda: t.Qwen2MoeConfig(**base(
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=48,
            decoder_sparse_step=1, mlp_only_layers=[0], norm_topk_prob=False, use_sliding_window=False))
    if hasattr(t, "Gemma3TextConfig"):  # local (window 16) and global layers with their own rope bases
        out["gemma3"] = lambda: t.Gemma3TextConfig(**base(
            num_hidden_layers=4, head_dim=16, query_pre_attn_scalar=24, sliding_window=16,
            layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
            hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True))
    if hasattr(t, "Phi3Config"):  # fused qkv and gate-up projections
        out["phi3"] = lambda: t.Phi3Config(**base(pad_token_id=0))
    # Every layer routed, as llama.cpp's qwen3moe and qwen2moe hold them (their GGUF has no dense layers).
    if hasattr(t, "Qwen3MoeConfig"):
        out["qwen3_moe_routed"] = lambda: t.Qwen3MoeConfig(**base(
            head_dim=32, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=1,
            norm_topk_prob=True, mlp_only_layers=[], use_sliding_window=False))
    if hasattr(t, "Qwen2MoeConfig"):
        out["qwen2_moe_routed"] = lambda: t.Qwen2MoeConfig(**base(
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=48,
            decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=False, use_sliding_window=False))
    if hasattr(t, "DeepseekV32Config"):  # DeepSeek-V3's layout plus the sparse-attention indexer: rows past
        # position 16 attend to their indexer's 16 best keys (token-level top-k), the others to all
        out["deepseek_v32"] = lambda: t.DeepseekV32Config(**base(
            num_key_value_heads=HEADS, q_lora_rank=16, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
            v_head_dim=24, first_k_dense_replace=1, moe_intermediate_size=32, n_routed_experts=4,
            num_experts_per_tok=2, n_shared_experts=1, n_group=2, topk_group=1, routed_scaling_factor=2.5,
            norm_topk_prob=True, index_topk=16, index_n_heads=64, index_head_dim=16))
    return out


def randomize(model, family, gen):
    """Weights large enough that logits are far from uniform; norms away from 1 so a
    (1 + w) / w mix-up shows; biases nonzero so a dropped bias shows."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(torch.empty_like(p).uniform_(-0.1, 0.1, generator=gen))
            elif p.ndim == 1:
                centre = 0.0 if family in ("gemma2", "gemma3") else 1.0  # gemma's RMSNorm scales by (1 + w)
                p.copy_(centre + torch.empty_like(p).uniform_(-0.3, 0.3, generator=gen))
            else:
                p.copy_(torch.empty_like(p).normal_(0.0, 0.12, generator=gen))


class IndexerGaps:
    """While a sparse-attention indexer runs, records each top-k that drops keys: the gap
    between the last key kept and the first dropped, over rows where both are unmasked. The
    pick among exact (or near) ties is the reference's own, so a fixture needs clear gaps."""

    def __init__(self, model):
        self.gaps, self.active, self.orig = [], False, torch.Tensor.topk
        for name, mod in model.named_modules():
            if name.endswith("indexer"):
                mod.register_forward_pre_hook(lambda *a: setattr(self, "active", True))
                mod.register_forward_hook(lambda *a: setattr(self, "active", False))
        gaps = self

        def topk(t, k, *args, **kw):
            if gaps.active and k < t.shape[-1]:
                vals = gaps.orig(t.float(), k + 1, dim=-1).values
                kept, dropped = vals[..., k - 1], vals[..., k]
                valid = dropped > torch.finfo(torch.float32).min / 2
                if bool(valid.any()):
                    gaps.gaps.append(float((kept - dropped)[valid].min()))
            return gaps.orig(t, k, *args, **kw)
        torch.Tensor.topk = topk

    def close(self):
        torch.Tensor.topk = self.orig
        return min(self.gaps) if self.gaps else None


def build(family, make_config, out_dir, seed):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    cfg = make_config()
    model = transformers.AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32, attn_implementation="eager")
    randomize(model, family, gen)
    model.eval()
    ids = torch.randint(3, VOCAB, (1, N_INPUT), generator=gen)
    gaps = IndexerGaps(model) if getattr(cfg, "index_topk", None) else None
    with torch.no_grad():
        logits = model(ids).logits[0].float().numpy()
        prompt = ids[:, :N_PROMPT]
        res = model.generate(prompt, max_new_tokens=N_NEW, min_new_tokens=N_NEW, do_sample=False, use_cache=True,
                             output_scores=True, return_dict_in_generate=True, pad_token_id=0)
    index_gap = gaps.close() if gaps else None
    greedy = res.sequences[0, N_PROMPT:].tolist()
    margins = []
    for s in res.scores:
        top2 = torch.topk(s[0].float(), 2).values
        margins.append(float(top2[0] - top2[1]))
    d = os.path.join(out_dir, family)
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    np.save(os.path.join(d, "logits.npy"), logits.astype(np.float32))
    meta = {
        "family": family, "model_type": cfg.model_type, "seed": seed,
        "transformers": transformers.__version__, "torch": torch.__version__,
        "input_ids": ids[0].tolist(), "prompt_ids": prompt[0].tolist(), "greedy_ids": greedy,
        "greedy_top2_margins": margins, "logits": "logits.npy", "logits_shape": list(logits.shape),
        "command": "python3 tools/make_fixtures.py --out tests/fixtures",
    }
    if index_gap is not None:
        meta["index_topk_min_gap"] = index_gap
    with open(os.path.join(d, "fixture.json"), "w") as f:
        json.dump(meta, f, indent=1)
    gen_cfg = os.path.join(d, "generation_config.json")
    if os.path.exists(gen_cfg):
        os.remove(gen_cfg)
    print(f"{family:14s} params {sum(p.numel() for p in model.parameters()):7d}  "
          f"min margin {min(margins):.4f}  logits {tuple(logits.shape)}"
          + (f"  indexer top-k min gap {index_gap:.3g}" if index_gap is not None else ""))


def build_lora(out_dir, seed, llama_cpp=None):
    """A llama base and two PEFT adapters of different ranks and targets (adapters/a1: rank 8
    on all seven projections; adapters/a2: rank 4, rsLoRA, on q, v and down), both factors of
    each drawn at random (PEFT starts B at 0, which would make an adapter a no-op); the base's
    logits and greedy ids as for a family, and each adapter's beside its files. With the
    llama.cpp source (--llama-cpp), a1 also as llama.cpp's convert_lora_to_gguf.py writes it
    (adapters/a1.gguf; a2 is not: GGUF LoRA has no rsLoRA scale)."""
    import copy
    import peft
    family = "llama_lora"
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    cfg = transformers.LlamaConfig(**base(rope_theta=10000.0))
    model = transformers.AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32, attn_implementation="eager")
    randomize(model, family, gen)
    model.eval()
    ids = torch.randint(3, VOCAB, (1, N_INPUT), generator=gen)
    d = os.path.join(out_dir, family)
    os.makedirs(d, exist_ok=True)

    def run(m):
        with torch.no_grad():
            logits = m(input_ids=ids).logits[0].float().numpy()
            res = m.generate(input_ids=ids[:, :N_PROMPT], max_new_tokens=N_NEW, min_new_tokens=N_NEW, do_sample=False,
                             use_cache=True, output_scores=True, return_dict_in_generate=True, pad_token_id=0)
        margins = [float(torch.topk(s[0].float(), 2).values.diff().abs()) for s in res.scores]
        return logits, res.sequences[0, N_PROMPT:].tolist(), margins

    logits, greedy, margins = run(model)
    model.save_pretrained(d, safe_serialization=True)
    np.save(os.path.join(d, "logits.npy"), logits.astype(np.float32))
    adapters = {}
    all_seven = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    for name, rank, alpha, targets, rslora in [("a1", 8, 16, all_seven, False),
                                               ("a2", 4, 8, ["q_proj", "v_proj", "down_proj"], True)]:
        lcfg = peft.LoraConfig(r=rank, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0, bias="none",
                               use_rslora=rslora, task_type="CAUSAL_LM")
        pm = peft.get_peft_model(copy.deepcopy(model), lcfg)
        with torch.no_grad():
            for pname, p in pm.named_parameters():
                if "lora_A" in pname or "lora_B" in pname:
                    p.copy_(torch.empty_like(p).normal_(0.0, 0.15, generator=gen))
        pm.eval()
        a_logits, a_greedy, a_margins = run(pm)
        ad = os.path.join(d, "adapters", name)
        pm.save_pretrained(ad, safe_serialization=True)
        for extra in ("README.md",):
            if os.path.exists(os.path.join(ad, extra)):
                os.remove(os.path.join(ad, extra))
        np.save(os.path.join(ad, "logits.npy"), a_logits.astype(np.float32))
        adapters[name] = {"rank": rank, "alpha": alpha, "target_modules": targets, "rslora": rslora,
                          "logits": f"adapters/{name}/logits.npy", "greedy_ids": a_greedy,
                          "greedy_top2_margins": a_margins}
        print(f"{family} {name}: rank {rank} min margin {min(a_margins):.4f} "
              f"max |logit change| {np.abs(a_logits - logits).max():.3f}")
    meta = {
        "family": family, "model_type": cfg.model_type, "seed": seed,
        "transformers": transformers.__version__, "torch": torch.__version__, "peft": peft.__version__,
        "input_ids": ids[0].tolist(), "prompt_ids": ids[0, :N_PROMPT].tolist(), "greedy_ids": greedy,
        "greedy_top2_margins": margins, "logits": "logits.npy", "logits_shape": list(logits.shape),
        "adapters": adapters,
        "command": "python3 tools/make_fixtures.py --out tests/fixtures --only llama_lora --llama-cpp LLAMA_CPP_SOURCE",
    }
    with open(os.path.join(d, "fixture.json"), "w") as f:
        json.dump(meta, f, indent=1)
    gen_cfg = os.path.join(d, "generation_config.json")
    if os.path.exists(gen_cfg):
        os.remove(gen_cfg)
    if llama_cpp:
        import subprocess
        subprocess.run([sys.executable, os.path.join(llama_cpp, "convert_lora_to_gguf.py"), "--base", d, "--outtype", "f32",
                        "--outfile", os.path.join(d, "adapters", "a1.gguf"), os.path.join(d, "adapters", "a1")], check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--llama-cpp", default=None, help="llama.cpp's source: also write the GGUF LoRA fixture")
    args = ap.parse_args()
    torch.set_num_threads(8)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    fams = configs()
    only = [f for f in args.only.split(",") if f]
    failed = []
    for i, (family, make) in enumerate(fams.items()):
        if only and family not in only:
            continue
        try:
            build(family, make, args.out, seed=1000 + i)
        except Exception as e:  # report every family, then fail
            failed.append(family)
            print(f"{family}: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
    extras = {"llama_lora": lambda out, seed: build_lora(out, seed, args.llama_cpp)}  # after the families: seeds kept
    for j, (name, build_extra) in enumerate(extras.items()):
        if only and name not in only:
            continue
        try:
            build_extra(args.out, seed=1000 + len(fams) + j)
        except Exception as e:
            failed.append(name)
            print(f"{name}: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
