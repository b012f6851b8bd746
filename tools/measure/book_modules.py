"""The book's own PyTorch modules: a GPT-style or Llama-style decoder-only :class:`Transformer` built from an
:class:`llmsizing.Model`, with fused-kernel stand-ins where torch's CPU kernels save more than a GPU's would
(:class:`RMSNormFn`, :class:`FlashAttentionFn`). ``saved`` measures what they save; ``step`` runs them as the
``fused`` stack. Each module has a ``tag`` (the activation component it counts towards); :data:`TAGGER` keeps
the running component while they run.
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from llmsizing import Model


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


# ============================================================================ the modules
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


class SwiGLUFn(torch.autograd.Function):
    """SiLU(gate) * up that saves what a fused SwiGLU kernel saves: gate and up only, with SiLU recomputed in the
    backward (Megatron-LM's ``SwiGLUFunction`` in ``megatron/core/fusions/fused_bias_swiglu.py`` saves its
    ``[gate | up]`` input and nothing else; ``tools/measure/swiglu.py`` runs that function itself). The unfused
    ``F.silu(gate) * up`` also keeps SiLU(gate): one more ``f``-wide tensor per layer."""

    @staticmethod
    def forward(ctx, gate, up):
        ctx.save_for_backward(gate, up)
        return F.silu(gate) * up

    @staticmethod
    def backward(ctx, g):
        gate, up = ctx.saved_tensors
        sig = torch.sigmoid(gate)
        return g * up * sig * (1 + gate * (1 - sig)), g * gate * sig


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
            y = SwiGLUFn.apply(self.gate_proj(x), self.up_proj(x))
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
