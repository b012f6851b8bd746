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
table the chapter prints. Chapter 4b.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._validate import check_int
from .catalog import get_gpu, resolve_model
from .memory import TrainingMemory, max_micro_batch, training_memory
from .model import Model
from .parallel import Parallel
from .units import fmt_gib

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
