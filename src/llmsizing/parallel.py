"""How a run is split across GPUs. Introduced now so that every memory function can report per-GPU bytes;
the many-GPU chapters (DP/ZeRO/FSDP, TP/SP/PP) teach and refine it, and the "Long context" chapter adds
context parallelism.

Sources: ZeRO stages, Rajbhandari et al. 2020 (Sec. 5, Fig. 1); tensor and sequence parallelism, Shoeybi et
al. 2019 (Megatron-LM) and Korthikanti et al. 2022; pipeline parallelism, Narayanan et al. 2021; context
parallelism, Liu et al. 2023 (ring attention), Megatron-LM's ``--context-parallel-size`` with Transformer
Engine's attention (``cp_comm_type`` ``p2p`` or ``all_gather``), Dubey et al. 2024 (Llama 3), Sec. 3.3.2, and
torchtitan.

How a pipeline splits the layers over its stages and chunks, what each stage recomputes and holds in flight,
lives in :mod:`llmsizing.pipeline_stages` (imported here, so ``parallel.layers_per_stage`` and the rest keep
working).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields, replace

from ._compat import keep_hash
from ._validate import MAX_MEANINGFUL, check_bool, check_choice, check_int
from .pipeline_schedule import MAX_PP, pipeline_bubble  # noqa: F401 (issue 34: they live with the schedules)
# how a pipeline splits the layers lives in pipeline_stages (issue 32: modules under 600 lines); re-exported
from .pipeline_stages import (_held_layers, _kept_stage_chunks, _stage_chunks,  # noqa: F401
                              check_recompute_layers, chunk_layers, layers_per_stage, pipeline_in_flight,
                              recomputed_layers, stage_chunks, uneven_stages)

#: What ZeRO-Offload / ZeRO-Infinity can move to the host's memory (Ren et al. 2021; Rajbhandari et al. 2021):
#: nothing, the optimizer's bytes (fp32 master copy, moments, fp32 gradient copy: DeepSpeed's
#: ``offload_optimizer``, ZeRO stage 1 or more; from stage 2 the gradient shard goes straight to the host
#: too), or those and the 16-bit weights too (``offload_param``, ZeRO stage 3 only). Taught in chapter 7.
OFFLOADS = ("none", "optimizer", "optimizer+params")

# MAX_PP, the most pipeline stages a layout may have, lives with the schedules (issue 34) and is re-exported

#: How context-parallel attention exchanges K and V (Transformer Engine's ``cp_comm_type``, which
#: Megatron-LM's ``--cp-comm-type`` passes on): ``"p2p"``, a ring of point-to-point sends overlapped with each
#: step's attention block (``AttnFuncWithCPAndKVP2P``; ring attention, Liu et al. 2023; Megatron-LM's
#: default), or ``"all_gather"``, one all-gather of K and V per layer before the attention and a
#: reduce-scatter of their gradients after it, not overlapped (``AttnFuncWithCPAndKVAllGather``; Llama 3's
#: choice, Dubey et al. 2024, Sec. 3.3.2, because it handles any mask and grouped-query attention's small K, V
#: simply), or ``"a2a"``, Ulysses (Jacobs et al. 2023; TE's ``AttnFuncWithCPAndQKVOA2A``): all-to-alls that
#: trade the sequence split for a head split around the attention, so ``cp`` must divide each TP rank's query
#: and KV heads (:func:`check_ulysses`). Taught in the "Long context" chapter.
CP_COMMS = ("p2p", "all_gather", "a2a")

#: When ZeRO-3 reduce-scatters (:attr:`Parallel.grad_reduce`): every micro-batch (FSDP2), or once per run of
#: a chunk's consecutive backwards, accumulated over it (PyTorch pipelining's ``_add_reduce_grad``: after a
#: stage's last backward; Llama 3 accumulates in fp32 "over multiple micro-batches", Sec. 3.3.2).
GRAD_REDUCES = ("micro_batch", "chunk_run")

#: Activation recomputation a run may use (Korthikanti et al. 2022, Sec. 5): none, the attention core only, or
#: every layer (``recompute_layers`` for the first few only: :func:`recomputed_layers`).
RECOMPUTE = ("none", "selective", "full")

#: torchtitan's op-level selective activation checkpointing (``selective_ac_option = 'op'``; issues 34/38):
#: each layer keeps the outputs of SDPA and of every other matmul and recomputes the rest in its backward
#: (:data:`llmsizing.act_terms.OP_SAC_SOURCE`). Priced by the activation and step-time models for a
#: dense bias-free block, with tensor, sequence and context parallelism too
#: (:data:`llmsizing.op_sac.OP_SAC_TP_SOURCE`); not one of :data:`RECOMPUTE`, which the planner searches by
#: default and every other model takes (they refuse it by that name).
OP_SAC = "op-sac"

#: :data:`OP_SAC` where torchtitan's ``_save_list`` lacks the SDPA kernel the run dispatched to: cuDNN
#: attention, which torchtitan puts first on compute capability >= 10.0 from 3b85aa31 (2025-05-14, PR #1196;
#: ``torchtitan/models/attention.py`` l.209-211 at 6fc499f6) and added to the list only in b39377f9
#: (2025-12-01, PR #2095, after issue #2091). Its layers keep no SDPA output and rerun attention's forward.
OP_SAC_SDPA_RERUN = "op-sac-sdpa-rerun"

#: Whether each op SAC mode keeps SDPA's output and log-sum-exp (data the activation and FLOP models read).
OP_SAC_SDPA_SAVED = {OP_SAC: True, OP_SAC_SDPA_RERUN: False}

#: torchtitan's op SAC modes (:data:`OP_SAC_SDPA_SAVED`).
OP_SAC_MODES = tuple(OP_SAC_SDPA_SAVED)

#: The recomputation modes the activation and step-time models price: :data:`RECOMPUTE` and
#: :data:`OP_SAC_MODES`.
RECOMPUTE_MODES = RECOMPUTE + OP_SAC_MODES


#: :class:`Parallel`'s integer fields in the order it checks them: the range each takes and
#: :func:`~llmsizing._validate.check_int`'s keywords for it.
_INT_CHECKS = tuple((f, 1, MAX_MEANINGFUL, {}) for f in ("tp", "dp", "cp", "ep")) + (
    ("pp", 1, MAX_PP, {"maximum": MAX_PP}), ("zero", 0, 3, {"minimum": 0, "maximum": 3}),
    ("virtual_stages", 1, MAX_MEANINGFUL, {}))
#: :class:`Parallel`'s boolean fields, in the order it checks them.
_BOOL_FIELDS = ("sp", "expert_tp", "account_for_embedding", "account_for_loss", "deallocate_pipeline_outputs",
                "shared_expert_overlap")


def _check_reshard(value, zero: int) -> bool:
    """``reshard_after_forward`` as a bool; None (torch's default, the root kept) only with ``zero=3``."""
    if value is None:
        raise ValueError(f"reshard_after_forward=None (FSDP2's default: every block resharded, the root "
                         f"kept) needs zero=3, got zero={zero}; give True or False")
    return check_bool("reshard_after_forward", value)


def _as_model(model):                  # a catalogue name's Model (a model as given)
    if not isinstance(model, str):     # (first: no import on the planner's ~1,000 calls a search; pick49)
        return model
    from .catalog import get_model
    return get_model(model)


@keep_hash
@dataclass(frozen=True)
class Parallel:
    """A parallel layout: ``tp`` tensor-, ``pp`` pipeline-, ``dp`` data-parallel degree; ``zero`` is the ZeRO
    stage (0-3, FSDP full-shard is stage 3) over the ``dp`` group; ``sp`` turns on sequence parallelism
    (splits the norm/dropout activations that plain TP replicates); ``virtual_stages`` is the number of model
    chunks per pipeline rank of the interleaved 1F1B schedule (Narayanan et al. 2021, Sec. 2.2; 1 = plain
    1F1B). ``stage_layers`` gives the transformer layers of each pipeline rank (``pp`` numbers summing to the
    model's layers) for an uneven split: Llama 3 405B put 126 layers on 16 stages by taking one layer off the
    first and the last stage (Dubey et al. 2024, Sec. 3.3.2; :func:`uneven_stages`). ``None`` is Megatron-LM's
    even split (the first stages take the remainder). ``reshard_after_forward`` (ZeRO-3 only) is FSDP2's
    choice: ``True`` frees the gathered weights after each forward and gathers them again for the backward;
    ``None`` is ``fully_shard``'s own default, ``True`` for every block and ``False`` for the root unit
    (:func:`~llmsizing.zero_traffic.fsdp_root_params`; ZeRO-3 only, priced as ``True`` under a pipeline);
    ``False`` keeps them until the backward (one gather per micro-batch; the stage's 16-bit weights stay in
    memory); with a pipeline (``pp > 1``) for the whole step, one gather per step, as torchtitan's
    ``apply_fsdp`` does with PP "to avoid per-microbatch all-gathers" and PyTorch's pipeline stages do
    (``set_reshard_after_backward(False)``, ``torch/distributed/pipelining/stage.py``). A pipeline's
    micro-batches are the gradient-accumulation steps of
    :func:`~llmsizing.memory.training_memory` (``grad_accum``). ``offload`` (one of :data:`OFFLOADS`) moves
    the optimizer's bytes, or those and the weights, to the host's memory (ZeRO-Offload, ZeRO-Infinity);
    :class:`~llmsizing.memory.ModelStates` then reports the host bytes it costs (``host_bytes``).

    ``cp`` is the context-parallel degree: each sequence is split over ``cp`` GPUs, each holding ``seq / cp``
    of its tokens (two chunks of ``seq / (2 cp)``, the first and the mirrored last, so that causal attention
    costs every rank the same: Megatron-LM and Transformer Engine require ``seq % (2 cp) == 0``, checked where
    the sequence is known). Attention exchanges K and V over the ``cp`` group as ``cp_comm`` says (one of
    :data:`CP_COMMS`). The ``cp`` ranks hold the same weights, like data-parallel replicas: gradients are
    reduced and ZeRO shards over ``dp x cp`` GPUs (Megatron-LM's data-parallel group "with context
    parallelism"; torchtitan's FSDP mesh ``dp_shard x cp``). ``cp_comm`` sits on the layout, not on each call,
    because the memory (the gathered K, V), the communication and the step time must all agree on it, as one
    Megatron-LM launch flag sets it for all of them. Rank order (Megatron-LM's default ``tp-cp-ep-dp-pp``,
    torchtitan's mesh ``pp, dp, cp, tp``): ``tp`` ranks adjacent, then ``cp``, then ``dp``, then ``pp``.
    Taught in the "Long context" chapter.

    ``ep`` is the expert-parallel degree of a mixture of experts: each MoE layer's routed experts are split
    over ``ep`` GPUs the layout already has (it adds no GPUs). Megatron-Core lays a second grid over the same
    ranks for the MoE layers, ``etp x ep x edp x pp`` (``initialize_model_parallel``'s expert rank generator),
    so ``ep`` must divide ``tp x cp x dp / etp`` (and the routed experts); ``etp`` (:attr:`etp`) is the
    experts' tensor-parallel size, ``tp`` with ``expert_tp=True`` (Megatron-LM's
    ``--expert-tensor-parallel-size`` left unset), else 1 (``--expert-tensor-parallel-size 1``, as DeepSeek-V3
    ran: the default here); the experts' gradients and ZeRO shards go over the :attr:`edp`
    expert-data-parallel GPUs. With ``tp > 1``, ``ep > 1`` needs ``sp=True``, as Megatron-Core requires.
    ``shared_expert_overlap`` runs the shared experts beside the all-to-all (Megatron-Core's
    ``--moe-shared-expert-overlap``: :func:`llmsizing.moe_time.shared_expert_window_s`; :mod:`llmsizing.moe`).

    The pipeline's edges: ``account_for_embedding`` (``account_for_loss``) counts the embedding (the output
    layer and loss) as one layer's place in the split, taken from the first model chunk of the first stage
    (the last chunk of the last stage): Megatron-LM's ``--account-for-embedding-in-pipeline-split`` and
    ``--account-for-loss-in-pipeline-split`` (``transformer_config.py``; ``get_num_layers_to_build`` in
    ``transformer_block.py`` builds one layer fewer in that chunk), both off by default. Llama 3 405B ran
    this way: 126 layers + 2 = 128 places on 16 stages, "the first model chunk on the first stage has only
    the embedding, and the last model chunk on the last stage has only output projection and loss" (Dubey
    et al. 2024, Sec. 3.3.2), which with one place per chunk means ``virtual_stages=8``. Without
    ``stage_layers`` the split is Megatron-LM's (``(layers + 2) / pp`` places per stage); with it, the counts
    given. The interleaved schedule keeps the most micro-batches in flight in the first chunk, so an
    embedding-only chunk lightens the first stage (:func:`pipeline_in_flight` with ``chunks``).
    ``grad_reduce`` (ZeRO-3 only): :data:`GRAD_REDUCES`. ``deallocate_pipeline_outputs`` frees each stage's
    output once sent (Megatron-LM's ``deallocate_output_tensor``, ``pipeline_parallel/schedules.py``, on by
    default in its training loop; Llama 3's "proactively deallocate ... the input and output tensors of each
    pipeline stage"); ``False`` keeps one output per chunk and micro-batch in flight. Chapter 8."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    zero: int = 0
    sp: bool = False
    virtual_stages: int = 1
    offload: str = "none"
    stage_layers: tuple | None = None
    reshard_after_forward: bool | None = True
    cp: int = 1
    cp_comm: str = "p2p"
    # ---- expert parallelism (issue 24; the rules and the arithmetic live in llmsizing.moe)
    ep: int = 1
    expert_tp: bool = False
    shared_expert_overlap: bool = False
    # ---- the pipeline's edges and what it frees (issue 34: Llama 3 405B as Meta ran it)
    account_for_embedding: bool = False
    account_for_loss: bool = False
    deallocate_pipeline_outputs: bool = True
    grad_reduce: str = "micro_batch"

    def __post_init__(self):
        # store what the checks return (Python ints), so that tp * pp * dp cannot wrap around in NumPy; a
        # Python int (bool) in range is what its check returns, so it is left as it is (pick49: a dense
        # model's first search builds ~300 layouts)
        d = self.__dict__
        for f, low, top, kw in _INT_CHECKS:
            v = d[f]
            if type(v) is not int or v < low or v > top:
                object.__setattr__(self, f, check_int(f, v, **kw))
        check_choice("offload", self.offload, OFFLOADS)
        check_choice("cp_comm", self.cp_comm, CP_COMMS)
        for f in _BOOL_FIELDS:
            v = d[f]
            if v is not True and v is not False:
                object.__setattr__(self, f, check_bool(f, v))
        if self.reshard_after_forward is not None or self.zero != 3:   # None: torch's default, ZeRO-3 only
            object.__setattr__(self, "reshard_after_forward", _check_reshard(self.reshard_after_forward,
                                                                             self.zero))
        gr = check_choice("grad_reduce", self.grad_reduce, GRAD_REDUCES)
        if gr != "micro_batch" and (self.zero != 3 or self.reshard_after_forward is not False):
            raise ValueError(f"grad_reduce={gr!r} needs zero=3 with reshard_after_forward=False, got "
                             f"zero={self.zero}, reshard_after_forward={self.reshard_after_forward}")
        if self.stage_layers is not None:
            from ._validate import check_sequence

            layers = tuple(check_int(f"stage_layers[{i}]", n) for i, n in
                           enumerate(check_sequence("stage_layers", self.stage_layers,
                                                    example="(7, 8, 8, 7)")))
            if len(layers) != self.pp:
                raise ValueError(f"stage_layers must give one layer count per pipeline stage: pp={self.pp}, "
                                 f"got {len(layers)} numbers")
            object.__setattr__(self, "stage_layers", layers)
        if (self.tp * self.dp_cp) % (self.etp * self.ep):
            raise ValueError(f"ep={self.ep} must divide tp x cp x dp / etp = "
                             f"{self.tp * self.dp_cp // self.etp} (etp={self.etp}, the experts' "
                             "tensor-parallel size): the expert-parallel ranks are taken from the GPUs the "
                             "layout has (Megatron-Core's initialize_model_parallel); ep adds no GPUs")
        if self.ep > 1 and self.tp > 1 and not self.sp:
            raise ValueError(f"ep={self.ep} with tp={self.tp} needs sp=True (Megatron-Core's "
                             "TransformerConfig: 'When using expert parallelism and tensor parallelism, "
                             "sequence parallelism must be used')")
        check_layout(None, tp=self.tp, pp=self.pp, sp=self.sp, virtual_stages=self.virtual_stages,
                     zero=self.zero, offload=self.offload, stage_layers=self.stage_layers, cp=self.cp,
                     account_for_embedding=self.account_for_embedding, account_for_loss=self.account_for_loss)

    @property
    def gpus(self) -> int:
        """``tp x cp x pp x dp`` (``ep`` splits the experts over GPUs the layout already has)."""
        return self.tp * self.cp * self.pp * self.dp

    @property
    def etp(self) -> int:
        """The routed experts' tensor-parallel size: ``tp`` with ``expert_tp``, else 1."""
        return self.tp if self.expert_tp else 1

    @property
    def edp(self) -> int:
        """The expert-data-parallel size, ``tp x cp x dp / (etp x ep)``: the GPUs that hold the same experts,
        over which their gradients are reduced and their ZeRO shards taken (Megatron-Core's
        ``expert_data_parallel_size = world_size // (etp x ep x pp)``)."""
        return self.tp * self.dp_cp // (self.etp * self.ep)

    @property
    def dp_cp(self) -> int:
        """``dp x cp``: the GPUs that hold the same weights, over which the gradients are reduced and ZeRO
        shards (Megatron-LM's ``get_data_parallel_group(with_context_parallel=True)``, used by its gradient
        buffers and distributed optimizer; torchtitan's FSDP dimension ``dp_shard x cp``). ``dp`` without
        context parallelism."""
        return self.dp * self.cp


def check_layout(model, *, tp: int = 1, pp: int = 1, sp: bool = False, virtual_stages: int = 1, zero: int = 0,
                 offload: str = "none", stage_layers: tuple | None = None, cp: int = 1,
                 seq: int | None = None, ep: int = 1, expert_tp: bool = False,
                 account_for_embedding: bool = False, account_for_loss: bool = False) -> None:
    """Refuse a layout that cannot run: the one place these rules live (``Parallel``, :func:`resolve_parallel`
    and :func:`~llmsizing.activations.activation_memory` all call it). ``model`` may be ``None`` (then only
    the rules that need no architecture are checked).

    * ``sp`` needs ``tp > 1``: sequence parallelism splits along the tensor-parallel group (Korthikanti
      et al. 2022, Sec. 4.2.2).
    * ``tp`` must divide the attention heads and the MLP width: Megatron-LM splits both column-wise and
      asserts it (``num_attention_heads % tensor_model_parallel_size == 0``).
    * KV heads: with ``tp <= kv_heads``, ``tp`` must divide them (each rank holds ``kv_heads / tp`` of them;
      Megatron-LM asserts ``num_query_groups % tp == 0``). With ``tp > kv_heads``, ``tp`` a multiple of
      ``kv_heads``: vLLM replicates each KV head ``tp / kv_heads`` times; Megatron-LM refused it until
      2025-12 (commit f7dfb99, "Support TP greater than num_kv_heads") and now all-gathers the Q/K/V
      projection's output so that ``tp / kv_heads`` ranks share each KV head. The library follows vLLM and
      counts one KV head per rank; Megatron-LM's extra all-gather is not in
      :func:`~llmsizing.comm.communication`.
    * ``pp`` must not exceed the layer count: a pipeline stage needs at least one layer.
    * ``virtual_stages > 1`` needs ``pp > 1`` and at least one layer per chunk; chunks of a stage may differ
      by a layer (Megatron-Core's ``--pipeline-model-parallel-layout`` takes any split; issue 35; before it,
      Megatron-LM's interleaved schedule wanted equal chunks). With ``stage_layers`` (an uneven split) every
      stage needs at least ``virtual_stages`` layers, and chunks may differ by a layer, as in Llama 3's.
    * ``stage_layers`` must sum to the model's layers, one count of at least 1 per stage.
    * ZeRO stage 2 or 3 with ``pp > 1`` is allowed: DeepSpeed's pipeline engine refuses it ("ZeRO-2 and ZeRO-3
      are incompatible with pipeline parallelism"), but PyTorch's FSDP2 runs under pipelines (torchtitan), as
      Llama 3 did; the gradients are reduce-scattered as ``grad_reduce`` says (:mod:`llmsizing.comm`).
      Megatron-LM pairs pipelines with its distributed optimizer, which is ZeRO-1.
    * ``offload="optimizer"`` needs ZeRO stage >= 1 and ``"optimizer+params"`` stage 3, as DeepSpeed's
      ``offload_optimizer`` and ``offload_param`` do.
    * ``cp > 1`` needs the sequence (``seq``, when given) divisible by ``2 cp``: causal load balancing gives
      each context-parallel rank two chunks of ``seq / (2 cp)`` tokens (Megatron-LM's ``arguments.py`` asserts
      ``seq_length % (context_parallel_size * 2) == 0``; Transformer Engine's attention needs the same).
    * ``ep > 1`` (or ``expert_tp``) needs a mixture of experts whose routed experts ``ep`` divides
      (:func:`check_ep`); ``zero=3`` with ``ep > 1`` is not modelled.
    * ``account_for_embedding`` / ``account_for_loss`` need ``pp > 1``; without ``stage_layers``, ``pp`` must
      divide the layers plus the places they add, and ``virtual_stages`` each stage's places (Megatron-LM's
      ``get_num_layers_to_build`` asserts both); with ``stage_layers``, the first (last) stage's places
      count the embedding (loss) when ``virtual_stages`` is checked against them.
    """
    sp, expert_tp = check_bool("sp", sp), check_bool("expert_tp", expert_tp)
    if cp > 1 and seq is not None and seq % (2 * cp):
        raise ValueError(f"seq={seq:,} must be a multiple of 2 x cp = {2 * cp} with cp={cp}: context "
                         "parallelism gives each rank two chunks of seq / (2 cp) tokens (causal load "
                         "balancing, as Megatron-LM and Transformer Engine require)")
    check_choice("offload", offload, OFFLOADS)
    model = _as_model(model)
    if offload == "optimizer" and zero < 1:
        raise ValueError("offload='optimizer' needs zero >= 1 (DeepSpeed's offload_optimizer), got "
                         f"zero={zero}")
    if offload == "optimizer+params" and zero != 3:
        raise ValueError(f"offload='optimizer+params' needs zero=3 (DeepSpeed's offload_param partitions the "
                         f"weights first), got zero={zero}")
    if sp and tp == 1:
        raise ValueError("sp=True needs tp > 1: sequence parallelism splits along the tensor-parallel group")
    if virtual_stages > 1 and pp == 1:
        raise ValueError(f"virtual_stages={virtual_stages} needs pp > 1: interleaving splits each pipeline "
                         "stage")
    emb, loss = check_bool("account_for_embedding", account_for_embedding), check_bool("account_for_loss",
                                                                                       account_for_loss)
    if (emb or loss) and pp == 1:
        raise ValueError("account_for_embedding / account_for_loss need pp > 1: they give the embedding or "
                         "the loss a layer's place in the pipeline split")
    if model is None:
        return
    if ep > 1 or expert_tp:                    # ---- expert parallelism (issue 24)
        check_ep(model, kept_parallel(tp=tp, ep=ep, dp=ep, sp=sp, expert_tp=expert_tp))
        if ep > 1 and zero == 3:
            raise ValueError(f"zero=3 with ep={ep} is not modelled: ZeRO-3/FSDP's gathered unit of a mixture "
                             "of experts under expert parallelism (Megatron-Core pairs expert parallelism "
                             "with its distributed optimizer, ZeRO-1)")
    if model.heads % tp:
        raise ValueError(f"tp={tp} must divide the attention heads ({model.heads}): each tensor-parallel "
                         "rank holds whole heads")
    if model.ffn_hidden % tp:
        raise ValueError(f"tp={tp} must divide ffn_hidden ({model.ffn_hidden}): the MLP is split column-wise")
    g = model.kv_heads
    if (tp <= g and g % tp) or (tp > g and tp % g):
        raise ValueError(f"tp={tp} and the KV heads ({g}) must divide one another: below {g}, each rank "
                         f"holds kv_heads/tp of them; above, vLLM replicates each KV head tp/kv_heads times "
                         "(and Megatron-LM, since 2025-12, shares it among tp/kv_heads ranks)")
    if pp > model.layers:
        raise ValueError(f"pp={pp} must be <= layers ({model.layers}): every pipeline stage needs a layer")
    if stage_layers is not None:
        if sum(stage_layers) != model.layers:
            raise ValueError(f"stage_layers must add up to the model's {model.layers} layers, got "
                             f"{sum(stage_layers)} ({', '.join(map(str, stage_layers))})")
        places = [n + (emb and i == 0) + (loss and i == pp - 1) for i, n in enumerate(stage_layers)]
        if virtual_stages > min(places):
            raise ValueError(f"virtual_stages={virtual_stages} needs at least that many layers on every "
                             f"pipeline stage; the smallest stage_layers entry is {min(stage_layers)}"
                             + (" (the embedding or loss counting as one)" if emb or loss else ""))
    elif emb or loss:
        places = model.layers + emb + loss
        if places % pp or (places // pp) % virtual_stages:
            raise ValueError(f"with account_for_embedding={emb} and account_for_loss={loss}, pp={pp} must "
                             f"divide the {places} places (layers + embedding + loss) and virtual_stages="
                             f"{virtual_stages} each stage's {places / pp:g} (Megatron-LM's "
                             "get_num_layers_to_build); pass stage_layers for another split")
    elif virtual_stages > 1 and model.layers // pp < virtual_stages:
        # Megatron-Core's --pipeline-model-parallel-layout takes any split of the layers into pp x v chunks
        # (NVIDIA/Megatron-LM MR 2795, "flexible asymmetric VPP"; e.g. 94 layers, PP 8, VP 4): the chunks of a
        # stage may differ by a layer (chunk_layers); each needs one
        raise ValueError(f"virtual_stages={virtual_stages} needs at least that many layers on each of the "
                         f"{pp} pipeline stages ({model.layers} layers / pp = {model.layers / pp:g})")


SINGLE_GPU = Parallel()


def smallest_tp(model, at_least: int = 1) -> int:
    """The smallest tensor-parallel degree of at least ``at_least`` that :func:`check_layout` accepts for
    ``model`` (a catalogue name or Model): whole query heads and MLP columns on every GPU, and its KV heads
    split evenly or, beyond their number, each replicated on the same number of GPUs. Up to the model's query
    heads; ValueError when none of them runs. Chapter 3, exercise 1."""
    m = _as_model(model)
    at_least = check_int("at_least", at_least)
    for tp in range(at_least, m.heads + 1):
        try:
            check_layout(m, tp=tp)
        except ValueError:
            continue
        return tp
    raise ValueError(f"at_least={at_least}: no tensor-parallel degree from {at_least} to {m.heads} (the "
                     f"query heads) runs {m.name}")


def kept_parallel(**fields) -> Parallel:
    """``Parallel(**fields)``, kept for the last 4,096 sets of fields (each with its type, so that ``sp=1``
    never hits the entry kept for ``sp=True`` and skips its check): a layout is immutable and its checks
    depend on its fields only, so the same fields give an equal layout, checked once (a refused one is not
    kept: it raises each time). For the hot paths that build many layouts from a few (issue 33: the planner's
    search, :func:`llmsizing.moe.moe_model_states`, :func:`check_layout`). Unhashable fields are not kept."""
    try:
        return _kept_parallel(**fields)
    except TypeError:                   # an unhashable field: built (and refused, with its message) as given
        return Parallel(**fields)


@functools.lru_cache(maxsize=4096, typed=True)
def _kept_parallel(**fields) -> Parallel:
    return Parallel(**fields)


#: The changes :func:`derived_layout` takes, each with the one value it may set: those that keep every rule of
#: :meth:`Parallel.__post_init__` on a layout that passed them (no expert parallelism, ZeRO, offloading or
#: per-chunk gradient reduction; any ``dp`` and ``cp`` of 1).
_DERIVED = dict(dp=1, cp=1, cp_comm="p2p", zero=0, ep=1, offload="none", reshard_after_forward=True,
                grad_reduce="micro_batch")


def derived_layout(par: Parallel, **changes) -> Parallel:
    """``dataclasses.replace(par, **changes)`` without running all of :meth:`Parallel.__post_init__`'s checks
    again, for the planner's internal layouts (plan36: a search reads the model states and the activations of
    a few hundred layouts off ones derived so, ~10 us of checks each: ~2-4 ms of a chapter 17 move of the K/V
    exchange or of a model pick). ``par`` is a checked :class:`Parallel` (every instance is) and each change
    one of :data:`_DERIVED`, with its value there, so every field keeps a value the checks accept and store
    (Python ints, bools and the names); of the rules between fields, those these changes can break are
    checked here (``ep`` dividing ``tp x cp x dp / etp``, the offload's ZeRO stage, ``grad_reduce``'s), and
    :func:`check_layout`'s others read only fields they leave alone. Where one fails, the layout is
    ``replace``'s, which raises as it would. Equal to (and hashed as) ``replace(par, **changes)``:
    ``tests/test_derived_layout.py``. Any other change: a ``ValueError`` (a user's layout is always built
    with its checks)."""
    if type(par) is not Parallel:
        raise TypeError(f"derived_layout: par must be a Parallel, got {type(par).__name__}")
    for name, value in changes.items():
        if name not in _DERIVED or type(value) is not type(_DERIVED[name]) or value != _DERIVED[name]:
            raise ValueError(f"derived_layout: {name}={value!r} is not one of the changes it takes "
                             f"({', '.join(f'{k}={v!r}' for k, v in _DERIVED.items())})")
    state = par.__dict__.copy()          # (its fields, in order; its kept hash dropped: pick49, a copy in C)
    state.pop("_hash", None)
    state.update(changes)
    f = state.__getitem__
    etp = f("tp") if f("expert_tp") else 1
    if ((f("tp") * f("dp") * f("cp")) % (etp * f("ep"))
            or f("offload") == "optimizer" and f("zero") < 1
            or f("offload") == "optimizer+params" and f("zero") != 3
            or f("reshard_after_forward") is None and f("zero") != 3
            or f("grad_reduce") != "micro_batch"
            and (f("zero") != 3 or f("reshard_after_forward") is not False)):
        return replace(par, **changes)                  # (refused, with the checks' own message)
    out = object.__new__(Parallel)
    out.__dict__.update(state)
    return out


def resolve_parallel(parallel: Parallel | None, model=None, seq: int | None = None) -> Parallel:
    """``parallel`` or the single-GPU layout for ``None``; with ``model``, also check that the layout can run
    that model (:func:`check_layout`), and with ``seq`` that the sequence splits over ``cp``."""
    if parallel is None:
        return SINGLE_GPU
    if not isinstance(parallel, Parallel):
        raise TypeError(f"parallel must be a Parallel(...) or None, got {type(parallel).__name__}")
    try:
        return _kept_resolved(parallel, model, seq)
    except TypeError:      # an unhashable model or seq (or a refused type): checked, and refused, as given
        return _kept_resolved.__wrapped__(parallel, model, seq)


@functools.lru_cache(maxsize=4096, typed=True)
def _kept_resolved(parallel: Parallel, model, seq) -> Parallel:
    """:func:`resolve_parallel` kept per (layout, model, seq), on which alone its checks depend (a refused one
    raises each time). Issue 35: a planner's search resolves a few hundred layouts ~1,400 times."""
    check_layout(model, tp=parallel.tp, pp=parallel.pp, sp=parallel.sp,
                 virtual_stages=parallel.virtual_stages, zero=parallel.zero, offload=parallel.offload,
                 stage_layers=parallel.stage_layers, cp=parallel.cp, seq=seq, ep=parallel.ep,
                 expert_tp=parallel.expert_tp, account_for_embedding=parallel.account_for_embedding,
                 account_for_loss=parallel.account_for_loss)
    if model is not None and parallel.cp_comm == "a2a":
        check_ulysses(model, tp=parallel.tp, cp=parallel.cp)
    if model is not None and parallel.stage_layers is None and (parallel.account_for_embedding
                                                                or parallel.account_for_loss):
        # Megatron-LM's split with the embedding / loss places, written out (every per-stage count reads it)
        split = layers_per_stage(_as_model(model).layers, parallel)
        return kept_parallel(**{**_fields(parallel), "stage_layers": split})
    return parallel


def check_ulysses(model, *, tp: int, cp: int) -> None:
    """Ulysses (``cp_comm="a2a"``) gives each of the ``cp`` ranks ``1 / cp`` of a TP rank's heads: ``cp`` must
    divide its query heads and its KV heads (one when ``tp`` exceeds ``kv_heads``). Transformer Engine asserts
    both ("The number of attention heads needs to be divisible by CP size"); so ``cp <= kv_heads / tp``."""
    m = _as_model(model)
    q, kv = m.heads // tp, max(m.kv_heads // tp, 1)
    if q % cp or kv % cp:
        raise ValueError(f"cp={cp} with cp_comm='a2a' (Ulysses) must divide each tensor-parallel rank's "
                         f"{q} query and {kv} KV heads (heads={m.heads}, kv_heads={m.kv_heads}, tp={tp}): "
                         "the all-to-all splits the heads over the cp ranks")


def _fields(par: Parallel) -> dict:
    return {f.name: getattr(par, f.name) for f in fields(par)}



def check_ep(model, par: Parallel) -> None:
    """Refuse an expert-parallel layout that cannot run ``model``: ``ep > 1`` needs a mixture of experts whose
    routed experts ``ep`` divides (Megatron-Core's ``MoELayer`` asserts ``num_moe_experts %
    expert_model_parallel_size == 0``), and ``expert_tp=True`` needs the expert width divisible by ``tp``."""
    if par.ep == 1 and not par.expert_tp:
        return
    if model is None:
        return
    if not model.is_moe:
        what = f"ep={par.ep}" if par.ep > 1 else "expert_tp=True"
        raise ValueError(f"{what} splits routed experts, but {model.name!r} is dense (experts=0)")
    if model.experts % par.ep:
        raise ValueError(f"ep={par.ep} must divide the routed experts ({model.experts}) of {model.name!r}: "
                         "each expert-parallel rank holds experts / ep whole experts")
    fe = model.expert_ffn_hidden or model.ffn_hidden
    if par.expert_tp and fe % par.tp:
        raise ValueError(f"expert_tp=True: tp={par.tp} must divide the expert width ({fe})")


#: Llama 3's precision recipe: bf16 weights and compute, gradients accumulated over the micro-batches and
#: reduce-scattered in fp32 (Dubey et al. 2024, Sec. 3.3.2, "Numerical stability"), fp32 AdamW states.
LLAMA3_RECIPE = "bf16-mixed-fp32-grads"


def llama3_405b_layout(dp: int = 128, cp: int = 1) -> Parallel:
    """Llama 3 405B's pre-training layout as Meta describes it (Dubey et al. 2024, Sec. 3.3.2, Table 4):
    ``tp=8``, ``pp=16``, ``dp`` (64 or 128 at 8K, 8 at 128K with ``cp=16``, K and V all-gathered), sequence
    parallelism; FSDP that shards gradients and optimizer states but does not reshard the weights after the
    forward (``zero=3, reshard_after_forward=False``); the embedding and the loss each alone in a model
    chunk of the first and last stage, so 8 one-layer chunks per stage (``account_for_embedding``,
    ``account_for_loss``); stage outputs freed once sent; a chunk's gradients reduce-scattered once per run
    of its backwards (``grad_reduce="chunk_run"``). Use with :data:`LLAMA3_RECIPE`. Chapters 8, 13, 17."""
    return Parallel(tp=8, pp=16, dp=check_int("dp", dp), cp=check_int("cp", cp), cp_comm="all_gather",
                    zero=3, reshard_after_forward=False, sp=True, virtual_stages=8,
                    account_for_embedding=True, account_for_loss=True, grad_reduce="chunk_run")


def llama3_long_context_layout() -> Parallel:
    """Llama 3 405B's 128K degrees (Dubey et al. 2024, Table 4): TP8 CP16 PP16 DP8 with all-gathered K and V,
    read as a Megatron-LM run (four interleaved chunks, the 7-8...8-7 split, ZeRO-1, sequence parallelism).
    Not Meta's layout, which is :func:`llama3_405b_layout` ``(8, cp=16)`` (FSDP, eight one-layer chunks); the
    context-parallel traffic and compute are the same in both. Chapter 17's default (its CP figure) and the
    appendix's partial-recomputation example; moved here from ``charts.long_context``, which re-exports it."""
    return Parallel(tp=8, cp=16, pp=16, dp=8, zero=1, sp=True, virtual_stages=4,
                    stage_layers=uneven_stages(126, 16, first=7, last=7), cp_comm="all_gather")


#: The :class:`~llmsizing.parallel.Parallel` fields of a split that counts the embedding and the loss as one
#: layer's place each (:func:`pipeline_split`).
ACCOUNTED = {"account_for_embedding": True, "account_for_loss": True}


def pipeline_split(model, pp: int) -> dict:
    """The :class:`~llmsizing.parallel.Parallel` fields of the planner's split of ``model``'s layers over
    ``pp`` stages (issue 34): none for Megatron-LM's even split (``pp`` divides the layers), else
    :data:`ACCOUNTED`: ``--account-for-embedding-in-pipeline-split`` and
    ``--account-for-loss-in-pipeline-split``, ``(layers + 2) / pp`` places per stage, the first and the last
    stage one layer fewer (Llama 3 405B: 126 layers on 16 stages, 7, fourteen 8s, 7; Dubey et al. 2024,
    Sec. 3.3.2). The planner (:mod:`llmsizing.plan_stage_terms`, which re-exports it) gives a dense model
    such a ``pp`` only where it divides ``layers + 2`` and not the layers, so ``pp`` alone names the split.
    A ``pp`` that divides neither (a DualPipe search's only, dual48: :func:`uneven_split`) gets
    ``stage_layers``: Megatron-LM's ``--decoder-first-pipeline-num-layers`` and
    ``--decoder-last-pipeline-num-layers``."""
    return split_fields(model.layers, pp)


def split_fields(layers: int, pp: int) -> dict:
    """:func:`pipeline_split` of a model of ``layers`` layers (what needs the layer count only, e.g.
    :func:`~llmsizing.grad_buckets.megatron_calls_of`)."""
    if layers % pp == 0:
        return {}
    if (layers + 2) % pp == 0 and pp <= layers:
        return ACCOUNTED
    split = uneven_split(layers, pp)
    return ACCOUNTED if split is None else {"stage_layers": split}


@functools.lru_cache(maxsize=1024)
def uneven_split(layers: int, pp: int) -> tuple | None:
    """The split of ``layers`` over ``pp`` stages that the planner gives a DualPipe search where ``pp``
    divides neither the layers nor the layers plus two (dual48, issue 35): the middle stages
    ``ceil(layers / pp)`` layers each, the first and the last the rest, the first the larger half
    (Megatron-LM's ``--decoder-first-pipeline-num-layers`` and ``--decoder-last-pipeline-num-layers``, which
    want equal middle stages; the embedding's and the head's stages lighter, as DeepSeek-V3's 61 layers on
    16 stages: 3, fourteen 4s, 2, :data:`~llmsizing.deepseek.DEEPSEEK_V3_BALANCED_SPLIT`). None where the
    rest leaves the first or the last stage no layer (or ``pp`` is below 2 or above the layers)."""
    if pp < 2 or pp > layers:
        return None
    mid = -(-layers // pp)
    rest = layers - (pp - 2) * mid if pp > 2 else layers
    if rest < 2:
        return None
    return uneven_stages(layers, pp, first=rest - rest // 2, last=rest // 2)
