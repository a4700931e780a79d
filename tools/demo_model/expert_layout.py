"""Expert weight layouts of the demo model: transformers may hold a Qwen3-MoE block's experts
fused in memory (gate_up_proj [E, 2I, H] or [E, H, 2I], down_proj 3D) or as one nn.Linear per
expert; the checkpoint always has the canonical Hugging Face names, one [out, in] matrix per
expert. Pure torch, so it is unit-testable without transformers (train.py imports it)."""

import re

# =============================================================================
# Expert weight layout helpers (pure torch; unit-testable without transformers)
# =============================================================================
# Canonical (saved) names, nn.Linear layout [out_features, in_features]:
#   model.layers.{i}.mlp.experts.{e}.gate_proj.weight  [I, H]
#   model.layers.{i}.mlp.experts.{e}.up_proj.weight    [I, H]
#   model.layers.{i}.mlp.experts.{e}.down_proj.weight  [H, I]
# In-memory variants handled:
#   "legacy":   the canonical names above (ModuleList of nn.Linear)
#   "gate_up":  model.layers.{i}.mlp.experts.gate_up_proj [E,2I,H] or [E,H,2I] (+ down_proj 3D)
#   "separate": model.layers.{i}.mlp.experts.gate_proj / up_proj 3D (+ down_proj 3D)
LEGACY_RE = re.compile(r"^model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")
FUSED_RE = re.compile(r"^model\.layers\.(\d+)\.mlp\.experts\.(gate_up_proj|gate_proj|up_proj|down_proj)(\.weight)?$")
GU_ORDERS = ("concat_gate_first", "concat_up_first", "interleave_gate_even", "interleave_up_even")


def expert_kind(keys):
    keys = list(keys)
    fused = [k for k in keys if FUSED_RE.match(k)]
    legacy = [k for k in keys if LEGACY_RE.match(k)]
    if fused and legacy:
        raise ValueError("state dict mixes fused and per-expert keys: %s / %s" % (fused[:2], legacy[:2]))
    if legacy:
        return "legacy"
    if not fused:
        raise ValueError("no expert weights found in state dict (keys like %s)" % keys[:8])
    kinds = {FUSED_RE.match(k).group(2) for k in fused}
    if "gate_up_proj" in kinds:
        return "gate_up"
    if {"gate_proj", "up_proj"} <= kinds:
        return "separate"
    raise ValueError("unrecognised fused expert keys: %s" % sorted(kinds))


def _fused_key(keys, layer, name):
    for suffix in ("", ".weight"):
        k = "model.layers.%d.mlp.experts.%s%s" % (layer, name, suffix)
        if k in keys:
            return k
    raise KeyError("missing fused expert tensor %s for layer %d" % (name, layer))


def candidate_layouts(shapes, E, H, I):
    """All layouts consistent with the in-memory tensor shapes of layer 0 (ambiguous when
    e.g. H == 2*I; the semantic check picks the right one)."""
    kind = expert_kind(shapes.keys())
    if kind == "legacy":
        return [{"kind": "legacy"}]

    def orients(shape, out_dim, in_dim):
        res = []
        if tuple(shape) == (E, out_dim, in_dim):
            res.append("out_in")
        if tuple(shape) == (E, in_dim, out_dim):
            res.append("in_out")
        return res

    down = orients(shapes[_fused_key(shapes, 0, "down_proj")], H, I)
    if not down:
        raise ValueError("down_proj shape %s matches neither [E,H,I] nor [E,I,H] (E=%d H=%d I=%d)"
                         % (tuple(shapes[_fused_key(shapes, 0, "down_proj")]), E, H, I))
    out = []
    if kind == "gate_up":
        gu_shape = shapes[_fused_key(shapes, 0, "gate_up_proj")]
        gu = orients(gu_shape, 2 * I, H)
        if not gu:
            raise ValueError("gate_up_proj shape %s matches neither [E,2I,H] nor [E,H,2I]" % (tuple(gu_shape),))
        for o in gu:
            for order in GU_ORDERS:
                for d in down:
                    out.append({"kind": "gate_up", "gate_up": o, "order": order, "down": d})
    else:
        g = orients(shapes[_fused_key(shapes, 0, "gate_proj")], I, H)
        u = orients(shapes[_fused_key(shapes, 0, "up_proj")], I, H)
        if not g or g != u:
            raise ValueError("gate_proj/up_proj 3D shapes unexpected")
        for o in g:
            for d in down:
                out.append({"kind": "separate", "gate_up": o, "down": d})
    return out


def _as_out_in(w, orient):
    return w if orient == "out_in" else w.t()


def _split_gate_up(m, order, I):
    """m: [2I, H] (out, in) -> (gate [I,H], up [I,H])."""
    if order == "concat_gate_first":
        return m[:I], m[I:]
    if order == "concat_up_first":
        return m[I:], m[:I]
    if order == "interleave_gate_even":
        return m[0::2], m[1::2]
    if order == "interleave_up_even":
        return m[1::2], m[0::2]
    raise ValueError(order)


def _join_gate_up(gate, up, order):
    import torch
    if order == "concat_gate_first":
        return torch.cat([gate, up], 0)
    if order == "concat_up_first":
        return torch.cat([up, gate], 0)
    m = torch.empty((gate.shape[0] * 2, gate.shape[1]), dtype=gate.dtype, device=gate.device)
    if order == "interleave_gate_even":
        m[0::2], m[1::2] = gate, up
    elif order == "interleave_up_even":
        m[0::2], m[1::2] = up, gate
    else:
        raise ValueError(order)
    return m


def to_canonical(sd, layout, E, I, layers=None):
    """In-memory state dict -> canonical per-expert dict (tensors contiguous, dtype kept)."""
    out = {}
    for k, v in sd.items():
        if "rotary_emb" in k:  # non-persistent buffers, never saved
            continue
        m = FUSED_RE.match(k)
        if m is None:
            if LEGACY_RE.match(k) and layout["kind"] != "legacy":
                raise ValueError("unexpected per-expert key %s for layout %s" % (k, layout))
            if layers is not None:
                lm = re.match(r"^model\.layers\.(\d+)\.", k)
                if lm and int(lm.group(1)) not in layers:
                    continue
            out[k] = v.contiguous()
            continue
        layer, name = int(m.group(1)), m.group(2)
        if layers is not None and layer not in layers:
            continue
        if v.dim() != 3 or v.shape[0] != E:
            raise ValueError("fused tensor %s has shape %s, expected 3D with %d experts" % (k, tuple(v.shape), E))
        pre = "model.layers.%d.mlp.experts" % layer
        for e in range(E):
            if name == "down_proj":
                out["%s.%d.down_proj.weight" % (pre, e)] = _as_out_in(v[e], layout["down"]).contiguous()
            elif name == "gate_up_proj":
                g, u = _split_gate_up(_as_out_in(v[e], layout["gate_up"]), layout["order"], I)
                out["%s.%d.gate_proj.weight" % (pre, e)] = g.contiguous()
                out["%s.%d.up_proj.weight" % (pre, e)] = u.contiguous()
            else:  # separate gate_proj / up_proj
                out["%s.%d.%s.weight" % (pre, e, name)] = _as_out_in(v[e], layout["gate_up"]).contiguous()
    return out


def from_canonical(canon, layout, mem_keys, E):
    """Canonical dict -> dict keyed like the in-memory state dict (mem_keys)."""
    import torch
    out = {}
    for k in mem_keys:
        if "rotary_emb" in k:
            continue
        m = FUSED_RE.match(k)
        if m is None:
            if k not in canon:
                raise KeyError("checkpoint lacks %s" % k)
            out[k] = canon[k]
            continue
        layer, name = int(m.group(1)), m.group(2)
        pre = "model.layers.%d.mlp.experts" % layer
        mats = []
        for e in range(E):
            if name == "down_proj":
                w = canon["%s.%d.down_proj.weight" % (pre, e)]
                mats.append(_as_out_in(w, layout["down"]))
            elif name == "gate_up_proj":
                g = canon["%s.%d.gate_proj.weight" % (pre, e)]
                u = canon["%s.%d.up_proj.weight" % (pre, e)]
                mats.append(_as_out_in(_join_gate_up(g, u, layout["order"]), layout["gate_up"]))
            else:
                w = canon["%s.%d.%s.weight" % (pre, e, name)]
                mats.append(_as_out_in(w, layout["gate_up"]))
        out[k] = torch.stack(mats, 0).contiguous()
    return out


def reference_moe(x, canon, layer, E, top_k, norm_topk):
    """Canonical Qwen3-MoE sparse block: softmax router -> top-k -> (renorm) -> SwiGLU experts."""
    import torch
    import torch.nn.functional as F
    p = "model.layers.%d.mlp." % layer
    probs = F.softmax(x @ canon[p + "gate.weight"].t(), dim=-1, dtype=torch.float32)
    topv, topi = probs.topk(top_k, dim=-1)
    if norm_topk:
        topv = topv / topv.sum(-1, keepdim=True)
    y = torch.zeros_like(x)
    for e in range(E):
        w = (topv * (topi == e)).sum(-1)
        if not bool((w != 0).any()):
            continue
        g = x @ canon[p + "experts.%d.gate_proj.weight" % e].t()
        u = x @ canon[p + "experts.%d.up_proj.weight" % e].t()
        h = (F.silu(g) * u) @ canon[p + "experts.%d.down_proj.weight" % e].t()
        y = y + w[:, None].to(h.dtype) * h
    return y


# =============================================================================
# main
