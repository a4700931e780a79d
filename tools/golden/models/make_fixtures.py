#!/usr/bin/env python3
"""Tiny random checkpoints + golden logits for the model-parity tests (issue #4).

Runs where torch + transformers exist (the GPU machine: transformers 5.x). For each architecture it
builds a tiny model with every feature of the family switched on, rounds the weights to bf16,
saves it with save_pretrained (the Hugging Face checkpoint format), loads it back with
from_pretrained in float32 and records, for a few prompts of unequal lengths:
  prompt.<i>  int32 [L]        the prompt token ids
  logits.<i>  float32 [L, V]   logits at every position, the prompt run alone
  greedy.<i>  int32 [32]       greedy continuation (argmax, full recompute each step)
  margin.<i>  float32 [32]     top-1 minus top-2 logit at each greedy step (a near-tie warning)
into golden.safetensors next to config.json and model.safetensors. The fp8 variant stores
e4m3 weights with float32 weight_scale_inv per 128x128 block (DeepSeek-V3's format); its
reference runs on the dequantized weights.

Usage: python3 make_fixtures.py OUT_DIR [name ...]
"""
import copy
import inspect
import json
import os
import re
import shutil
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file

import transformers
from transformers import AutoModelForCausalLM

SEED = 1234
VOCAB = 512
PROMPT_LENGTHS = [1, 7, 19, 40]
GREEDY_TOKENS = 32
BLOCK = 128

# Every family with its features on. rope settings are given once in the legacy form
# (rope_theta / rope_scaling); make_config() converts them for configs that want rope_parameters.
MODELS = {
    "qwen3-moe": ("Qwen3MoeConfig", dict(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=192, moe_intermediate_size=64,
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=48,
        num_experts=8, num_experts_per_tok=2, norm_topk_prob=True, decoder_sparse_step=1,
        mlp_only_layers=[0], rms_norm_eps=1e-6, max_position_embeddings=256,
        tie_word_embeddings=False, rope_theta=10000.0)),
    "mixtral": ("MixtralConfig", dict(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=8, num_experts_per_tok=2,
        rms_norm_eps=1e-5, max_position_embeddings=256, tie_word_embeddings=False,
        rope_theta=1e6, sliding_window=None)),
    "glm4-moe": ("Glm4MoeConfig", dict(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=192, moe_intermediate_size=64,
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        partial_rotary_factor=0.5, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2,
        n_group=2, topk_group=1, routed_scaling_factor=2.5, norm_topk_prob=True,
        first_k_dense_replace=1, use_qk_norm=True, attention_bias=True, rms_norm_eps=1e-5,
        max_position_embeddings=256, tie_word_embeddings=False, rope_theta=1e6)),
    "minimax-m2": ("MiniMaxM2Config", dict(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, rotary_dim=16,
        partial_rotary_factor=0.5, num_local_experts=8, num_experts_per_tok=2,
        scoring_func="sigmoid", use_routing_bias=True, use_qk_norm=True, qk_norm_type="per_layer",
        rms_norm_eps=1e-6, max_position_embeddings=256, tie_word_embeddings=False,
        rope_theta=5e6)),
    "deepseek-v3": ("DeepseekV3Config", dict(
        vocab_size=VOCAB, hidden_size=256, intermediate_size=384, moe_intermediate_size=96,
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4, n_shared_experts=1,
        n_routed_experts=8, num_experts_per_tok=2, n_group=4, topk_group=2,
        routed_scaling_factor=2.5, norm_topk_prob=True, first_k_dense_replace=1,
        q_lora_rank=96, kv_lora_rank=64, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
        rms_norm_eps=1e-6, max_position_embeddings=256, tie_word_embeddings=False,
        rope_theta=10000.0,
        rope_scaling=dict(type="yarn", factor=4.0, original_max_position_embeddings=64,
                          beta_fast=32, beta_slow=1, mscale=1.0, mscale_all_dim=1.0))),
    "kimi-k2": ("DeepseekV3Config", dict(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=192, moe_intermediate_size=48,
        num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, n_shared_experts=1,
        n_routed_experts=16, num_experts_per_tok=4, n_group=1, topk_group=1,
        routed_scaling_factor=2.827, norm_topk_prob=True, first_k_dense_replace=1,
        q_lora_rank=64, kv_lora_rank=32, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
        rms_norm_eps=1e-6, max_position_embeddings=256, tie_word_embeddings=False,
        rope_theta=50000.0,
        rope_scaling=dict(type="yarn", factor=8.0, original_max_position_embeddings=32,
                          beta_fast=1, beta_slow=1, mscale=1.0, mscale_all_dim=1.0))),
    "deepseek-v2": ("DeepseekV2Config", dict(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=192, moe_intermediate_size=48,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, n_shared_experts=2,
        n_routed_experts=8, num_experts_per_tok=3, n_group=1, topk_group=1, topk_method="greedy",
        routed_scaling_factor=1.0, norm_topk_prob=False, first_k_dense_replace=1,
        q_lora_rank=None, kv_lora_rank=32, qk_nope_head_dim=32, qk_rope_head_dim=16,
        v_head_dim=32, rms_norm_eps=1e-6, max_position_embeddings=256,
        tie_word_embeddings=False, rope_theta=10000.0)),
}
FP8_VARIANTS = {"deepseek-v3-fp8": "deepseek-v3"}


def log(*a):
    print(*a, flush=True)


def make_config(class_name, kwargs):
    cls = getattr(transformers, class_name)
    kw = copy.deepcopy(kwargs)
    params = inspect.signature(cls.__init__).parameters
    if "rope_parameters" in params and "rope_theta" not in params:
        rp = {"rope_type": "default", "rope_theta": kw.pop("rope_theta")}
        scaling = kw.pop("rope_scaling", None)
        if scaling:
            scaling = dict(scaling)
            rp["rope_type"] = scaling.pop("type")
            rp.update(scaling)
        if "partial_rotary_factor" in kw and "partial_rotary_factor" not in params:
            rp["partial_rotary_factor"] = kw.pop("partial_rotary_factor")
        kw["rope_parameters"] = rp
    config = cls(**kw)
    config.architectures = [class_name.replace("Config", "ForCausalLM")]
    return config


def randomize(model, gen):
    with torch.no_grad():
        for name, p in list(model.named_parameters()) + list(model.named_buffers()):
            if not p.is_floating_point() or "inv_freq" in name or "rotary" in name:
                continue
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif "e_score_correction_bias" in name:
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))
            p.copy_(p.to(torch.bfloat16).to(torch.float32))


def pattern(key):
    return re.sub(r"\.\d+\.", ".N.", re.sub(r"\.\d+\.", ".N.", key))


def quantize_fp8(w):
    """Block-scaled e4m3 as DeepSeek-V3 ships it: q [out, in] e4m3, scale_inv [ceil(out/128), ceil(in/128)]."""
    out_f, in_f = w.shape
    rows, cols = (out_f + BLOCK - 1) // BLOCK, (in_f + BLOCK - 1) // BLOCK
    scale = torch.empty(rows, cols, dtype=torch.float32)
    q = torch.empty(out_f, in_f, dtype=torch.float8_e4m3fn)
    deq = torch.empty(out_f, in_f, dtype=torch.float32)
    for r in range(rows):
        for c in range(cols):
            blk = w[r * BLOCK:(r + 1) * BLOCK, c * BLOCK:(c + 1) * BLOCK].float()
            s = blk.abs().max().clamp(min=1e-12) / 448.0
            qb = (blk / s).to(torch.float8_e4m3fn)
            scale[r, c] = s
            q[r * BLOCK:(r + 1) * BLOCK, c * BLOCK:(c + 1) * BLOCK] = qb
            deq[r * BLOCK:(r + 1) * BLOCK, c * BLOCK:(c + 1) * BLOCK] = qb.float() * s
    return q, scale, deq


FP8_SKIP = ("norm", "embed_tokens", "lm_head", "mlp.gate.", "e_score_correction_bias")


def golden(model_dir, out_dir, gen):
    try:
        ref = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    except TypeError:
        ref = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    ref.eval()
    tensors, margins = {}, []
    with torch.no_grad():
        for i, length in enumerate(PROMPT_LENGTHS):
            ids = torch.randint(0, VOCAB, (length,), generator=gen)
            logits = ref(input_ids=ids[None]).logits[0].float()
            tensors[f"prompt.{i}"] = ids.to(torch.int32)
            tensors[f"logits.{i}"] = logits.contiguous()
            seq, toks, marg = ids.tolist(), [], []
            for _ in range(GREEDY_TOKENS):
                last = ref(input_ids=torch.tensor([seq])).logits[0, -1].float()
                top2 = torch.topk(last, 2)
                toks.append(int(top2.indices[0]))
                marg.append(float(top2.values[0] - top2.values[1]))
                seq.append(toks[-1])
            tensors[f"greedy.{i}"] = torch.tensor(toks, dtype=torch.int32)
            tensors[f"margin.{i}"] = torch.tensor(marg, dtype=torch.float32)
            margins.append(min(marg))
    meta = {"num_prompts": str(len(PROMPT_LENGTHS)), "greedy_tokens": str(GREEDY_TOKENS),
            "transformers_version": transformers.__version__, "torch_version": torch.__version__,
            "compute": "float32 on CPU, weights from model.safetensors"}
    save_file(tensors, os.path.join(out_dir, "golden.safetensors"), metadata=meta)
    return min(margins)


def build(name, class_name, kwargs, out_root, fp8_name=None):
    gen = torch.Generator().manual_seed(SEED)
    torch.manual_seed(SEED)
    config = make_config(class_name, kwargs)
    config.dtype = "bfloat16"
    try:
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    except TypeError:  # transformers 4.x spells it torch_dtype
        model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    randomize(model, gen)
    tmp = tempfile.mkdtemp()
    model.to(torch.bfloat16).save_pretrained(tmp)
    sd = load_file(os.path.join(tmp, "model.safetensors"))
    pats = sorted({pattern(k) + " " + str(tuple(v.shape)) for k, v in sd.items()})
    log(f"== {name}: {len(sd)} tensors; key patterns:\n  " + "\n  ".join(pats))
    log(open(os.path.join(tmp, "config.json")).read())
    out = os.path.join(out_root, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for f in ("config.json", "model.safetensors", "generation_config.json"):
        if os.path.exists(os.path.join(tmp, f)):
            shutil.copy(os.path.join(tmp, f), out)
    margin = golden(tmp, out, torch.Generator().manual_seed(SEED + 1))
    log(f"{name}: saved; smallest greedy top-2 margin {margin:.4g}")

    if fp8_name:
        q_sd, deq_sd = {}, {}
        for k, v in sd.items():
            if v.dim() == 2 and k.endswith(".weight") and not any(s in k for s in FP8_SKIP):
                q, s, deq = quantize_fp8(v.float())
                q_sd[k] = q
                q_sd[k[:-len("weight")] + "weight_scale_inv"] = s
                deq_sd[k] = deq
            else:
                q_sd[k] = v
                deq_sd[k] = v.float()
        fout = os.path.join(out_root, fp8_name)
        shutil.rmtree(fout, ignore_errors=True)
        os.makedirs(fout)
        save_file(q_sd, os.path.join(fout, "model.safetensors"), metadata={"format": "pt"})
        cfg = json.load(open(os.path.join(tmp, "config.json")))
        cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3",
                                      "activation_scheme": "dynamic",
                                      "weight_block_size": [BLOCK, BLOCK]}
        json.dump(cfg, open(os.path.join(fout, "config.json"), "w"), indent=2)
        dtmp = tempfile.mkdtemp()
        shutil.copy(os.path.join(tmp, "config.json"), dtmp)
        save_file(deq_sd, os.path.join(dtmp, "model.safetensors"), metadata={"format": "pt"})
        margin = golden(dtmp, fout, torch.Generator().manual_seed(SEED + 1))
        log(f"{fp8_name}: saved; smallest greedy top-2 margin {margin:.4g}")


def main():
    out_root = sys.argv[1]
    names = sys.argv[2:] or list(MODELS)
    log(f"transformers {transformers.__version__}, torch {torch.__version__}")
    torch.set_num_threads(8)
    failures = 0
    for name in names:
        class_name, kwargs = MODELS[name]
        fp8 = next((f for f, base in FP8_VARIANTS.items() if base == name), None)
        try:
            build(name, class_name, kwargs, out_root, fp8)
        except Exception as e:  # keep going: one family's failure must not hide the others
            import traceback
            traceback.print_exc()
            log(f"!! {name} failed: {e}")
            failures += 1
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
