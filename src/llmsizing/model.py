"""Decoder-only transformer architectures and their exact parameter counts (chapter 1, "Counting parameters").

One list of tensors, :meth:`Model.tensors`, is the single source of truth: the parameter count, the
per-component breakdown and the factored optimizer state (Adafactor, chapter 2) are all derived from it, so
they cannot disagree.

Sources for the layer layouts:

* GPT-2: Radford et al. 2019; Hugging Face ``transformers`` ``modeling_gpt2.py`` (biases everywhere,
  LayerNorm with bias, learned positions, tied embeddings).
* GPT-3: Brown et al. 2020, Table 2.1 (same layout as GPT-2 at 96 x 12288).
* Llama: Touvron et al. 2023a/b, Llama 3 team (Dubey et al.) 2024; ``modeling_llama.py`` (RMSNorm,
  SwiGLU MLP with three matrices, no biases, rotary positions, grouped-query attention in the larger models).
* Mistral 7B: Jiang et al. 2023 (Llama layout with GQA). Qwen2: Yang et al. 2024 (bias on Q, K and V only).
* Mixtures of experts and multi-head latent attention (chapter 1, "Mixtures of experts: total and active
  parameters"; chapter 3 for MLA's KV cache): Mixtral (Jiang et al. 2024, arXiv:2401.04088), DeepSeek-V2
  (arXiv:2405.04434) and DeepSeek-V3 (arXiv:2412.19437), Qwen2-MoE/Qwen3 (Yang et al. 2025, arXiv:2505.09388),
  gpt-oss (OpenAI 2025 model card), Llama 4; the other Hugging Face families of :meth:`Model.from_hf_config`
  (Gemma 1-3, Phi-3, OLMo 2, Nemotron, GPT-NeoX, Falcon, OPT, BLOOM). Every layout is the module tree of
  ``transformers`` 5.24's ``modeling_<type>.py``, checked tensor for tensor on the meta device
  (``data/hf_meta_param_counts.csv``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from os import PathLike

from ._validate import check_bool, check_choice, check_int
from .hf_config import model_from_hf_config
# The key tables and moe_layer_indices live one level down, in model_keys, and the tensor layout in
# model_tensors (issue 32); every name they had here still imports from here.
from .model_keys import (_HF_ACTIVATION_ALIASES, ACTIVATIONS, HF_DEFAULTS, HF_FAMILIES,  # noqa: F401
                         MOE_KEYS, moe_layer_indices)
from .model_tensors import _NORM_NAMES, TensorLayout  # noqa: F401
from .model_counts import COMPONENTS, ModelCounts  # noqa: F401  (the counts; COMPONENTS still exported here)
from .hf_types import sweep_coverage  # noqa: F401  (chapter 1: which Hugging Face types load; issue 36)
from .layer_kinds import AttentionLayout, Indexer, StateMixer, check_layer_kinds
from .moe_fields import _opt_int, check_moe_fields
from .positions import POSITIONS, check_positions, positions_changes  # noqa: F401

#: Norm kinds: LayerNorm (gain and bias), RMSNorm (gain), and three without some parameters (issue 36):
#: ``layernorm_nobias`` (MPT), ``layernorm_noweight`` (OLMo's non-parametric LayerNorm), ``rmsnorm_noweight``
#: (nanochat's).
NORMS = ("layernorm", "rmsnorm", "layernorm_nobias", "layernorm_noweight", "rmsnorm_noweight")



#: ``qk_norm`` values: a norm over each head's query and key vectors (``head_dim`` gains each: Qwen3, Gemma 3,
#: Qwen3-MoE), or over the whole query and key projections (``heads x head_dim`` and ``kv_heads x head_dim``
#: gains: OLMo 2). ``head_l2``: a norm over each head without gains, on the layers that rotate only (Llama
#: 4's ``Llama4TextL2Norm``, built where ``use_qk_norm`` and the layer's ``use_rope``: no parameters, but
#: its bytes are moved, :mod:`llmsizing.pointwise`).
QK_NORMS = ("head", "proj", "head_ln", "head_l2")   # head_ln: per head with a bias too (Persimmon's)
#: ``attn_gate`` values: a gate per attention output number (``"full"``) or per head (``"head"``).
ATTN_GATES = ("full", "head")

#: What the functions that do not model mixtures of experts yet say when they are given one.
MOE_NOT_MODELLED = "this function does not model a mixture of experts yet"


class MoENotModelledError(ValueError):
    """Raised by :func:`require_dense` (a ``ValueError``): a function that does not model mixtures of experts
    was given one."""


def require_dense(model: "Model", what: str) -> "Model":
    """Return ``model`` if it is dense; refuse a mixture of experts (:attr:`Model.is_moe`) naming ``what``
    (the function that cannot handle it) and what is missing (:data:`MOE_NOT_MODELLED`).

    This is the library's one guard for functions that would silently compute a dense answer for an MoE model
    (fine-tuning, speculative decoding, the dense-only formulas of chapters 4 and 7): they call it (directly
    or through :func:`llmsizing.catalog.resolve_model`), so there is one place to lift it. What DOES handle an
    MoE model: :attr:`Model.n_params`, :attr:`Model.active_params`, the weights and KV cache of
    :mod:`llmsizing.inference`, the FLOPs of :mod:`llmsizing.flops`, and since issue 24 training memory,
    activations, communication and step time with expert parallelism (:mod:`llmsizing.moe`,
    ``Parallel(ep=...)``), the planner (``plan``, ``min_gpus``), the calibrated MFU, ``training_time``,
    ``implied_mfu``, ``cost_by_gpu`` and serving (chapter 18)."""
    if getattr(model, "is_moe", False):
        raise MoENotModelledError(
            f"{what}: {model.name!r} is a mixture of experts ({model.experts} routed experts, "
            f"{model.experts_per_token} per token) and {MOE_NOT_MODELLED}. Its parameters (n_params, "
            "active_params), weights, KV cache, FLOPs, training memory, communication and step time "
            "(training_memory, step_time with Parallel(ep=...)), the planner (plan, min_gpus), "
            "training_time, implied_mfu, cost_by_gpu and serving are modelled (chapter 18)")
    return model


@dataclass(frozen=True)
class Model(TensorLayout, ModelCounts):
    """A decoder-only transformer, described by the numbers in its config file.

    ``head_dim`` defaults to ``hidden // heads`` and ``kv_heads`` to ``heads`` (no GQA). ``ffn_hidden`` is the
    width of the MLP's inner layer; with ``gated_mlp`` (SwiGLU) the MLP has three matrices (gate, up, down),
    without it two (up, down). ``bias`` puts a bias on every linear layer (GPT-2 style); ``qkv_bias`` only on
    the query/key/value projections (Qwen2 style). LayerNorm has a bias (2 vectors; :data:`NORMS` for those
    without), RMSNorm only a
    gain. ``activation`` is the MLP's activation function by its Hugging Face name (default: ``"silu"`` with a
    gated MLP, ``"gelu_new"`` without); it changes no parameter count, only what the Hugging Face stack saves
    for backward. ``sliding_window`` (``None``: full attention) limits how far back each token attends
    (Mistral 7B v0.1: 4096); it caps the KV cache (:func:`~llmsizing.inference.inference_memory`) and the
    attention FLOPs (:func:`~llmsizing.flops.attention_keys_per_token`). ``fused_qkv`` says the query, key and
    value projections are one matrix of ``(heads + 2 kv_heads) x head_dim`` rows (GPT-2's ``c_attn``, BLOOM's
    and Falcon's ``query_key_value``, MPT's ``Wqkv``): the same parameters, but LoRA adapts it as one matrix
    (:func:`~llmsizing.finetune.lora_params`), as PEFT does.

    ``max_seq`` is the context the model was trained with. The library accepts longer sequences: none of its
    memory formulas depends on the position encoding except learned positions (GPT-2 has exactly ``max_seq``
    position rows and cannot run longer). For rotary models, a longer context assumes the positions are
    extended (RoPE scaling or position interpolation, as Llama 3.1 does to 128K); the memory is the same, the
    quality is the trainer's concern.

    **The odd parts of other families** (all default to the Llama/GPT-2 layout above, so a dense model built
    without them is exactly what it was):

    * ``mlp_bias`` (``None``: the same as ``bias``): biases on the MLP's matrices independently of the
      attention's (Qwen3's and Llama's ``attention_bias`` without ``mlp_bias``; Nemotron's ``mlp_bias``);
    * ``qk_norm``: ``"head"`` (a norm of ``head_dim`` gains on queries and on keys: Qwen3, Gemma 3) or
      ``"proj"`` (over the whole projections: OLMo 2) or ``"head_l2"`` (per head, no gains, rotating layers
      only: Llama 4), :data:`QK_NORMS`;
    * ``attn_sinks``: one learned logit per head that every softmax also normalises over (gpt-oss's
      ``sinks``);
    * ``norms_per_layer`` (1 to 4; default 2): Falcon-7B's parallel block has one norm, Gemma 2 and 3 four;
    * ``embed_norm``: a norm right after the embedding (BLOOM's ``word_embeddings_layernorm``);
    * ``pos_offset``: learned position rows beyond ``max_seq`` (OPT's table has ``max_seq + 2``);
    * ``window_layers``: how many of the layers use ``sliding_window`` (``None``: all of them); the rest
      attend to everything (Gemma 2 and gpt-oss alternate, Gemma 3 has five windowed layers for one global);
    * ``parallel_block``: attention and MLP read the same input and add into one residual (GPT-J, GPT-NeoX,
      Falcon). No parameter changes; recorded for what it saves;
    * ``attn_gate``: a sigmoid gate on the attention output, one matrix from the block's input (issue 36):
      ``"full"`` (``heads x head_dim`` outputs: AFMoE's ``gate_proj``) or ``"head"`` (one per head: Laguna's
      ``g_proj``), :data:`ATTN_GATES`;
    * ``lm_head_bias``: a bias of ``vocab`` numbers on the LM head (GPT-J's and CodeGen's ``lm_head``);
    * ``o_bias`` (``None``: the same as ``bias``): a bias on the attention output alone (GPT-Neo's
      ``out_proj``);
    * ``final_norm``: the norm after the last block (``False``: GPT-1's post-norm stack has none).

    Position encodings without parameters change no parameter and no cache byte; ``positions`` (``"rope"``,
    ``"alibi"``, ``"learned"``, ``"none"``; ``None``: ``"learned"`` with ``learned_pos``, else ``"rope"``) and
    ``rope_layers`` (how many layers rotate; ``None``: all) say which kernels run
    (:mod:`llmsizing.positions`, :mod:`llmsizing.pointwise`). Logit soft-capping and attention scaling have
    no field.

    **Mixtures of experts** (``experts > 0``; Shazeer et al. 2017, Fedus et al. 2021; Mixtral, Jiang et al.
    2024; DeepSeekMoE, Dai et al. 2024): an MoE layer replaces the MLP by ``experts`` routed expert MLPs of
    width ``expert_ffn_hidden`` (default ``ffn_hidden``; Hugging Face's ``moe_intermediate_size``), of which a
    linear router (``hidden x experts``, plus a bias with ``router_bias``) picks ``experts_per_token`` for
    each token; ``shared_experts`` MLPs of width ``shared_expert_ffn_hidden`` (default ``expert_ffn_hidden``)
    see every token (DeepSeek's ``n_shared_experts``; Qwen2-MoE's and Llama 4's one shared expert),
    Qwen2-MoE's with a ``1 x hidden`` sigmoid gate (``shared_expert_gate``). ``moe_layers`` lists the indices
    of the MoE layers (``None``: every layer); the others are dense MLPs of width ``ffn_hidden``
    (DeepSeek-V3's first three layers, Llama 4 Maverick's every other layer). Routed experts have the same
    matrices as the dense MLP (``gated_mlp``, ``mlp_bias``). Use :func:`moe_layer_indices` to build
    ``moe_layers`` from a config's ``first_k_dense_replace`` / ``decoder_sparse_step`` /
    ``interleave_moe_layer_step``. Group-limited routing (DeepSeek's ``n_group`` / ``topk_group``): the routed
    experts fall into ``expert_groups`` groups and each token picks its experts from
    ``expert_groups_per_token`` of them (0 and 0: no grouping). DeepSeek-V3 deploys one group per node, so a
    token reaches at most ``expert_groups_per_token`` nodes (arXiv:2412.19437 Sec. 2.1.2, 3.2.2): the node
    limit the all-to-all is priced with (:func:`llmsizing.moe_layouts.route_max_nodes`), read from these
    fields, never from a name.

    **Mixture of attention heads** (``attn_experts > 0``; Zhang et al. 2022, arXiv:2210.05144; JetMoE, Shen
    et al. 2024, arXiv:2404.07413, Sec. 2.2; transformers' ``JetMoeMoA``): every attention layer holds
    ``attn_experts`` pairs of query and output projections, each of ``heads / attn_experts_per_token`` heads,
    and a router (``hidden x attn_experts``, no bias) that picks ``attn_experts_per_token`` of them for each
    token; the keys and values are one projection of ``kv_heads`` shared by every expert. ``heads`` is the
    query heads a token uses (JetMoE-8B: 2 experts of 16 heads, 32), so the KV cache and the attention
    core are those of ``heads`` query and ``kv_heads`` KV heads; ``o_bias`` is the one bias added after the
    experts' outputs are combined. Needs MLP experts too (``experts >= 1``: the one layout published) and
    q/k/v projections (not MLA, not fused).
 (``kv_lora_rank`` set; DeepSeek-V2, DeepSeek-AI 2024, arXiv:2405.04434,
    Sec. 2.1): queries go through a rank-``q_lora_rank`` bottleneck (``q_a_proj``, a norm, ``q_b_proj``; none
    with ``q_lora_rank=None``, DeepSeek-V2-Lite), keys and values are one shared latent of ``kv_lora_rank``
    numbers plus one rotary key of ``qk_rope_head_dim`` shared by all heads (``kv_a_proj_with_mqa``), expanded
    per head by ``kv_b_proj`` to ``qk_nope_head_dim`` key and ``v_head_dim`` value numbers. ``head_dim`` is
    then the query/key width ``qk_nope_head_dim + qk_rope_head_dim`` and ``kv_heads`` must be ``heads``; the
    KV cache is the latent plus the rotary key (:func:`~llmsizing.inference.kv_cache_bytes_per_token`).

    **State-space layers** (``mixer``, a :class:`~llmsizing.layer_kinds.StateMixer`: Mamba, Mamba-2, Gated
    DeltaNet, lightning attention; issue 36):
    the layers ``mixer_layers`` (``None``: every layer) replace attention by the mixer, which keeps a fixed
    state per sequence instead of a KV cache (:attr:`state_numbers_per_sequence`); the KV cache counts the
    other layers only (:attr:`n_attention_layers`). ``mixer_mlp=False``: a mixer layer is a norm and the
    mixer, with no MLP (Mamba, Mamba-2; only when every layer is one, so ``heads`` and ``ffn_hidden`` count
    nothing); with ``True`` it keeps the block's MLP or experts (Jamba, Bamba). ``mixer_parallel``: every
    layer runs attention AND the mixer side by side on the same norm's output (Falcon-H1).
    """

    name: str
    layers: int
    hidden: int
    heads: int
    ffn_hidden: int
    vocab: int
    kv_heads: int | None = None
    head_dim: int | None = None
    gated_mlp: bool = True
    tied_embeddings: bool = False
    norm: str = "rmsnorm"
    bias: bool = False
    qkv_bias: bool = False
    learned_pos: bool = False
    max_seq: int = 4096
    activation: str | None = None
    sliding_window: int | None = None
    fused_qkv: bool = False
    # ---- odd parts of other dense families (defaults: the layout above)
    mlp_bias: bool | None = None
    qk_norm: str | None = None
    attn_sinks: bool = False
    norms_per_layer: int = 2
    embed_norm: bool = False
    pos_offset: int = 0
    window_layers: int | None = None
    parallel_block: bool = False
    attn_gate: str | None = None
    lm_head_bias: bool = False
    o_bias: bool | None = None
    final_norm: bool = True
    # ---- mixture of experts (experts=0: dense)
    experts: int = 0
    experts_per_token: int = 0
    expert_ffn_hidden: int | None = None
    shared_experts: int = 0
    shared_expert_ffn_hidden: int | None = None
    shared_expert_gate: bool = False
    router_bias: bool = False
    moe_layers: tuple[int, ...] | None = None
    expert_groups: int = 0
    expert_groups_per_token: int = 0
    attn_experts: int = 0                 # mixture of attention heads (JetMoE): q/o experts, K/V shared
    attn_experts_per_token: int = 0
    # ---- multi-head latent attention (kv_lora_rank=None: none)
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    # ---- state-space layers (mixer=None: every layer is attention)
    mixer: StateMixer | None = None
    mixer_layers: tuple[int, ...] | None = None
    mixer_mlp: bool = True
    mixer_parallel: bool = False
    indexer: Indexer | None = None        # DeepSeek Sparse Attention's indexer (layer_kinds.Indexer)
    mlp_free_layers: tuple[int, ...] = ()  # layers with no MLP (Nemotron-H; layer_kinds.check_layer_kinds)
    extra_layer_tensors: tuple = ()       # ((component, name, shape), ...) in every layer: sub-norms, scalars
    attention_layout: AttentionLayout | None = None   # full layers' own widths, KV sharing (Gemma 3n/4)
    positions: str | None = None          # rope / alibi / learned / none (positions.POSITIONS)
    rope_layers: int | None = None        # layers with a rotary embedding (None: all, with "rope")

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"name must be a non-empty string, got {self.name!r}")
        # every field keeps what its check returns (Python int/bool), so NumPy scalars cannot overflow later
        for f in ("layers", "hidden", "heads", "ffn_hidden", "vocab", "max_seq"):
            object.__setattr__(self, f, check_int(f, getattr(self, f)))
        mla = self.kv_lora_rank is not None
        kv = self.heads if self.kv_heads is None else check_int("kv_heads", self.kv_heads)
        if kv > self.heads or self.heads % kv:
            raise ValueError(f"kv_heads must divide heads ({self.heads}) and be <= heads, got {kv}")
        if mla:
            self._check_mla(kv)
            hd = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.head_dim is not None and check_int("head_dim", self.head_dim) != hd:
                raise ValueError(f"head_dim must be qk_nope_head_dim + qk_rope_head_dim ({hd}) with "
                                 f"multi-head latent attention (kv_lora_rank), got {self.head_dim}")
        else:
            for f in ("q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
                if getattr(self, f) is not None:
                    raise ValueError(f"{f} describes multi-head latent attention: give kv_lora_rank too, "
                                     f"or leave {f}=None")
            hd = self.hidden // self.heads if self.head_dim is None else check_int("head_dim", self.head_dim)
            if self.head_dim is None and self.hidden % self.heads:
                raise ValueError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads}) "
                                 "unless head_dim is given")
        object.__setattr__(self, "kv_heads", kv)
        object.__setattr__(self, "head_dim", hd)
        for f in ("gated_mlp", "tied_embeddings", "bias", "qkv_bias", "learned_pos", "fused_qkv",
                  "attn_sinks", "embed_norm", "parallel_block", "shared_expert_gate", "router_bias",
                  "lm_head_bias", "final_norm"):
            object.__setattr__(self, f, check_bool(f, getattr(self, f)))
        for f in ("mlp_bias", "o_bias"):
            if getattr(self, f) is not None:
                object.__setattr__(self, f, check_bool(f, getattr(self, f)))
        check_choice("norm", self.norm, NORMS)
        if self.qk_norm is not None:
            check_choice("qk_norm", self.qk_norm, QK_NORMS)
        if self.attn_gate is not None:
            check_choice("attn_gate", self.attn_gate, ATTN_GATES)
        object.__setattr__(self, "norms_per_layer",
                           check_int("norms_per_layer", self.norms_per_layer, maximum=4))
        object.__setattr__(self, "pos_offset", check_int("pos_offset", self.pos_offset, minimum=0))
        act = self.activation
        if act is None:              # the usual pairing: SwiGLU for gated MLPs, GPT-2's gelu_new otherwise
            act = "silu" if self.gated_mlp else "gelu_new"
        object.__setattr__(self, "activation", check_choice("activation", act, ACTIVATIONS))
        if self.sliding_window is not None:
            object.__setattr__(self, "sliding_window", check_int("sliding_window", self.sliding_window))
        if self.window_layers is not None:
            if self.sliding_window is None:
                raise ValueError("window_layers counts the layers that use sliding_window: give "
                                 "sliding_window too, or leave window_layers=None")
            object.__setattr__(self, "window_layers",
                               check_int("window_layers", self.window_layers, minimum=0,
                                                                maximum=self.layers))
        check_moe_fields(self)                          # experts, moe_layers, groups (moe_fields)
        check_positions(self)                           # positions, rope_layers (positions)
        check_layer_kinds(self)                         # mixer, mlp_free_layers, indexer (layer_kinds)

    def _check_mla(self, kv: int) -> None:
        for f in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            if getattr(self, f) is None:
                raise ValueError(f"{f} is required with multi-head latent attention (kv_lora_rank is set)")
            object.__setattr__(self, f, check_int(f, getattr(self, f)))
        object.__setattr__(self, "q_lora_rank", _opt_int("q_lora_rank", self.q_lora_rank))
        if kv != self.heads:
            raise ValueError(f"kv_heads must equal heads ({self.heads}) with multi-head latent attention "
                             f"(every head gets its own key and value from the shared latent), got {kv}")
        if self.fused_qkv or self.qk_norm is not None or self.qkv_bias or self.bias:
            raise ValueError("multi-head latent attention (kv_lora_rank) has no fused_qkv, qk_norm, qkv_bias "
                             "or bias variant in this library")

    # ------------------------------------------------------------------ tensors and counts: inherited
    # (model_tensors.TensorLayout, model_counts.ModelCounts)

    def with_(self, **changes) -> "Model":
        """A copy with some fields changed (``head_dim``/``kv_heads`` recomputed unless given; the position
        fields follow ``learned_pos`` and ``layers``: :func:`llmsizing.positions.positions_changes`)."""
        changes = positions_changes(self, changes)
        if ("hidden" in changes or "heads" in changes) and not self.is_mla:
            changes.setdefault("head_dim", None)
        if "heads" in changes and not self.is_mla:
            changes.setdefault("kv_heads", None)
        if "heads" in changes and self.is_mla:
            changes.setdefault("kv_heads", changes["heads"])
        return replace(self, **changes)

    # ------------------------------------------------------------------ Hugging Face
    @classmethod
    def from_hf_config(cls, config: dict | str | PathLike, name: str | None = None) -> "Model":
        """Build a :class:`Model` from a Hugging Face ``config.json``: a dict, a path to the file, or a folder
        that holds one (as ``save_pretrained`` writes it).

        Besides the families below, every type of :data:`llmsizing.hf_types.TYPE_RULES` and
        :data:`llmsizing.hf_ssm.SSM_TYPES` (Mamba, Mamba-2 and linear-attention hybrids: ``mixer``) is read.
        Supported ``model_type`` (:data:`HF_FAMILIES`): dense ``llama``, ``mistral``, ``qwen2``, ``qwen3``,
        ``gemma``, ``gemma2``, ``gemma3_text`` (and ``gemma3``: its ``text_config``), ``phi3``, ``olmo2``,
        ``nemotron``, ``gpt_neox``, ``falcon``, ``opt``, ``bloom``, ``gpt2``; mixtures of experts ``mixtral``,
        ``qwen2_moe``, ``qwen3_moe``, ``deepseek_v2``, ``deepseek_v3``, ``gpt_oss``, ``llama4_text`` (and
        ``llama4``: its ``text_config``; the vision tower is not counted). Each family's count equals the
        parameters of transformers 5.24's ``<Family>ForCausalLM`` built from the same config on the meta
        device (``data/hf_meta_param_counts.csv``, made by ``tools/measure_memory.py hf-counts``). Anything
        else raises ``ValueError`` naming the ``model_type``: a silently wrong architecture would give a
        silently wrong count. So does a config with mixture-of-experts fields (:data:`MOE_KEYS`) under a dense
        ``model_type``; the error names the keys it saw.

        Every key read is checked, and an error names the **config key** and the file
        (``config.json: num_attention_heads must be an integer >= 1, got 0``; ``num_key_value_heads`` must
        divide ``num_attention_heads``), never a :class:`Model` field. A key that is absent gets the default
        of the Hugging Face config class (:data:`HF_DEFAULTS`: Mistral's ``num_key_value_heads`` is 8, Qwen2's
        32); ``null`` is read as absent, except where the class's ``__post_init__`` gives it its own meaning
        (``num_key_value_heads: null`` is ``num_attention_heads``, ``sliding_window: null`` no window,
        ``head_dim: null`` ``hidden_size // num_attention_heads``). A present but invalid value (0, a float,
        ``"false"``, an integer of thousands of digits) is refused, not replaced. Bias flags the Hugging Face
        class ignores are ignored too: Qwen2 always has biases on q, k and v only, Mistral none.

        What each family adds (transformers 5.24's ``modeling_<type>.py``):

        * ``qwen3``, ``qwen3_moe``, ``gemma3_text``: per-head q/k RMSNorms; ``olmo2``: q/k norms over the
          whole projections; ``gemma2``/``gemma3_text``: four norms per block; ``attention_bias`` (``qwen3``,
          ``gemma*``, ``olmo2``, ``nemotron``, ``llama4_text``, ``gpt_oss``) biases q, k, v and o only;
        * ``phi3``: fused ``qkv_proj`` and ``gate_up_proj`` (the same parameters as separate matrices);
          ``nemotron``: a two-matrix MLP with squared ReLU and LayerNorm with a bias (``LayerNorm1P``);
        * ``gpt_neox``: fused q/k/v, biases (``attention_bias`` on attention, always on the MLP), parallel
          attention and MLP (``use_parallel_residual``), partial rotary (no parameters); ``falcon``: fused
          q/k/v with multi-query (``multi_query``) or grouped (``new_decoder_architecture``, ``num_kv_heads``)
          keys, one or two LayerNorms per parallel block (``num_ln_in_parallel_attn``), ALiBi or rotary (no
          parameters); ``opt``: learned positions with 2 extra rows, biases, ReLU; ``bloom``: ALiBi, fused
          q/k/v, a LayerNorm after the embedding;
        * windows: ``mistral``, ``mixtral``, ``phi3`` window every layer; ``gemma2``, ``gemma3_text``,
          ``gpt_oss`` window the layers ``layer_types`` marks ``sliding_attention`` (by default every other
          layer, Gemma 3 five in six); ``llama4_text``'s chunked-attention layers (``attention_chunk_size``,
          three in four) are kept as windows of the chunk size (the same KV cache; their attention FLOPs are
          counted as a window's, up to twice a chunk's); ``qwen3``/``qwen3_moe`` with ``use_sliding_window``
          are refused (no released config sets it);
        * mixtures of experts: ``mixtral`` and ``gpt_oss`` (``num_local_experts``, experts of width
          ``intermediate_size``; gpt-oss's router and experts have biases, its attention learned ``sinks``),
          ``qwen2_moe`` and ``qwen3_moe`` (``num_experts`` of width ``moe_intermediate_size`` in the layers
          ``(i + 1) % decoder_sparse_step == 0`` not in ``mlp_only_layers``, the others dense of width
          ``intermediate_size``; Qwen2-MoE's gated shared expert of ``shared_expert_intermediate_size``),
          ``deepseek_v2``/``deepseek_v3`` (``n_routed_experts`` and ``n_shared_experts`` of width
          ``moe_intermediate_size`` from layer ``first_k_dense_replace`` on, multi-head latent attention; a
          ``moe_layer_freq`` other than 1 is refused: DeepSeek's own code and Hugging Face's disagree on it,
          and no released model uses it; DeepSeek-V3's ``e_score_correction_bias`` is a buffer in Hugging
          Face's module, updated by a rule rather than by gradients, but it is stored in the checkpoint and
          counted here as the router's bias: 256 numbers per MoE layer, 14,848 in all, which make the
          published 671,026,419,200), ``llama4_text``
          (``num_local_experts`` of width ``intermediate_size`` plus a shared expert of that width in the
          ``moe_layers`` / every ``interleave_moe_layer_step``-th layer, dense layers of
          ``intermediate_size_mlp``; its q/k norm has no weights).

        Sliding windows of the older families follow each architecture's Hugging Face code (``transformers``
        5.x):

        * ``mistral``: ``sliding_window`` applies to every layer (``modeling_mistral.py``); absent it is
          ``MistralConfig``'s 4096 (Mistral 7B v0.1), ``null`` is no window (v0.2 and v0.3);
        * ``qwen2``: ``sliding_window`` counts only with ``use_sliding_window``; then the layers with
          ``layer_types[i] == "sliding_attention"`` are windowed, by default those with
          ``i >= max_window_layers`` (``Qwen2Config.__post_init__``). No windowed layer (``max_window_layers``
          >= ``num_hidden_layers``, Qwen2's released configs) is full attention; every layer windowed is a
          window; a mix of full and windowed layers is refused;
        * ``llama`` and ``gpt2``: no window; a ``sliding_window`` key is ignored, as Hugging Face ignores it.
        """
        return model_from_hf_config(cls, config, name)


_fields_hash = Model.__hash__           # the dataclass's: the hash of every compared field


def _kept_hash(self) -> int:
    """``Model.__hash__``, the dataclass's value worked out once per Model (issue 35: the kept results of a
    search hash the same Model thousands of times); not pickled (a str's hash differs between processes)."""
    h = self.__dict__.get("_hash")
    if h is None:
        h = _fields_hash(self)
        object.__setattr__(self, "_hash", h)
    return h


Model.__hash__ = _kept_hash
Model.__getstate__ = lambda self: {k: v for k, v in self.__dict__.items() if k != "_hash"}

# ----------------------------------------------------------------------------- approximations
def approx_params_12lh2(model: Model) -> int:
    """The popular shortcut ``N ~ 12 L h^2`` (chapter 1, "Counting parameters").

    It counts only the transformer blocks of a GPT-2/GPT-3 style layer without GQA and with ``f = 4h``:
    4 h^2 for the attention projections (q, k, v, o) plus 8 h^2 for a two-matrix MLP, and drops biases,
    norms, embeddings and the LM head. Kaplan et al. 2020 (arXiv:2001.08361) Sec. 2.1 write it as
    ``N ~ 2 d_model n_layer (2 d_attn + d_ff) = 12 n_layer d_model^2``. Compare with :attr:`Model.n_params`
    to see how wrong it is for a given model; the book does so per catalogued model.
    """
    if not isinstance(model, Model):
        raise TypeError(f"model must be a Model, got {type(model).__name__}")
    return 12 * model.layers * model.hidden**2
