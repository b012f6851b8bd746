"""The peak of a training step from its parts (chapter 4, "Activation memory"; chapter 3 for the allowances):
the :class:`TrainingMemory` result, the four phases of a step and what each holds at its peak
(:func:`step_phases`), and the constants of the loss and of one layer's working set.
:func:`llmsizing.memory.training_memory` fills it in for a model and a layout; :mod:`llmsizing.deepseek` for
DeepSeek-V3's own plan.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from .states import ModelStates, _frame
from .units import GiB


#: PyTorch's three AdamW implementations (its own names): ``foreach`` (its default on CUDA) applies each
#: update to the whole parameter group at once, ``for-loop`` one tensor at a time, ``fused`` in one kernel.
OPTIMIZER_IMPLS = ("foreach", "for-loop", "fused")


#: The phases of one training step, in order (:attr:`TrainingMemory.phases`).
PHASES = ("forward", "loss backward", "backward", "optimizer step")


@dataclass(frozen=True)
class TrainingMemory:
    """The memory of one training step on one GPU, phase by phase (chapter 4, "The peak of a step").

    ``phases_bytes`` holds the largest live bytes of each phase in :data:`PHASES`, at steady state (the
    optimizer states already exist; the gradients were freed by ``zero_grad(set_to_none=True)``, unless
    ``grad_buffer``: they live in a persistent buffer, :func:`phase_values`):
    ``peak_bytes`` is the largest of them and ``total_bytes`` adds the overhead allowance to it. Gradient
    accumulation multiplies the global batch, not the activations.

    With pipeline parallelism the result is the most loaded GPU's (``stage`` is its pipeline stage; ties go to
    the earlier stage): ``stages`` holds one row per stage (params, micro-batches in flight, states,
    activations, peak, total, host bytes) and :attr:`stage_table` shows them. ``in_flight`` is how many
    micro-batches of this stage's layers are alive at its peak
    (:func:`~llmsizing.parallel.pipeline_in_flight`), ``gathered_bytes`` ZeRO-3's gathered unit
    (:func:`zero3_gathered_bytes`) and :attr:`host_bytes` the host memory an ``offload`` layout costs per GPU.

    Changed in the "peak of a step" revision: ``total_bytes`` used to be model states + activations +
    allowance; it is now the peak of the phases + allowance, which is never less than the activations
    alive at the end of the forward plus the states that exist then. Every field and property of the old
    result is still there.
    """

    states: ModelStates
    activations: "ActivationMemory"  # noqa: F821
    overhead_bytes: float
    micro_batch: int
    grad_accum: int
    seq: int
    flops_per_token: float
    pieces: dict = field(default_factory=dict)
    stack: str = "fused"
    optimizer_impl: str = "foreach"
    autocast_copies_bytes: float = 0.0
    loss_temporaries_bytes: float = 0.0
    optimizer_temporaries_bytes: float = 0.0
    stage: int = 0
    in_flight: float = 1.0
    gathered_bytes: float = 0.0
    stages: tuple = ()
    grad_buffer: bool | str = False

    @property
    def weights_bytes(self) -> float:
        return self.states.weights_bytes

    @property
    def gradients_bytes(self) -> float:
        return self.states.gradients_bytes

    @property
    def optimizer_bytes(self) -> float:
        return self.states.optimizer_bytes

    @property
    def activations_bytes(self) -> float:
        return self.activations.total_bytes

    @property
    def pieces_bytes(self) -> dict[str, float]:
        """The bytes of each piece of :func:`step_phases` (the backward's two ends apart)."""
        return {k: sum(v.values()) for k, v in self.pieces.items()}

    @property
    def phase_parts(self) -> dict[str, dict[str, float]]:
        """What is alive at the peak of each phase in :data:`PHASES`, by part (:data:`STEP_PARTS`)."""
        p, b = self.pieces, self.pieces_bytes
        back = "backward (start)" if b["backward (start)"] >= b["backward (end)"] else "backward (end)"
        out = {"forward": p["forward"], "loss backward": p["loss backward"], "backward": p[back],
               "optimizer step": p["optimizer step"]}
        return {k: {part: v.get(part, 0.0) for part in STEP_PARTS} for k, v in out.items()}

    @property
    def phases_bytes(self) -> dict[str, float]:
        """The largest live bytes of each phase in :data:`PHASES` (:func:`step_phases`)."""
        return dict(self._phases_bytes)

    @functools.cached_property
    def _phases_bytes(self) -> tuple[tuple[str, float], ...]:
        """:attr:`phases_bytes`, worked out once per result (the fields are frozen; the planner's searches
        read the peak, its phase and the total of every stage)."""
        return tuple((k, sum(v.values())) for k, v in self.phase_parts.items())

    @property
    def peak_bytes(self) -> float:
        """The largest phase of the step, without the overhead allowance."""
        return max(v for _, v in self._phases_bytes)

    @property
    def peak_phase(self) -> str:
        """Which phase holds the peak (the first one, if two are equal)."""
        b = dict(self._phases_bytes)
        return max(PHASES, key=lambda p: (b[p], -PHASES.index(p)))

    @property
    def total_bytes(self) -> float:
        """The peak of the step plus the overhead allowance: what must fit in the GPU's memory."""
        return self.peak_bytes + self.overhead_bytes

    @property
    def host_bytes(self) -> float:
        """Host (CPU) memory this GPU's offloaded states take (0 without ``offload``)."""
        return self.states.host_bytes

    @property
    def stage_table(self):
        """A DataFrame, one row per pipeline stage (bytes, and ``total GiB``); one row without a pipeline."""
        import pandas as pd

        df = pd.DataFrame(list(self.stages)).set_index("stage")
        df["total GiB"] = df["total"] / GiB
        return df

    @property
    def global_batch(self) -> int:
        """Sequences per optimizer step: micro-batch x accumulation steps x data-parallel replicas."""
        return self.micro_batch * self.grad_accum * self.states.parallel.dp

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq

    @property
    def phases(self):
        """A DataFrame, one row per phase: what is alive at its peak by part (bytes, :data:`STEP_PARTS`), the
        phase's ``bytes`` and ``GiB``."""
        import pandas as pd

        df = pd.DataFrame(self.phase_parts).T.astype("float64")
        df["bytes"] = df.sum(axis=1)
        df["GiB"] = df["bytes"] / GiB
        df.index.name = "phase"
        return df

    def to_frame(self):
        return _frame({"weights": self.weights_bytes, "gradients": self.gradients_bytes,
                       "optimizer": self.optimizer_bytes, "activations": self.activations_bytes,
                       "peak": self.peak_bytes, "overhead": self.overhead_bytes, "total": self.total_bytes},
                      self.states.n_params)


def step_phases(states: ModelStates, acts, *, grad_accum: int, autocast_bytes: float, loss_bytes: float,
                optimizer_bytes: float, layer_working_bytes: float, head_grad_bytes: float,
                head_copy_bytes: float = 0.0, embedding_grad_bytes: float = 0.0,
                gathered_bytes: float = 0.0, cp_buffers_bytes: tuple = (0.0, 0.0),
                grad_buffer: bool | str = False, no_sync_bytes: float = 0.0) -> dict[str, float]:
    """The live bytes of each phase of one step (see :class:`TrainingMemory`), from its parts.

    * forward: weights + optimizer states + activations + autocast copies (+ gradients from the previous
      micro-batch when accumulating, or always with ``grad_buffer``: :func:`phase_values`);
    * loss backward: the forward's bytes + the loss's temporaries (the fp32 gradient of the logits and its
      companions, ``loss_bytes``);
    * backward: the loss's and the LM head's tensors are gone; the layers' activations are freed layer by
      layer while that layer's gradients appear, so the live bytes move linearly from (the layers'
      activations + the LM head's gradients) to (the embedding's activations + all gradients); the larger
      end, plus one layer's backward working set. With tied embeddings the embedding's backward writes a
      dense gradient of the shared matrix and adds it to the LM head's: two more copies at the end
      (``embedding_grad_bytes``, measured). The LM head's autocast copy (``head_copy_bytes``) is gone;
    * autocast's copies of a layer that full recomputation reruns (``acts.recomputed``) live only in
      autocast's cache, which empties when the forward leaves ``torch.autocast`` (its ``__exit__`` calls
      ``torch.clear_autocast_cache()``; the checkpoint saved no tensor that holds them): from the loss
      backward on only the LM head's and the other layers' copies are left, and at the start of the backward
      the rebuilt layer's own (the recomputation runs under autocast again; measured, chapter 5);
    * optimizer step: weights + gradients + optimizer states + the optimizer's temporaries (the activations
      and autocast copies are gone);
    * with ZeRO-3, the weights and gradient of the unit being computed are gathered in full
      (``gathered_bytes``, :func:`zero3_gathered_bytes`) during the forward and backward;
    * with context parallelism, one layer's attention holds the K and V it exchanges
      (``cp_buffers_bytes``, forward and backward: :func:`~llmsizing.activations.cp_attention_buffers_bytes`)
      on top of the forward's activations and of the backward's working set.

    Against the measured Hugging Face steps (chapter 5) the forward and the loss backward are within -1% / +5%
    and the optimizer step exact; the backward is the least exact phase, -4% to +9% (its working set,
    :data:`LAYER_WORKING_SET`, is half a layer: a cautious round-up of the best fit, 0.395), and it rarely
    holds the peak.

    Returns five pieces, each a dict of what is alive (keys of :data:`STEP_PARTS`) and each linear in the
    micro-batch: the two ends of the backward are kept apart (``"backward (start)"``, ``"backward (end)"``),
    which is what lets :func:`max_micro_batch` stay exact.
    """
    return {phase: dict(zip(keys, values)) for (phase, keys), values in zip(
        PHASE_KEYS, phase_values(states, acts, grad_accum=grad_accum, autocast_bytes=autocast_bytes,
                                 loss_bytes=loss_bytes, optimizer_bytes=optimizer_bytes,
                                 layer_working_bytes=layer_working_bytes, head_grad_bytes=head_grad_bytes,
                                 head_copy_bytes=head_copy_bytes, embedding_grad_bytes=embedding_grad_bytes,
                                 gathered_bytes=gathered_bytes, cp_buffers_bytes=cp_buffers_bytes,
                                 grad_buffer=check_grad_buffer_kind(grad_buffer),
                                 no_sync_bytes=no_sync_bytes))}


#: :func:`step_phases`' phases and, for each, what is alive in it, in order (:func:`phase_values`' order).
PHASE_KEYS = (("forward", ("weights", "optimizer states", "gradients", "activations", "autocast copies",
                           "temporaries")),
              ("loss backward", ("weights", "optimizer states", "gradients", "activations", "autocast copies",
                                 "temporaries")),
              ("backward (start)", ("weights", "optimizer states", "gradients", "activations",
                                    "autocast copies", "temporaries")),
              ("backward (end)", ("weights", "optimizer states", "gradients", "activations", "temporaries")),
              ("optimizer step", ("weights", "optimizer states", "gradients", "temporaries")))


def phase_values(states: ModelStates, acts, *, grad_accum: int, autocast_bytes: float, loss_bytes: float,
                 optimizer_bytes: float, layer_working_bytes: float, head_grad_bytes: float,
                 head_copy_bytes: float = 0.0, embedding_grad_bytes: float = 0.0,
                 gathered_bytes: float = 0.0, cp_buffers_bytes: tuple = (0.0, 0.0),
                 grad_buffer: bool | str = False, no_sync_bytes: float = 0.0) -> tuple:
    """:func:`step_phases` as tuples: each phase's live bytes in the order of :data:`PHASE_KEYS` (the one
    place they are worked out; issue 32: the planner's searches sum them a few hundred times per search
    and need no dicts).

    ``grad_buffer`` (issue 38, one of :data:`GRAD_BUFFERS`): the gradients live in a buffer allocated once
    and only zeroed between steps (Megatron-Core's ``DistributedDataParallel`` grad buffer, ``main_grad``;
    PyTorch DDP's buckets), so they are alive in every phase, as from the second micro-batch on when
    accumulating; PyTorch DDP's ``.grad`` tensors apart from its buckets come on top
    (:func:`grad_copies` says how many copies each phase holds). Without it the step starts with them freed
    (``zero_grad(set_to_none=True)``). ``no_sync_bytes``: FSDP2's unsharded gradients accumulated without a
    sync (:data:`NO_SYNC_GRADS`), alive before each micro-batch's backward but the first in place of the
    ``.grad`` tensors; the last micro-batch's backward reduce-scatters them."""
    W, G, O = states.working_weights_bytes, states.gradients_bytes, states.optimizer_bytes
    # what the forward leaves alive; with recomputation, the layer rebuilt during the backward comes on top
    # only in the backward (activation_memory reports the backward peak, rebuilt layer included)
    kept = acts.total_bytes - acts.rebuilt_bytes
    A, A_emb = kept, acts.embedding_bytes
    # whole copies of the gradients: the buffer's, and the .grad tensors apart from it before this
    # micro-batch's backward, at its end and in the optimizer step (x 1 and x 2 are exact: the same floats)
    buf, before, end, step = _GRAD_COPIES[grad_buffer, grad_accum > 1]
    g_fwd = no_sync_bytes if no_sync_bytes and before else G * (buf + before)
    cp_fwd, cp_bwd = cp_buffers_bytes
    bwd_temps = layer_working_bytes + gathered_bytes + cp_bwd
    # autocast's copies after the forward: a recomputed layer's are freed with autocast's cache, and the
    # backward rebuilds one layer's at a time (r of n layers recomputed; footprint's docstring says why)
    copies_after, copies_bwd = autocast_bytes, autocast_bytes - head_copy_bytes
    r, n = acts.recomputed
    if r and autocast_bytes:
        copies_after = autocast_bytes - copies_bwd * r / n
        copies_bwd = copies_bwd * (n - r + 1) / n
    return ((W, O, g_fwd, A, autocast_bytes, gathered_bytes + cp_fwd),
            (W, O, g_fwd, A, copies_after, loss_bytes + gathered_bytes),
            # (the LM head's gradients are the backward's first: alone, or beside the buffer's)
            (W, O, g_fwd + head_grad_bytes if end and not before else g_fwd,
             A - acts.logits_bytes + acts.rebuilt_bytes, copies_bwd, bwd_temps),
            (W, O, G * (buf + end) + embedding_grad_bytes, A_emb, bwd_temps),
            (W, O, G * (buf + step), optimizer_bytes))


#: What ``grad_buffer`` takes (issue 38): ``False``, the gradients freed after each step
#: (``zero_grad(set_to_none=True)``); ``True``, one persistent buffer the gradients accumulate into and live
#: in (Megatron-Core's DDP ``main_grad``; PyTorch DDP with ``gradient_as_bucket_view=True`` when it does not
#: accumulate); ``"ddp-view"``, PyTorch DDP with ``gradient_as_bucket_view=True`` accumulating under
#: ``no_sync``; ``"ddp-copy"``, PyTorch DDP's default (``gradient_as_bucket_view=False``): the buckets
#: and, apart from them, the ``.grad`` tensors (:func:`grad_copies`).
GRAD_BUFFERS = (False, True, "ddp-view", "ddp-copy")

#: :func:`grad_copies` by ``(grad_buffer, grad_accum > 1)``: (buffer, before, end, step).
_GRAD_COPIES = {(False, False): (0, 0, 1, 1), (False, True): (0, 1, 1, 1),
                (True, False): (1, 0, 0, 0), (True, True): (1, 0, 0, 0),
                ("ddp-view", False): (1, 0, 0, 0), ("ddp-view", True): (1, 1, 1, 0),
                ("ddp-copy", False): (1, 0, 1, 1), ("ddp-copy", True): (1, 1, 1, 1)}


def grad_copies(grad_buffer=False, grad_accum: int = 1) -> tuple[int, int, int, int]:
    """How many whole copies of the gradients a step holds (issue 38, chapter 12): ``(buffer, before, end,
    step)``, the persistent buffer's (every phase) and the ``.grad`` tensors' apart from it before a
    micro-batch's backward (forward and loss; the backward then starts with them, or with the LM head's
    alone where there are none), at the backward's end and in the optimizer step; for ``grad_buffer`` one of
    :data:`GRAD_BUFFERS`, at the worst micro-batch of ``grad_accum``.

    * ``False``: the ``.grad`` tensors only, freed by ``zero_grad(set_to_none=True)``, alive before the
      backward from the second micro-batch on: ``(0, 0 or 1, 1, 1)``.
    * ``True``: Megatron-Core's buffer; its backward hook adds each ``.grad`` into ``main_grad`` and drops
      it: ``(1, 0, 0, 0)``.
    * PyTorch DDP (``torch/csrc/distributed/c10d/reducer.cpp``, pytorch/pytorch at ad78a7b3; measured with
      torch 2.13.0, ``data/grad_buffer_measurements.csv``): ``initialize_buckets`` allocates each bucket's
      flat ``gradients`` with ``at::empty`` in the parameters' dtype (or DDP's ``mixed_precision`` dtype),
      and the reducer keeps it until it is destroyed or rebuilt. After the backward writes a ``.grad``,
      ``mark_variable_ready_dense`` copies it into the bucket; with ``gradient_as_bucket_view`` it then
      points ``.grad`` at the bucket (the tensor autograd wrote is freed), without it
      ``finalize_bucket_dense`` copies the reduced bucket back into ``.grad`` (``copy_bucket_to_grad``),
      which stays until ``zero_grad(set_to_none=True)``. Under ``no_sync`` the forward does not call
      ``prepare_for_backward`` (``torch/nn/parallel/distributed.py``), so ``autograd_hook`` returns early
      and the ``.grad`` tensors accumulate apart from the buckets in both modes, until the synchronising
      micro-batch.
      ``"ddp-view"``: ``(1, 0, 0, 0)``, accumulating ``(1, 1, 1, 0)``; ``"ddp-copy"``: ``(1, 0, 1, 1)``,
      accumulating ``(1, 1, 1, 1)``.
    """
    from ._validate import check_int

    accum = check_int("grad_accum", grad_accum) > 1
    return _GRAD_COPIES[check_grad_buffer_kind(grad_buffer), accum]


def check_grad_buffer_kind(grad_buffer):
    """``grad_buffer`` checked: one of :data:`GRAD_BUFFERS` (a bool or one of its strings, NumPy's too);
    TypeError for another type, ValueError naming the allowed values for another string."""
    from ._validate import check_bool

    if grad_buffer is False or grad_buffer is True:       # (the common case first)
        return grad_buffer
    allowed = "True or False or one of " + ", ".join(repr(k) for k in GRAD_BUFFERS if type(k) is str)
    if isinstance(grad_buffer, str):                    # (NumPy's str_ too, e.g. read from a frame)
        if grad_buffer in GRAD_BUFFERS:
            return str(grad_buffer)
        raise ValueError(f"grad_buffer must be {allowed}, got {grad_buffer!r}")
    try:
        return check_bool("grad_buffer", grad_buffer)
    except TypeError:
        raise TypeError(f"grad_buffer must be {allowed}, got {type(grad_buffer).__name__} "
                        f"{grad_buffer!r}") from None


def check_grad_buffer(grad_buffer, zero: int):
    """``grad_buffer`` checked (one of :data:`GRAD_BUFFERS`, :func:`check_grad_buffer_kind`) against the
    ZeRO stage ``zero``: a persistent gradient buffer is DDP's or ZeRO-1's (Megatron-Core's distributed
    optimizer keeps the whole buffer); ZeRO-2 and 3 shard the gradients and free them (FSDP's
    ``set_to_none``; DeepSpeed's ZeRO-2 frees its gradient partition in ``step()``), which
    :func:`~llmsizing.memory.training_memory` models without it. The one check of ``training_memory``,
    :class:`~llmsizing.job.Job` and the command line."""
    grad_buffer = check_grad_buffer_kind(grad_buffer)
    if grad_buffer is not False and zero >= 2:
        raise ValueError(f"grad_buffer={grad_buffer!r} needs parallel.zero <= 1 (DDP or ZeRO-1, whose "
                         f"gradients stay whole in a persistent buffer), got zero={zero}: ZeRO-2 and 3 shard "
                         "the gradients and free them each step")
    return grad_buffer


def grad_buffer_note(grad_buffer) -> str:
    """``grad_buffer`` (:data:`GRAD_BUFFERS`) in words, for :func:`~llmsizing.planner.plan`'s
    ``attrs["assumes"]`` and the command line's title; ``""`` for ``False``."""
    kind = check_grad_buffer_kind(grad_buffer)
    return {False: "", True: "a persistent gradient buffer",
            "ddp-view": "a persistent gradient buffer, PyTorch DDP's buckets with .grad apart under no_sync",
            "ddp-copy": "a persistent gradient buffer and .grad apart from it, PyTorch DDP's default"}[kind]


def zero_grad_buffer(grad_buffer, zero: int):
    """The ``grad_buffer`` a layout of ZeRO stage ``zero`` runs with: as given under ZeRO 0 and 1, ``False``
    under ZeRO-2 and 3 (:func:`~llmsizing.planner.plan` applies it so)."""
    return grad_buffer if zero <= 1 else False


#: DeepSpeed ZeRO's default ``reduce_bucket_size``, in elements (``deepspeed/runtime/zero/config.py``:
#: ``reduce_bucket_size: int = Field(pp_int(5e8), ge=0)``, deepspeedai/DeepSpeed at edaa7221, 2026-08-22).
DEEPSPEED_REDUCE_BUCKET_SIZE = 500_000_000


def deepspeed_bucket_bytes(precision: str = "bf16-mixed", *,
                           reduce_bucket_size: int = DEEPSPEED_REDUCE_BUCKET_SIZE,
                           overlap_comm: bool = False) -> float:
    """The most bytes DeepSpeed ZeRO-1/2's gradient reduce buckets hold during a backward, which
    :func:`~llmsizing.memory.training_memory` does not count (chapter 12).

    From ``deepspeed/runtime/zero/stage_1_and_2.py`` (deepspeedai/DeepSpeed at edaa7221, 2026-08-22):
    with ``contiguous_gradients`` (its default), ``setup_buckets`` allocates, at a backward's first gradient
    hook, a bucket of ``reduce_bucket_size``
    elements in the optimizer's parameter dtype (the recipe's working weights), and a second one with
    ``overlap_comm`` (its default is on for ZeRO-3 only, ``zero/config.py``); ``_release_ipg_buffers`` frees
    them at the end of the backward (ZeRO-2: each micro-batch's; ZeRO-1: the last one's, where it reduces).
    Each reduction flattens the bucket's contents into one more tensor of that size (``allreduce_bucket``'s
    ``self.flatten``, under the default ``use_multi_rank_bucket_allreduce``), so the most is one bucket more
    than are allocated. A parameter larger than the bucket is reduced on its own, through a flattened copy
    of its size: not counted here. The buffers are the same size whatever the model, the layout and ``dp``.
    """
    from ._validate import check_bool, check_int
    from .precision import DTYPE_BYTES, RECIPES, check_recipe

    check_recipe("precision", precision)
    size = check_int("reduce_bucket_size", reduce_bucket_size, minimum=0)
    buckets = 2 if check_bool("overlap_comm", overlap_comm) else 1
    return float(size * DTYPE_BYTES[RECIPES[precision].weights] * (buckets + 1))


#: What :func:`step_phases` reports as alive in each phase.
STEP_PARTS = ("weights", "optimizer states", "gradients", "activations", "autocast copies", "temporaries")


#: Bytes per logit (per ``batch x seq x vocab / tp`` element) that the loss's backward allocates on top of
#: what the forward left alive: ``nll_loss``'s backward writes an fp32 gradient of the log-probabilities
#: (4 bytes) and ``log_softmax``'s backward an fp32 gradient of the logits (4 more) while the first is still
#: alive. Measured at exactly 8.0 for every configuration of ``data/step_measurements.csv``, both stacks and
#: every precision (chapter 5). Fused or chunked cross-entropy kernels (Megatron's vocab-parallel one writes
#: the gradient in place of its saved softmax; Liger-Kernel's never materialises the logits) allocate less.
LOSS_BACKWARD_BYTES_PER_LOGIT = {"fused": 8.0, "hf": 8.0, "torchtitan": 8.0}   # torchtitan: F.cross_entropy


#: One layer's backward working set, as a multiple of what that layer saved for backward (the gradients of
#: its inputs and intermediate results coexist with the saved tensors they are computed from). Set from the
#: start of the backward in ``data/step_measurements.csv``: single Hugging Face runs ask for 0.00 to 0.69 of a
#: layer (median 0.05; more with eager attention and long sequences), the minimax over all of them is 0.395
#: (:func:`~llmsizing.measurements.working_set_fit`), and 0.5 is kept as a cautious round-up (chapter 5).
LAYER_WORKING_SET = 0.5


# ----------------------------------------------------------------------------- options of the runs' code
# (issue 38: what chapter 5's traced runs do that the generic step does not; llmsizing.measured_traced)

#: What :func:`~llmsizing.memory.training_memory`'s ``loss`` takes: for each way of computing the
#: cross-entropy, ``(bytes per logit kept from the forward, bytes per logit its backward allocates)``.
#: ``"fp32"`` (the default, what the model always priced): ``F.cross_entropy(logits.float())`` run eagerly,
#: the fp32 log-probabilities kept and :data:`LOSS_BACKWARD_BYTES_PER_LOGIT` in the backward (torchtitan
#: 0.0.2's ``components/loss.py``, Hugging Face's ``ForCausalLMLoss``). ``"bf16"``: ``F.cross_entropy`` on the
#: bf16 logits as they are (KempnerForge's ``scripts/train.py`` at 01b461a, its model cast to bf16): the
#: logits (held by the loop's ``logits`` variable) and the bf16 log-probabilities, then ``nll_loss``'s and
#: ``log_softmax``'s bf16 gradients, 2 bytes each (checked with an op trace on CPU). ``"compiled"``:
#: torchtitan's ``build_cross_entropy_loss`` compiled with the model (from pytorch/torchtitan PR #1033,
#: bbb1b616, 2025-04-02): Inductor's graph for ``cross_entropy(pred.float(), labels)`` saves the bf16 ``pred``
#: (and two fp32 numbers per row, not counted: 8 bytes against 2 x vocabulary) and its backward writes one
#: bf16 gradient (read off its generated code, torch 2.13, CPU).
LOSS_KINDS = {"fp32": (4.0, 8.0), "bf16": (4.0, 4.0), "compiled": (2.0, 2.0)}

#: What ``tp_vocab`` takes: ``"split"`` (the default: Megatron-LM's and torchtitan's vocabulary-parallel
#: embedding, LM head and loss, each tensor-parallel rank ``vocab / tp`` of the logits) or ``"replicated"``:
#: KempnerForge's ``apply_tensor_parallel`` (``distributed/tensor_parallel.py`` at 01b461a) leaves the token
#: embedding whole on every rank and gives the output head ``ColwiseParallel(output_layouts=Replicate())``, so
#: every rank holds the whole embedding and the whole logits, log-probabilities and loss temporaries (the LM
#: head's weight is still split). ZeRO-3's gathered unit stays the split head's: the embedding is gathered at
#: the forward's start and the backward's end, not around the loss
#: (:func:`~llmsizing.zero_traffic.zero3_gathered_bytes`).
TP_VOCABS = ("split", "replicated")

#: What ``no_sync_grads`` takes: ``"none"`` (the default: the gradients reduced, and with ZeRO-2/3 sharded,
#: after every micro-batch's backward) or the dtype FSDP2 keeps them in between micro-batches when the
#: loop turns the sync off (``set_requires_gradient_sync(False)``; KempnerForge's ``maybe_no_sync``,
#: ``training/grad.py``, for every micro-batch but the last): torch's
#: ``FSDPParam.to_accumulated_grad_if_needed`` (``torch/distributed/fsdp/_fully_shard/_fsdp_param.py``)
#: keeps each *unsharded* gradient, upcast to the ``MixedPrecisionPolicy``'s ``reduce_dtype``
#: (KempnerForge's ``default_mp_policy``: ``float32``), until the last micro-batch's backward reduce-scatters
#: it: those bytes x every parameter of the tensor-parallel rank, not divided by ``dp``, from the second
#: micro-batch's forward to the last one's backward.
NO_SYNC_GRADS = ("none", "fp32", "bf16")


def check_code_options(model, par, *, loss: str, tp_vocab: str, no_sync_grads: str, grad_buffer) -> tuple:
    """``loss``, ``tp_vocab`` and ``no_sync_grads`` checked (ValueError naming the parameter and its allowed
    values: :data:`LOSS_KINDS`, :data:`TP_VOCABS`, :data:`NO_SYNC_GRADS`); ``"replicated"`` is priced for a
    dense untied model (KempnerForge's), ``no_sync_grads`` without a pipeline and, being FSDP2's, without a
    ``grad_buffer`` (PyTorch DDP's ``no_sync`` is ``grad_buffer="ddp-view"`` or ``"ddp-copy"``)."""
    if (type(loss) is type(tp_vocab) is type(no_sync_grads) is str and loss == "fp32" and tp_vocab == "split"
            and no_sync_grads == "none"):
        return loss, tp_vocab, no_sync_grads             # (the defaults first: the planner's many calls)
    from ._validate import check_choice

    loss = check_choice("loss", loss, tuple(LOSS_KINDS))
    tp_vocab = check_choice("tp_vocab", tp_vocab, TP_VOCABS)
    no_sync_grads = check_choice("no_sync_grads", no_sync_grads, NO_SYNC_GRADS)
    if tp_vocab == "replicated" and (model.is_moe or model.tied_embeddings):
        raise ValueError(f"tp_vocab='replicated' is priced for a dense model with an untied LM head "
                         f"(KempnerForge's), got {model.name!r}")
    if no_sync_grads != "none" and par.pp > 1:
        raise ValueError(f"no_sync_grads={no_sync_grads!r} is priced without a pipeline, got pp={par.pp}")
    if no_sync_grads != "none" and grad_buffer is not False:
        raise ValueError(f"no_sync_grads={no_sync_grads!r} is FSDP2's no-sync accumulation and takes no "
                         f"grad_buffer (PyTorch DDP's no_sync is grad_buffer='ddp-view' or 'ddp-copy'), got "
                         f"grad_buffer={grad_buffer!r}")
    return loss, tp_vocab, no_sync_grads


def loss_option_bytes(acts, loss_bytes: float, model, *, batch: int, local_seq: int, tp: int, stack: str,
                      loss: str = "fp32", tp_vocab: str = "split") -> tuple:
    """``(acts, loss_bytes)`` with the loss ``loss`` computes and ``tp_vocab``'s share of the logits
    (:data:`LOSS_KINDS`, :data:`TP_VOCABS`): the activations' fp32 log-probabilities (4 bytes x ``batch x
    local_seq x vocab / tp``) replaced by what that loss keeps, the loss's temporaries by what its backward
    allocates. The defaults return both unchanged (the same objects)."""
    if loss == "fp32" and tp_vocab == "split":
        return acts, loss_bytes
    from dataclasses import replace

    kept, temps = LOSS_KINDS[loss]
    temps = LOSS_BACKWARD_BYTES_PER_LOGIT[stack] if loss == "fp32" else temps
    logits = batch * local_seq * model.vocab
    share = 1 / tp if tp_vocab == "split" else 1.0
    delta = kept * logits * share - 4.0 * logits / tp
    out = replace(acts, logits_bytes=acts.logits_bytes + delta,
                  breakdown={**acts.breakdown, "logits": acts.breakdown["logits"] + delta})
    return out, temps * logits * share
