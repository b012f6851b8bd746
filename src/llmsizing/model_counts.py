"""What a :class:`~llmsizing.model.Model` counts (chapter 1, "Counting parameters"): its layers of each kind
(experts, sliding windows, state-space mixers, attention) and its exact parameters, total and active, by
component and by MoE part, all summed from the one tensor list :meth:`~llmsizing.model.Model.tensors`
(:mod:`llmsizing.model_tensors`), so that they cannot disagree. The counts are checked against transformers'
own modules on the meta device (``data/hf_meta_param_counts.csv``) and the published totals (Mixtral's "12.9B
active", DeepSeek-V3's 671,026,419,200). :class:`ModelCounts` is a base of :class:`~llmsizing.model.Model`;
moved out of :mod:`llmsizing.model` unchanged (session 25), which still exports :data:`COMPONENTS`.
"""

from __future__ import annotations

import math
from functools import cached_property

#: Components of :meth:`Model.param_breakdown`, in the order charts draw them. A mixture of experts' routed
#: and shared experts and its router count under ``"mlp"`` (:meth:`Model.moe_breakdown` splits them).
COMPONENTS = ("embedding", "position", "attention", "mlp", "norms", "lm_head")


class ModelCounts:
    """The counts of a :class:`~llmsizing.model.Model`, from its fields and its :meth:`tensors` (a base class
    with no fields of its own: every value is the Model's)."""

    # ------------------------------------------------------------------ layer kinds
    @property
    def is_moe(self) -> bool:
        """Whether this is a mixture of experts (``experts > 0``)."""
        return self.experts > 0

    @property
    def is_mla(self) -> bool:
        """Whether attention is multi-head latent attention (``kv_lora_rank`` set; DeepSeek-V2/V3)."""
        return self.kv_lora_rank is not None

    @property
    def n_moe_layers(self) -> int:
        """How many layers have experts (0 for a dense model)."""
        if not self.experts:
            return 0
        return self.layers if self.moe_layers is None else len(self.moe_layers)

    @property
    def n_dense_layers(self) -> int:
        """How many layers have a dense MLP (every layer of a dense model but ``mlp_free_layers``)."""
        return self.layers - self.n_moe_layers - len(self.mlp_free_layers)

    @property
    def n_window_layers(self) -> int:
        """How many layers use :attr:`sliding_window` (0 without one)."""
        if self.sliding_window is None:
            return 0
        return self.n_attention_layers if self.window_layers is None else self.window_layers

    @property
    def n_mixer_layers(self) -> int:
        """How many layers are state-space mixer layers (0 without a ``mixer``)."""
        if self.mixer is None:
            return 0
        return self.layers if self.mixer_layers is None else len(self.mixer_layers)

    @property
    def n_attention_layers(self) -> int:
        """How many layers attend (and hold a KV cache): every layer but the mixer layers (all of them with
        ``mixer_parallel``)."""
        return self.layers if self.mixer_parallel else self.layers - self.n_mixer_layers

    @property
    def state_numbers_per_sequence(self) -> int:
        """Numbers one sequence keeps in the mixer layers whatever its length (conv and SSM state; 0 without
        a mixer). :func:`llmsizing.inference.state_bytes_per_sequence` gives the bytes. Chapter 3."""
        return self.n_mixer_layers * (self.mixer.state_numbers if self.mixer else 0)

    # ------------------------------------------------------------------ counts
    @cached_property
    def n_params(self) -> int:
        """Exact number of parameters (tied embeddings counted once). Computed once per (immutable) Model.

        A mixture of experts counts every expert (its total; :attr:`active_params` is what one token uses)."""
        return sum(math.prod(s) * k for _, _, s, k in self.tensors())

    @property
    def params_per_layer(self) -> int | float:
        """Parameters of one transformer block. A mixture of experts whose layers differ (some dense, some
        with experts) gets the mean over its layers, a float; every other model an exact ``int``."""
        if self.n_moe_layers in (0, self.layers) and self.n_attention_layers in (0, self.layers) \
                and self.n_mixer_layers in (0, self.layers):
            return self.block_params // self.layers
        return self.block_params / self.layers

    @cached_property
    def block_params(self) -> int:
        """Parameters of all transformer blocks together (every layer; every expert)."""
        return sum(math.prod(s) * k for _, n, s, k in self.tensors() if n.startswith("layers."))

    @cached_property
    def active_params(self) -> int:
        """Parameters one token uses (chapter 1, "Mixtures of experts: total and active parameters").

        Convention: everything but the routed experts counts once, as in :attr:`n_params` (the input
        embedding, the LM head, attention, norms, dense MLPs, shared experts, the router); of the routed
        experts, the ``experts_per_token`` a token is sent to in each MoE layer. The input embedding is
        counted, as Mixtral's "12.9B active" (12.88B here) and Qwen3-30B-A3B's "3.3B activated" (3.35B) count
        it; DeepSeek's "36.7B" for V3 says it does (README_WEIGHTS.md: "including 0.9B for Embedding and 0.9B
        for the output Head"), but is one 0.93B vocabulary matrix short of the 37.55B here: 0.2% above the
        36.63B without the input embedding, which DeepSeek's later text for R1-0528 gives as "36.6B (including
        0.9B for the output Head)" (chapter 1). OpenAI's "5.13B active" for gpt-oss-120b leaves it out (5.13B
        here), and DeepSeek-V2's "21B" and V2-Lite's "2.4B" lie nearer the count without it (20.85B, 2.45B;
        their reports do not say): that count is :func:`llmsizing.flops.matmul_params`, which the FLOPs use,
        as they leave the embedding lookup out of a dense model's FLOPs. A dense model's active parameters are
        its parameters. A mixture of attention heads (``attn_experts``) counts ``attn_experts_per_token`` of
        its query/output experts in each attention layer (:attr:`attention_expert_params`), the shared K/V
        projections and the attention router whole."""
        if not self.is_moe:
            return self.n_params
        return self.n_params - self._unused_routed_params

    @cached_property
    def routed_expert_params(self) -> int:
        """Parameters of all routed experts of all MoE layers (0 for a dense model)."""
        return sum(math.prod(s) * k for _, n, s, k in self.tensors() if n.startswith("layers.experts."))

    @cached_property
    def attention_expert_params(self) -> int:
        """Parameters of all attention experts (query and output projections) of a mixture of attention
        heads, over all attention layers (0 without ``attn_experts``)."""
        return sum(math.prod(s) * k for _, n, s, k in self.tensors() if n.startswith("layers.attn_experts."))

    def active_share(self, name: str) -> float:
        """The share of the tensor ``name`` (a :meth:`layer_tensors` name, or ``layers.`` and that) one token
        uses: ``experts_per_token / experts`` for a routed MLP expert's (``experts.``),
        ``attn_experts_per_token / attn_experts`` for an attention expert's (``attn_experts.``), else 1."""
        name = name[7:] if name.startswith("layers.") else name
        if name.startswith("experts.") and self.experts:
            return self.experts_per_token / self.experts
        if name.startswith("attn_experts.") and self.attn_experts:
            return self.attn_experts_per_token / self.attn_experts
        return 1.0

    @cached_property
    def _unused_routed_params(self) -> int:
        """The routed experts' parameters a token does not use: of the MLP experts all but
        ``experts_per_token / experts``, of the attention experts all but ``attn_experts_per_token /
        attn_experts``."""
        if not self.is_moe:
            return 0
        r, a = self.routed_expert_params, self.attention_expert_params
        return (r - r * self.experts_per_token // self.experts
                + (a - a * self.attn_experts_per_token // self.attn_experts if self.attn_experts else 0))

    @cached_property
    def active_block_params(self) -> int:
        """:attr:`block_params` one token uses: the routed experts only ``experts_per_token`` of
        ``experts`` (the attention experts ``attn_experts_per_token`` of ``attn_experts``)."""
        return self.block_params - self._unused_routed_params

    def moe_breakdown(self) -> dict[str, int]:
        """The MoE part of :attr:`n_params`: ``routed_experts``, ``active_routed_experts`` (the top-k share),
        ``shared_experts``, ``router`` (weights, bias and Qwen2-MoE's shared-expert gate), over all MoE
        layers; zeros for a dense model."""
        out = {"routed_experts": self.routed_expert_params,
               "active_routed_experts": (self.routed_expert_params * self.experts_per_token
                                         // max(self.experts, 1)),
               "shared_experts": 0, "router": 0}
        for _, n, s, k in self.tensors():
            if n.startswith("layers.shared_experts."):
                out["shared_experts"] += math.prod(s) * k
            elif n.startswith(("layers.router.", "layers.shared_expert_gate.")):
                out["router"] += math.prod(s) * k
        return out

    def param_breakdown(self) -> dict[str, int]:
        """Parameters by component (keys: :data:`COMPONENTS`), summing to :attr:`n_params`."""
        return dict(self._breakdown)

    @cached_property
    def _breakdown(self) -> dict[str, int]:
        out = dict.fromkeys(COMPONENTS, 0)
        for comp, _, s, k in self.tensors():
            out[comp] += math.prod(s) * k
        return out
