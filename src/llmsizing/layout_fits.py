"""Do the published layouts fit? The memory model checked against the runs that ran (issues 38 and 34).

Every run of ``data/published_runs.csv`` with a layout, and every run of ``data/moe_published_runs.csv``,
ran without running out of memory. So :func:`~llmsizing.memory.training_memory` must give each one a
per-GPU total (peak + the book's allowance) within its GPU's memory (the driver's total,
:attr:`~llmsizing.catalog.GPU.memory_bytes`). :func:`published_layout_fits` prices each row three ways.

* **Today**: the row as the step model reads it.
  - A dense row goes through :func:`llmsizing.calibration._layout_of`: a blank micro-batch is 1, a blank
    ZeRO stage 0, a blank recomputation none. ``dtype`` bf16 and fp8 price ``bf16-mixed`` (the step model's
    FP8 is a GEMM rate on that recipe's memory), and fp16 prices ``fp16-mixed``. The 2021-22 Megatron and
    Megatron-DeepSpeed stacks get eager attention, with dropout on Megatron-LM's own
    (:func:`llmsizing.calibration.attention_kernel_of`); the others get flash attention. Every stack gets
    Megatron-style fused layers.
  - A MoE row gets :func:`llmsizing.moe_runs.run_step`'s layout, recipe and micro-batches of one sequence.
* **With the stack's buffer**: a Megatron-family stack (:func:`~llmsizing.frameworks.stack_family`) at
  ZeRO 0 or 1 keeps its gradients in Megatron-Core's persistent buffer (``grad_buffer=True``).
  - The buffer is FP32 with bf16 (``bf16-mixed-fp32-grads``: ``--bf16`` turns on
    ``accumulate_allreduce_grads_in_fp32`` in Megatron-LM's ``arguments.py``).
  - It is in the parameters' dtype with fp16, where that switch stays off. FP8 recipes already hold FP32
    gradients.
  - Every other stack is priced as today: FSDP, ZeRO-3 and DeepSpeed's ZeRO-1/2 keep no persistent
    buffer (``notes/grad28b.md``).
* **As the source states it** (``gib_stated``), where ``data/memory_as_stated.csv`` holds, by run, what the
  row's columns cannot carry (:func:`stated_rows`).
  - KempnerForge casts its model to bf16 (``scripts/train.py``: ``model.to(dtype=tc.param_dtype)``), so its
    AdamW states are bf16 too: the ``bf16`` recipe. Its report states fused AdamW.
  - Llama 3 405B is priced on :func:`~llmsizing.parallel.llama3_405b_layout` with
    :data:`~llmsizing.parallel.LLAMA3_RECIPE`: FSDP without resharding after the forward, stage outputs
    freed.
  - DeepSeek-V3 is priced by :func:`~llmsizing.deepseek.deepseek_memory` on the balanced split: DualPipe,
    recomputed RMSNorms and MLA up-projections, FP8 caches.

No formula here: the module reads rows and calls the memory model. A run that does not fit is a finding
against the model or against the row, reported in ``data/published_layout_fits.csv``
(``tools/layout_fits.py``), and never fixed with a constant.
"""

from __future__ import annotations

from pathlib import Path

from .frameworks import stack_family

#: The columns of :func:`published_layout_fits` (``data/published_layout_fits.csv``).
FIT_COLUMNS = ("run", "table", "gpu", "stack", "layout", "assumed", "precision_today", "gib_today",
               "grad_buffer", "precision_buffer", "gib_buffer", "gpu_gib", "fits_today", "fits_buffer",
               "peak_phase", "dominant", "weights_gib", "optimizer_states_gib", "gradients_gib",
               "activations_gib", "temporaries_gib", "gib_stated", "stated", "method", "source", "as_of")

#: The parts of today's peak phase that are kept (of :data:`~llmsizing.footprint.STEP_PARTS`; the autocast
#: copies are 0 for these recipes).
PART_COLUMNS = ("weights", "optimizer states", "gradients", "activations", "temporaries")

#: A dense row's ``dtype`` -> the recipe its memory is priced with today.
DENSE_RECIPE = {"bf16": "bf16-mixed", "fp8": "bf16-mixed", "fp16": "fp16-mixed"}

#: What a source states that its row's columns cannot carry: ``run, kind, text, source, as_of``, one row
#: per run priced that way (:func:`stated_rows`). ``kind`` selects how :func:`_stated_memory` prices it.
STATED_CSV = Path(__file__).resolve().parents[2] / "data" / "memory_as_stated.csv"

#: The kinds of ``data/memory_as_stated.csv`` (:func:`_stated_step`).
STATED_KINDS = ("recipe", "llama3", "deepseek")


def stated_rows() -> dict:
    """``data/memory_as_stated.csv`` as ``run -> (text, kind)``; an unknown kind raises ValueError."""
    import csv

    with open(STATED_CSV, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    bad = sorted({r["kind"] for r in rows} - set(STATED_KINDS))
    if bad:
        raise ValueError(f"kind in {STATED_CSV.name} must be one of {', '.join(STATED_KINDS)}; got {bad}")
    return {r["run"]: (r["text"], r["kind"]) for r in rows}


#: How the totals were computed (the ``method`` column).
METHOD = "llmsizing.layout_fits.published_layout_fits (training_memory: peak of the step + allowance)"


def _blank(x) -> bool:
    return x is None or x != x or x == ""


def _buffer_recipe(precision: str) -> str:
    """The recipe of Megatron-Core's gradient buffer with ``precision`` (bf16 -> FP32 gradients)."""
    return "bf16-mixed-fp32-grads" if precision == "bf16-mixed" else precision


def _dense_job_args(row):
    """``(training_memory keywords, assumed)`` of one dense row with a layout, or ``None``."""
    from .calibration import _layout_of, attention_kernel_of

    lay = _layout_of(row)
    if lay is None:
        return None
    par, micro, accum, recompute = lay
    assumed = [text for text, col in (("micro_batch 1", "micro_batch"), ("zero 0", "zero"),
                                      ("recompute none", "recompute")) if _blank(getattr(row, col))]
    kernel = attention_kernel_of(row.framework, row.gpu) or "flash"
    args = dict(model=row.model, batch=micro, seq=int(row.seq), grad_accum=accum, parallel=par,
                precision=DENSE_RECIPE[row.dtype], recompute=recompute,
                attention="eager" if kernel.startswith("unfused") else "flash",
                dropout=kernel == "unfused-dropout")
    return args, assumed


def _moe_parallel(row):
    from .parallel import Parallel

    split = "" if _blank(row["stage_layers"]) else str(row["stage_layers"])
    return Parallel(pp=int(row["pp"]), dp=int(row["dp"]), ep=int(row["ep"]), zero=int(row["zero"]),
                    stage_layers=tuple(int(x) for x in split.split(";")) if split else None,
                    shared_expert_overlap=row["shared_expert_overlap"] == "yes")


def _moe_job_args(row):
    """``(training_memory keywords, assumed)`` of one MoE row, as :func:`llmsizing.moe_runs.run_step` builds
    its step (micro-batches of one sequence, an assumption of every MoE row)."""
    from .moe_runs import _model

    par = _moe_parallel(row)
    cap = {} if _blank(row["capacity_factor"]) else {"capacity_factor": float(row["capacity_factor"])}
    args = dict(model=_model(row["model"]), batch=1, seq=int(row["seq"]),
                grad_accum=int(row["global_batch"]) // par.dp, parallel=par, precision=row["precision"],
                recompute=row["recompute"], mtp_depth=int(row["mtp_depth"]), **cap)
    assumed = ["micro_batch 1"] + ([] if row["layout_published"] == "yes" else
                                   [f"layout_published {row['layout_published']} (see its note)"])
    return args, assumed


def _layout_text(par, micro) -> str:
    parts = [f"tp{par.tp}", f"pp{par.pp}"] + ([f"vp{par.virtual_stages}"] if par.virtual_stages > 1 else [])
    parts += ([f"cp{par.cp}"] if par.cp > 1 else []) + ([f"ep{par.ep}"] if par.ep > 1 else [])
    return " ".join(parts + [f"dp{par.dp}", f"zero{par.zero}", f"mb{micro}"])


def _stated_step(kind: str, args: dict, **options):
    """The step of a row priced as its source states it (:func:`stated_rows`); ``options``: more
    :func:`~llmsizing.memory.training_memory` keywords for a ``recipe`` row (what its code does,
    :mod:`llmsizing.measured_traced`)."""
    from dataclasses import replace

    from .memory import training_memory

    par = args["parallel"]
    if kind == "recipe":
        return training_memory(**{**args, "precision": "bf16"}, optimizer_impl="fused", **options)
    if options:
        raise ValueError(f"options are priced for a 'recipe' row, got kind {kind!r}")
    if kind == "llama3":
        from .parallel import LLAMA3_RECIPE, llama3_405b_layout

        return training_memory(**{**args, "parallel": llama3_405b_layout(par.dp, par.cp),
                                  "precision": LLAMA3_RECIPE})
    from .deepseek import DEEPSEEK_V3_BALANCED_SPLIT, deepseek_memory

    return deepseek_memory(args["model"], replace(par, stage_layers=DEEPSEEK_V3_BALANCED_SPLIT),
                           seq=args["seq"], grad_accum=args["grad_accum"])


def _stated_memory(kind: str, args: dict) -> float:
    """Total bytes of a row priced as its source states it (:func:`stated_rows`)."""
    return _stated_step(kind, args).total_bytes


def _fit_row(row: dict, family: str, args: dict, assumed: list, stated: dict) -> dict:
    from .catalog import get_gpu
    from .memory import training_memory
    from .units import GiB

    g = get_gpu(row["gpu"])
    today = training_memory(**args)
    par = args["parallel"]
    buffer = family == "megatron" and par.zero <= 1
    rec = _buffer_recipe(args["precision"]) if buffer else args["precision"]
    withb = training_memory(**{**args, "precision": rec}, grad_buffer=True) if buffer else today
    parts = today.phase_parts[today.peak_phase]
    text, kind = stated.get(row["run"], ("", None))
    gib_stated = _stated_memory(kind, args) / GiB if kind else float("nan")
    return dict(run=row["run"], table=row["table"], gpu=g.name, stack=family,
                layout=_layout_text(par, args["batch"]), assumed="; ".join(assumed),
                precision_today=args["precision"], gib_today=today.total_bytes / GiB, grad_buffer=buffer,
                precision_buffer=rec, gib_buffer=withb.total_bytes / GiB, gpu_gib=g.memory_gib,
                fits_today=today.total_bytes <= g.memory_bytes,
                fits_buffer=withb.total_bytes <= g.memory_bytes,
                peak_phase=today.peak_phase, dominant=max(PART_COLUMNS, key=parts.get),
                **{f"{k.replace(' ', '_')}_gib": parts[k] / GiB for k in PART_COLUMNS},
                gib_stated=gib_stated, stated=text, method=METHOD, source=row["source"], as_of=row["as_of"])


def published_layout_fits():
    """One row per published run with a layout (the dense runs, then the MoE runs): :data:`FIT_COLUMNS`.
    Each is priced today, with the stack's buffer and as its source states it (module docstring), against
    its GPU's memory."""
    import pandas as pd

    from .mfu_published import PUBLISHED_RUNS_CSV
    from .moe_runs import moe_published_runs

    dense = pd.read_csv(PUBLISHED_RUNS_CSV)
    dense["dtype"] = dense["dtype"].fillna("bf16")
    stated, out = stated_rows(), []
    for row in dense.itertuples():
        got = None if _blank(row.dp) else _dense_job_args(row)
        if got is None:
            continue
        out.append(_fit_row({**row._asdict(), "table": "published_runs"},
                            stack_family(row.framework, lenient=True), *got, stated))
    for _, row in moe_published_runs().iterrows():
        family = stack_family(row["framework"], lenient=True)
        out.append(_fit_row({**row.to_dict(), "table": "moe_published_runs"}, family, *_moe_job_args(row),
                            stated))
    lost = sorted(set(stated) - {r["run"] for r in out})
    if lost:
        raise ValueError(f"run in {STATED_CSV.name} must name a priced row of published_runs.csv or "
                         f"moe_published_runs.csv; not found: {lost}")
    return pd.DataFrame(out, columns=list(FIT_COLUMNS))


# ----------------------------------------------------------------------------- the misses, for chapter 5

#: The kinds of cause of a run that ran but does not fit as read today (:data:`MISSES`).
MISS_CAUSES = ("stand-in layout", "recipe the row cannot state", "term the model lacks", "row assumption")

#: Why each run that ran does not fit as read today: ``run -> (cause, one line)``, from the sources cited in
#: ``tests/test_layout_fits.py`` (``DOES_NOT_FIT``). A stand-in layout is one the row assumes in place of
#: what the source ran; a row assumption is a blank or config value read literally.
MISSES = {
    "Llama 3.1 405B, 8,192 GPUs (TP8 PP16 DP64)": (
        "stand-in layout",
        "zero=2 stands in for Meta's FSDP; as Meta states it, only the fragmentation allowance is over",
    ),
    "Llama 4 Scout pre-training": ("stand-in layout", "layout not published: pp 4, ep 16, ZeRO-1 assumed"),
    "Llama 4 Maverick pre-training": ("stand-in layout", "layout not published: Scout's assumptions kept"),
    "KempnerForge 7B (llama-3-8b), 1 x H200, single GPU": (
        "recipe the row cannot state", "the model is cast to bf16, so AdamW keeps 8 B/param, not 16"),
    "GPT3-1.3B 8k (FlashAttention-2 paper, 8 x A100 80GB, ZeRO-1 DDP)": (
        "term the model lacks", "flash-attn's cross-entropy writes its gradient in place (inplace_backward)"),
    "DeepSeek-V3 pre-training": (
        "term the model lacks", "recomputed RMSNorms, MLA up-projections, FP8 caches: deepseek_memory fits",
    ),
    "DeepSeek-V2 pre-training": (
        "term the model lacks", "'a portion of the operators are recomputed': which ones is not stated"),
    "Llama 2 7B, 8 H100 (MaxText on 1x A3, FSDP 8 x DP 1, batch 4 a GPU)": (
        "recipe the row cannot state", "remat minimal_flash reruns element-wise ops only: priced as none"),
    "Llama 2 7B, 16 H100 (MaxText on 2x A3, FSDP 8 x DP 2, batch 4 a GPU)": (
        "recipe the row cannot state", "remat minimal_flash reruns element-wise ops only: priced as none"),
    "Llama 2 7B, 32 H100 (MaxText on 4x A3, FSDP 8 x DP 4, batch 4 a GPU)": (
        "recipe the row cannot state", "remat minimal_flash reruns element-wise ops only: priced as none"),
    "GLM-130B, 768 A100 40GB (DeepSpeed PipeDream-Flush, TP4 PP8 DP24)": (
        "row assumption", "ZeRO stage not stated, read as 0: the optimizer states alone exceed 40 GB"),
    "GPT3-2.7B 8k (FlashAttention-2 paper, 8 x A100 80GB, ZeRO-1 DDP)": (
        "row assumption", "micro-batch 4, the 2k config's formula copied; unresolved without a measurement",
    ),
}


def layout_misses(fits=None):
    """The runs of :func:`published_layout_fits` that do not fit as read today, with their cause
    (:data:`MISSES`): run, gpu, gib_today, gpu_gib, gib_buffer, gib_stated, cause, why. Raises ``ValueError``
    if a miss has no cause or a cause names a run that fits: the table and the causes must agree."""
    fits = published_layout_fits() if fits is None else fits
    miss = fits[~fits["fits_today"]]
    unknown = sorted(set(miss["run"]) - set(MISSES))
    stale = sorted(set(MISSES) - set(miss["run"]))
    if unknown or stale:
        raise ValueError(f"fits: runs without a cause in MISSES {unknown}, causes of runs that fit {stale}")
    cols = ["run", "gpu", "gib_today", "gpu_gib", "gib_buffer", "gib_stated"]
    out = miss[cols].assign(cause=[MISSES[r][0] for r in miss["run"]],
                            why=[MISSES[r][1] for r in miss["run"]])
    order = {c: i for i, c in enumerate(MISS_CAUSES)}
    return out.sort_values("cause", key=lambda c: c.map(order), kind="stable").reset_index(drop=True)


def layout_fit_summary(fits=None):
    """Counts for chapter 5: one row per outcome ("fits", then each of :data:`MISS_CAUSES`) with ``runs``."""
    import pandas as pd

    fits = published_layout_fits() if fits is None else fits
    miss = layout_misses(fits)
    counts = [("fits", int(fits["fits_today"].sum()))]
    counts += [(f"does not fit: {c}", int((miss["cause"] == c).sum())) for c in MISS_CAUSES]
    return pd.DataFrame(counts, columns=["outcome", "runs"])


# ----------------------------------------------------------------------------- measured memory

#: Memory that sources measured on their runs (torchtitan's max reserved, KempnerForge's max allocated).
MEASURED_MEMORY_CSV = Path(__file__).resolve().parents[2] / "data" / "published_measured_memory.csv"

#: What each statistic of :data:`MEASURED_MEMORY_CSV` bounds. PyTorch's caching allocator keeps freed blocks,
#: so the peak reserved is at least the peak allocated (torch.cuda memory notes, ch5).
STATISTICS = ("max_allocated", "max_reserved")


def _evidence(statistic: str, model_gib: float, measured_gib: float) -> str:
    """What one measurement says about the model's peak (tensors only, no allowance)."""
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {STATISTICS}, got {statistic!r}")
    if model_gib > measured_gib:
        return "over-counts"
    if statistic == "max_allocated" and model_gib < measured_gib:
        return "under-counts"
    return "no evidence" if statistic == "max_reserved" else "matches"


def published_measured_memory():
    """Each published memory measurement (:data:`MEASURED_MEMORY_CSV`) against the model's peak of the step
    for its run: run, statistic, measured_gib, micro_batch, model_gib (the peak, no allowance),
    model_total_gib (with it), ratio (measured / model_gib), evidence (:func:`_evidence`) and code_traced
    (the file's column: the cause :mod:`llmsizing.measured_traced` prices from the run's code, else "").

    The run is priced as :func:`published_layout_fits` prices it, as its source states it where
    ``data/memory_as_stated.csv`` has a recipe (:func:`stated_rows`), and at the micro-batch the measured
    run used where the file gives one.
    Reserved >= allocated, since PyTorch's caching allocator keeps freed blocks: a peak above a max reserved
    over-counts, a peak below one is no evidence; against a max allocated (the live tensors' peak) a peak
    below under-counts and one above over-counts."""
    import pandas as pd

    from .memory import training_memory
    from .mfu_published import PUBLISHED_RUNS_CSV
    from .units import GiB

    meas = pd.read_csv(MEASURED_MEMORY_CSV)
    dense = pd.read_csv(PUBLISHED_RUNS_CSV)
    dense["dtype"] = dense["dtype"].fillna("bf16")
    rows = {r.run: r for r in dense.itertuples()}
    stated, out = stated_rows(), []
    for m in meas.itertuples():
        if m.run not in rows:
            raise ValueError(f"run {m.run!r} of {MEASURED_MEMORY_CSV.name} is not in published_runs.csv")
        row = rows[m.run]
        args, _ = _dense_job_args(row)
        if not _blank(m.micro_batch):
            mb = int(m.micro_batch)
            tokens = args["batch"] * args["grad_accum"]
            if tokens % mb:
                raise ValueError(f"micro_batch {mb} of {m.run!r} must divide its {tokens} sequences per GPU")
            args = {**args, "batch": mb, "grad_accum": tokens // mb}
        kind = stated.get(m.run, ("", None))[1]
        step = _stated_step(kind, args) if kind == "recipe" else training_memory(**args)
        model_gib = step.peak_bytes / GiB
        out.append(dict(run=m.run, statistic=m.statistic, measured_gib=m.measured_gib,
                        micro_batch=args["batch"], model_gib=model_gib,
                        model_total_gib=step.total_bytes / GiB, ratio=m.measured_gib / model_gib,
                        evidence=_evidence(m.statistic, model_gib, m.measured_gib),
                        code_traced="" if _blank(m.code_traced) else m.code_traced))
    return pd.DataFrame(out)
