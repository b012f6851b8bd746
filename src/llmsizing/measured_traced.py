"""Why two families of published runs miss the memory model: the causes traced in their sources, priced by the
memory model's own options (issue 38).

Chapter 5 compares the GPU memory published runs logged with the model's peak
(:func:`~llmsizing.layout_fits.published_measured_memory`). Two patterns there come from what the runs' code
does; each is an option of :func:`~llmsizing.memory.training_memory` (documented, with the code that does it,
in :mod:`llmsizing.footprint`), and this module prices the rows ``data/published_measured_memory.csv``'s
``code_traced`` column names with them (:func:`traced_options`).

* **KempnerForge allocates more** (``benchmarks/mfu_scaling/mfu_scaling.md`` at abbbac3, code at 01b461a, the
  commit the report names; torch 2.11 in its ``uv.lock``): on top of its stated recipe (pure bf16, fused
  AdamW: ``data/memory_as_stated.csv``)

  - ``no_sync_grads="fp32"`` (:data:`~llmsizing.footprint.NO_SYNC_GRADS`): ``scripts/train.py`` runs every
    micro-batch but the last under ``maybe_no_sync`` and ``default_mp_policy`` sets FSDP2's
    ``reduce_dtype=float32``, so FSDP2 keeps every unsharded gradient in FP32 between micro-batches.
    ``init_distributed`` keeps ``dp_shard`` in the mesh whenever tensor parallelism is on, so its TP-only runs
    are FSDP2 runs of one shard; its single GPU has no mesh and accumulates bf16 ``.grad`` (``"none"``);
  - ``tp_vocab="replicated"`` (:data:`~llmsizing.footprint.TP_VOCABS`): ``apply_tensor_parallel`` leaves the
    embedding whole and gathers the logits to ``Replicate()`` on every rank;
  - ``loss="bf16"`` (:data:`~llmsizing.footprint.LOSS_KINDS`): ``F.cross_entropy`` on its bf16 logits.

* **torchao's MI300X and B200 runs reserve less**: ``loss="compiled"``. The torchtitan they ran (2c8b5947 and
  6fc499f6, August 2025) compiles the loss with the model (``build_cross_entropy_loss``, torchtitan #1033,
  2025-04-02); the torchtitan 0.0.2 of the H100 runs (README of 2025-03-12) ran it eagerly, as the default
  prices it.

What the generic model adds to the first trace's own sum (weights, optimizer states, gradients, layer inputs,
loss; :func:`kempnerforge_peak_bytes` and :func:`compiled_loss_peak_bytes`, which held it, are deprecated
wrappers now): the torchao rows come out the same to the byte (their steps were already the
model's). The KempnerForge rows without FSDP (the single GPU and TP-only) move by the final norm's and the
LM head's inputs and the targets, 0.06-0.13 GiB (measured / traced 1.16, 1.003, 1.008). The rows with FSDP
move by ZeRO-3's gathered unit too (:func:`~llmsizing.zero_traffic.zero3_gathered_bytes`: the largest unit's
weights and gradient, held in every phase): 0.5-2.8 GiB in all, so they read 0.97-1.00 instead of 1.00-1.02
(1.00-1.01 without the unit: ``gathered_gib`` of :func:`measured_memory_traced`). That
term is the model's own and stays: KempnerForge reshards its whole model after the forward (``apply_fsdp2``
passes ``reshard_after_forward=True`` to the root too), so around its loss no unit is gathered, and a max
allocated just below the model's peak says the model holds one unit too many there, not that a cause is
missing. Chapter 5 prints the comparison; ``tests/test_measured_traced.py`` works rows by hand.
"""

from __future__ import annotations

import warnings

from ._validate import check_int
from .footprint import LOSS_KINDS

#: Bytes per logit KempnerForge's eager bf16 loss holds at its backward (``LOSS_KINDS["bf16"]``, kept and
#: allocated: the logits, the log-probabilities and their two gradients, 2 bytes each).
KF_LOSS_BYTES_PER_LOGIT = sum(LOSS_KINDS["bf16"])

#: Bytes per logit torchtitan's compiled loss saves against the eager fp32 one the model prices by default, by
#: phase (:data:`~llmsizing.footprint.LOSS_KINDS`): 2 kept from the forward, 8 at the loss's backward.
COMPILED_LOSS_SAVING = {"forward": LOSS_KINDS["fp32"][0] - LOSS_KINDS["compiled"][0],
                        "loss backward": sum(LOSS_KINDS["fp32"]) - sum(LOSS_KINDS["compiled"])}

#: The causes ``data/published_measured_memory.csv``'s ``code_traced`` column may name
#: (:func:`traced_options`).
TRACED_CAUSES = ("kempnerforge", "compiled loss")


def traced_options(cause: str, parallel) -> dict:
    """The :func:`~llmsizing.memory.training_memory` options that price what a run's code does, for a
    ``cause`` of :data:`TRACED_CAUSES` and the run's ``parallel`` layout (module docstring)."""
    if cause == "kempnerforge":            # (a mesh, and so FSDP2, whenever there is more than one GPU)
        return dict(loss="bf16", tp_vocab="replicated", no_sync_grads="fp32" if parallel.gpus > 1 else "none")
    if cause == "compiled loss":
        return dict(loss="compiled")
    raise ValueError(f"code_traced must be one of {', '.join(TRACED_CAUSES)} or empty, got {cause!r}")


def traced_step(run: str, cause: str, *, micro_batch: int | None = None):
    """The :class:`~llmsizing.footprint.TrainingMemory` of ``run`` (a row of ``data/published_runs.csv``)
    priced as :func:`~llmsizing.layout_fits.published_measured_memory` prices it, with ``cause``'s options
    (:func:`traced_options`); ``micro_batch`` (default: the row's) splits its sequences per GPU so."""
    import pandas as pd

    from .layout_fits import _dense_job_args, _stated_step, stated_rows
    from .memory import training_memory
    from .mfu_published import PUBLISHED_RUNS_CSV

    dense = pd.read_csv(PUBLISHED_RUNS_CSV)
    dense["dtype"] = dense["dtype"].fillna("bf16")
    rows = dense[dense["run"] == run]
    if rows.empty:
        raise ValueError(f"run must name a row of {PUBLISHED_RUNS_CSV.name}, got {run!r}")
    args, _ = _dense_job_args(next(rows.itertuples()))
    if micro_batch is not None:
        mb, tokens = check_int("micro_batch", micro_batch), args["batch"] * args["grad_accum"]
        if tokens % mb:
            raise ValueError(f"micro_batch {mb} of {run!r} must divide its {tokens} sequences per GPU")
        args = {**args, "batch": mb, "grad_accum": tokens // mb}
    options = traced_options(cause, args["parallel"])
    kind = stated_rows().get(run, ("", None))[1]
    return _stated_step(kind, args, **options) if kind == "recipe" else training_memory(**args, **options)


def measured_memory_traced():
    """The rows of :func:`~llmsizing.layout_fits.published_measured_memory` whose ``code_traced`` names a
    cause (the data file's column, not the run's name) with their traced peak: ``run, measured_gib,
    model_gib, traced_gib, traced_ratio`` (measured / traced), ``cause`` and ``gathered_gib`` (ZeRO-3's
    gathered unit in that peak, :func:`~llmsizing.zero_traffic.zero3_gathered_bytes`: module docstring), each
    priced by :func:`traced_step` at the micro-batch the measured run used."""
    import pandas as pd

    from .layout_fits import published_measured_memory
    from .units import GiB

    out = []
    for m in published_measured_memory().itertuples():
        if not m.code_traced:
            continue
        step = traced_step(m.run, m.code_traced, micro_batch=m.micro_batch)
        traced = step.peak_bytes
        out.append(dict(run=m.run, measured_gib=m.measured_gib, model_gib=m.model_gib,
                        traced_gib=traced / GiB, traced_ratio=m.measured_gib * GiB / traced,
                        cause=m.code_traced, gathered_gib=step.gathered_bytes / GiB))
    return pd.DataFrame(out)


# ----------------------------------------------------------------------------- deprecated (the first sum)

def kempnerforge_peak_bytes(model, *, tp: int, dp: int, batch: int, seq: int, grad_accum: int) -> dict:
    """Deprecated: :func:`~llmsizing.memory.training_memory` with :func:`traced_options`
    ``("kempnerforge")`` (pure bf16, fused AdamW, FSDP2 over ``dp`` when there is more than one GPU).
    KempnerForge's peak per GPU by part at its peak phase: ``weights``, ``optimizer states``,
    ``gradients``, ``activations``, ``loss`` (the phase's temporaries) and ``peak``."""
    from .memory import training_memory
    from .parallel import Parallel

    warnings.warn("kempnerforge_peak_bytes is deprecated: use training_memory(..., **traced_options("
                  "'kempnerforge', parallel)) (llmsizing.measured_traced)", DeprecationWarning, stacklevel=2)
    tp, dp = check_int("tp", tp), check_int("dp", dp)
    par = Parallel(tp=tp, dp=dp, sp=tp > 1, zero=3 if dp > 1 else 0)
    step = training_memory(model, batch=batch, seq=seq, grad_accum=grad_accum, parallel=par, precision="bf16",
                           optimizer_impl="fused", recompute="full", **traced_options("kempnerforge", par))
    parts = step.phase_parts[step.peak_phase]
    out = {k: parts[k] for k in ("weights", "optimizer states", "gradients", "activations")}
    return {**out, "loss": parts["temporaries"], "peak": step.peak_bytes}


def compiled_loss_peak_bytes(step, model, *, batch: int, seq: int, tp: int = 1) -> float:
    """Deprecated: ``training_memory(..., loss="compiled").peak_bytes``. The peak of ``step`` (priced with the
    eager fp32 loss) less :data:`COMPILED_LOSS_SAVING` bytes per logit of one micro-batch in each phase."""
    from .catalog import resolve_model

    warnings.warn("compiled_loss_peak_bytes is deprecated: use training_memory(..., loss='compiled')",
                  DeprecationWarning, stacklevel=2)
    model = resolve_model(model)
    logits = check_int("batch", batch) * check_int("seq", seq) * model.vocab / check_int("tp", tp)
    return max(v - COMPILED_LOSS_SAVING.get(k, 0.0) * logits for k, v in step.phases_bytes.items())
