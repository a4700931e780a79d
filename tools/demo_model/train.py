#!/usr/bin/env python3
"""Train the locus demo tokenizer + Qwen3-MoE model and write a Hugging Face checkpoint.

Runs on the GPU machine (torch 2.x + transformers 5.x + tokenizers + safetensors):

  python tools/demo_model/train.py --data build/demo_data --out OUT --seed 0 [--steps N]

Writes to OUT:
  tokenizer.json, tokenizer_config.json      byte-level BPE (4096), ChatML template
  config.json, generation_config.json        Qwen3MoeForCausalLM
  model.safetensors                          bf16, canonical HF names, one tensor per expert
  reference.json                             val perplexity, greedy continuations, logprobs

Order of work (cheap checks first so a broken environment fails in seconds):
  tokenizer -> chat template check -> model build -> expert layout detection ->
  checkpoint save/load self-test on the untrained model -> training -> save ->
  round-trip check -> reference outputs.
"""

import argparse
import json
import math
import os
import random
import re
import sys
import time

from expert_layout import candidate_layouts, from_canonical, reference_moe, to_canonical

T0 = time.time()

EOT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [EOT, IM_START, IM_END]  # ids 0, 1, 2

VOCAB = 4096
HIDDEN = 256
LAYERS = 4
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 64
INTERMEDIATE = 512
MOE_INTER = 128
EXPERTS = 16
TOPK = 2
MAX_POS = 512
ROPE_THETA = 10000.0
RMS_EPS = 1e-6
AUX_COEF = 0.01
SEQ = 256
BATCH = 64
MAX_PARAMS = 10_000_000

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

PLAIN_PROMPTS = ["In the beginning", "And the LORD said unto Moses,", "Blessed are the"]
CHAT_WORDS = ["river", "happy", "bread"]
GREEDY_NEW_TOKENS = 24
VAL_WINDOWS = 16


def log(*a):
    print("[%7.1fs]" % (time.time() - T0), *a, flush=True)


def die(msg):
    print("\n*** train.py FAILED: %s\n" % msg, file=sys.stderr, flush=True)
    sys.exit(1)


def render_chat(messages, add_generation_prompt):
    """Reference (pure Python) rendering of CHAT_TEMPLATE."""
    s = "".join("%s%s\n%s%s\n" % (IM_START, m["role"], m["content"], IM_END) for m in messages)
    if add_generation_prompt:
        s += IM_START + "assistant\n"
    return s




def expected_canonical_shapes():
    s = {"model.embed_tokens.weight": (VOCAB, HIDDEN), "model.norm.weight": (HIDDEN,),
         "lm_head.weight": (VOCAB, HIDDEN)}
    for i in range(LAYERS):
        p = "model.layers.%d." % i
        s[p + "input_layernorm.weight"] = (HIDDEN,)
        s[p + "post_attention_layernorm.weight"] = (HIDDEN,)
        s[p + "self_attn.q_proj.weight"] = (HEADS * HEAD_DIM, HIDDEN)
        s[p + "self_attn.k_proj.weight"] = (KV_HEADS * HEAD_DIM, HIDDEN)
        s[p + "self_attn.v_proj.weight"] = (KV_HEADS * HEAD_DIM, HIDDEN)
        s[p + "self_attn.o_proj.weight"] = (HIDDEN, HEADS * HEAD_DIM)
        s[p + "self_attn.q_norm.weight"] = (HEAD_DIM,)
        s[p + "self_attn.k_norm.weight"] = (HEAD_DIM,)
        s[p + "mlp.gate.weight"] = (EXPERTS, HIDDEN)
        for e in range(EXPERTS):
            s[p + "mlp.experts.%d.gate_proj.weight" % e] = (MOE_INTER, HIDDEN)
            s[p + "mlp.experts.%d.up_proj.weight" % e] = (MOE_INTER, HIDDEN)
            s[p + "mlp.experts.%d.down_proj.weight" % e] = (HIDDEN, MOE_INTER)
    return s


def check_canonical(canon):
    exp = expected_canonical_shapes()
    missing = sorted(set(exp) - set(canon))
    extra = sorted(set(canon) - set(exp))
    if missing or extra:
        raise ValueError("canonical key mismatch: missing=%s extra=%s" % (missing[:10], extra[:10]))
    for k, shp in exp.items():
        if tuple(canon[k].shape) != shp:
            raise ValueError("%s has shape %s, expected %s" % (k, tuple(canon[k].shape), shp))


# =============================================================================
def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="dir with corpus_train.txt / corpus_val.txt")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--experts-impl", default="auto", choices=["auto", "eager", "grouped_mm", "batched_mm"],
                    help="transformers experts backend for TRAINING (reference always uses eager)")
    return ap.parse_args()


def main():
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)

    # ---------------------------------------------------------------- imports
    try:
        import numpy as np
        import torch
        import torch.nn.functional as F
        import tokenizers
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
        import safetensors
        from safetensors.torch import load_file, save_file
        import transformers
        from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
    except Exception as e:  # noqa: BLE001
        die("import failed: %r (need torch, numpy, tokenizers, safetensors, transformers>=4.51)" % (e,))
    log("python", sys.version.split()[0], "| torch", torch.__version__, "| transformers", transformers.__version__,
        "| tokenizers", tokenizers.__version__, "| safetensors", getattr(safetensors, "__version__", "?"))

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        die("--device %s requested but torch.cuda.is_available() is False" % args.device)
    dev = torch.device(args.device)
    if dev.type == "cuda":
        log("gpu:", torch.cuda.get_device_name(dev))
    # exact fp32 matmuls for every fp32 computation (training itself runs under bf16 autocast)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(args.seed)

    # ------------------------------------------------------------------ data
    def read_docs(name):
        path = os.path.join(args.data, name)
        if not os.path.exists(path):
            die("missing %s (run tools/demo_model/prepare_data.py first)" % path)
        with open(path, "r", encoding="utf-8") as f:
            text = f.read()
        docs = [d for d in text.split(EOT) if d]
        log("read %s: %d bytes, %d docs" % (path, len(text.encode()), len(docs)))
        return docs

    train_docs = read_docs("corpus_train.txt")
    val_docs = read_docs("corpus_val.txt")

    # ------------------------------------------------------------- tokenizer
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, min_frequency=2, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    special_re = re.compile("|".join(re.escape(s) for s in SPECIAL_TOKENS))

    def bpe_iter():
        # specials are split out so no merges are spent on their spellings
        for d in train_docs:
            for piece in special_re.split(d):
                if piece:
                    yield piece

    tok.train_from_iterator(bpe_iter(), trainer=trainer)
    for i, s in enumerate(SPECIAL_TOKENS):
        if tok.token_to_id(s) != i:
            die("special token %s has id %s, expected %d" % (s, tok.token_to_id(s), i))
    vsize = tok.get_vocab_size()
    log("tokenizer trained: vocab %d" % vsize)
    if vsize > VOCAB:
        die("tokenizer vocab %d > %d" % (vsize, VOCAB))
    if vsize < VOCAB:
        log("WARNING: tokenizer vocab %d < %d (model keeps %d rows)" % (vsize, VOCAB, VOCAB))
    probe = IM_START + 'user\nWhat does "river" mean?' + IM_END + "\n" + EOT + "In the beginning"
    enc = tok.encode(probe)
    if enc.ids[0] != 1 or 2 not in enc.ids or 0 not in enc.ids:
        die("special tokens are split by the tokenizer: %s" % enc.tokens[:12])
    if tok.decode(enc.ids, skip_special_tokens=False) != probe:
        die("tokenizer decode round trip failed: %r" % tok.decode(enc.ids, skip_special_tokens=False))
    tok.save(os.path.join(args.out, "tokenizer.json"))
    im_end_id = tok.token_to_id(IM_END)
    eot_id = tok.token_to_id(EOT)
    tok_cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": IM_END,
        "pad_token": EOT,
        "unk_token": None,
        "model_max_length": MAX_POS,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump(tok_cfg, f, indent=2)
        f.write("\n")

    # chat template: pure-python rendering must equal jinja2 and transformers' rendering
    chat_msgs = [[{"role": "user", "content": 'What does "%s" mean?' % w}] for w in CHAT_WORDS]
    chat_texts = [render_chat(m, True) for m in chat_msgs]
    try:
        import jinja2
        for trim in (False, True):
            env = jinja2.Environment(trim_blocks=trim, lstrip_blocks=trim)
            tmpl = env.from_string(CHAT_TEMPLATE)
            for m, want in zip(chat_msgs, chat_texts):
                got = tmpl.render(messages=m, add_generation_prompt=True)
                if got != want:
                    die("chat template (jinja2 trim=%s) renders %r, expected %r" % (trim, got, want))
            two = chat_msgs[0] + [{"role": "assistant", "content": "x"}]
            if tmpl.render(messages=two, add_generation_prompt=False) != render_chat(two, False):
                die("chat template multi-turn rendering mismatch")
        log("chat template: jinja2 rendering OK")
    except ImportError:
        log("WARNING: jinja2 not importable; skipped direct template check")
    try:
        from transformers import PreTrainedTokenizerFast
        hf_tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(args.out, "tokenizer.json"))
        hf_tok.chat_template = CHAT_TEMPLATE
        for m, want in zip(chat_msgs, chat_texts):
            got = hf_tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True)
            if got != want:
                die("transformers apply_chat_template renders %r, expected %r" % (got, want))
            if list(hf_tok(want, add_special_tokens=False)["input_ids"]) != tok.encode(want).ids:
                die("transformers tokenizer ids differ from tokenizers ids for %r" % want)
        log("chat template: transformers apply_chat_template OK")
    except SystemExit:
        raise
    except Exception as e:  # noqa: BLE001
        log("WARNING: transformers tokenizer check skipped: %r" % (e,))
    try:
        from transformers import AutoTokenizer
        at = AutoTokenizer.from_pretrained(args.out)
        got = at.apply_chat_template(chat_msgs[0], tokenize=False, add_generation_prompt=True)
        log("AutoTokenizer.from_pretrained(out): %s, eos=%r pad=%r bos=%r, template %s"
            % (type(at).__name__, at.eos_token, at.pad_token, at.bos_token, "OK" if got == chat_texts[0] else "MISMATCH"))
        if got != chat_texts[0]:
            die("AutoTokenizer chat template mismatch: %r" % got)
    except SystemExit:
        raise
    except Exception as e:  # noqa: BLE001
        log("WARNING: AutoTokenizer.from_pretrained(out) failed: %r" % (e,))

    def stream(docs):
        ids = []
        for enc in tok.encode_batch(docs):
            ids.extend(enc.ids)
            ids.append(eot_id)
        return np.asarray(ids, dtype=np.int64)

    train_np = stream(train_docs)
    val_np = stream(val_docs)
    log("train stream %d tokens (%.2f bytes/token), val stream %d tokens"
        % (len(train_np), sum(len(d.encode()) for d in train_docs) / len(train_np), len(val_np)))
    if len(val_np) < VAL_WINDOWS * SEQ:
        die("val stream too short: %d < %d" % (len(val_np), VAL_WINDOWS * SEQ))
    train_ids = torch.from_numpy(train_np).to(dev)
    val_windows = torch.from_numpy(val_np[: VAL_WINDOWS * SEQ].reshape(VAL_WINDOWS, SEQ).copy())

    # ----------------------------------------------------------------- model
    base_kw = dict(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, hidden_act="silu",
        max_position_embeddings=MAX_POS, initializer_range=0.02, rms_norm_eps=RMS_EPS, use_cache=True,
        tie_word_embeddings=False, attention_bias=False, use_sliding_window=False, attention_dropout=0.0,
        decoder_sparse_step=1, moe_intermediate_size=MOE_INTER, num_experts_per_tok=TOPK, num_experts=EXPERTS,
        norm_topk_prob=True, output_router_logits=True, router_aux_loss_coef=AUX_COEF, mlp_only_layers=[],
        pad_token_id=eot_id, bos_token_id=None, eos_token_id=im_end_id,
    )
    rope_params = {"rope_type": "default", "rope_theta": ROPE_THETA}
    attempts = [
        ("head_dim+rope_parameters", dict(base_kw, head_dim=HEAD_DIM, rope_parameters=rope_params)),
        ("rope_parameters", dict(base_kw, rope_parameters=rope_params)),
        ("head_dim+rope_theta", dict(base_kw, head_dim=HEAD_DIM, rope_theta=ROPE_THETA)),
        ("rope_theta", dict(base_kw, rope_theta=ROPE_THETA)),
    ]
    config = None
    errs = []
    for name, kw in attempts:
        try:
            config = Qwen3MoeConfig(**kw)
            log("Qwen3MoeConfig built with", name)
            break
        except Exception as e:  # noqa: BLE001
            errs.append("%s: %r" % (name, e))
    if config is None:
        die("could not build Qwen3MoeConfig:\n  " + "\n  ".join(errs))

    def build_model():
        torch.manual_seed(args.seed)
        m = Qwen3MoeForCausalLM(config)
        m = m.to(dtype=torch.float32)
        return m

    def set_experts_impl(m, name):
        if hasattr(m, "set_experts_implementation"):
            try:
                m.set_experts_implementation(name)
                return True
            except Exception as e:  # noqa: BLE001
                log("WARNING: set_experts_implementation(%r) failed: %r" % (name, e))
                return False
        return name == "eager"  # old transformers: per-expert modules only

    model = build_model()
    log("model class tree (layer 0):", type(model.model.layers[0].mlp).__name__,
        type(getattr(model.model.layers[0].mlp, "experts", None)).__name__,
        type(getattr(model.model.layers[0].mlp, "gate", None)).__name__)
    if hasattr(model, "get_experts_implementation"):
        try:
            log("default experts implementation:", model.get_experts_implementation())
        except Exception as e:  # noqa: BLE001
            log("get_experts_implementation failed: %r" % (e,))
    set_experts_impl(model, "eager")

    # sanity: parameter init (v5 may leave torch.empty/zeros params if init is skipped)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if not torch.isfinite(p).all():
                log("WARNING: non-finite init in %s; re-initialising N(0, 0.02)" % n)
                p.normal_(0.0, 0.02)
            elif p.dim() >= 2 and float(p.float().std()) < 1e-6:
                log("WARNING: constant init in %s; re-initialising N(0, 0.02)" % n)
                p.normal_(0.0, 0.02)

    n_params = sum(p.numel() for p in model.parameters())
    log("parameters: %d (%.3fM)" % (n_params, n_params / 1e6))
    if n_params > MAX_PARAMS:
        die("parameter count %d exceeds %d" % (n_params, MAX_PARAMS))

    # rope check: inv_freq must be 1/theta^(2i/d) with d=64, theta=1e4
    inv = [(n, b) for n, b in model.named_buffers() if n.endswith("inv_freq")]
    if not inv:
        log("WARNING: no inv_freq buffer found; rope theta unchecked")
    want_inv = 1.0 / (ROPE_THETA ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float64) / HEAD_DIM))
    for n, b in inv:
        if b.numel() != want_inv.numel() or not torch.allclose(b.double().cpu(), want_inv, rtol=1e-5):
            die("rotary buffer %s does not match head_dim=%d theta=%g: %s" % (n, HEAD_DIM, ROPE_THETA, b[:4]))
    attn0 = model.model.layers[0].self_attn
    hd = getattr(attn0, "head_dim", HEAD_DIM)
    if hd != HEAD_DIM:
        die("attention head_dim is %s, expected %d" % (hd, HEAD_DIM))
    log("rope/head_dim check OK (%d inv_freq buffers)" % len(inv))

    model.to(dev)
    model.eval()
    mem_shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    mem_keys = list(mem_shapes)
    log("in-memory layer-0 MoE tensors:",
        {k: v for k, v in mem_shapes.items() if k.startswith("model.layers.0.mlp.") and ".experts.1" not in k
         and not re.match(r".*experts\.\d{1,2}\.", k)})

    # ------------------------------------------- expert layout (semantic check)
    try:
        cands = candidate_layouts(mem_shapes, EXPERTS, HIDDEN, MOE_INTER)
    except ValueError as e:
        die(str(e))
    sd_dev = model.state_dict()
    g = torch.Generator(device="cpu").manual_seed(1234)
    x = torch.randn(1, 40, HIDDEN, generator=g).to(dev)
    with torch.no_grad():
        y = model.model.layers[0].mlp(x)
    if isinstance(y, tuple):
        y = y[0]
    y = y.reshape(-1, HIDDEN).float()
    scale = float(y.abs().max())
    matches = []
    with torch.no_grad():
        for c in cands:
            canon0 = to_canonical(sd_dev, c, EXPERTS, MOE_INTER, layers={0})
            yr = reference_moe(x.reshape(-1, HIDDEN), canon0, 0, EXPERTS, TOPK, True)
            err = float((yr - y).abs().max()) / max(scale, 1e-12)
            log("  layout %s: rel err %.3e" % (c, err))
            if err < 1e-4:
                matches.append(c)
    if not matches:
        die("no expert layout reproduces the MoE block output; refusing to write a checkpoint")
    layout = matches[0]
    if len(matches) > 1:
        log("WARNING: %d layouts matched; using %s" % (len(matches), layout))
    log("expert layout:", layout)

    # ------------------------------------ checkpoint helpers + self-test (untrained)
    def save_checkpoint(m, path):
        sd = {k: v.detach().to("cpu", torch.float32) for k, v in m.state_dict().items()}
        canon = to_canonical(sd, layout, EXPERTS, MOE_INTER)
        check_canonical(canon)
        canon = {k: v.to(torch.bfloat16).contiguous() for k, v in canon.items()}
        save_file(canon, path, metadata={"format": "pt"})
        return canon

    def load_checkpoint(path):
        loaded = {k: v.to(torch.float32) for k, v in load_file(path).items()}
        check_canonical(loaded)
        fresh = build_model()
        set_experts_impl(fresh, "eager")
        mem = from_canonical(loaded, layout, mem_keys, EXPERTS)
        res = fresh.load_state_dict(mem, strict=False)
        bad_missing = [k for k in res.missing_keys if "rotary_emb" not in k]
        if bad_missing or res.unexpected_keys:
            raise RuntimeError("load_state_dict: missing=%s unexpected=%s" % (bad_missing[:8], res.unexpected_keys[:8]))
        return fresh.to(dev).eval()

    def logits_of(m, ids):
        with torch.no_grad():
            return m(input_ids=ids.to(dev), use_cache=False).logits.float()

    def roundtrip_check(m, path, tag):
        """m's weights rounded to bf16 must give the same logits as the reloaded checkpoint."""
        reloaded = load_checkpoint(path)
        with torch.no_grad():
            for p in m.parameters():
                p.data = p.data.to(torch.bfloat16).to(torch.float32)
        m.eval()
        set_experts_impl(m, "eager")
        ids = val_windows[:4]
        d = float((logits_of(m, ids) - logits_of(reloaded, ids)).abs().max())
        log("%s round-trip max |logit diff| = %.3e" % (tag, d))
        if not d < 1e-4:
            die("%s checkpoint round trip failed: max abs logit diff %.3e >= 1e-4" % (tag, d))
        return reloaded

    tmp_path = os.path.join(args.out, "selftest.safetensors")
    try:
        save_checkpoint(model, tmp_path)
        st = build_model()  # identical init (same seed) used as the "trained" model stand-in
        set_experts_impl(st, "eager")
        st.load_state_dict(model.state_dict())
        st.to(dev)
        roundtrip_check(st, tmp_path, "self-test (untrained)")
        del st
    except SystemExit:
        raise
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        die("checkpoint self-test failed: %r" % (e,))
    finally:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)

    # ------------------------------------------------ experts backend for training
    impl = "eager"
    choices = ["grouped_mm", "eager"] if args.experts_impl == "auto" else [args.experts_impl]
    probe_ids = train_ids[:2 * SEQ].reshape(2, SEQ)
    with torch.no_grad():
        set_experts_impl(model, "eager")
        ref_logits = logits_of(model, probe_ids)
    for cand in choices:
        if cand == "eager":
            impl = "eager"
            break
        if not set_experts_impl(model, cand):
            continue
        try:
            model.train()
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
                out = model(input_ids=probe_ids, use_cache=False)
            out.logits.float().mean().backward()
            model.zero_grad(set_to_none=True)
            model.eval()
            d = float((logits_of(model, probe_ids) - ref_logits).abs().max())
            if d > 1e-2:
                raise RuntimeError("fp32 logits differ from eager by %.3e" % d)
            impl = cand
            break
        except Exception as e:  # noqa: BLE001
            log("experts backend %s unusable for training (%r); trying next" % (cand, e))
            model.zero_grad(set_to_none=True)
            set_experts_impl(model, "eager")
    set_experts_impl(model, impl)
    log("training experts backend:", impl)

    # ---------------------------------------------------------------- training
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.dim() >= 2 else no_decay).append(p)
    opt_kw = dict(lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        opt = torch.optim.AdamW(groups, fused=(dev.type == "cuda"), **opt_kw)
    except Exception:  # noqa: BLE001
        opt = torch.optim.AdamW(groups, **opt_kw)

    def lr_at(step):
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        t = (step - args.warmup) / max(1, args.steps - args.warmup)
        return args.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, t))))

    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    offs = torch.arange(SEQ, device=dev)
    n_tok = train_ids.numel()
    torch.manual_seed(args.seed)
    model.train()
    acc = torch.zeros((), device=dev)
    acc_aux = torch.zeros((), device=dev)
    acc_n = 0
    final_loss = float("nan")
    warned_aux = False
    t_train = time.time()
    t_mark = None
    log("training: %d steps, batch %d x %d tokens, lr %g, warmup %d" % (args.steps, BATCH, SEQ, args.lr, args.warmup))
    for step in range(args.steps):
        for gparam in opt.param_groups:
            gparam["lr"] = lr_at(step)
        starts = torch.randint(0, n_tok - SEQ, (BATCH,), generator=gen).to(dev, non_blocking=True)
        xb = train_ids[starts[:, None] + offs[None, :]]
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
            out = model(input_ids=xb, use_cache=False)
        logits = out.logits
        lm = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(), xb[:, 1:].reshape(-1))
        aux = getattr(out, "aux_loss", None)
        if aux is None:
            if not warned_aux:
                log("WARNING: model returned no aux_loss; training without router balancing loss")
                warned_aux = True
            loss = lm
        else:
            loss = lm + AUX_COEF * aux.float()
            acc_aux += aux.detach().float()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        acc += lm.detach()
        acc_n += 1
        if step == 9:
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t_mark = time.time()
        if step == 59 and t_mark is not None:
            if dev.type == "cuda":
                torch.cuda.synchronize()
            sps = 50.0 / (time.time() - t_mark)
            log("speed: %.2f steps/s -> projected training time %.0fs for %d steps"
                % (sps, args.steps / sps, args.steps))
        if (step + 1) % 100 == 0 or step + 1 == args.steps:
            final_loss = float(acc) / acc_n
            msg = "step %5d/%d  loss %.4f  lr %.2e" % (step + 1, args.steps, final_loss, lr_at(step))
            if not warned_aux:
                msg += "  aux %.4f" % (float(acc_aux) / acc_n)
            log(msg)
            if not math.isfinite(final_loss):
                die("training loss is not finite")
            acc.zero_()
            acc_aux.zero_()
            acc_n = 0
    if dev.type == "cuda":
        torch.cuda.synchronize()
    train_secs = time.time() - t_train
    log("training done in %.1fs, final train loss %.4f" % (train_secs, final_loss))

    # -------------------------------------------------------------------- save
    model.eval()
    set_experts_impl(model, "eager")
    st_path = os.path.join(args.out, "model.safetensors")
    canon = save_checkpoint(model, st_path)
    log("saved %s (%d tensors, %d bytes)" % (st_path, len(canon), os.path.getsize(st_path)))
    print("checkpoint keys:")
    for k in sorted(canon, key=lambda s: [int(t) if t.isdigit() else t for t in s.split(".")]):
        print("  %-52s %s %s" % (k, list(canon[k].shape), str(canon[k].dtype).replace("torch.", "")))

    cfg = config.to_dict()
    cfg = {k: v for k, v in cfg.items() if v is not None and not k.startswith("_")}
    for k, v in base_kw.items():
        if v is not None:
            cfg[k] = v
    cfg.pop("bos_token_id", None)
    cfg.update({
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "torch_dtype": "bfloat16",
        "dtype": "bfloat16",
        "head_dim": HEAD_DIM,
        "rope_theta": ROPE_THETA,
        "num_experts": EXPERTS,
        "transformers_version": transformers.__version__,
    })
    if "rope_parameters" in cfg or hasattr(config, "rope_parameters"):
        cfg["rope_parameters"] = dict(rope_params)
    if "num_local_experts" in cfg:
        cfg["num_local_experts"] = EXPERTS
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True, default=str)
        f.write("\n")
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": [im_end_id, eot_id], "pad_token_id": eot_id, "do_sample": False}, f, indent=2)
        f.write("\n")

    # ------------------------------------------------------ round trip (trained)
    ref_model = roundtrip_check(model, st_path, "trained")
    del model
    if dev.type == "cuda":
        torch.cuda.empty_cache()

    # optional: transformers' own loader on the written directory (report only)
    hf_check = "skipped"
    try:
        from transformers import AutoModelForCausalLM
        hf = AutoModelForCausalLM.from_pretrained(args.out, dtype=torch.float32)
        set_experts_impl(hf, "eager")
        hf.to(dev).eval()
        d = float((logits_of(hf, val_windows[:2]) - logits_of(ref_model, val_windows[:2])).abs().max())
        hf_check = "ok (max |logit diff| %.3e)" % d if d < 1e-4 else "MISMATCH (max |logit diff| %.3e)" % d
        del hf
    except Exception as e:  # noqa: BLE001
        hf_check = "error: %r" % (e,)
    log("AutoModelForCausalLM.from_pretrained(out) check:", hf_check)

    # --------------------------------------------------------------- reference
    with torch.no_grad():
        lg = logits_of(ref_model, val_windows)
        lp = torch.log_softmax(lg[:, :-1], dim=-1)
        tgt = val_windows[:, 1:].to(dev)
        nll = -lp.gather(-1, tgt[..., None]).squeeze(-1)
        val_ppl = math.exp(float(nll.double().mean()))
    log("val perplexity (%d windows x %d): %.4f" % (VAL_WINDOWS, SEQ, val_ppl))

    stop_ids = {im_end_id, eot_id}

    def greedy(prompt_ids):
        ids = list(prompt_ids)
        new = []
        for _ in range(GREEDY_NEW_TOKENS):
            lgt = logits_of(ref_model, torch.tensor([ids], dtype=torch.long))[0, -1]
            nxt = int(torch.argmax(lgt))
            ids.append(nxt)
            new.append(nxt)
            if nxt in stop_ids:
                break
        return new

    greedy_out = []
    prompt_lps = []
    for p in PLAIN_PROMPTS:
        ids = tok.encode(p).ids
        new = greedy(ids)
        greedy_out.append({"kind": "text", "prompt": p, "prompt_ids": ids, "output_ids": new,
                           "output_text": tok.decode(new, skip_special_tokens=False)})
        with torch.no_grad():
            lgp = torch.log_softmax(logits_of(ref_model, torch.tensor([ids]))[0], dim=-1)
        lps = [float(lgp[i - 1, ids[i]]) for i in range(1, len(ids))]
        prompt_lps.append({"prompt": p, "prompt_ids": ids, "logprobs": lps})
    for m, text in zip(chat_msgs, chat_texts):
        ids = tok.encode(text).ids
        new = greedy(ids)
        greedy_out.append({"kind": "chat", "messages": m, "prompt": text, "prompt_ids": ids, "output_ids": new,
                           "output_text": tok.decode(new, skip_special_tokens=False)})

    ref = {
        "model": "locus demo Qwen3-MoE (4 layers, 16 experts, top-2)",
        "seed": args.seed,
        "steps": args.steps,
        "final_train_loss": final_loss,
        "param_count": n_params,
        "val_perplexity": val_ppl,
        "val_windows": val_windows.tolist(),
        "val_window_len": SEQ,
        "greedy_max_new_tokens": GREEDY_NEW_TOKENS,
        "greedy": greedy_out,
        "prompt_logprobs": prompt_lps,
        "compute": "float32 (bf16 weights upcast), eval mode, TF32 off, device %s" % dev.type,
        "expert_layout_in_memory": layout,
        "training_experts_backend": impl,
        "hf_from_pretrained_check": hf_check,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "train_seconds": round(train_secs, 1),
        "wall_seconds": round(time.time() - T0, 1),
    }
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")

    # ----------------------------------------------------------------- summary
    print("\n===== summary =====")
    print("params          : %d (%.2fM)" % (n_params, n_params / 1e6))
    print("model.safetensors: %.2f MB" % (os.path.getsize(st_path) / 1e6))
    print("final train loss: %.4f" % final_loss)
    print("val perplexity  : %.3f" % val_ppl)
    print("HF loader check : %s" % hf_check)
    for gout in greedy_out:
        print("  %-40r -> %r" % (gout["prompt"][-40:], gout["output_text"]))
    print("wall time       : %.1fs (training %.1fs)" % (time.time() - T0, train_secs))
    print("outputs in      :", os.path.abspath(args.out))


if __name__ == "__main__":
    main()
