#!/usr/bin/env python
"""Measure the memory of one training step in PyTorch and write it to data/ (book chapter 5, "Measure it yourself").

Usage (from the repository root, in the optional torch venv; ``make measure`` runs ``all``)::

    .venv-measure/bin/python tools/measure_memory.py [all|saved|step|dist|peft|lora|nf4] [--quick] [options]

    saved  [--out data/activation_measurements.csv] [--tensors-out data/activation_saved_tensors.csv]
    step   [--out data/step_measurements.csv] [--timeline-out data/step_timeline_example.csv]
           [--tensors-out data/step_saved_tensors.csv]
    dist   [--out data/dist_measurements.csv] [--collectives-out data/dist_collectives.csv]
           per-rank states and the collectives of one step under DDP / ZeRO-1 / FSDP2 / TP / SP (gloo, CPU)
    peft   [--out data/peft_trainable_params.csv]   LoRA trainable/total parameters PEFT reports (meta device)
    lora   [--out data/lora_step_measurements.csv]  live bytes over a PEFT LoRA step (small HF Llama, CPU)
    nf4    [--out data/nf4_storage.csv]             bitsandbytes NF4 storage of one linear layer (CPU)
    all    saved, step, dist, peft, lora, then nf4, with the default files (also what runs with no sub-command)

(``peft``, ``lora``: peft==0.21.2; ``nf4``: bitsandbytes==0.50.2; all in .venv-measure. The columns of their CSVs
are explained in a comment block above each sub-command.)

Sub-command ``saved`` (about 50 s on 2 cores) is the original experiment, described first below. Sub-command
``step`` (about 5 minutes) measures the live bytes over a whole training step, see "The whole step" below.

The tensors saved for backward (``saved``)
------------------------------------------

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
  cast of an fp32 input. (More precisely: CPU autocast leaves ``layer_norm`` alone, so it runs in the dtype of
  its input, which is the fp32 residual stream of an fp32 model; CUDA autocast casts it to fp32 whatever the
  input. On CPU only matmul-like ops are cast down to bf16 and only the losses (``cross_entropy``,
  ``nll_loss``, ...) up to fp32; ``softmax``, ``log_softmax``, ``pow``, ``rsqrt``, ``exp``, ``sum`` and
  ``mean`` keep their input's dtype, while CUDA runs them in fp32.)

The whole step (``step``)
-------------------------

A live-bytes tracker (:class:`LiveBytes`, a ``TorchDispatchMode``) sees every op, also in backward (the
autograd engine runs CPU backward on the calling thread; :func:`selfcheck` verifies it against a hand-computed
gradient size). Each new output storage adds its ``nbytes`` to a running count and a ``weakref.finalize`` on
the storage subtracts it when the storage is freed. Storages alive before the step (parameters, AdamW states,
buffers, the input ids and labels) are the baseline. After the step (and dropping the loss) the count must equal
baseline + gradients; ``end_residual_bytes`` in the CSV is that difference (0 in every row). Blind spot:
scratch buffers a kernel allocates internally and never returns as a tensor.

Models: real Hugging Face ``transformers`` classes built from small config objects (random, seeded weights;
nothing is downloaded): ``GPT2LMHeadModel`` (gelu_new), ``LlamaForCausalLM`` (GQA 8/2 heads, untied),
``Qwen2ForCausalLM`` (GQA, QKV bias, tied), and, as stack ``fused``, this file's own :class:`Transformer`
with its stand-ins (named in the CSV's ``stand_ins`` column) at the same shapes. One warm-up step creates
the AdamW states; ``zero_grad(set_to_none=True)``; then one measured step with the phases

* ``forward`` (until the LM head's output, the logits), ``loss_forward`` (HF computes the loss inside the
  model from ``labels``, its ForCausalLMLoss upcasting the logits to fp32; the model's outputs are then
  dropped, as the HF Trainer does), ``forward_end_bytes`` (live bytes when the forward returns);
* ``loss_backward`` (until the gradient w.r.t. the logits exists: a tensor hook on the logits),
  ``head_backward`` (LM head + final norm: until the final norm's input has its gradient), ``backward``
  (the rest);
* ``optimizer`` (AdamW ``foreach``, for-loop, or ``fused``).

Modes: ``fp32``; ``bf16`` (``model.to(torch.bfloat16)``, pure); ``autocast-bf16`` (fp32 model, forward under
``torch.autocast("cpu", dtype=torch.bfloat16)``, backward and step outside it, as the HF Trainer's bf16=True).
Recompute ``full`` is ``model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant":
False})`` (transformers 5.23 warns the name becomes ``activation_checkpointing_enable`` in v6).

It writes data/step_measurements.csv (one row per configuration), data/step_timeline_example.csv (live bytes
after every op of one configuration, with the phase) and data/step_saved_tensors.csv (the storages one decoder
layer saves for backward, deduplicated by storage, with the module that saved and the one that made each,
parameters and views of them left out, autocast's bf16 weight copies as ``kind=weight_copy``, tensors shared
by all layers -- rotary tables -- as ``kind=shared``; ``term`` names the size, e.g. ``b*s*h``).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime as _dt
import itertools
import gc
import math
import re
import sys
import time
import warnings
import weakref
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
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
        self.on_logits = None

    def forward(self, x, targets):
        x = self.norm(x)
        w = self.embedding.tokens.weight if self.lm_head is None else self.lm_head.weight
        logits = F.linear(x, w)
        if self.on_logits is not None:                   # the `step` tracker's phase marker (identity)
            self.on_logits(logits)
        logits = logits.float()                          # upcast: the loss runs in fp32
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


def cmd_saved(args):
    """Sub-command ``saved``: the tensors autograd saves, of the book's own module code (the original experiment)."""
    today = _dt.date.today().isoformat()
    rows = []
    cfgs = configurations(args.quick)
    for i, (m, b, s, mode, att, dp, rc) in enumerate(cfgs, 1):
        row, _ = measure(m, batch=b, seq=s, mode=mode, attention=att, dropout=dp, recompute=rc)
        row.update(torch_version=torch.__version__, measured_on=today)
        rows.append(row)
        print(f"[{i:3d}/{len(cfgs)}] {m.name:10s} b={b} s={s:3d} {mode:13s} {att:5s} drop={dp} {rc:9s} "
              f"act={row['act_bytes'] / 2**20:8.2f} MiB", flush=True)
    _write_csv(args.out, rows)
    listing = []
    for m, b, s, mode, att, dp, rc in LISTINGS:
        listing += measure(m, batch=b, seq=s, mode=mode, attention=att, dropout=dp, recompute=rc,
                           listing=True)[1]
    _write_csv(args.tensors_out, listing)
    print(f"wrote {len(rows)} rows to {args.out} and {len(listing)} rows to {args.tensors_out}")


def _write_csv(path, rows):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


# ============================================================================ the live-bytes tracker (`step`)
class LiveBytes(TorchDispatchMode):
    """Counts the bytes of every tensor storage alive, op by op.

    Every op runs through :meth:`__torch_dispatch__`; each output storage not seen before adds its ``nbytes``
    to :attr:`live`, and a ``weakref.finalize`` on the storage subtracts it when the storage is freed (torch
    keeps one Python object per live storage, so the finalizer fires when the C++ storage dies, also when the
    autograd engine frees it during backward). Storages that exist before the mode is entered (parameters,
    optimizer states, inputs) are registered with :meth:`add_baseline`. Kernel-internal scratch buffers that
    never become a tensor visible to the dispatcher (e.g. the CPU flash-attention kernel's per-thread buffers)
    are not seen.
    """

    def __init__(self, record_timeline=False):
        super().__init__()
        self.live = 0
        self.known = {}               # data_ptr -> [nbytes, op, module, category, token]
        self.baseline = 0
        self.untracked = 0            # storages first seen as an op *input* that were never registered
        self.weight_copy_live = 0
        self.param_ptrs = set()
        self.phase = "setup"
        self.phase_max = {}
        self.phase_ops = {}
        self.ops_seen = set()
        self.module = "-"             # set by a ModuleTagger, if any
        self.timeline = [] if record_timeline else None
        self.n_ops = 0

    # -- bookkeeping
    def _register(self, st, op, category):
        ptr = st.data_ptr()
        n = st.nbytes()
        if ptr == 0 or n == 0 or ptr in self.known:
            return False
        token = object()
        self.known[ptr] = [n, op, self.module, category, token]
        if category == "untracked":
            self.untracked += n
        else:
            self.live += n
            if category == "weight_copy":
                self.weight_copy_live += n
        weakref.finalize(st, self._free, ptr, token)
        return True

    def _free(self, ptr, token):
        rec = self.known.get(ptr)
        if rec is None or rec[4] is not token:
            return
        del self.known[ptr]
        n, _, _, category, _ = rec
        if category == "untracked":
            self.untracked -= n
        else:
            self.live -= n
            if category == "weight_copy":
                self.weight_copy_live -= n

    def add_baseline(self, tensors, params=()):
        for t in tensors:
            if torch.is_tensor(t) and t.device.type == "cpu":
                st = t.untyped_storage()
                if self._register(st, "baseline", "baseline"):
                    self.baseline += st.nbytes()
        self.param_ptrs |= {p.untyped_storage().data_ptr() for p in params}

    def set_phase(self, phase):
        self.phase = phase
        self._record("<" + phase + ">")

    def _record(self, op):
        self.phase_max[self.phase] = max(self.phase_max.get(self.phase, 0), self.live)
        if self.timeline is not None:
            self.timeline.append((self.phase, op, self.live, self.weight_copy_live))

    # -- the dispatch hook
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        ins = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        for a in ins:                 # a storage made outside the mode (e.g. torch.tensor(...)): not live-counted
            try:
                self._register(a.untyped_storage(), "input", "untracked")
            except (RuntimeError, NotImplementedError):
                pass
        out = func(*args, **kwargs)
        name = func.__name__ if hasattr(func, "__name__") else str(func)
        opname = str(func.overloadpacket.__name__) if hasattr(func, "overloadpacket") else name
        self.ops_seen.add(opname)
        weight_copy = (opname == "_to_copy" and ins and ins[0].untyped_storage().data_ptr() in self.param_ptrs)
        for o in tree_flatten(out)[0]:
            if isinstance(o, torch.Tensor) and o.device.type == "cpu":
                try:
                    st = o.untyped_storage()
                except (RuntimeError, NotImplementedError):
                    continue
                self._register(st, opname, "weight_copy" if weight_copy else "activation")
        self.n_ops += 1
        self.phase_ops[self.phase] = self.phase_ops.get(self.phase, 0) + 1
        self._record(opname)
        return out


class ModuleTagger:
    """Forward pre-/post-hooks that keep the qualified name of the innermost running module."""

    def __init__(self, model, tracker=None):
        self.stack = ["-"]
        self.tracker = tracker
        self.handles = []
        for name, mod in model.named_modules():
            self.handles.append(mod.register_forward_pre_hook(lambda m, a, n=name: self._push(n)))
            self.handles.append(mod.register_forward_hook(lambda m, a, o: self._pop()))

    def _push(self, name):
        self.stack.append(name or "<root>")
        if self.tracker is not None:
            self.tracker.module = self.stack[-1]

    def _pop(self):
        self.stack.pop()
        if self.tracker is not None:
            self.tracker.module = self.stack[-1]

    def remove(self):
        for h in self.handles:
            h.remove()


def selfcheck():
    """The tracker sees backward ops: y = relu(x W), loss = sum(y); after backward the live bytes must have
    grown by exactly W.grad's bytes (hand-computed: 4 bytes x 512 x 256) and every forward temporary be freed."""
    W = torch.randn(512, 256, requires_grad=True)
    x = torch.randn(64, 512)
    tr = LiveBytes()
    tr.add_baseline([W, x], [W])
    with tr:
        tr.set_phase("forward")
        loss = torch.relu(x @ W).sum()
        tr.set_phase("backward")
        loss.backward()
    del loss
    gc.collect()
    expected = 4 * 512 * 256
    grown = tr.live - tr.baseline
    bwd_ops = tr.phase_ops.get("backward", 0)
    ok = grown == expected == W.grad.nbytes and bwd_ops >= 3
    print(f"selfcheck: backward ops seen {bwd_ops}, live grew by {grown} B after backward, W.grad is "
          f"{W.grad.nbytes} B (hand: {expected}) -> {'ok' if ok else 'FAILED'}", flush=True)
    if not ok:
        raise SystemExit("the live-bytes tracker does not see the backward pass")


# ---------------------------------------------------------------------------- the models of `step`
# One llmsizing.Model per shape: the HF config and the fused stack's modules are both built from it.
STEP_SHAPES = {
    "gpt2": Model("step-gpt2", layers=4, hidden=256, heads=4, ffn_hidden=1024, vocab=16384, gated_mlp=False,
                  tied_embeddings=True, norm="layernorm", bias=True, learned_pos=True, max_seq=512),
    "llama": Model("step-llama", layers=4, hidden=256, heads=8, kv_heads=2, ffn_hidden=688, vocab=32000,
                   gated_mlp=True, tied_embeddings=False, norm="rmsnorm", max_seq=512),
    "qwen2": Model("step-qwen2", layers=4, hidden=256, heads=8, kv_heads=2, ffn_hidden=688, vocab=16384,
                   gated_mlp=True, tied_embeddings=True, norm="rmsnorm", qkv_bias=True, max_seq=512),
}
HF_CLASSES = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}
FUSED_STAND_INS = {
    "gpt": "LayerNorm=F.layer_norm; GELU=F.gelu(tanh); eager=matmul+softmax (GQA folded, no K/V copy); "
           "sdpa=F.scaled_dot_product_attention; loss=F.cross_entropy on .float() logits",
    "llama": "RMSNorm=RMSNormFn (fused-kernel stand-in: saves input + fp32 rstd); SwiGLU unfused (F.silu * up); "
             "Rotary (rotate-half, tables in activation dtype); eager=matmul+softmax (GQA folded); "
             "sdpa=F.scaled_dot_product_attention(enable_gqa); loss=F.cross_entropy on .float() logits",
}
STEP_MODES = ("fp32", "bf16", "autocast-bf16")


def _hf_config(key, attention):
    import transformers as tf
    m = STEP_SHAPES[key]
    if key == "gpt2":
        cfg = tf.GPT2Config(vocab_size=m.vocab, n_positions=m.max_seq, n_embd=m.hidden, n_layer=m.layers,
                            n_head=m.heads, n_inner=m.ffn_hidden, activation_function="gelu_new",
                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
                            use_cache=False)
    else:
        cls = tf.LlamaConfig if key == "llama" else tf.Qwen2Config
        cfg = cls(vocab_size=m.vocab, hidden_size=m.hidden, intermediate_size=m.ffn_hidden,
                  num_hidden_layers=m.layers, num_attention_heads=m.heads, num_key_value_heads=m.kv_heads,
                  max_position_embeddings=m.max_seq, tie_word_embeddings=m.tied_embeddings,
                  attention_dropout=0.0, use_cache=False, bos_token_id=0, eos_token_id=0)
    cfg._attn_implementation = attention
    return cfg


class Harness:
    """One model of the `step` sweep, with what the phase markers need: the LM head (its output are the
    logits) and the final norm (its input's gradient marks the end of the LM-head + final-norm backward)."""

    def __init__(self, stack, key, attention, mode, recompute, seed=0):
        self.stack, self.key, self.attention, self.mode, self.recompute = stack, key, attention, mode, recompute
        torch.manual_seed(seed)
        if stack == "hf":
            import transformers as tf
            self.shape = STEP_SHAPES[key]
            self.model_class = HF_CLASSES[key]
            self.model = getattr(tf, self.model_class)(_hf_config(key, attention))
            if recompute == "full":   # (5.23 warns that this name becomes activation_checkpointing_enable in v6)
                warnings.filterwarnings("ignore", message=".*gradient_checkpointing_enable.*")
                self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            base = self.model.transformer if key == "gpt2" else self.model.model
            self.final_norm = base.ln_f if key == "gpt2" else base.norm
            self.activation = self.model.config.activation_function if key == "gpt2" else self.model.config.hidden_act
            self.stand_ins = ""
        else:
            style = "gpt" if key == "gpt2" else "llama"
            self.shape = STEP_SHAPES[key]
            self.model_class = f"tools.measure_memory.Transformer[{style}]"
            att = "eager" if attention == "eager" else "flash"
            self.model = Transformer(self.shape, attention=att, dropout=0.0, recompute=recompute)
            self.final_norm = self.model.head.norm
            self.activation = "gelu_tanh" if style == "gpt" else "silu"
            self.stand_ins = FUSED_STAND_INS[style]
        self.model = self.model.to(MODES[mode]).train()
        self.on_logits = None

    def loss(self, ids, labels):
        """The loss as a training loop gets it: HF computes it inside the model from ``labels`` (its
        ForCausalLMLoss upcasts the logits to fp32); the model outputs are dropped, as the HF Trainer does."""
        if self.stack == "hf":
            return self.model(input_ids=ids, labels=labels, use_cache=False).loss
        return self.model(ids, labels)

    def install_markers(self, on_logits, on_final_norm_grad):
        handles = []
        if self.stack == "hf":
            handles.append(self.model.lm_head.register_forward_hook(lambda m, a, o: on_logits(o)))
        else:
            self.model.head.on_logits = on_logits

        def pre(mod, args):
            if torch.is_tensor(args[0]) and args[0].requires_grad:
                args[0].register_hook(on_final_norm_grad)
        handles.append(self.final_norm.register_forward_pre_hook(pre))
        return handles

    def remove_markers(self, handles):
        for h in handles:
            h.remove()
        if self.stack != "hf":
            self.model.head.on_logits = None


def _optimizer(params, impl):
    kw = {"foreach": dict(foreach=True), "forloop": dict(foreach=False), "fused": dict(fused=True)}[impl]
    return torch.optim.AdamW(params, lr=1e-4, **kw)


def _autocast(mode):
    return torch.autocast("cpu", dtype=torch.bfloat16) if mode == "autocast-bf16" else contextlib.nullcontext()


def _attention_impl(h, ops):
    if h.attention == "eager":
        return "eager-matmul"
    if "_scaled_dot_product_flash_attention_for_cpu" in ops:
        return "sdpa-flash-cpu"
    if "_scaled_dot_product_attention_math" in ops or "_scaled_dot_product_attention_math_for_mps" in ops:
        return "sdpa-math"
    return "sdpa-other"


def _dtype(t):
    return str(t).replace("torch.", "") if t is not None else ""


def _phase_columns(tr, pmax: dict, info: dict, *, input_bytes, forward_end, backward_end, optimizer_end) -> dict:
    """The live-bytes columns of one measured step, phase by phase (the ``step`` and ``lora`` CSVs share them)."""
    return {
        "baseline_bytes": tr.baseline, "input_bytes": input_bytes,
        "forward_max_bytes": pmax["forward"], "loss_forward_max_bytes": pmax["loss_forward"],
        "forward_end_bytes": forward_end,
        "loss_backward_max_bytes": pmax["loss_backward"], "logits_grad_bytes": info.get("logits_grad_live", ""),
        "head_backward_max_bytes": pmax["head_backward"],
        "head_backward_end_bytes": info.get("head_backward_end_live", ""),
        "backward_max_bytes": pmax["backward"], "backward_end_bytes": backward_end,
        "optimizer_max_bytes": pmax["optimizer"], "optimizer_end_bytes": optimizer_end,
    }


def measure_step(stack, key, *, mode, attention, recompute, optimizer_impl, batch, seq, timeline=False):
    """One steady-state training step (after one warm-up step, grads set to None), op by op."""
    h = Harness(stack, key, attention, mode, recompute)
    m = h.shape
    params = list(h.model.parameters())
    opt = _optimizer(params, optimizer_impl)
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, m.vocab, (batch, seq), generator=gen)
    labels = ids.clone() if stack == "hf" else torch.randint(0, m.vocab, (batch, seq), generator=gen)
    with _autocast(mode):             # warm-up: creates AdamW's states
        loss = h.loss(ids, labels)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    del loss
    gc.collect()

    state = [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v)]
    tr = LiveBytes(record_timeline=timeline)
    tr.add_baseline(params + [p.grad for p in params if p.grad is not None] + state, params)
    tr.add_baseline(list(h.model.buffers()))
    input_bytes = ids.untyped_storage().nbytes() + labels.untyped_storage().nbytes()
    tr.add_baseline([ids, labels])
    info = {}

    def on_logits(t):
        info["logits_dtype"] = t.dtype
        tr.set_phase("loss_forward")
        if t.requires_grad:
            t.register_hook(on_logits_grad)

    def on_logits_grad(g):
        info["logits_grad_dtype"] = g.dtype
        info["logits_grad_live"] = tr.live
        tr.set_phase("head_backward")

    def on_final_norm_grad(g):
        info["head_backward_end_live"] = tr.live
        tr.set_phase("backward")

    handles = h.install_markers(on_logits, on_final_norm_grad)
    t0 = time.perf_counter()
    with tr:
        tr.set_phase("forward")
        with _autocast(mode):
            loss = h.loss(ids, labels)
        forward_end = tr.live
        wc_forward_end = tr.weight_copy_live
        tr.set_phase("loss_backward")
        loss.backward()
        backward_end = tr.live
        wc_backward_end = tr.weight_copy_live
        tr.set_phase("optimizer")
        opt.step()
        tr._record("<end>")
        optimizer_end = tr.live
    seconds = time.perf_counter() - t0
    h.remove_markers(handles)
    lossval = loss.item()
    del loss
    gc.collect()
    grad_bytes = sum(p.grad.untyped_storage().nbytes() for p in {id(p): p for p in params}.values()
                     if p.grad is not None)
    residual = tr.live - (tr.baseline + grad_bytes)   # after the step only states and grads may remain
    uniq = {p.untyped_storage().data_ptr(): p for p in params}.values()
    opt_bytes = sum(v.nbytes for s in opt.state.values() for k, v in s.items() if torch.is_tensor(v) and k != "step")
    step_bytes = sum(v.nbytes for s in opt.state.values() for k, v in s.items() if torch.is_tensor(v) and k == "step")
    phases = ("forward", "loss_forward", "loss_backward", "head_backward", "backward", "optimizer")
    pmax = {ph: tr.phase_max.get(ph, 0) for ph in phases}
    peak_phase = max(phases, key=lambda ph: pmax[ph])
    row = {
        "stack": stack, "model_class": h.model_class, "model": m.name,
        "layers": m.layers, "hidden": m.hidden, "heads": m.heads, "kv_heads": m.kv_heads, "head_dim": m.head_dim,
        "ffn": m.ffn_hidden, "vocab": m.vocab, "norm": m.norm, "activation": h.activation,
        "gated_mlp": m.gated_mlp, "bias": m.bias, "qkv_bias": m.qkv_bias, "tied_embeddings": m.tied_embeddings,
        "learned_pos": m.learned_pos, "max_seq": m.max_seq, "n_params": sum(p.numel() for p in uniq),
        "stand_ins": h.stand_ins,
        "mode": mode, "param_dtype": _dtype(params[0].dtype), "attention": attention,
        "attention_impl": _attention_impl(h, tr.ops_seen), "recompute": recompute,
        "optimizer_impl": optimizer_impl, "batch": batch, "seq": seq,
        "logits_dtype": _dtype(info.get("logits_dtype")), "logits_grad_dtype": _dtype(info.get("logits_grad_dtype")),
        **_phase_columns(tr, pmax, info, input_bytes=input_bytes, forward_end=forward_end,
                         backward_end=backward_end, optimizer_end=optimizer_end),
        "peak_bytes": max(pmax.values()), "peak_phase": peak_phase,
        "weight_copy_forward_end_bytes": wc_forward_end, "weight_copy_backward_end_bytes": wc_backward_end,
        "param_bytes": sum(p.untyped_storage().nbytes() for p in uniq), "grad_bytes": grad_bytes,
        "optimizer_state_bytes": opt_bytes, "optimizer_step_bytes": step_bytes,
        "end_residual_bytes": residual, "untracked_input_bytes": tr.untracked,
        "n_ops_forward": tr.phase_ops.get("forward", 0) + tr.phase_ops.get("loss_forward", 0),
        "n_ops_backward": sum(tr.phase_ops.get(p, 0) for p in ("loss_backward", "head_backward", "backward")),
        "n_ops_optimizer": tr.phase_ops.get("optimizer", 0),
        "cuda_max_memory_allocated_bytes": (torch.cuda.max_memory_allocated() if torch.cuda.is_available() else ""),
        "loss": round(lossval, 4), "step_seconds": round(seconds, 3),
    }
    return row, tr


def _weight_copy_max(tr):
    return max((wc for _, _, _, wc in tr.timeline), default=0) if tr.timeline else ""


# ---------------------------------------------------------------------------- saved tensors of one layer
_LAYER_RE = re.compile(r"(?:^|\.)(?:layers|h)\.(\d+)(?:\.|$)")


def _term(elems, shape, m, b, s):
    """Which size a saved storage has, as a symbol: elements = b*s*X (X in h, f, g*d, a*s, ...)."""
    cands = [("h", m.hidden), ("3h", 3 * m.hidden), ("f", m.ffn_hidden), ("2f", 2 * m.ffn_hidden),
             ("a*d", m.heads * m.head_dim), ("g*d", m.kv_heads * m.head_dim),
             ("2g*d", 2 * m.kv_heads * m.head_dim), ("(a+2g)*d", (m.heads + 2 * m.kv_heads) * m.head_dim),
             ("a*s", m.heads * s), ("s", s), ("a", m.heads), ("1", 1)]
    if elems % (b * s) == 0:
        x = elems // (b * s)
        for name, v in cands:
            if v == x:
                return "b*s*" + name
    for name, v in (("s*d", s * m.head_dim), ("s*s", s * s), ("s", s), ("d", m.head_dim), ("h", m.hidden)):
        if elems == v:
            return name
    return "other"


def list_saved(stack, key, *, mode, attention, batch=2, seq=80, layer=1):
    """The storages autograd saves in decoder layer ``layer`` during one forward (deduplicated by storage)."""
    h = Harness(stack, key, attention, mode, "none")
    m = h.shape
    params = list(h.model.parameters())
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, m.vocab, (batch, seq), generator=gen)
    labels = ids.clone() if stack == "hf" else torch.randint(0, m.vocab, (batch, seq), generator=gen)
    tr = LiveBytes()
    tr.add_baseline(params, params)
    tr.add_baseline(list(h.model.buffers()) + [ids, labels])
    tagger = ModuleTagger(h.model, tr)
    saved = {}                        # ptr -> record

    def pack(t):
        if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
            return t
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if st.nbytes() == 0 or ptr in tr.param_ptrs:
            return t
        mod = tagger.stack[-1]
        mm = _LAYER_RE.search(mod)
        lay = int(mm.group(1)) if mm else None
        rec = saved.get(ptr)
        if rec is None:
            k = tr.known.get(ptr)
            cat = k[3] if k else "untracked"
            if cat == "activation" and _is_weight_copy(t):
                cat = "weight_copy"
            saved[ptr] = rec = {"nbytes": st.nbytes(), "keep": st, "dtype": t.dtype, "shape": tuple(t.shape),
                                "elems": st.nbytes() // t.element_size(), "op": k[1] if k else "-",
                                "created_in": k[2] if k else "-", "kind": cat, "savers": [], "layers": set()}
        if mod not in rec["savers"]:
            rec["savers"].append(mod)
        rec["layers"].add(lay)
        return t

    with tr, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with _autocast(mode):
            loss = h.loss(ids, labels)
    tagger.remove()
    rows = []
    for rec in saved.values():
        if layer not in rec["layers"]:
            continue
        shared = len(rec["layers"]) > 1 or not _LAYER_RE.search(rec["created_in"] or "")
        kind = rec["kind"]
        if kind == "baseline":
            kind = "buffer_or_input"
        elif kind == "activation" and shared:
            kind = "shared"   # saved by several layers or made outside the layers (rotary tables, masks)
        rows.append({"stack": stack, "model_class": h.model_class, "mode": mode, "attention": attention,
                     "attention_impl": _attention_impl(h, tr.ops_seen), "batch": batch, "seq": seq,
                     "hidden": m.hidden, "ffn": m.ffn_hidden, "heads": m.heads, "kv_heads": m.kv_heads,
                     "head_dim": m.head_dim, "layer": layer,
                     "saved_by": ";".join(rec["savers"]), "created_in": rec["created_in"], "op": rec["op"],
                     "kind": kind, "shape": "x".join(map(str, rec["shape"])) or "scalar",
                     "dtype": _dtype(rec["dtype"]), "elements": rec["elems"], "nbytes": rec["nbytes"],
                     "term": _term(rec["elems"], rec["shape"], m, batch, seq)})
    del loss
    return rows


# ---------------------------------------------------------------------------- the sweep
def step_configurations(quick=False):
    """(stack, key, mode, attention, recompute, optimizer_impl, batch, seq), deduplicated."""
    out = []
    if quick:
        for mode in STEP_MODES:
            out.append(("hf", "llama", mode, "sdpa", "none", "foreach", 1, 128))
        out += [("hf", "gpt2", "bf16", "eager", "none", "foreach", 1, 128),
                ("hf", "qwen2", "autocast-bf16", "sdpa", "full", "foreach", 1, 128),
                ("hf", "llama", "bf16", "sdpa", "none", "forloop", 1, 128),
                ("hf", "llama", "bf16", "sdpa", "none", "fused", 1, 128),
                ("fused", "llama", "bf16", "sdpa", "none", "foreach", 1, 128)]
        return out
    for key in ("llama", "gpt2", "qwen2"):
        for mode, att, s, b in itertools.product(STEP_MODES, ("eager", "sdpa"), (128, 256, 512), (1, 2)):
            out.append(("hf", key, mode, att, "none", "foreach", b, s))
        for mode, att, s in itertools.product(STEP_MODES, ("eager", "sdpa"), (256, 512)):
            out.append(("hf", key, mode, att, "full", "foreach", 2, s))
        for mode, opt in itertools.product(STEP_MODES, ("forloop", "fused")):
            out.append(("hf", key, mode, "sdpa", "none", opt, 2, 256))
    for key in ("llama", "gpt2"):
        for mode, att, s in itertools.product(STEP_MODES, ("eager", "sdpa"), (128, 256, 512)):
            out.append(("fused", key, mode, att, "none", "foreach", 2, s))
        for mode, att in itertools.product(STEP_MODES, ("eager", "sdpa")):
            out.append(("fused", key, mode, att, "full", "foreach", 2, 256))
        for mode, opt in itertools.product(STEP_MODES, ("forloop", "fused")):
            out.append(("fused", key, mode, "sdpa", "none", opt, 2, 256))
    return list(dict.fromkeys(out))


TIMELINE_CONFIG = ("hf", "llama", "autocast-bf16", "sdpa", "none", "foreach", 2, 512)


def _downsample(timeline, limit=2000):
    """At most ``limit`` rows: every k-th op, plus every phase marker and each phase's maximum."""
    keep = set()
    best = {}
    for i, (ph, op, live, _) in enumerate(timeline):
        if op.startswith("<"):
            keep.add(i)
        if live > timeline[best[ph]][2] if ph in best else True:
            best[ph] = i
    keep |= set(best.values())
    k = max(1, math.ceil(len(timeline) / max(1, limit - len(keep))))
    keep |= set(range(0, len(timeline), k))
    keep.add(len(timeline) - 1)
    return sorted(keep)


def cmd_step(args):
    """Sub-command ``step``: live bytes over one whole training step, HF models and the fused stack."""
    import transformers
    tf_version = transformers.__version__
    transformers.logging.set_verbosity_error()
    today = _dt.date.today().isoformat()
    selfcheck()
    t_start = time.perf_counter()
    cfgs = step_configurations(args.quick)
    if TIMELINE_CONFIG not in cfgs:
        cfgs = [TIMELINE_CONFIG] + cfgs
    rows, timeline_rows = [], []
    for i, c in enumerate(cfgs, 1):
        stack, key, mode, att, rc, oi, b, s = c
        want_tl = c == TIMELINE_CONFIG
        row, tr = measure_step(stack, key, mode=mode, attention=att, recompute=rc, optimizer_impl=oi,
                               batch=b, seq=s, timeline=True)
        row["weight_copy_max_bytes"] = _weight_copy_max(tr)
        row.update(torch_version=torch.__version__, transformers_version=tf_version if stack == "hf" else "",
                   measured_on=today)
        rows.append(row)
        if want_tl:
            for j in _downsample(tr.timeline):
                ph, op, live, wc = tr.timeline[j]
                timeline_rows.append({"op_index": j, "phase": ph, "op": op, "live_bytes": live,
                                      "weight_copy_bytes": wc, "stack": stack, "model_class": row["model_class"],
                                      "mode": mode, "attention": att, "recompute": rc, "optimizer_impl": oi,
                                      "batch": b, "seq": s})
        print(f"[{i:3d}/{len(cfgs)}] {stack:5s} {key:5s} {mode:13s} {att:5s} {rc:4s} {oi:7s} b={b} s={s:3d} "
              f"peak={row['peak_bytes'] / 2**20:8.2f} MiB ({row['peak_phase']:13s}) base="
              f"{row['baseline_bytes'] / 2**20:7.2f} resid={row['end_residual_bytes']} "
              f"t={row['step_seconds']:.2f}s", flush=True)
    _write_csv(args.out, rows)
    _write_csv(args.timeline_out, timeline_rows)
    listing = []
    stacks = [("hf", k) for k in HF_CLASSES] + [("fused", "gpt2"), ("fused", "llama")]
    if args.quick:
        stacks = [("hf", "llama")]
    for (stack, key), mode, att in itertools.product(stacks, STEP_MODES, ("eager", "sdpa")):
        listing += list_saved(stack, key, mode=mode, attention=att)
    _write_csv(args.tensors_out, listing)
    print(f"wrote {len(rows)} rows to {args.out}, {len(timeline_rows)} to {args.timeline_out}, "
          f"{len(listing)} to {args.tensors_out} in {time.perf_counter() - t_start:.0f} s")


# ---------------------------------------------------------------------------- dist: per-rank states under torch.distributed
#: The model of the `dist` sweep: a real LlamaForCausalLM at a small shape (fp32, random seeded weights).
DIST_SHAPE = Model("dist-llama", layers=4, hidden=256, heads=8, kv_heads=2, ffn_hidden=688, vocab=8192,
                   gated_mlp=True, tied_embeddings=False, norm="rmsnorm", max_seq=256)
DIST_LAYOUTS = ("ddp", "zero1", "fsdp2", "fsdp2-no-reshard")


def _storage_bytes(tensors) -> int:
    """Bytes of the distinct storages behind ``tensors`` (DTensors counted by their local shard)."""
    seen, total = set(), 0
    for t in tensors:
        if t is None:
            continue
        local = t.to_local() if hasattr(t, "to_local") else t
        st = local.untyped_storage()
        if st.data_ptr() not in seen:
            seen.add(st.data_ptr())
            total += st.nbytes()
    return total


# ---------------------------------------------------------------------------- dist: collectives per step
#: How each collective that reaches the dispatcher is named in data/dist_collectives.csv, and which argument
#: holds its full (unsharded) buffer: ``c10d.*`` are the ProcessGroup calls (DDP's C++ reducer,
#: ZeroRedundancyOptimizer's broadcasts, FSDP2's all-gathers and reduce-scatters all go through them),
#: ``_c10d_functional.*`` the functional collectives DTensor uses for tensor and sequence parallelism.
#: ``"out"``/``"in"`` = the output/input tensor(s); ``"in*n"`` = the input times the group size.
COLLECTIVE_OPS = {
    "c10d.allreduce_": ("all-reduce", "in"), "c10d.allreduce_coalesced_": ("all-reduce", "in"),
    "c10d.broadcast_": ("broadcast", "in"),
    "c10d._allgather_base_": ("all-gather", "out"), "c10d.allgather_": ("all-gather", "out"),
    "c10d.allgather_into_tensor_coalesced_": ("all-gather", "out"),
    "c10d._reduce_scatter_base_": ("reduce-scatter", "in1"), "c10d.reduce_scatter_": ("reduce-scatter", "in1"),
    "c10d.reduce_scatter_tensor_coalesced_": ("reduce-scatter", "in1"),
    "c10d.alltoall_": ("all-to-all", "in1"), "c10d.alltoall_base_": ("all-to-all", "in1"),
    "_c10d_functional.all_reduce": ("all-reduce", "in"), "_c10d_functional.all_reduce_": ("all-reduce", "in"),
    "_c10d_functional.all_reduce_coalesced": ("all-reduce", "in"),
    "_c10d_functional.all_gather_into_tensor": ("all-gather", "in*n"),
    "_c10d_functional.all_gather_into_tensor_coalesced": ("all-gather", "in*n"),
    "_c10d_functional.reduce_scatter_tensor": ("reduce-scatter", "in"),
    "_c10d_functional.reduce_scatter_tensor_coalesced": ("reduce-scatter", "in"),
    "_c10d_functional.broadcast": ("broadcast", "in"), "_c10d_functional.all_to_all_single": ("all-to-all", "in"),
}
#: Dispatcher ops of the two namespaces that move no data (waits, autograd wrappers, barriers).
NOT_COLLECTIVES = {"_c10d_functional.wait_tensor", "_c10d_functional._wrap_tensor_autograd", "c10d.barrier",
                   "c10d.monitored_barrier_"}


def _tensors(x):
    return [t for t in tree_flatten(x)[0] if torch.is_tensor(t)]


class CollectiveCounter(TorchDispatchMode):
    """Counts every collective of a step on this rank: its kind, calls and the bytes of its full buffer.

    A ``TorchDispatchMode`` sees every op that reaches PyTorch's dispatcher. Since torch 2.0 a
    ``ProcessGroup``'s methods are dispatcher ops (``c10d::allreduce_``, ``c10d::_allgather_base_``, ...), so
    this sees the collectives DDP's C++ reducer launches from its autograd hooks, the ``dist.broadcast`` calls
    of ``ZeroRedundancyOptimizer`` and FSDP2's ``all_gather_into_tensor``/``reduce_scatter_tensor``, as well as
    the functional collectives (``_c10d_functional::*``) DTensor issues when it redistributes a tensor. (The
    CPU autograd engine runs the backward on the calling thread, so the mode is active there too; DTensor's
    own ``CommDebugMode`` gives the same counts for the TP/SP runs.) ``message_bytes`` is the full buffer of
    one call, before sharding: the tensor of an all-reduce or broadcast, the gathered output of an all-gather,
    the input of a reduce-scatter; the same convention as :func:`llmsizing.comm.communication`. An op of the
    two namespaces that is neither listed in :data:`COLLECTIVE_OPS` nor known to move no data is recorded as
    kind ``"other"`` rather than dropped. Set :attr:`phase` between the phases of the step."""

    def __init__(self, group_size):
        super().__init__()
        self.group_size = group_size
        self.phase = "forward"
        self.calls = {}          # (phase, kind, op, dtype, message_bytes) -> calls

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        from torch.distributed.tensor import DTensor
        if DTensor in types:
            # a tensor subclass (DTensor): let it run first, with this mode still active, so that the
            # collectives its sharding propagation issues inside the op (e.g. the all-reduce that turns a
            # Partial gradient into a Replicate one in the optimizer's arithmetic) come back here as plain ops;
            # CommDebugMode does the same
            return NotImplemented
        if func.namespace in ("c10d", "_c10d_functional"):
            name = f"{func.namespace}.{func._opname}"
            if name not in NOT_COLLECTIVES:
                kind, where = COLLECTIVE_OPS.get(name, ("other", "in"))
                first = args[0] if args else None
                if where == "out":                     # output tensor(s) first, input(s) second
                    ts = _tensors(first)
                elif where == "in1":                   # reduce-scatter (c10d): input is the second argument
                    ts = _tensors(args[1])
                else:
                    ts = _tensors(first)
                nbytes = sum(t.nbytes for t in ts) * (self.group_size if where == "in*n" else 1)
                dtype = str(ts[0].dtype).replace("torch.", "") if ts else ""
                key = (self.phase, kind, name, dtype, nbytes)
                self.calls[key] = self.calls.get(key, 0) + 1
        return func(*args, **kwargs)


def _tp_plan(m, sp: bool):
    """DTensor plan of a LlamaForCausalLM: Megatron-style tensor parallelism (column-parallel q, k, v, gate,
    up; row-parallel o, down; vocabulary-parallel embedding; column-parallel LM head whose logits are gathered,
    since HF's loss needs the whole vocabulary) and, with ``sp``, sequence parallelism as torchtitan applies it
    (norms ``SequenceParallel`` on sequence shards; each attention and MLP gathers its input once with
    ``PrepareModuleInput``; o and down reduce-scatter to sequence shards; residual stream kept as DTensors)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel)
    if not sp:
        plan = {"model.embed_tokens": RowwiseParallel(input_layouts=Replicate()),
                "lm_head": ColwiseParallel(output_layouts=Replicate())}
    else:
        plan = {"model.embed_tokens": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1),
                                                      use_local_output=False),
                "model.norm": SequenceParallel(),
                "lm_head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())}
    for i in range(m.layers):
        p = f"model.layers.{i}."
        for name in ("q_proj", "k_proj", "v_proj"):
            plan[p + f"self_attn.{name}"] = ColwiseParallel()
        for name in ("gate_proj", "up_proj"):
            plan[p + f"mlp.{name}"] = ColwiseParallel()
        if not sp:
            plan[p + "self_attn.o_proj"] = RowwiseParallel()
            plan[p + "mlp.down_proj"] = RowwiseParallel()
        else:
            plan[p + "input_layernorm"] = SequenceParallel()
            plan[p + "post_attention_layernorm"] = SequenceParallel()
            plan[p + "self_attn"] = PrepareModuleInput(input_kwarg_layouts={"hidden_states": Shard(1)},
                                                       desired_input_kwarg_layouts={"hidden_states": Replicate()})
            plan[p + "mlp"] = PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))
            plan[p + "self_attn.o_proj"] = RowwiseParallel(output_layouts=Shard(1), use_local_output=False)
            plan[p + "mlp.down_proj"] = RowwiseParallel(output_layouts=Shard(1), use_local_output=False)
    return plan


#: Tokens per rank and step of the `dist` sweep (one sequence; the same on every rank).
DIST_BATCH, DIST_SEQ = 1, 64


def _dist_worker(rank, world, layout, port, queue):
    import os

    import torch.distributed as dist
    import transformers as tf

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    m = DIST_SHAPE
    cfg = tf.LlamaConfig(vocab_size=m.vocab, hidden_size=m.hidden, intermediate_size=m.ffn_hidden,
                         num_hidden_layers=m.layers, num_attention_heads=m.heads, num_key_value_heads=m.kv_heads,
                         max_position_embeddings=m.max_seq, tie_word_embeddings=False, use_cache=False,
                         bos_token_id=0, eos_token_id=0)
    model = tf.LlamaForCausalLM(cfg).train()
    n_params = sum(p.numel() for p in model.parameters())
    if layout in ("tp", "sp"):   # Megatron-style tensor (and sequence) parallelism with DTensor
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import parallelize_module

        mesh = init_device_mesh("cpu", (world,))
        parallelize_module(model, mesh, _tp_plan(m, sp=layout == "sp"))
        net = model
        opt = torch.optim.AdamW(net.parameters(), lr=1e-4, foreach=False)
    elif layout == "ddp":
        net = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.AdamW(net.parameters(), lr=1e-4, foreach=True)
    elif layout == "zero1":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        net = torch.nn.parallel.DistributedDataParallel(model)
        opt = ZeroRedundancyOptimizer(net.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-4)
    else:
        from torch.distributed.fsdp import fully_shard
        reshard = layout == "fsdp2"
        for layer in model.model.layers:
            fully_shard(layer, reshard_after_forward=reshard)
        fully_shard(model, reshard_after_forward=reshard)
        net = model
        opt = torch.optim.AdamW(net.parameters(), lr=1e-4, foreach=True)
    weight_bytes = _storage_bytes(list(model.parameters()))   # before any step (the TP row's figure)
    gen = torch.Generator().manual_seed(1)                    # the same tokens on every rank (TP/SP need it)
    counter = CollectiveCounter(world)
    for step in range(3):          # two warm-ups (DDP rebuilds its buckets in the 2nd), then the counted step
        ids = torch.randint(0, m.vocab, (DIST_BATCH, DIST_SEQ), generator=gen)
        mode = counter if step == 2 else contextlib.nullcontext()
        check = contextlib.nullcontext()
        if step == 2 and layout in ("tp", "sp"):            # DTensor's own counter, as a cross-check
            from torch.distributed.tensor.debug import CommDebugMode
            check = CommDebugMode()
        with mode, check:
            counter.phase = "forward"
            opt.zero_grad(set_to_none=False)
            loss = net(input_ids=ids, labels=ids).loss
            counter.phase = "backward"
            loss.backward()
            counter.phase = "optimizer"
            opt.step()
    params = list(model.parameters())
    if layout in ("tp", "sp"):     # weights only, as before (the states of a TP rank are its weights x 4)
        row = {"param_bytes": weight_bytes, "grad_bytes": "", "optimizer_state_bytes": "",
               "grad_is_bucket_view": ""}
    else:
        optim = opt.optim if layout == "zero1" else opt   # ZeroRedundancyOptimizer wraps the rank's AdamW
        moments = [v for s in optim.state.values() for k, v in s.items() if torch.is_tensor(v) and k != "step"]
        row = {"param_bytes": _storage_bytes(params), "grad_bytes": _storage_bytes([p.grad for p in params]),
               "optimizer_state_bytes": _storage_bytes(moments),
               "grad_is_bucket_view": bool(getattr(net, "gradient_as_bucket_view", False))}
    row = {"layout": layout, "world_size": world, "rank": rank, "n_params": n_params, **row,
           "torch_version": torch.__version__, "transformers_version": tf.__version__}
    if not isinstance(check, contextlib.nullcontext):
        ours, theirs = {}, {str(k).split(".")[-1]: v for k, v in check.get_comm_counts().items()}
        for (_, _, op, _, _), n in counter.calls.items():
            ours[op.split(".")[-1]] = ours.get(op.split(".")[-1], 0) + n
        assert ours == theirs, (layout, ours, theirs)
    colls = [{"layout": layout, "world_size": world, "rank": rank, "phase": ph, "kind": kind, "op": op,
              "dtype": dt, "message_bytes": nb, "calls": n}
             for (ph, kind, op, dt, nb), n in counter.calls.items()]
    queue.put((row, colls))
    dist.barrier()
    dist.destroy_process_group()


#: The runs of the `dist` sweep: (layout, world size, whether its per-rank states go to dist_measurements.csv).
#: TP and SP run on 2 ranks (tp <= kv_heads = 2 keeps whole KV heads); FSDP2 also on 3, whose shards of
#: dimension-0 sizes not divisible by 3 are padded.
DIST_RUNS = ([(lay, w, True) for lay in DIST_LAYOUTS for w in (2, 4)] + [("tp", 2, True), ("sp", 2, False)]
             + [("fsdp2", 3, False), ("fsdp2-no-reshard", 3, False)])


def cmd_dist(args):
    """Sub-command ``dist``: per-rank parameter, gradient and AdamW-state bytes of a real LlamaForCausalLM under
    DDP, ZeroRedundancyOptimizer (ZeRO-1) and FSDP2 ``fully_shard`` (ZeRO-3; ``reshard_after_forward=False`` is
    the ZeRO-2-like variant), with 2 and 4 gloo processes on the CPU; and the per-rank weights of Megatron-style
    tensor parallelism with DTensor's ``parallelize_module`` (column-parallel q, k, v, gate, up and LM head,
    row-parallel o and down, vocabulary-parallel embedding) on 2 ranks. Measured at rest, after the step: FSDP2's
    unsharded parameters during forward and backward, and DDP's gradient buckets (a flat copy of the gradients
    when ``gradient_as_bucket_view`` is off, its default), are not in these figures.

    The same runs (plus sequence parallelism on 2 ranks and FSDP2 on 3) count the collectives of one training
    step on every rank with :class:`CollectiveCounter` (phase, kind, op, dtype, full-buffer bytes, calls) and
    write them to ``--collectives-out`` (data/dist_collectives.csv; chapter 9). The counted step is the third:
    DDP rebuilds its gradient buckets (and broadcasts their order) during the second."""
    import socket

    import torch.multiprocessing as mp

    today = _dt.date.today().isoformat()
    rows, coll_rows = [], []
    runs = [r for r in DIST_RUNS if (not args.quick or r[1] == 2) and (not args.only or r[0] in args.only)]
    m = DIST_SHAPE
    config = dict(layers=m.layers, hidden=m.hidden, heads=m.heads, kv_heads=m.kv_heads, head_dim=m.head_dim,
                  ffn=m.ffn_hidden, vocab=m.vocab, tied_embeddings=m.tied_embeddings)
    for layout, world, states in runs:
        t0 = time.perf_counter()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        procs = [ctx.Process(target=_dist_worker, args=(r, world, layout, port, queue)) for r in range(world)]
        for p in procs:
            p.start()
        got = []
        while len(got) < world:                  # fail fast if a rank dies (its peers would wait forever)
            try:
                got.append(queue.get(timeout=5))
            except Exception:
                if any(p.exitcode not in (None, 0) for p in procs):
                    for p in procs:
                        p.kill()
                    raise RuntimeError(f"dist {layout} x {world}: a rank failed (see its traceback above)")
        for p in procs:
            p.join()
        for row, colls in sorted(got, key=lambda g: g[0]["rank"]):
            versions = {k: row[k] for k in ("torch_version", "transformers_version")}
            for c in sorted(colls, key=lambda c: (c["phase"], c["kind"], c["op"], -c["message_bytes"])):
                coll_rows.append({**c, "batch": DIST_BATCH, "seq": DIST_SEQ, "n_params": row["n_params"],
                                  **versions, **config, "measured_on": today})
            if states:
                row.update(**config, measured_on=today)
                rows.append(row)
            calls = sum(c["calls"] for c in colls)
            print(f"{layout:16s} world={world} rank={row['rank']} params={row['param_bytes']:>10} "
                  f"grads={row['grad_bytes']:>10} adam={row['optimizer_state_bytes']:>10} "
                  f"collective calls={calls}", flush=True)
        print(f"  {layout} x {world}: {time.perf_counter() - t0:.1f} s", flush=True)
    _write_csv(args.out, rows)
    _write_csv(args.collectives_out, coll_rows)
    print(f"wrote {len(rows)} rows to {args.out}, {len(coll_rows)} to {args.collectives_out}")


# ---------------------------------------------------------------------------- peft: trainable parameters of LoRA
# Sub-command ``peft`` writes data/peft_trainable_params.csv, one row per (model, r, targets):
#   model, model_class            catalogue name (data/models.csv) and the HF class built from its shape
#   layers .. vocab, tied_embeddings   the catalogue's shape, as passed to the HF config
#   r, lora_alpha, lora_dropout   the LoraConfig (alpha = 2r, dropout 0.05: common choices; they change no count)
#   targets, target_modules       "attention" (q,k,v,o_proj) or "all-linear" (+ gate,up,down_proj), the exact list
#   n_adapted_modules             how many nn.Linear PEFT wrapped (layers x targets)
#   trainable_params, total_params   what PeftModel.get_nb_trainable_parameters() returns (the two numbers
#                                  print_trainable_parameters() prints); total includes the adapters
#   base_params                   total - trainable (the frozen model); catalogue_params: the catalogue's
#                                  published count (base_params must equal it)
#   peft_version, torch_version, transformers_version, measured_on
# Built on the meta device: no weight is downloaded or allocated (a few seconds for all 18 rows).
PEFT_MODELS = ("llama-2-7b", "llama-3-8b", "mistral-7b")
PEFT_RANKS = (8, 16, 64)
LORA_TARGETS = {"attention": ("q_proj", "k_proj", "v_proj", "o_proj"),
                "all-linear": ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")}


def _hf_model_from_shape(m: Model, family: str, attention="sdpa"):
    """An HF LlamaForCausalLM / MistralForCausalLM with the shape of ``m`` (random weights; call it under
    ``torch.device("meta")`` to allocate nothing)."""
    import transformers as tf
    kw = dict(vocab_size=m.vocab, hidden_size=m.hidden, intermediate_size=m.ffn_hidden,
              num_hidden_layers=m.layers, num_attention_heads=m.heads, num_key_value_heads=m.kv_heads,
              head_dim=m.head_dim, max_position_embeddings=m.max_seq, tie_word_embeddings=m.tied_embeddings,
              attention_dropout=0.0, use_cache=False, bos_token_id=0, eos_token_id=0)
    if family == "mistral":
        cfg, cls = tf.MistralConfig(sliding_window=m.sliding_window, **kw), tf.MistralForCausalLM
    else:
        cfg, cls = tf.LlamaConfig(**kw), tf.LlamaForCausalLM
    cfg._attn_implementation = attention
    return cls(cfg)


def cmd_peft(args):
    """Sub-command ``peft``: trainable / total parameters PEFT reports for LoRA on real-size models (meta device)."""
    import peft
    import transformers
    from llmsizing.catalog import model_entry
    transformers.logging.set_verbosity_error()
    today = _dt.date.today().isoformat()
    rows = []
    models = PEFT_MODELS[:1] if args.quick else PEFT_MODELS
    for name, r, (tname, targets) in itertools.product(models, PEFT_RANKS, LORA_TARGETS.items()):
        entry = model_entry(name)
        m = entry.model
        family = "mistral" if name.startswith("mistral") else "llama"
        with torch.device("meta"):
            base = _hf_model_from_shape(m, family)
            cfg = peft.LoraConfig(r=r, lora_alpha=2 * r, lora_dropout=0.05, target_modules=list(targets),
                                  task_type="CAUSAL_LM")
            pm = peft.get_peft_model(base, cfg)
        trainable, total = pm.get_nb_trainable_parameters()
        n_adapted = sum(1 for mod in pm.modules() if isinstance(mod, peft.tuners.lora.LoraLayer))
        rows.append({"model": name, "model_class": type(base).__name__, "layers": m.layers, "hidden": m.hidden,
                     "heads": m.heads, "kv_heads": m.kv_heads, "head_dim": m.head_dim, "ffn": m.ffn_hidden,
                     "vocab": m.vocab, "tied_embeddings": m.tied_embeddings, "r": r, "lora_alpha": 2 * r,
                     "lora_dropout": 0.05, "targets": tname, "target_modules": ";".join(targets),
                     "n_adapted_modules": n_adapted, "trainable_params": trainable, "total_params": total,
                     "base_params": total - trainable, "catalogue_params": entry.published_params,
                     "peft_version": peft.__version__, "torch_version": torch.__version__,
                     "transformers_version": transformers.__version__, "measured_on": today})
        print(f"{name:11s} r={r:2d} {tname:10s} trainable={trainable:>11,} total={total:>14,} "
              f"base={'ok' if total - trainable == entry.published_params else 'MISMATCH'}", flush=True)
        del pm, base
    _write_csv(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")


# ---------------------------------------------------------------------------- lora: one LoRA training step, live bytes
# Sub-command ``lora`` writes data/lora_step_measurements.csv, one row per configuration: a real PEFT LoRA step
# (forward, HF's in-model loss, backward, AdamW on the adapters only) of a small HF LlamaForCausalLM on the CPU,
# with the `step` mode's live-bytes tracker (LiveBytes) and its phases. One warm-up step creates AdamW's states;
# ``zero_grad(set_to_none=True)``; then the measured step. Columns:
#   model .. tied_embeddings     the small shape (random seeded weights; nothing downloaded)
#   mode, param_dtype, adapter_dtype   fp32 / bf16 (model.to(bf16) *before* get_peft_model) / autocast-bf16
#                                (fp32 model, forward under CPU autocast), as in `step`. PEFT's get_peft_model
#                                (autocast_adapter_dtype=True, its default) keeps the adapters in fp32 on a
#                                bf16 base: adapter_dtype says what it did
#   attention, attention_impl, recompute   sdpa; recompute "full" = gradient_checkpointing_enable(use_reentrant=
#                                False) on the HF model before wrapping, as PEFT users do
#   r, lora_alpha, lora_dropout, targets, n_adapted_modules   the LoraConfig (alpha = 2r) and targets as in `peft`
#   batch, seq
#   trainable_params, total_params   PeftModel.get_nb_trainable_parameters()
#   base_weight_bytes            bytes of the frozen parameters (requires_grad False: the whole base model)
#   adapter_bytes                bytes of the trainable parameters (lora_A, lora_B)
#   grad_bytes                   gradients after the step (= adapter_bytes: frozen weights get none)
#   optimizer_state_bytes, optimizer_step_bytes   AdamW exp_avg + exp_avg_sq (adapters only); the step counters
#   baseline_bytes               live before the step: all parameters + AdamW states + buffers + ids/labels
#   input_bytes                  ids + labels
#   <phase>_max_bytes            the maximum live bytes in each phase of `step` (forward, loss_forward,
#                                loss_backward, head_backward, backward, optimizer); forward_end_bytes: live bytes
#                                when the forward (with the loss) returns; backward_end_bytes, optimizer_end_bytes
#   peak_bytes, peak_phase       the step's maximum live bytes (baseline included) and where it happens
#   saved_bytes                  storages autograd saves in the forward (deduplicated by storage; parameters,
#                                buffers, inputs and autocast's weight copies left out; under recompute only what
#                                is saved outside the checkpointed layers)
#   saved_lora_bytes             of those, the storages saved by a LoRA module (lora_dropout, lora_A, lora_B)
#   saved_lora_only_bytes        ... and saved by nothing else: the memory the adapters' path adds
#   saved_lora_fp32_bytes        of saved_lora_bytes, the fp32 ones (PEFT casts a bf16 input to the fp32 adapter)
#   weight_copy_forward_end_bytes   autocast's bf16 copies of weights alive at the end of the forward
#   end_residual_bytes           live - (baseline + grads) after the step (0: nothing leaks)
#   loss, step_seconds, peft_version, torch_version, transformers_version, measured_on
LORA_SHAPES = {
    "llama-256": Model("lora-llama-256", layers=4, hidden=256, heads=8, kv_heads=2, ffn_hidden=688, vocab=8192,
                       gated_mlp=True, tied_embeddings=False, norm="rmsnorm", max_seq=1024),
    "llama-512": Model("lora-llama-512", layers=2, hidden=512, heads=8, kv_heads=4, ffn_hidden=1376, vocab=8192,
                       gated_mlp=True, tied_embeddings=False, norm="rmsnorm", max_seq=1024),
}


def measure_lora(key, *, mode, r, targets, dropout, recompute, batch, seq, attention="sdpa"):
    """One steady-state LoRA step (after one warm-up step), op by op; returns a CSV row."""
    import peft
    m = LORA_SHAPES[key]
    torch.manual_seed(0)
    model = _hf_model_from_shape(m, "llama", attention)
    if recompute == "full":
        warnings.filterwarnings("ignore", message=".*gradient_checkpointing_enable.*")
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model = model.to(MODES[mode]).train()
    cfg = peft.LoraConfig(r=r, lora_alpha=2 * r, lora_dropout=dropout, target_modules=list(LORA_TARGETS[targets]),
                          task_type="CAUSAL_LM")
    pm = peft.get_peft_model(model, cfg).train()
    lora_layers = [mod for mod in pm.modules() if isinstance(mod, peft.tuners.lora.LoraLayer)]
    params = list({id(p): p for p in pm.parameters()}.values())
    trainable = [p for p in params if p.requires_grad]
    frozen = [p for p in params if not p.requires_grad]
    opt = _optimizer(trainable, "foreach")
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, m.vocab, (batch, seq), generator=gen)
    labels = ids.clone()

    def loss_of():
        return pm(input_ids=ids, labels=labels, use_cache=False).loss

    with _autocast(mode):             # warm-up: creates AdamW's states
        loss = loss_of()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    del loss
    gc.collect()

    state = [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v)]
    tr = LiveBytes()
    tr.add_baseline(params + state, params)
    tr.add_baseline(list(pm.buffers()))
    input_bytes = ids.untyped_storage().nbytes() + labels.untyped_storage().nbytes()
    tr.add_baseline([ids, labels])
    info = {}

    def on_logits(mod, a, t):
        tr.set_phase("loss_forward")
        if t.requires_grad:
            t.register_hook(on_logits_grad)

    def on_logits_grad(g):
        info["logits_grad_live"] = tr.live
        tr.set_phase("head_backward")

    def on_final_norm_grad(g):
        info["head_backward_end_live"] = tr.live
        tr.set_phase("backward")

    def pre(mod, a):
        if torch.is_tensor(a[0]) and a[0].requires_grad:
            a[0].register_hook(on_final_norm_grad)

    hf = pm.get_base_model()
    handles = [hf.lm_head.register_forward_hook(on_logits), hf.model.norm.register_forward_pre_hook(pre)]
    tagger = ModuleTagger(pm, tr)
    saved = {}                        # ptr -> [nbytes, saved by a lora module, saved by another, dtype]

    def pack(t):
        if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
            return t
        st = t.untyped_storage()
        ptr = st.data_ptr()
        k = tr.known.get(ptr)
        if st.nbytes() == 0 or ptr in tr.param_ptrs or (k and k[3] == "baseline") or _is_weight_copy(t):
            return t
        rec = saved.setdefault(ptr, [st.nbytes(), False, False, t.dtype])
        rec[1 if ".lora_" in tagger.stack[-1] else 2] = True
        return t

    t0 = time.perf_counter()
    with tr:
        tr.set_phase("forward")
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), _autocast(mode):
            loss = loss_of()
        forward_end = tr.live
        wc_forward_end = tr.weight_copy_live
        tagger.remove()
        tr.set_phase("loss_backward")
        loss.backward()
        backward_end = tr.live
        tr.set_phase("optimizer")
        opt.step()
        tr._record("<end>")
        optimizer_end = tr.live
    seconds = time.perf_counter() - t0
    for hd in handles:
        hd.remove()
    lossval = loss.item()
    del loss
    gc.collect()
    grad_bytes = sum(p.grad.untyped_storage().nbytes() for p in params if p.grad is not None)
    residual = tr.live - (tr.baseline + grad_bytes)
    n_trainable, n_total = pm.get_nb_trainable_parameters()
    opt_bytes = sum(v.nbytes for s in opt.state.values() for k, v in s.items() if torch.is_tensor(v) and k != "step")
    step_bytes = sum(v.nbytes for s in opt.state.values() for k, v in s.items() if torch.is_tensor(v) and k == "step")
    phases = ("forward", "loss_forward", "loss_backward", "head_backward", "backward", "optimizer")
    pmax = {ph: tr.phase_max.get(ph, 0) for ph in phases}
    lora_saved = [v for v in saved.values() if v[1]]

    class _H:                         # what _attention_impl reads
        pass
    hh = _H()
    hh.attention = attention
    row = {
        "model": m.name, "model_class": type(hf).__name__, "layers": m.layers, "hidden": m.hidden,
        "heads": m.heads, "kv_heads": m.kv_heads, "head_dim": m.head_dim, "ffn": m.ffn_hidden, "vocab": m.vocab,
        "tied_embeddings": m.tied_embeddings, "mode": mode, "param_dtype": _dtype(frozen[0].dtype),
        "adapter_dtype": _dtype(trainable[0].dtype), "attention": attention,
        "attention_impl": _attention_impl(hh, tr.ops_seen), "recompute": recompute,
        "r": r, "lora_alpha": 2 * r, "lora_dropout": dropout, "targets": targets,
        "n_adapted_modules": len(lora_layers), "batch": batch, "seq": seq,
        "trainable_params": n_trainable, "total_params": n_total,
        "base_weight_bytes": sum(p.untyped_storage().nbytes() for p in frozen),
        "adapter_bytes": sum(p.untyped_storage().nbytes() for p in trainable),
        "grad_bytes": grad_bytes, "optimizer_state_bytes": opt_bytes, "optimizer_step_bytes": step_bytes,
        **_phase_columns(tr, pmax, info, input_bytes=input_bytes, forward_end=forward_end,
                         backward_end=backward_end, optimizer_end=optimizer_end),
        "peak_bytes": max(pmax.values()), "peak_phase": max(phases, key=lambda ph: pmax[ph]),
        "saved_bytes": sum(v[0] for v in saved.values()),
        "saved_lora_bytes": sum(v[0] for v in lora_saved),
        "saved_lora_only_bytes": sum(v[0] for v in lora_saved if not v[2]),
        "saved_lora_fp32_bytes": sum(v[0] for v in lora_saved if v[3] == torch.float32),
        "weight_copy_forward_end_bytes": wc_forward_end, "end_residual_bytes": residual,
        "loss": round(lossval, 4), "step_seconds": round(seconds, 3),
    }
    return row


def lora_configurations(quick=False):
    """(key, mode, r, targets, dropout, recompute, batch, seq), deduplicated, around b=2, s=256."""
    if quick:
        return [("llama-256", "fp32", 16, "all-linear", 0.0, "none", 2, 128),
                ("llama-256", "bf16", 16, "attention", 0.05, "none", 2, 128),
                ("llama-256", "fp32", 16, "all-linear", 0.0, "full", 2, 128)]
    out = []
    for key in LORA_SHAPES:
        for mode, r, tg in itertools.product(STEP_MODES, PEFT_RANKS, LORA_TARGETS):
            out.append((key, mode, r, tg, 0.0, "none", 2, 256))                    # rank x targets
        for mode, (b, s) in itertools.product(("fp32", "bf16"), ((1, 128), (1, 512), (4, 256), (2, 512))):
            out.append((key, mode, 16, "all-linear", 0.0, "none", b, s))          # batch, sequence
        for mode, tg in itertools.product(STEP_MODES, LORA_TARGETS):
            out.append((key, mode, 16, tg, 0.0, "full", 2, 256))                  # checkpointing
            out.append((key, mode, 16, tg, 0.05, "none", 2, 256))                 # adapter dropout
        out.append((key, "fp32", 64, "all-linear", 0.0, "full", 2, 256))
        out.append((key, "fp32", 16, "all-linear", 0.05, "full", 2, 256))
    return list(dict.fromkeys(out))


def cmd_lora(args):
    """Sub-command ``lora``: live bytes over one PEFT LoRA training step of small HF Llama models."""
    import peft
    import transformers
    transformers.logging.set_verbosity_error()
    today = _dt.date.today().isoformat()
    selfcheck()
    rows = []
    cfgs = lora_configurations(args.quick)
    for i, (key, mode, r, tg, dp, rc, b, s) in enumerate(cfgs, 1):
        row = measure_lora(key, mode=mode, r=r, targets=tg, dropout=dp, recompute=rc, batch=b, seq=s)
        row.update(peft_version=peft.__version__, torch_version=torch.__version__,
                   transformers_version=transformers.__version__, measured_on=today)
        rows.append(row)
        print(f"[{i:3d}/{len(cfgs)}] {key} {mode:13s} r={r:2d} {tg:10s} drop={dp} {rc:4s} b={b} s={s:3d} "
              f"peak={row['peak_bytes'] / 2**20:7.2f} MiB ({row['peak_phase']}) base={row['base_weight_bytes'] / 2**20:.2f} "
              f"adapt={row['adapter_bytes'] / 2**10:.0f} KiB saved={row['saved_bytes'] / 2**20:.2f} "
              f"(lora {row['saved_lora_bytes'] / 2**20:.2f}, only {row['saved_lora_only_bytes'] / 2**20:.2f}) "
              f"resid={row['end_residual_bytes']}", flush=True)
    _write_csv(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")


# ---------------------------------------------------------------------------- nf4: bitsandbytes 4-bit storage
# Sub-command ``nf4`` writes data/nf4_storage.csv: what bitsandbytes stores for one linear layer's weight in
# 4-bit NF4 (QLoRA, Dettmers et al. 2023), one row per (shape, double quantisation on/off). The weight is a
# random bf16 (out, in) matrix made a ``bnb.nn.Params4bit`` and moved to the CPU, which quantises it (the path
# transformers' BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4") takes). Columns:
#   layer, out_features, in_features, n_params   the shape (catalogue projections, a small one, a ragged one)
#   source_dtype, quant_type, blocksize, double_quant, nested_blocksize   bf16 in; nf4; 64; compress_statistics
#   weight_bytes              the packed uint8 weight (two 4-bit codes per byte)
#   n_blocks, absmax_dtype, absmax_bytes   one absmax per block of 64 weights (uint8 if double-quantised,
#                             else fp32)
#   n_nested_blocks, nested_absmax_bytes, nested_offset_bytes   double quantisation: an fp32 absmax per 256
#                             first-level constants, plus an fp32 offset (their mean, subtracted before quantising)
#   quant_map_bytes, nested_quant_map_bytes   the 16-entry NF4 code and the 256-entry 8-bit code (fp32 tables)
#   total_bytes               everything above; bits_per_param = 8 * total / n_params;
#   bits_per_param_no_maps    the same without the two code tables (which a whole model could share)
#   bf16_bytes                2 * n_params, for comparison; dequant_rel_err: mean |W - dequant(W)| / mean |W|
#   bitsandbytes_version, torch_version, measured_on
NF4_SHAPES = [("llama-2-7b q_proj", 4096, 4096), ("llama-2-7b gate_proj", 11008, 4096),
              ("llama-2-7b down_proj", 4096, 11008), ("llama-3-8b k_proj", 1024, 4096),
              ("llama-3-8b gate_proj", 14336, 4096), ("lora-llama-256 gate_proj", 688, 256),
              ("ragged", 1000, 333)]


def cmd_nf4(args):
    """Sub-command ``nf4``: bytes bitsandbytes' NF4 storage takes for one linear layer's weight, on the CPU."""
    import bitsandbytes as bnb
    import bitsandbytes.functional as bnbF
    today = _dt.date.today().isoformat()
    rows = []
    shapes = NF4_SHAPES[-2:] if args.quick else NF4_SHAPES
    for (layer, out_f, in_f), dq in itertools.product(shapes, (True, False)):
        torch.manual_seed(0)
        w = (torch.randn(out_f, in_f) * 0.02).to(torch.bfloat16)
        p = bnb.nn.Params4bit(w.clone(), requires_grad=False, quant_type="nf4", blocksize=64,
                              compress_statistics=dq).to("cpu")
        qs = p.quant_state
        if not getattr(p, "bnb_quantized", False) or qs is None:
            raise SystemExit("bitsandbytes did not quantise on the CPU")
        nb = lambda t: t.untyped_storage().nbytes() if torch.is_tensor(t) else 0  # noqa: E731
        s2 = qs.state2 if qs.nested else None
        row = {"layer": layer, "out_features": out_f, "in_features": in_f, "n_params": out_f * in_f,
               "source_dtype": _dtype(w.dtype), "quant_type": qs.quant_type, "blocksize": qs.blocksize,
               "double_quant": bool(qs.nested), "nested_blocksize": s2.blocksize if s2 else "",
               "weight_bytes": nb(p.data), "n_blocks": qs.absmax.numel(), "absmax_dtype": _dtype(qs.absmax.dtype),
               "absmax_bytes": nb(qs.absmax), "n_nested_blocks": s2.absmax.numel() if s2 else 0,
               "nested_absmax_bytes": nb(s2.absmax) if s2 else 0,
               "nested_offset_bytes": nb(qs.offset) if s2 else 0,
               "quant_map_bytes": nb(qs.code), "nested_quant_map_bytes": nb(s2.code) if s2 else 0}
        row["total_bytes"] = sum(row[k] for k in ("weight_bytes", "absmax_bytes", "nested_absmax_bytes",
                                                  "nested_offset_bytes", "quant_map_bytes",
                                                  "nested_quant_map_bytes"))
        row["bits_per_param"] = round(8 * row["total_bytes"] / row["n_params"], 5)
        maps = row["quant_map_bytes"] + row["nested_quant_map_bytes"]
        row["bits_per_param_no_maps"] = round(8 * (row["total_bytes"] - maps) / row["n_params"], 5)
        row["bf16_bytes"] = 2 * row["n_params"]
        wd = bnbF.dequantize_4bit(p.data, qs).float()
        row["dequant_rel_err"] = round(((wd - w.float()).abs().mean() / w.float().abs().mean()).item(), 4)
        row.update(bitsandbytes_version=bnb.__version__, torch_version=torch.__version__, measured_on=today)
        rows.append(row)
        print(f"{layer:26s} {out_f:5d}x{in_f:5d} dq={dq!s:5s} total={row['total_bytes']:>11,} B "
              f"({row['bits_per_param']:.4f} bits/param) err={row['dequant_rel_err']}", flush=True)
    _write_csv(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")



# ---------------------------------------------------------------------------- dropout: what dropout keeps
# Sub-command ``dropout`` writes data/dropout_saved.csv: the tensors PyTorch's dropout keeps for its backward
# (p = 0.05, as PEFT's lora_dropout), per op, input dtype and whether the input needs a gradient.
# ``F.dropout`` on a CPU tensor computes ``input * noise`` (the noise scaled by 1 / (1 - p)); on a CUDA tensor
# it calls ``torch.native_dropout`` (aten/src/ATen/native/Dropout.cpp, is_fused_kernel_acceptable), which
# returns a bool mask. native_dropout runs on the CPU too, so the GPU path's op is measured here directly.
# Columns: op, input_dtype, input_requires_grad, n_elements, n_saved, saved_dtypes, saved_bytes,
# saved_bytes_per_element, torch_version, measured_on
DROPOUT_OPS = {"F.dropout (CPU path: input * noise)": lambda x: torch.nn.functional.dropout(x, 0.05, True),
               "torch.native_dropout (the op F.dropout calls on CUDA)": lambda x: torch.native_dropout(x, 0.05, True)[0]}


def cmd_dropout(args):
    """Sub-command ``dropout``: the bytes dropout keeps for its backward, per element of its input."""
    today = _dt.date.today().isoformat()
    rows = []
    for (op, fn), dtype, grad in itertools.product(DROPOUT_OPS.items(), (torch.float32, torch.bfloat16),
                                                   (True, False)):
        x = torch.randn(512, 256).to(dtype).requires_grad_(grad)
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
            fn(x)
        nbytes = sum(t.untyped_storage().nbytes() for t in saved)
        rows.append({"op": op, "input_dtype": _dtype(dtype), "input_requires_grad": grad,
                     "n_elements": x.numel(), "n_saved": len(saved),
                     "saved_dtypes": ";".join(_dtype(t.dtype) for t in saved), "saved_bytes": nbytes,
                     "saved_bytes_per_element": nbytes / x.numel(), "torch_version": torch.__version__,
                     "measured_on": today})
        print(f"{op:55s} {_dtype(dtype):9s} grad={grad!s:5s} keeps {nbytes / x.numel():.2f} B per element")
    _write_csv(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command")
    data = ROOT / "data"
    p_saved = sub.add_parser("saved", help="tensors saved for backward by the book's own module code")
    p_saved.add_argument("--out", default=str(data / "activation_measurements.csv"))
    p_saved.add_argument("--tensors-out", default=str(data / "activation_saved_tensors.csv"))
    p_step = sub.add_parser("step", help="live bytes over a whole training step (HF models + the fused stack)")
    p_step.add_argument("--out", default=str(data / "step_measurements.csv"))
    p_step.add_argument("--timeline-out", default=str(data / "step_timeline_example.csv"))
    p_step.add_argument("--tensors-out", default=str(data / "step_saved_tensors.csv"))
    p_dist = sub.add_parser("dist", help="per-rank model states under torch.distributed (DDP, ZeRO-1, FSDP2)")
    p_dist.add_argument("--out", default=str(data / "dist_measurements.csv"))
    p_dist.add_argument("--collectives-out", default=str(data / "dist_collectives.csv"))
    p_dist.add_argument("--only", nargs="*", help="only these layouts (e.g. tp sp); for a quick look")
    p_peft = sub.add_parser("peft", help="trainable/total parameters PEFT reports for LoRA (meta device)")
    p_peft.add_argument("--out", default=str(data / "peft_trainable_params.csv"))
    p_lora = sub.add_parser("lora", help="live bytes over a PEFT LoRA training step (small HF Llama models)")
    p_lora.add_argument("--out", default=str(data / "lora_step_measurements.csv"))
    p_nf4 = sub.add_parser("nf4", help="bitsandbytes NF4 storage of one linear layer's weight (CPU)")
    p_nf4.add_argument("--out", default=str(data / "nf4_storage.csv"))
    p_drop = sub.add_parser("dropout", help="the tensors PyTorch's dropout keeps for its backward (CPU)")
    p_drop.add_argument("--out", default=str(data / "dropout_saved.csv"))
    p_all = sub.add_parser("all", help="saved, step, dist, peft, lora, nf4, then dropout, with the default output "
                                       "files (the default)")
    p_all.set_defaults(only=None)
    for p in (p_saved, p_step, p_dist, p_peft, p_lora, p_nf4, p_drop, p_all):
        p.add_argument("--quick", action="store_true", help="a handful of small configurations (smoke test)")
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    commands = {"saved": cmd_saved, "step": cmd_step, "dist": cmd_dist, "peft": cmd_peft, "lora": cmd_lora,
                "nf4": cmd_nf4, "dropout": cmd_dropout}
    if args.command in commands:
        t0 = time.perf_counter()
        commands[args.command](args)
        print(f"{args.command}: {time.perf_counter() - t0:.0f} s")
        return
    quick = bool(getattr(args, "quick", False))
    for name in commands:
        main([name] + (["--quick"] if quick else []))


if __name__ == "__main__":
    main()
