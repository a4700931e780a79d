#!/usr/bin/python3
"""Writes the demo model (models/demo, a Hugging Face Qwen3-MoE checkpoint) as an f32 GGUF file
that llama.cpp's llama-server loads, so `locus bench sweep` can compare both servers on the same
model and machine (tools/llama_cpp/README.md).

  /usr/bin/python3 tools/llama_cpp/demo_to_gguf.py --llama-cpp DIR --model models/demo \
      --out build/llama_cpp/demo-f32.gguf

DIR is a llama.cpp source tree (its gguf-py package writes the file). f32 weights, because the
checkpoint's bf16 values are exact in f32 and locus's CPU backend computes in f32 too: both
servers then run the same numbers. Written by us for this one architecture (llama.cpp's
convert_hf_to_gguf.py needs transformers, which Debian does not package); the keys and tensor
names follow that script's Qwen3MoeModel.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np


def read_safetensors(path):
    """name -> f32 numpy array (bf16 / f32 checkpoints)."""
    with open(path, "rb") as f:
        header_len = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_len))
        base = 8 + header_len
        out = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            f.seek(base + begin)
            raw = f.read(end - begin)
            if info["dtype"] == "BF16":
                bits = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
                arr = bits.view(np.float32)
            elif info["dtype"] == "F32":
                arr = np.frombuffer(raw, dtype=np.float32)
            else:
                sys.exit("%s: dtype %s not handled" % (name, info["dtype"]))
            out[name] = arr.reshape(info["shape"]).copy()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", required=True, help="llama.cpp source tree (for gguf-py)")
    ap.add_argument("--model", required=True, help="the Hugging Face model directory")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.llama_cpp, "gguf-py"))
    import gguf  # noqa: E402  (from the llama.cpp tree named above)

    cfg = json.load(open(os.path.join(args.model, "config.json")))
    if cfg.get("model_type") != "qwen3_moe":
        sys.exit("only qwen3_moe checkpoints are handled, not %s" % cfg.get("model_type"))
    tok = json.load(open(os.path.join(args.model, "tokenizer.json")))
    weights = read_safetensors(os.path.join(args.model, "model.safetensors"))
    layers = cfg["num_hidden_layers"]
    experts = cfg["num_experts"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]

    w = gguf.GGUFWriter(args.out, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.QWEN3MOE])
    w.add_name("locus demo")
    w.add_block_count(layers)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_freq_base(cfg.get("rope_theta", cfg.get("rope_parameters", {}).get("rope_theta")))
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_expert_count(experts)
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)

    # Vocabulary in id order: the BPE vocab plus the added (special) tokens.
    size = max(max(tok["model"]["vocab"].values()), max(t["id"] for t in tok["added_tokens"])) + 1
    tokens = [None] * size
    types = [gguf.TokenType.NORMAL] * size
    for text, i in tok["model"]["vocab"].items():
        tokens[i] = text
    for t in tok["added_tokens"]:
        tokens[t["id"]] = t["content"]
        types[t["id"]] = gguf.TokenType.CONTROL if t["special"] else gguf.TokenType.USER_DEFINED
    if any(t is None for t in tokens):
        sys.exit("the vocabulary has holes")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")  # HF ByteLevel with its default GPT-2 split regex
    w.add_token_list(tokens)
    w.add_token_types(types)
    gguf.SpecialVocab(args.model, load_merges=True).add_to_gguf(w)  # merges, eos/pad, template

    def put(name, arr):
        w.add_tensor(name, np.ascontiguousarray(arr, dtype=np.float32))

    put("token_embd.weight", weights["model.embed_tokens.weight"])
    put("output_norm.weight", weights["model.norm.weight"])
    put("output.weight", weights["lm_head.weight"])
    for i in range(layers):
        p = "model.layers.%d." % i
        b = "blk.%d." % i
        put(b + "attn_norm.weight", weights[p + "input_layernorm.weight"])
        put(b + "ffn_norm.weight", weights[p + "post_attention_layernorm.weight"])
        for hf, gg in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"),
                       ("o_proj", "attn_output")):
            put(b + gg + ".weight", weights[p + "self_attn.%s.weight" % hf])
        put(b + "attn_q_norm.weight", weights[p + "self_attn.q_norm.weight"])
        put(b + "attn_k_norm.weight", weights[p + "self_attn.k_norm.weight"])
        put(b + "ffn_gate_inp.weight", weights[p + "mlp.gate.weight"])
        for hf, gg in (("gate_proj", "ffn_gate_exps"), ("up_proj", "ffn_up_exps"),
                       ("down_proj", "ffn_down_exps")):
            put(b + gg + ".weight",
                np.stack([weights[p + "mlp.experts.%d.%s.weight" % (e, hf)] for e in range(experts)]))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote %s (%d tensors, %.1f MB)" % (args.out, 3 + layers * 12, os.path.getsize(args.out) / 1e6))


if __name__ == "__main__":
    main()
