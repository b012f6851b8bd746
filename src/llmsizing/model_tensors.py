"""The parameter tensors of a :class:`~llmsizing.model.Model` (chapter 1, "Counting parameters"): the one list
every count, breakdown and optimizer state is derived from.

:class:`TensorLayout` holds the module tree of ``transformers`` 5.24's ``modeling_<type>.py`` as ``(component,
name, shape)`` tuples: attention (multi-head latent attention too), the norms, the MLP, a mixture of experts'
router, routed and shared experts; one block (:meth:`~TensorLayout.layer_tensors`) and the whole model
(:meth:`~TensorLayout.tensors`). :class:`~llmsizing.model.Model` inherits it (issue 32: model.py stays under
600 lines); its methods read only the Model's fields and properties, so this module imports nothing of the
library but the checks.
"""

from __future__ import annotations

from ._validate import check_choice
from .layer_kinds import attention_layout_tensors


#: The names of a block's norms, in order, for ``norms_per_layer`` = 1 .. 4: Falcon-7B's parallel block has
#: one (``input_layernorm``), most models two, Gemma 2 and 3 four (a norm before AND after attention and the
#: MLP).
_NORM_NAMES = ("attn_norm", "mlp_norm", "post_attn_norm", "post_mlp_norm")


class TensorLayout:
    """The parameter tensors of a :class:`~llmsizing.model.Model`, which inherits these methods (they read its
    fields, ``hidden``, ``heads``, ``experts``, ..., and its properties ``is_mla`` and ``n_moe_layers``)."""

    def _attention_tensors(self) -> list[tuple[str, str, tuple[int, ...]]]:
        h, a, g, d = self.hidden, self.heads, self.kv_heads, self.head_dim
        norm = self._norm_params(h)
        t: list[tuple[str, str, tuple[int, ...]]] = []
        t += [("norms", f"attn_norm.{n}", s) for n, s in norm]
        if self.is_mla:
            r, c, nope, rope, v = (self.q_lora_rank, self.kv_lora_rank, self.qk_nope_head_dim,
                                   self.qk_rope_head_dim, self.v_head_dim)
            if r is None:
                t.append(("attention", "q_proj.weight", (a * d, h)))
            else:
                t += [("attention", "q_a_proj.weight", (r, h)), ("norms", "q_a_layernorm.weight", (r,)),
                      ("attention", "q_b_proj.weight", (a * d, r))]
            t += [("attention", "kv_a_proj_with_mqa.weight", (c + rope, h)),
                  ("norms", "kv_a_layernorm.weight", (c,)),
                  ("attention", "kv_b_proj.weight", (a * (nope + v), c)),
                  ("attention", "o_proj.weight", (h, a * v))]
        else:
            ea = getattr(self, "attn_experts", 0)
            w = a // self.attn_experts_per_token * d if ea else a * d    # one query expert's width
            for proj, out in (("q", a * d), ("k", g * d), ("v", g * d)):
                if proj == "q" and ea:           # a mixture of attention heads: a router, query experts
                    t += [("attention", "attn_router.weight", (ea, h)),
                          ("attention", "attn_experts.q_proj.weight", (ea, w, h))]
                    continue
                t.append(("attention", f"{proj}_proj.weight", (out, h)))
                if self.bias or self.qkv_bias:
                    t.append(("attention", f"{proj}_proj.bias", (out,)))
            t.append(("attention", "attn_experts.o_proj.weight", (ea, h, w)) if ea else
                     ("attention", "o_proj.weight", (h, a * d)))
            o_bias = getattr(self, "o_bias", None)
            if self.bias if o_bias is None else o_bias:
                t.append(("attention", "o_proj.bias", (h,)))
        if self.qk_norm == "head":
            t += [("norms", "q_norm.weight", (d,)), ("norms", "k_norm.weight", (d,))]
        elif self.qk_norm == "head_ln":                  # LayerNorms with biases over each head (Persimmon)
            t += [("norms", f"{p}_norm.{w}", (d,)) for p in "qk" for w in ("weight", "bias")]
        elif self.qk_norm == "proj":
            t += [("norms", "q_norm.weight", (a * d,)), ("norms", "k_norm.weight", (g * d,))]
        if self.attn_sinks:
            t.append(("attention", "sinks", (a,)))
        if getattr(self, "attn_gate", None):                    # an output gate from the block's input
            t.append(("attention", "attn_gate.weight", (a * d if self.attn_gate == "full" else a, h)))
        return t

    def _norm_params(self, h: int) -> list[tuple[str, tuple[int, ...]]]:
        """One norm's parameters: a gain unless ``*_noweight``, a bias with ``layernorm`` only."""
        if self.norm.endswith("_noweight"):
            return []
        return [("weight", (h,))] + ([("bias", (h,))] if self.norm == "layernorm" else [])

    def _norm_tensors(self, which: str) -> list[tuple[str, str, tuple[int, ...]]]:
        h = self.hidden
        norm = self._norm_params(h)
        return [("norms", f"{which}.{n}", s) for n, s in norm]

    def _mlp_tensors(self, prefix: str, f: int, experts: int | None = None, bias: bool | None = None):
        """The matrices of one MLP of width ``f`` (``experts`` of them stacked as ``(E, out, in)``)."""
        h = self.hidden
        bias = self._mlp_bias if bias is None else bias
        stack = () if experts is None else (experts,)
        t = []
        for proj in (("gate_proj", "up_proj") if self.gated_mlp else ("up_proj",)):
            t.append(("mlp", f"{prefix}{proj}.weight", stack + (f, h)))
            if bias:
                t.append(("mlp", f"{prefix}{proj}.bias", stack + (f,)))
        t.append(("mlp", f"{prefix}down_proj.weight", stack + (h, f)))
        if bias:
            t.append(("mlp", f"{prefix}down_proj.bias", stack + (h,)))
        return t

    @property
    def _mlp_bias(self) -> bool:
        return self.bias if self.mlp_bias is None else self.mlp_bias

    def _moe_mlp_tensors(self) -> list[tuple[str, str, tuple[int, ...]]]:
        """The MoE part of one MoE layer: router, routed experts (stacked, ``(experts, out, in)``, as Hugging
        Face's fused expert modules hold them), shared experts (as one MLP of ``shared_experts x`` the width,
        as DeepSeek's ``shared_experts`` module is) and the shared expert's gate."""
        h, e = self.hidden, self.experts
        t = [("mlp", "router.weight", (e, h))]
        if self.router_bias:
            t.append(("mlp", "router.bias", (e,)))
        t += self._mlp_tensors("experts.", self.expert_ffn_hidden or self.ffn_hidden, experts=e)
        if self.shared_experts:
            fs = self.shared_expert_ffn_hidden or self.expert_ffn_hidden or self.ffn_hidden
            t += self._mlp_tensors("shared_experts.", self.shared_experts * fs, bias=False)
            if self.shared_expert_gate:
                t.append(("mlp", "shared_expert_gate.weight", (1, h)))
        return t

    def layer_tensors(self, kind: str | None = None) -> list[tuple[str, str, tuple[int, ...]]]:
        """The tensors of ONE transformer block as ``(component, name, shape)``; matrices are (out, in).

        ``kind`` is ``"dense"`` (a block with a dense MLP) or ``"moe"`` (a block with experts; routed experts
        are one ``(experts, out, in)`` tensor per matrix); the default is the model's only kind of block, or
        ``"moe"`` for a mixture of experts with some dense layers."""
        if kind is None:
            kind = "moe" if self.n_moe_layers else "dense"
        check_choice("kind", kind, ("dense", "moe"))
        if kind == "moe" and not self.is_moe:
            raise ValueError(f"kind='moe': {self.name!r} is dense (experts=0)")
        t = self._attention_tensors()
        if self.norms_per_layer >= 3:
            t += self._norm_tensors(_NORM_NAMES[2])
        if self.norms_per_layer >= 2:
            t += self._norm_tensors(_NORM_NAMES[1])
        t += self._moe_mlp_tensors() if kind == "moe" else self._mlp_tensors("", self.ffn_hidden)
        if self.norms_per_layer >= 4:
            t += self._norm_tensors(_NORM_NAMES[3])
        return t

    def tensors(self) -> list[tuple[str, str, tuple[int, ...], int]]:
        """Every parameter tensor as ``(component, name, shape, copies)``; ``copies`` is the number of layers
        that hold it for block tensors (``layers``; the dense or the MoE layers for their MLPs) and 1
        otherwise.
        Tied embeddings are counted once (the LM head reuses the embedding)."""
        h = self.hidden
        t = [("embedding", "embed_tokens.weight", (self.vocab, h), 1)]
        if self.embed_norm:
            t += [(c, n, s, 1) for c, n, s in self._norm_tensors("embed_norm")]
        if self.learned_pos:
            t.append(("position", "embed_positions.weight", (self.max_seq + self.pos_offset, h), 1))
        n_moe, n_dense = self.n_moe_layers, self.n_dense_layers
        free = len(getattr(self, "mlp_free_layers", ()))   # blocks that end after attention or the mixer
        if n_moe == 0:
            mlp = {n for _, n, _ in self._mlp_tensors("", self.ffn_hidden)}
            t += [(c, f"layers.{n}", s, n_dense if n in mlp else self.layers)
                  for c, n, s in self.layer_tensors("dense")]
        else:
            dense_mlp = {n for _, n, _ in self._mlp_tensors("", self.ffn_hidden)}
            moe_mlp = {n for _, n, _ in self._moe_mlp_tensors()}
            for c, n, s in self.layer_tensors("moe"):
                t.append((c, f"layers.{n}", s, n_moe if n in moe_mlp else self.layers))
            if n_dense:
                t += [(c, f"layers.{n}", s, n_dense) for c, n, s in self._mlp_tensors("", self.ffn_hidden)
                      if n in dense_mlp]
        if free:                                            # ... so they have no MLP norm either
            t = [(c, n, s, k - free if n.startswith(f"layers.{_NORM_NAMES[1]}.") else k) for c, n, s, k in t]
        t = self._with_mixer(t)
        if getattr(self, "attention_layout", None) is not None:     # Gemma 4's full layers, KV sharing
            attn = {f"layers.{n}" for _, n, _ in self._attention_tensors()}
            t = [e for e in t if e[1] not in attn] + attention_layout_tensors(self)
        for e in getattr(self, "extra_layer_tensors", ()):
            k = e[3] if e[3:] and isinstance(e[3], int) else \
                {(): self.layers, ("one",): 1}.get(e[3:], self.n_moe_layers)
            block = e[0] in ("attention", "mlp", "norms")    # embedding / position / lm_head: not a block's
            if k:
                t.append((e[0], f"layers.{e[1]}" if block else e[1], e[2], k))
        idx = getattr(self, "indexer", None)          # a sparse-attention indexer beside attention
        if idx is not None:
            n = self.n_attention_layers if idx.layers is None else idx.layers
            t += [(c, f"layers.{m}", s, n) for c, m, s in idx.tensors(h) if n]
        if getattr(self, "final_norm", True):
            t += [("norms", f"final_norm.{n}", s, 1) for n, s in self._norm_params(h)]
        if not self.tied_embeddings:
            t.append(("lm_head", "lm_head.weight", (self.vocab, h), 1))
        if getattr(self, "lm_head_bias", False):
            t.append(("lm_head", "lm_head.bias", (self.vocab,), 1))
        return t

    def _with_mixer(self, t):
        """State-space layers (``mixer``): attention's tensors in the attention layers only, the mixer's (and
        its input norm) in ``n_mixer_layers``; without ``mixer_mlp`` no MLP and no second norm at all."""
        mixer = getattr(self, "mixer", None)
        if mixer is None:
            return t
        n_mix, n_att = self.n_mixer_layers, self.n_attention_layers
        attn = {f"layers.{n}" for _, n, _ in self._attention_tensors()}
        out = []
        for c, n, s, k in t:
            if n in attn:
                k = n_att
            elif n.startswith("layers.") and not self.mixer_mlp:
                k = 0
            if k:
                out.append((c, n, s, k))
        norm = [] if self.mixer_parallel else self._norm_tensors("norm")    # parallel: attention's norm
        mix = [(c, f"layers.mixer.{n}", s, n_mix) for c, n, s in norm + mixer.tensors(self.hidden)]
        return out + mix


__all__ = ["TensorLayout"]
