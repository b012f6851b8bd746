#!/usr/bin/env python
"""Measure the memory of one training step in PyTorch and write it to data/ (book chapter 5, "Measure it yourself").

Usage (from the repository root, in the optional torch venv; ``make measure`` does exactly this)::

    .venv-measure/bin/python tools/measure_memory.py [--out data/activation_measurements.csv]
        [--tensors-out data/activation_saved_tensors.csv] [--quick]

It builds small GPT-style and Llama-style decoder-only transformers *from an* :class:`llmsizing.Model`, so the
PyTorch modules and the library's prediction use exactly the same shapes, with random (seeded) weights; nothing
is downloaded. For each configuration it runs one training step (forward, cross-entropy on random targets,
backward, AdamW step) on the CPU and records

* parameter, gradient and optimizer-state bytes (sum of ``nbytes`` of the tensors the step leaves behind);
* activation bytes: every tensor autograd saves for the backward pass, captured with
  ``torch.autograd.graph.saved_tensors_hooks``, deduplicated by storage (``untyped_storage().data_ptr()``), and
  excluding parameters, views of parameters (``weight.t()``) and autocast's 16-bit copies of the weights
  (reported separately). Each storage is attributed to the component (norms, attention, MLP, ...) of the
  module that saved it last, using forward pre-hooks that tag the running module.
* with recomputation (checkpointing), the peak: everything saved in the forward plus the new tensors the
  most expensive layer saves while it is rebuilt during backward (tensors already alive since the forward,
  such as a checkpoint's inputs, are not counted twice).

CPU memory is measured, not time, so a laptop is enough: the whole sweep takes a few minutes on 2 cores.
torch is an optional, heavy dependency: the book only reads the CSV this script writes.

What torch 2.13 on the CPU does (found by this tool, discussed in chapter 5):

* dropout keeps a mask of the activation's dtype (0 or 1/(1-p)), not CUDA's 1-byte mask; the CSV gives both
  the bytes and the element count of the masks (``mask_bytes``, ``mask_elements``);
* ``scaled_dot_product_attention`` runs ``_scaled_dot_product_flash_attention_for_cpu`` (saves q, k, v, out and
  an fp32 log-sum-exp) without dropout, but the "math" path (fp32 s^2 tensors) with dropout, hence the
  :class:`FlashAttentionFn` stand-in for flash with dropout;
* LayerNorm keeps its mean/rstd in the input dtype (bf16 in bf16; CUDA keeps fp32);
* ``F.rms_norm`` is a composite that saves fp32 copies (hence :class:`RMSNormFn`, a fused-kernel stand-in);
* autocast runs ``layer_norm`` in fp32 and keeps ``softmax`` in bf16; every linear layer saves its own bf16
  cast of an fp32 input.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime as _dt
import itertools
import math
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from llmsizing import Model  # noqa: E402
from llmsizing.activations import ACT_COMPONENTS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODES = {"fp32": torch.float32, "bf16": torch.bfloat16, "autocast-bf16": torch.float32}  # mode -> param dtype

# The two tiny models of the sweep. Same fields as the catalogue's real models, only smaller.
GPT = Model("tiny-gpt", layers=4, hidden=256, heads=4, ffn_hidden=1024, vocab=2048, gated_mlp=False,
            tied_embeddings=True, norm="layernorm", bias=True, learned_pos=True, max_seq=512)
LLAMA = Model("tiny-llama", layers=4, hidden=256, heads=8, kv_heads=2, ffn_hidden=688, vocab=2048,
              gated_mlp=True, tied_embeddings=False, norm="rmsnorm", max_seq=512)


# ============================================================================ component tagging
class Tagger:
    """A stack of component names: each module pushes its ``tag`` when it starts and pops it when it ends."""

    def __init__(self):
        self.stack = ["other"]
        self.layer = -1
        self.in_dropout = 0

    @contextlib.contextmanager
    def tag(self, name):
        self.stack.append(name)
        try:
            yield
        finally:
            self.stack.pop()

    def install(self, model):
        for mod in model.modules():
            if hasattr(mod, "tag"):
                mod.register_forward_pre_hook(lambda m, a: self._push(m))
                mod.register_forward_hook(lambda m, a, o: self._pop())

    def _pop(self):
        self.stack.pop()          # returns None: a forward hook that returns a value replaces the output

    def _push(self, mod):
        self.stack.append(mod.tag)
        if hasattr(mod, "layer_idx"):
            self.layer = mod.layer_idx


TAGGER = Tagger()


# ============================================================================ the models
class RMSNormFn(torch.autograd.Function):
    """RMSNorm that saves what a fused kernel saves (input + fp32 1/rms per token), as Apex, Transformer
    Engine and Megatron do. (torch 2.13's F.rms_norm on CPU is a composite that saves an fp32 copy of the
    input and of the normalised output: 4x more in bf16.)"""

    @staticmethod
    def forward(ctx, x, weight, eps):
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, rstd)
        return (xf * rstd).to(x.dtype) * weight

    @staticmethod
    def backward(ctx, g):
        x, weight, rstd = ctx.saved_tensors
        xhat = x.float() * rstd
        gw = (g.float() * xhat).sum(dim=tuple(range(g.dim() - 1))).to(weight.dtype)
        gx = g.float() * weight.float()
        gx = rstd * (gx - xhat * (gx * xhat).mean(-1, keepdim=True))
        return gx.to(x.dtype), gw, None


class Norm(nn.Module):
    tag = "norms"

    def __init__(self, m: Model):
        super().__init__()
        self.kind = m.norm
        self.weight = nn.Parameter(torch.ones(m.hidden))
        self.bias = nn.Parameter(torch.zeros(m.hidden)) if m.norm == "layernorm" else None

    def forward(self, x):
        if self.kind == "layernorm":
            return F.layer_norm(x, x.shape[-1:], self.weight, self.bias)
        return RMSNormFn.apply(x, self.weight, 1e-6)


class Dropout(nn.Dropout):
    """nn.Dropout with a tag: whatever it saves is the dropout mask."""

    def __init__(self, p, tag="dropout_masks"):
        super().__init__(p)
        self.tag = tag

    def forward(self, x):
        TAGGER.in_dropout += 1
        try:
            return super().forward(x)
        finally:
            TAGGER.in_dropout -= 1


class FlashAttentionFn(torch.autograd.Function):
    """A stand-in with FlashAttention's memory behaviour (Dao et al. 2022): forward materialises the scores
    transiently, saves only q, k, v, the output and an fp32 log-sum-exp per row, and backward recomputes the
    probabilities (and regenerates the dropout mask from a seed, as the real kernel does). Used where torch's
    CPU flash kernel cannot run (dropout > 0 falls back to the "math" path, which saves s^2 tensors)."""

    @staticmethod
    def _probs(q, k, lse, scale):
        s = q.shape[-2]
        scores = (q.float() @ k.float().transpose(-2, -1)) * scale
        scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
        if lse is None:
            lse = torch.logsumexp(scores, -1)
        return torch.exp(scores - lse.unsqueeze(-1)), lse

    @staticmethod
    def _mask(shape, p, seed):
        gen = torch.Generator().manual_seed(seed)
        return (torch.rand(shape, generator=gen) >= p).float() / (1 - p)

    @staticmethod
    def forward(ctx, q, k, v, p):
        b, a, s, d = q.shape
        rep = a // k.shape[1]
        kk, vv = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        scale = 1 / math.sqrt(d)
        probs, lse = FlashAttentionFn._probs(q, kk, None, scale)
        seed = int(torch.randint(0, 2**62, (1,)).item())
        if p:
            probs = probs * FlashAttentionFn._mask(probs.shape, p, seed)
        out = torch.empty(b, s, a, d, dtype=q.dtype).transpose(1, 2)   # flash's (b, s, a, d) layout
        out.copy_(probs @ vv.float())
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.p, ctx.seed, ctx.scale = p, seed, scale
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        rep = q.shape[1] // k.shape[1]
        kk, vv = k.repeat_interleave(rep, 1).float(), v.repeat_interleave(rep, 1).float()
        probs, _ = FlashAttentionFn._probs(q, kk, lse, ctx.scale)
        dout = dout.float()
        mask = FlashAttentionFn._mask(probs.shape, ctx.p, ctx.seed) if ctx.p else 1.0
        dv = (probs * mask).transpose(-2, -1) @ dout
        dprobs = (dout @ vv.transpose(-2, -1)) * mask
        dscores = probs * (dprobs - (dout * out.float()).sum(-1, keepdim=True))
        dq = dscores @ kk * ctx.scale
        dk = dscores.transpose(-2, -1) @ q.float() * ctx.scale

        def fold(t):  # sum the gradient over the query heads that share a KV head
            b, a, s, d = t.shape
            return t.view(b, a // rep, rep, s, d).sum(2)
        return dq.to(q.dtype), fold(dk).to(k.dtype), fold(dv).to(v.dtype), None


class AttentionCore(nn.Module):
    """softmax(QK^T/sqrt(d) + causal) V, eager (every intermediate is a tensor) or flash-like."""

    tag = "attention_core"

    def __init__(self, m: Model, attention: str, dropout: float):
        super().__init__()
        self.attention, self.p = attention, dropout
        self.drop = Dropout(dropout)
        self.impl = "eager-matmul" if attention == "eager" else ("sdpa-flash-cpu" if dropout == 0 else "custom-flash")

    def forward(self, q, k, v):          # q (b, a, s, d); k, v (b, g, s, d)
        if self.impl == "sdpa-flash-cpu":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        if self.impl == "custom-flash":
            return FlashAttentionFn.apply(q, k, v, self.p if self.training else 0.0)
        b, a, s, d = q.shape
        g = k.shape[1]
        r = a // g
        # GQA without copying K and V to every head: fold the r query heads of a group into the rows.
        qf = q.reshape(b, g, r * s, d)
        causal = torch.full((s, s), float("-inf"), dtype=q.dtype).triu(1).repeat(r, 1)
        scores = (qf @ k.transpose(-2, -1)) * (1 / math.sqrt(d)) + causal
        probs = self.drop(torch.softmax(scores, dim=-1))
        return (probs @ v).view(b, a, s, d)


class Rotary(nn.Module):
    """Rotary position embedding (Su et al. 2021), "rotate half" form as in Llama."""

    tag = "embedding"     # its saved cos/sin tables are position data, independent of the batch

    def forward(self, x, cos, sin):
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class Attention(nn.Module):
    tag = "attention_projections"

    def __init__(self, m: Model, idx, attention, dropout, recompute):
        super().__init__()
        h, a, g, d = m.hidden, m.heads, m.kv_heads, m.head_dim
        qkvb = m.bias or m.qkv_bias
        self.q_proj, self.k_proj = nn.Linear(h, a * d, bias=qkvb), nn.Linear(h, g * d, bias=qkvb)
        self.v_proj, self.o_proj = nn.Linear(h, g * d, bias=qkvb), nn.Linear(a * d, h, bias=m.bias)
        self.rotary = None if m.learned_pos else Rotary()
        self.core = AttentionCore(m, attention, dropout)
        self.core.layer_idx = idx
        self.drop = Dropout(dropout)
        self.a, self.g, self.d, self.recompute = a, g, d, recompute

    def forward(self, x, cos=None, sin=None):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.a, self.d).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.g, self.d).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.g, self.d).transpose(1, 2)
        if self.rotary is not None:
            q, k = self.rotary(q, cos, sin), self.rotary(k, cos, sin)
        if self.recompute == "selective" and torch.is_grad_enabled():
            with TAGGER.tag("attention_core"):
                y = checkpoint(self.core, q, k, v, use_reentrant=True)
        else:
            y = self.core(q, k, v)
        return self.drop(self.o_proj(y.transpose(1, 2).reshape(b, s, self.a * self.d)))


class MLP(nn.Module):
    tag = "mlp"

    def __init__(self, m: Model, dropout):
        super().__init__()
        h, f = m.hidden, m.ffn_hidden
        self.gated = m.gated_mlp
        self.gate_proj = nn.Linear(h, f, bias=m.bias) if m.gated_mlp else None
        self.up_proj, self.down_proj = nn.Linear(h, f, bias=m.bias), nn.Linear(f, h, bias=m.bias)
        self.drop = Dropout(dropout)

    def forward(self, x):
        if self.gated:                                   # SwiGLU (Shazeer 2020)
            y = F.silu(self.gate_proj(x)) * self.up_proj(x)
        else:                                            # GPT-2: GELU (tanh approximation)
            y = F.gelu(self.up_proj(x), approximate="tanh")
        return self.drop(self.down_proj(y))


class Block(nn.Module):
    tag = "residuals"

    def __init__(self, m: Model, idx, attention, dropout, recompute):
        super().__init__()
        self.layer_idx = idx
        self.norm1, self.norm2 = Norm(m), Norm(m)
        self.attn = Attention(m, idx, attention, dropout, recompute)
        self.mlp = MLP(m, dropout)

    def forward(self, x, cos=None, sin=None):
        x = x + self.attn(self.norm1(x), cos, sin)
        return x + self.mlp(self.norm2(x))


class Embedding(nn.Module):
    tag = "embedding"

    def __init__(self, m: Model, dropout):
        super().__init__()
        self.tokens = nn.Embedding(m.vocab, m.hidden)
        self.positions = nn.Embedding(m.max_seq, m.hidden) if m.learned_pos else None
        self.drop = Dropout(dropout, tag="embedding")
        self.head_dim = m.head_dim

    def forward(self, ids):
        x = self.tokens(ids)
        s = ids.shape[1]
        if self.positions is not None:
            return self.drop(x + self.positions(torch.arange(s))), None, None
        # rotary tables, computed once per step in the activation dtype and shared by every layer
        inv = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        ang = torch.outer(torch.arange(s).float(), inv)
        ang = torch.cat((ang, ang), dim=-1)
        return self.drop(x), ang.cos().to(x.dtype), ang.sin().to(x.dtype)


class Head(nn.Module):
    """Final norm, LM head (tied to the token embedding or not) and the cross-entropy loss in fp32."""

    tag = "logits"

    def __init__(self, m: Model, embedding: Embedding):
        super().__init__()
        self.norm = Norm(m)
        self.norm.tag = "logits"
        self.lm_head = None if m.tied_embeddings else nn.Linear(m.hidden, m.vocab, bias=False)
        self.embedding = embedding
        self.layer_idx = -1

    def forward(self, x, targets):
        x = self.norm(x)
        w = self.embedding.tokens.weight if self.lm_head is None else self.lm_head.weight
        logits = F.linear(x, w).float()                  # upcast: the loss runs in fp32
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


class Transformer(nn.Module):
    def __init__(self, m: Model, *, attention="eager", dropout=0.0, recompute="none"):
        super().__init__()
        self.embedding = Embedding(m, dropout)
        self.layers = nn.ModuleList(Block(m, i, attention, dropout, recompute) for i in range(m.layers))
        self.head = Head(m, self.embedding)
        self.recompute = recompute
        for mod in self.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                nn.init.normal_(mod.weight, std=0.02)
                if getattr(mod, "bias", None) is not None:
                    nn.init.zeros_(mod.bias)

    def forward(self, ids, targets):
        x, cos, sin = self.embedding(ids)
        for layer in self.layers:
            if self.recompute == "full":
                with TAGGER.tag("residuals"):            # the checkpoint keeps only the layer's input
                    x = checkpoint(layer, x, cos, sin, use_reentrant=True)
            else:
                x = layer(x, cos, sin)
        return self.head(x, targets)


# ============================================================================ the measurement
_VIEW_OR_COPY = {"ToCopyBackward0", "TBackward0", "ViewBackward0", "TransposeBackward0", "PermuteBackward0",
                 "ExpandBackward0", "UnsafeViewBackward0", "AliasBackward0"}


def _is_weight_copy(t: torch.Tensor) -> bool:
    """True for autocast's low-precision copy of a parameter (or a view of it): a grad_fn chain of views and
    copies that ends in AccumulateGrad (i.e. at a parameter)."""
    fn = t.grad_fn
    for _ in range(4):
        if fn is None:
            return False
        if type(fn).__name__ == "AccumulateGrad":
            return True
        if type(fn).__name__ not in _VIEW_OR_COPY:
            return False
        nxt = [f for f, _ in fn.next_functions if f is not None]
        fn = nxt[0] if nxt else None
    return False


class SavedTensors:
    """Records every tensor autograd saves, once per storage, by phase (forward / recomputation in backward)."""

    def __init__(self, params):
        self.param_ptrs = {p.untyped_storage().data_ptr() for p in params}
        self.phase = "forward"
        self.store = {}               # (phase, layer or None, ptr) -> record
        self.weight_copies = {}

    def pack(self, t):
        if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
            return t
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr in self.param_ptrs or st.nbytes() == 0:
            return t
        if _is_weight_copy(t):
            self.weight_copies[ptr] = st.nbytes()
            return t
        if self.phase == "backward" and ("forward", None, ptr) in self.store:
            return t                  # already alive since the forward (e.g. a checkpoint's input): not new memory
        key = (self.phase, TAGGER.layer if self.phase == "backward" else None, ptr)
        rec = self.store.get(key)
        comp = TAGGER.stack[-1]
        if rec is None:
            self.store[key] = rec = {"nbytes": st.nbytes(), "keep": st, "layer": TAGGER.layer,
                                     "dtype": t.dtype, "shape": tuple(t.shape), "mask": TAGGER.in_dropout > 0,
                                     "producer": type(t.grad_fn).__name__ if t.grad_fn else "-"}
        rec["component"] = comp       # the last module that saves a storage gets it
        return t

    @staticmethod
    def unpack(t):
        return t

    def records(self, phase):
        return [r for (ph, _, _), r in self.store.items() if ph == phase]


def measure(m: Model, *, batch, seq, mode, attention, dropout, recompute, seed=0, listing=False):
    """One training step of ``m``; returns a dict (one CSV row) and, with ``listing``, the saved tensors of
    layer 0 (or of the whole step for full recomputation)."""
    torch.manual_seed(seed)
    dtype = MODES[mode]
    model = Transformer(m, attention=attention, dropout=dropout, recompute=recompute).to(dtype).train()
    TAGGER.__init__()
    TAGGER.install(model)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    ids = torch.randint(0, m.vocab, (batch, seq))
    targets = torch.randint(0, m.vocab, (batch, seq))
    rec = SavedTensors(params)
    loss = None
    auto = torch.autocast("cpu", dtype=torch.bfloat16) if mode == "autocast-bf16" else contextlib.nullcontext()
    with torch.autograd.graph.saved_tensors_hooks(rec.pack, rec.unpack):
        with auto:
            loss = model(ids, targets)
        rec.phase = "backward"        # recomputation (checkpointing) saves again during backward
        loss.backward()
    opt.step()

    fwd = rec.records("forward")
    comps = dict.fromkeys(ACT_COMPONENTS, 0)
    for r in fwd:
        comps[r["component"] if r["component"] in comps else "residuals"] += r["nbytes"]
    by_layer = {}
    for r in rec.records("backward"):
        by_layer.setdefault(r["layer"], []).append(r)
    peak_layer = max(by_layer, key=lambda i: sum(r["nbytes"] for r in by_layer[i]), default=None)
    work = by_layer.get(peak_layer, [])
    work_bytes = sum(r["nbytes"] for r in work)
    counted = list(fwd)
    if recompute != "none":           # one layer's rebuilt tensors are alive while it is recomputed
        counted += work
        for r in work:
            comps[r["component"] if r["component"] in comps else "residuals"] += r["nbytes"]
    masks = [r for r in counted if r["mask"]]
    mask_bytes = sum(r["nbytes"] for r in masks)
    mask_elem = sum(r["nbytes"] // r["dtype"].itemsize for r in masks)
    state = [v for s in opt.state.values() for k, v in s.items() if torch.is_tensor(v) and k != "step"]
    steps = [v for s in opt.state.values() for k, v in s.items() if torch.is_tensor(v) and k == "step"]
    row = {
        "model": m.name, "style": "gpt" if m.norm == "layernorm" else "llama",
        "layers": m.layers, "hidden": m.hidden, "heads": m.heads, "kv_heads": m.kv_heads,
        "head_dim": m.head_dim, "ffn": m.ffn_hidden, "vocab": m.vocab, "max_seq": m.max_seq,
        "norm": m.norm, "gated_mlp": m.gated_mlp, "bias": m.bias, "learned_pos": m.learned_pos,
        "tied_embeddings": m.tied_embeddings,
        "batch": batch, "seq": seq, "mode": mode, "attention": attention,
        "attention_impl": model.layers[0].attn.core.impl, "dropout": dropout, "recompute": recompute,
        "act_bytes": sum(r["nbytes"] for r in counted),
        "act_forward_bytes": sum(r["nbytes"] for r in fwd),
        "act_recompute_peak_bytes": work_bytes,
        **{f"act_{k}": v for k, v in comps.items()},
        "mask_bytes": mask_bytes, "mask_elements": int(mask_elem),
        "act_fp32_bytes": sum(r["nbytes"] for r in counted if r["dtype"] == torch.float32),
        "weight_copy_bytes": sum(rec.weight_copies.values()),
        "n_params": sum(p.numel() for p in params),
        "param_bytes": sum(p.nbytes for p in params),
        "grad_bytes": sum(p.grad.nbytes for p in params if p.grad is not None),
        "optimizer_bytes": sum(t.nbytes for t in state),
        "optimizer_step_bytes": sum(t.nbytes for t in steps),
        "n_param_tensors": len(params),
        "loss": round(loss.item(), 4),
    }
    listing_rows = []
    if listing:
        src = [r for r in fwd if r["layer"] == 0 or r["component"] in ("embedding", "logits", "residuals")]
        for r in sorted(src, key=lambda r: (ACT_COMPONENTS.index(r["component"])
                                            if r["component"] in ACT_COMPONENTS else 99, -r["nbytes"])):
            listing_rows.append({"model": m.name, "mode": mode, "attention": attention, "dropout": dropout,
                                 "recompute": recompute, "batch": batch, "seq": seq,
                                 "component": r["component"], "layer": r["layer"], "producer": r["producer"],
                                 "shape": "x".join(map(str, r["shape"])) or "scalar",
                                 "dtype": str(r["dtype"]).replace("torch.", ""), "nbytes": r["nbytes"]})
    return row, listing_rows


# ============================================================================ the sweep
def configurations(quick=False):
    """(model, batch, seq, mode, attention, dropout, recompute), deduplicated, around a base point."""
    out = []
    seqs = (64, 128, 256, 512) if not quick else (64, 128)
    for m in ((GPT, LLAMA) if not quick else (GPT,)):
        drops = (0.0, 0.1) if m is GPT else (0.0,)
        for mode, att, s, dp in itertools.product(MODES, ("eager", "flash"), seqs, drops):
            out.append((m, 2, s, mode, att, dp, "none"))                         # sequence length
        for mode, att, b in itertools.product(("bf16", "fp32"), ("eager", "flash"), (1, 2, 4, 8)):
            out.append((m, b, 256 if not quick else 64, mode, att, 0.0, "none"))  # batch
        for mode, att, dp, rc in itertools.product(MODES, ("eager", "flash"), drops,
                                                   ("none", "selective", "full")):
            out.append((m, 2, 256 if not quick else 64, mode, att, dp, rc))     # recomputation
    seen, uniq = set(), []
    for c in out:
        key = (c[0].name,) + c[1:]
        if key not in seen:
            seen.add(key)
            uniq.append(c)
    return uniq


LISTINGS = [(GPT, 2, 256, "bf16", "eager", 0.1, "none"), (GPT, 2, 256, "autocast-bf16", "eager", 0.0, "none"),
            (GPT, 2, 256, "bf16", "flash", 0.0, "none"), (LLAMA, 2, 256, "bf16", "flash", 0.0, "none")]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "data" / "activation_measurements.csv"))
    ap.add_argument("--tensors-out", default=str(ROOT / "data" / "activation_saved_tensors.csv"))
    ap.add_argument("--quick", action="store_true", help="a handful of small configurations (smoke test)")
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    today = _dt.date.today().isoformat()
    rows = []
    cfgs = configurations(args.quick)
    for i, (m, b, s, mode, att, dp, rc) in enumerate(cfgs, 1):
        row, _ = measure(m, batch=b, seq=s, mode=mode, attention=att, dropout=dp, recompute=rc)
        row.update(torch_version=torch.__version__, measured_on=today)
        rows.append(row)
        print(f"[{i:3d}/{len(cfgs)}] {m.name:10s} b={b} s={s:3d} {mode:13s} {att:5s} drop={dp} {rc:9s} "
              f"act={row['act_bytes'] / 2**20:8.2f} MiB", flush=True)
    with open(args.out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    listing = []
    for m, b, s, mode, att, dp, rc in LISTINGS:
        listing += measure(m, batch=b, seq=s, mode=mode, attention=att, dropout=dp, recompute=rc,
                           listing=True)[1]
    with open(args.tensors_out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(listing[0]))
        w.writeheader()
        w.writerows(listing)
    print(f"wrote {len(rows)} rows to {args.out} and {len(listing)} rows to {args.tensors_out}")


if __name__ == "__main__":
    main()
