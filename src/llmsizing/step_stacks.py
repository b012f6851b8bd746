"""Chapter 4b's three software stacks for one training step, each with what FSDP holds gathered (issue 38).

Chapter 4b prices one step of a model on three stacks, its states sharded ZeRO-3/FSDP-style over ``dp`` GPUs:

- ``"fused, bf16-mixed"``: the fused kernels of chapter 4 and chapter 2's recipe. FSDP holds **one unit at a
  time**, the largest (``Parallel(zero=3)``, ``reshard_after_forward=True``): DeepSpeed's
  ``estimate_zero3_model_states_mem_needs`` counts so, and torchtitan's ``apply_fsdp`` wraps the embedding and
  the head as units of their own.
- ``"hf, bf16-mixed, fused AdamW (Trainer + FSDP, bf16=True)"``: the Hugging Face Trainer sharding with FSDP.
  Accelerate wraps each decoder layer and leaves the embedding, the final norm and the LM head to the root
  unit, and gives FSDP a bf16 ``MixedPrecision`` policy. ``fully_shard``'s default
  (``reshard_after_forward=None``) keeps **the root unit gathered** from the forward to the backward.
- ``"hf, bf16-amp (autocast on fp32 weights)"``: a loop that wraps the same units with FSDP but without a
  mixed-precision policy and runs the forward under ``torch.autocast``. Which units FSDP frees after the
  forward does not depend on the policy or on autocast: FSDP2 marks the root "do not reshard after forward" in
  ``FSDPState._lazy_init`` (``torch/distributed/fsdp/_fully_shard/_fsdp_state.py``), and FSDP1 never frees
  the root's parameters in ``_post_forward_reshard`` (``torch/distributed/fsdp/_runtime_utils.py``). So this
  row holds **the root unit gathered** too, in fp32: ``data/fsdp_root_held.csv`` measured torch's
  ``fully_shard`` in exactly that setting (fp32 weights, no policy), the root held from the first block's
  forward to the embedding's backward. Before issue 38 (book38) this row counted one unit at a time: for
  Llama-3-8B over 8 GPUs at 8K tokens, 3.9 GiB (4,202,725,376 bytes) short at its peak.

:func:`step_stacks` prices each row (:func:`~llmsizing.memory.training_memory` without and with full
recomputation, and :func:`~llmsizing.memory.max_micro_batch` for both); :func:`step_stacks_table` is the
table the chapter prints. :func:`loss_backward_sum` and :func:`fit_margins` build the chapter's worked sum of
a peak and its paragraph on the allowance (:class:`~llmsizing.prose.ChapterText`, each statement checked).
Chapter 4b.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._validate import check_int
from .catalog import get_gpu, resolve_model
from .memory import TrainingMemory, max_micro_batch, training_memory
from .model import Model
from .parallel import Parallel
from .prose import ChapterText, number_word, prose_check
from .units import GiB, fmt_gib

#: label -> (training_memory's arguments, FSDP's ``reshard_after_forward``, what FSDP holds gathered).
STEP_STACKS = {
    "fused, bf16-mixed": (
        (("stack", "fused"), ("precision", "bf16-mixed")), True, "one unit at a time"),
    "hf, bf16-mixed, fused AdamW (Trainer + FSDP, bf16=True)": (
        (("stack", "hf"), ("precision", "bf16-mixed"), ("optimizer_impl", "fused")), None,
        "the root unit whole (bf16)"),
    "hf, bf16-amp (autocast on fp32 weights)": (
        (("stack", "hf"), ("precision", "bf16-amp")), None, "the root unit whole (fp32)"),
}


@dataclass(frozen=True)
class StackRow:
    """One row of :func:`step_stacks`: its label, its arguments (``training_memory``'s, a tuple of pairs),
    its layout, what FSDP holds gathered (``holds``), the step without and with full recomputation
    (``memory``, ``full``) and the largest micro-batch that fits without and with it."""

    label: str
    kwargs: tuple
    parallel: Parallel
    holds: str
    memory: TrainingMemory
    full: TrainingMemory
    max_micro_batch: int
    max_micro_batch_full: int

    @property
    def stack(self) -> str:
        return dict(self.kwargs)["stack"]

    @property
    def precision(self) -> str:
        return dict(self.kwargs)["precision"]


def step_stacks(model: Model | str = "llama-3-8b", *, seq: int = 8192, gpu="H100 SXM",
                dp: int = 8) -> dict[str, StackRow]:
    """{label: :class:`StackRow`} of :data:`STEP_STACKS` for one sequence of ``seq`` tokens per micro-batch,
    flash attention, states sharded over ``dp`` GPUs (ZeRO-3/FSDP, ``dp`` >= 2), the largest micro-batch on
    ``gpu`` (a catalogue name or a GPU). Chapter 4b (module docstring: which units each row holds)."""
    m = resolve_model(model)
    seq = check_int("seq", seq)
    dp = check_int("dp", dp, minimum=2)
    g = get_gpu(gpu)
    rows = {}
    for label, (pairs, reshard, holds) in STEP_STACKS.items():
        kw = dict(pairs)
        par = Parallel(dp=dp, zero=3, reshard_after_forward=reshard)
        none, full = (training_memory(m, batch=1, seq=seq, parallel=par, recompute=r, **kw)
                      for r in ("none", "full"))
        b_none, b_full = (int(max_micro_batch(m, g, seq, parallel=par, recompute=r, **kw))
                          for r in ("none", "full"))
        rows[label] = StackRow(label, pairs, par, holds, none, full, b_none, b_full)
    return rows


def step_stacks_table(rows: dict[str, StackRow]):
    """The table chapter 4b prints of :func:`step_stacks`' rows (a pandas DataFrame, one row per stack): the
    activations, the peak and its phase, the total with the overhead allowance, what FSDP holds gathered and
    the largest micro-batch without and with full recomputation."""
    import pandas as pd

    return pd.DataFrame({r.label: {"activations": fmt_gib(r.memory.activations_bytes),
                                   "peak": fmt_gib(r.memory.peak_bytes), "peak in": r.memory.peak_phase,
                                   "with allowance": fmt_gib(r.memory.total_bytes), "FSDP holds": r.holds,
                                   "max micro-batch": r.max_micro_batch,
                                   "... with full recompute": r.max_micro_batch_full}
                         for r in rows.values()}).T


def loss_backward_sum(t: TrainingMemory) -> ChapterText:
    """The peak of a step held by the loss's backward, as the sum chapter 4b works by hand: the model states
    without their gradients (``zero_grad(set_to_none=True)`` freed them; they return in the backward), the
    activations the forward left (the loss's fp32 log-probabilities included), ZeRO-3's gathered unit and the
    loss's temporaries (8 bytes per logit), then the allowance on top.

    ``values``: ``states``, ``act``, ``unit``, ``loss`` and ``peak`` in GiB to two decimals, so that the
    printed parts add up to the printed peak, and ``total``, the peak with the allowance as the chapter's
    table prints it (one decimal). Raises :class:`~llmsizing.prose.ProseOutOfDate` unless the loss backward
    holds the peak, holds exactly those four parts (no gradients, no autocast copies) and the rounded parts
    add up to the rounded peak. Chapter 4b, "Four phases"."""
    if not isinstance(t, TrainingMemory):
        raise TypeError(f"t must be a TrainingMemory (training_memory's result), got {type(t).__name__}")
    parts = t.phase_parts["loss backward"]
    what = "the loss's backward holds the peak, with the states, activations, gathered unit and loss only"
    prose_check(t.peak_phase == "loss backward" and parts["gradients"] == 0 and parts["autocast copies"] == 0
                and parts["temporaries"] == t.gathered_bytes + t.loss_temporaries_bytes, what, "chapter 4b")
    raw = {"states": parts["weights"] + parts["optimizer states"], "act": parts["activations"],
           "unit": t.gathered_bytes, "loss": t.loss_temporaries_bytes}
    gib = {k: round(v / GiB, 2) for k, v in raw.items()}
    peak = round(t.peak_bytes / GiB, 2)
    prose_check(abs(sum(gib.values()) - peak) < 0.005, f"the parts add up to the peak, {peak:.2f} GiB",
                "chapter 4b")
    values = {k: f"{v:.2f} GiB" for k, v in gib.items()}
    values |= {"peak": f"{peak:.2f} GiB", "total": fmt_gib(t.total_bytes)}
    return ChapterText(values=values, report=" + ".join(values[k] for k in raw) + f" = {values['peak']}",
                       data={"parts_bytes": raw})


def _pct(x: float) -> str:
    """A fraction as the prose prints it: one decimal below 10%, none from there."""
    return f"{x:.1%}" if abs(x) < 0.095 else f"{x:.0%}"


def fit_margins(fused: TrainingMemory, trainer: TrainingMemory, gpu="H100 SXM") -> ChapterText:
    """The allocator fragmentation the chapter's fused row and the Trainer's FSDP row leave room for on
    ``gpu`` (:func:`~llmsizing.states.fragmentation_room`: the ``f`` with ``1 GiB + (1 + f) x peak`` = its
    memory), against the book's 8% and the published pairs
    (:func:`~llmsizing.allocator_fragmentation.measured_fragmentation`, PyTorch's default allocator and
    ``expandable_segments:True``; chapters 3 and 5).

    ``values``: ``room_fused`` and ``room_trainer``; ``fixed_only`` (the Trainer's peak plus the fixed part
    alone); ``pub_lo``, ``pub_hi``, ``pub_med``, ``pub_runs``, ``pub_srcs`` (default allocator) and ``es_lo``,
    ``es_hi``, ``es_med``, ``es_srcs`` (expandable segments; "one source"). Raises
    :class:`~llmsizing.prose.ProseOutOfDate` unless what chapter 4b says holds: the book's 8% is below the
    published median of either setting; the Trainer's tensors plus the fixed part fit the card, yet the room
    they leave is below every published run's fragmentation, with either setting; the fused row's room is
    above the default allocator's median and below its highest. Chapter 4b, "Which software stack?"."""
    from .allocator_fragmentation import measured_fragmentation
    from .states import FIXED_OVERHEAD_BYTES, FRAGMENTATION, fragmentation_room

    for name, t in (("fused", fused), ("trainer", trainer)):
        if not isinstance(t, TrainingMemory):
            raise TypeError(f"{name} must be a TrainingMemory (training_memory's result), got "
                            f"{type(t).__name__}")
    cap = get_gpu(gpu).memory_bytes
    room = {k: fragmentation_room(cap, t.peak_bytes) for k, t in (("fused", fused), ("trainer", trainer))}
    pub, es = measured_fragmentation(), measured_fragmentation(allocator="expandable_segments")
    where = "chapter 4b"
    prose_check(FRAGMENTATION < min(pub.median, es.median), "the 8% is below the published medians", where)
    prose_check(trainer.peak_bytes + FIXED_OVERHEAD_BYTES <= cap,
                "the Trainer's row fits with the fixed part alone", where)
    prose_check(room["trainer"] < min(pub.low, es.low),
                "the Trainer's row leaves room for less fragmentation than any published run reserved", where)
    prose_check(pub.median < room["fused"] < pub.high, "the fused row fits at the published median, not at "
                "the highest", where)
    values = {"room_fused": _pct(room["fused"]), "room_trainer": _pct(room["trainer"]),
              "fixed_only": fmt_gib(trainer.peak_bytes + FIXED_OVERHEAD_BYTES),
              "pub_lo": _pct(pub.low), "pub_hi": _pct(pub.high), "pub_med": _pct(pub.median),
              "pub_runs": f"{pub.n_rows}", "pub_srcs": f"{pub.n_sources}",
              "es_lo": _pct(es.low), "es_hi": _pct(es.high), "es_med": _pct(es.median),
              "es_srcs": f"{number_word(es.n_sources)} source" + "s" * (es.n_sources > 1)}
    report = (f"room for fragmentation: fused row {values['room_fused']}, Trainer's row "
              f"{values['room_trainer']}; published: {values['pub_lo']} to {values['pub_hi']} (median "
              f"{values['pub_med']}), expandable segments {values['es_lo']} to {values['es_hi']}")
    return ChapterText(values=values, report=report, data={"room": room})
