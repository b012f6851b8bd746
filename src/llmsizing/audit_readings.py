"""The readings the seed audit judges claims at (chapter 14): the library look-ups behind
:data:`llmsizing.audit.COMPUTE`, each a few lines that call :mod:`~llmsizing.memory`,
:mod:`~llmsizing.layouts`, :mod:`~llmsizing.time_cost`, :mod:`~llmsizing.finetune` and the catalogues, and no
formula of their own.

Each returns a number or a :class:`Finding`: the value, the reading it was computed at (fused AdamW, CPU
offload, LoRA, the calibrated MFU and its band), and what the claim's premise needs (CPU offload) or why it
fails (a reason: wrong in kind). :mod:`llmsizing.audit` holds the claims, the verdict rule and the table; its
module docstring states the conventions these functions follow.

Here are the readings taken at :data:`SEQ` tokens (:func:`at_seq` reads them at another length); what reads
no sequence length (the :class:`Finding`, the settings and prices, the seeds' own arithmetic, the look-ups at
a fixed shape) is :mod:`llmsizing.audit_inputs`'s, whose every name is importable from here too.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from functools import cache

# what reads no sequence length lives in audit_inputs (issue 32: modules under 600 lines); every name of
# theirs is still importable from here (audit imports them from here)
from .audit_inputs import (_A100, _COST_TABLES, _H100, _H200, _L2_13, _L2_7, _L2_70,  # noqa: F401
                           _L3_70, _L3_8, _L405, _M7, _MATRIX, DAYS_PER_MONTH, DAYS_PER_YEAR, GPUS_PER_HOST,
                           DRIVER_GB_READING, GIB_READING, HOST_BYTES_PER_NODE, OFFLOAD_TOKENS_PER_STEP,
                           OPEN_SETTINGS,
                           SECONDS_PER_DAY,
                           RUN_GPUS_RULE, SEED_PRICES_USD, Finding,
                           _bytes, _gpu, _gpu_memory_gb, _model, _one_way_gbps, _par, _qlora, _qlora_fits,
                           _serving,
                           _serving_factor, _stage_params_billion, _states, _weights_gb, favourable_point,
                           seed_days_at_throughput, seed_gpu_days_usd, ten_b_stand_in)
from .units import GB

#: Sequence length of the central reading of every training claim (the seeds give none; 4,096 is Llama 2's
#: training length). The audit also judges each claim at every length of :data:`SEQS` (:func:`at_seq`).
SEQ = 4096
#: The sequence lengths a claim is read at, central first: Llama 2's 4,096 and GPT-3's and Llama 1's 2,048.
SEQS = (4096, 2048)
#: Micro-batches (sequences) the claim that FP8 saves memory is read at: the seed names none.
FP8_BATCHES = (1, 8)


def offload_counted(tokens_per_step: int) -> str:
    """The tail of the reading of a time, throughput or cost with the offload's exposed host time counted at
    ``tokens_per_step`` tokens per GPU per optimizer step (review24c L1: the batch it was counted at)."""
    return (f"offload time counted ({tokens_per_step:,} tokens per GPU per optimizer step, no delayed "
            "parameter update)")


#: :func:`offload_counted` at the stated batch, :data:`OFFLOAD_TOKENS_PER_STEP`.
OFFLOAD_COUNTED = offload_counted(OFFLOAD_TOKENS_PER_STEP)
#: Tokens per GPU per optimizer step the counted reading uses now: :data:`OFFLOAD_TOKENS_PER_STEP` except
#: inside :func:`at_offload_batch` (which :func:`llmsizing.audit.offload_batch_flip` uses to find the batch at
#: which a verdict changes).
_TOKENS_PER_STEP = OFFLOAD_TOKENS_PER_STEP

# ----------------------------------------------------------------------------- library look-ups (no formulas)
_FUSED = "fused"


@cache
def _min_plan(model: str, gpu: str):
    """The fewest GPUs that hold one training sequence of :data:`SEQ` tokens with full recomputation and the
    fused AdamW step, without offload."""
    from .fewest_gpus import min_gpus

    return min_gpus(model, gpu, batch=1, seq=SEQ, recompute="full", optimizer_impl=_FUSED)


#: The ZeRO-Offload layouts tried on n GPUs, least offloaded first (DeepSpeed's ``offload_optimizer`` needs a
#: ZeRO stage; ``offload_param`` needs stage 3).
_OFFLOADS = ((1, "optimizer"), (2, "optimizer"), (3, "optimizer"), (3, "optimizer+params"))


@cache
def _offload_layout(model: str, gpu: str, n_gpus: int):
    """The least offloaded of :data:`_OFFLOADS` that holds a training step of ``model`` on ``n_gpus`` x
    ``gpu`` (data parallelism over all of them, within the usable share of each GPU and
    :data:`HOST_BYTES_PER_NODE` of host memory per server): ``(zero, what, training_memory result)``, or
    ``None`` if none does."""
    from .layouts import USABLE_FRACTION
    from .memory import training_memory
    from .parallel import Parallel

    limit = USABLE_FRACTION * _gpu(gpu).memory_bytes
    per_host = min(n_gpus, GPUS_PER_HOST)
    for zero, what in _OFFLOADS:
        par = Parallel(dp=n_gpus, zero=zero, offload=what)
        r = training_memory(model, batch=1, seq=SEQ, recompute="full", optimizer_impl=_FUSED, parallel=par)
        if r.total_bytes <= limit and r.host_bytes * per_host <= HOST_BYTES_PER_NODE:
            return zero, what, r
    return None


@cache
def _offload_fit(model: str, gpu: str, n_gpus: int) -> str:
    """How ``n_gpus`` x ``gpu`` hold a training step of ``model`` with CPU offload ("" if no layout does), in
    words: the layout of :func:`_offload_layout`."""
    found = _offload_layout(model, gpu, n_gpus)
    if found is None:
        return ""
    zero, what, r = found
    per_host = min(n_gpus, GPUS_PER_HOST)
    return (f"ZeRO-{zero} with the {what.replace('+', ' and ')} on the CPU holds a {model} step on "
            f"{'one' if n_gpus == 1 else n_gpus} {gpu} ({r.total_bytes / GB:,.0f} GB per GPU, "
            f"{r.host_bytes * per_host / 1e12:.2f} TB of host memory per server)")


@cache
def _offload_s_per_token(model: str, gpu: str, n_gpus: int, tokens_per_step: int) -> float:
    """Seconds of host time the GPUs wait for, per token of the run, when ``n_gpus`` x ``gpu`` train
    ``model`` with the CPU offload of :func:`_offload_layout`: :func:`~llmsizing.runs.offload_exposed_s` of
    one optimizer step (:func:`~llmsizing.zero_traffic.offload_time` over ``gpu``'s host link: the gradients
    down, the CPU's Adam, the weights up; without the delayed parameter update of Ren et al. 2021, Sec. 5.2)
    over the step of :func:`~llmsizing.layouts.step_time` it hides behind (micro-batch 1, full recomputation,
    as the fit check), each GPU accumulating ``tokens_per_step`` tokens (whole sequences of :data:`SEQ`; the
    audit's is :data:`OFFLOAD_TOKENS_PER_STEP`). Chapter 13 (case 1) times it."""
    from .layouts import step_time
    from .parallel import Parallel
    from .runs import offload_exposed_s
    from .zero_traffic import offload_time

    found = _offload_layout(model, gpu, n_gpus)
    if found is None:
        return 0.0
    zero, what, _ = found
    accum = max(1, tokens_per_step // SEQ)
    par = Parallel(dp=n_gpus, zero=zero, offload=what)
    st = step_time(model, gpu, par, batch=1, seq=SEQ, grad_accum=accum, recompute="full")
    exposed = offload_exposed_s(offload_time(model, par, grad_accum=accum, gpu=gpu), st)
    return exposed / (accum * SEQ * n_gpus)


def _names(model, gpu) -> tuple[str, str]:
    """Catalogue names of ``model`` and ``gpu`` (a :class:`~llmsizing.model.Model` or
    :class:`~llmsizing.hardware.GPU` object, or a name), checked against the catalogues."""
    from .catalog import get_gpu, resolve_model

    return resolve_model(model, moe=True).name, get_gpu(gpu).name


def offload_exposed_days(model, tokens: float, gpu, n_gpus: int, *,
                         tokens_per_step: int = OFFLOAD_TOKENS_PER_STEP) -> float:
    """Days the host's exposed work adds to a run of ``tokens`` tokens of ``model`` on ``n_gpus`` x ``gpu``
    that fits only with CPU offload: the time the audit counts in the other reading of an offloaded run
    (:data:`OFFLOAD_COUNTED`), each GPU accumulating ``tokens_per_step`` tokens per optimizer step
    (:data:`OFFLOAD_TOKENS_PER_STEP` by default; a larger batch adds less host time, a smaller one more).
    ``model`` and ``gpu`` are catalogue names or :class:`~llmsizing.model.Model` /
    :class:`~llmsizing.hardware.GPU` objects. A run that fits without offload gets 0.0 (it waits for no
    host); a run that fits in no layout, offload included, raises ValueError. Chapter 14 (its exercise 1)
    and chapter 13 (case 1)."""
    from ._validate import check_int, check_number

    tokens = check_number("tokens", tokens, allow_equal=False)
    n = check_int("n_gpus", n_gpus, minimum=1)
    per_step = check_int("tokens_per_step", tokens_per_step, minimum=SEQ)
    m, g = _names(model, gpu)
    if n >= _min_plan(m, g).gpus:
        return 0.0
    if _offload_layout(m, g, n) is None:
        raise ValueError(f"n_gpus={n}: a {m} training step fits on {n} {g} in no layout, offload included "
                         f"(it needs at least {_min_plan(m, g).gpus} without offload)")
    return tokens * _offload_s_per_token(m, g, n, per_step) / SECONDS_PER_DAY


@cache
def _min_offload_gpus(model: str, gpu: str) -> int:
    """The fewest GPUs that hold the step with CPU offload (:func:`_offload_fit`), at most the count
    without."""
    plain = _min_plan(model, gpu).gpus
    return next((n for n in range(1, plain) if _offload_fit(model, gpu, n)), plain)


def _min_gpus(model: str, gpu: str) -> Finding:
    """The fewest GPUs for a training step without offload; the other reading: any count from the fewest with
    CPU offload up to one below that (each holds the step with ZeRO-Offload), judged at the count nearest the
    claim."""
    from .time_cost import _layout_label

    plan = _min_plan(model, gpu)
    plain = Finding(float(plan.gpus), reading=f"fused AdamW, no offload ({_layout_label(plan.parallel)})")
    n_off = _min_offload_gpus(model, gpu)
    if n_off >= plan.gpus:
        return plain
    span = "one" if n_off == plan.gpus - 1 == 1 else f"{n_off} to {plan.gpus - 1}"
    off = (f"ZeRO-Offload layouts hold a {model} step on {span} {gpu} (fewer than the {plan.gpus} it needs "
           f"without offload), within {HOST_BYTES_PER_NODE / 1e12:g} TB of host memory per server")
    return Finding(plain.value, reading=plain.reading,
                   others=(Finding(float(n_off), reading="CPU offload", low=float(n_off),
                                   high=float(plan.gpus - 1), offload=off),))


def _suffices(model: str, gpu: str, n_gpus: int) -> Finding:
    """Whether ``n_gpus`` suffice for a training step, as a GPU count judged "at most": the fewest GPUs
    without offload, or, when the claim's count needs it, the claim's count with CPU offload."""
    plain = _min_gpus(model, gpu)
    if plain.value <= n_gpus:
        return Finding(plain.value, reading=plain.reading)
    off = _offload_fit(model, gpu, n_gpus)
    if off:
        return Finding(plain.value, reading=plain.reading,
                       others=(Finding(float(n_gpus), reading="CPU offload", offload=off),))
    return Finding(plain.value, reading=plain.reading)


def _fit(model: str, gpu: str, n_gpus: int) -> tuple[str, str, str]:
    """(reason, offload, reading) for a run of ``model`` on ``n_gpus`` x ``gpu``: no reason when the step fits
    without offload; an offload note when it fits only with CPU offload; a reason when it fits in neither."""
    from .time_cost import _layout_label

    plan = _min_plan(model, gpu)
    if n_gpus >= plan.gpus:
        return "", "", "fused AdamW"
    off = _offload_fit(model, gpu, n_gpus)
    if off:
        return "", off, "CPU offload"
    what = "one GPU" if n_gpus == 1 else f"{n_gpus} GPUs"
    return (f"a {model} training step does not fit on {what}, even with CPU offload within "
            f"{HOST_BYTES_PER_NODE / 1e12:g} TB of host memory per server; it needs at least {plan.gpus} "
            f"{gpu} ({_layout_label(plan.parallel)})", "", "fused AdamW")


def _fit_reason(model: str, gpu: str, n_gpus: int) -> str:
    """Why a run of ``model`` on ``n_gpus`` x ``gpu`` cannot happen in any layout, offload included ("" if it
    can)."""
    return _fit(model, gpu, n_gpus)[0]


def _memory(model: str, batch: int = 1, parallel=None, **kw):
    from .memory import training_memory

    kw = {"recompute": "full", "optimizer_impl": _FUSED, **kw}
    return training_memory(model, batch=batch, seq=SEQ, parallel=parallel, **kw)


def _train_gb(model: str, batch: int = 1, parallel=None) -> float:
    """Per-GPU training memory (the step's peak + allowance on the most loaded GPU, fused AdamW, full
    recomputation) in GB: the "training memory" yardstick."""
    return _memory(model, batch, parallel).total_bytes / GB


def _memory_ratio(model: str, *, batch: int, base_batch: int, grad_accum: int = 1,
                  precision: str = "bf16-mixed", base_precision: str = "bf16-mixed",
                  scale: float = 1.0, offset: float = 0.0) -> Finding:
    """One step peak over another (same model), at the batch and dtype the seed describes: with full
    recomputation (the training-memory yardstick, the central reading) and, as the other reading of
    :data:`OPEN_SETTINGS`, without. ``offset + scale * ratio`` is returned (a saving in % is 100 - 100 x
    ratio)."""
    found = []
    for recompute in ("full", "none"):
        a = _memory(model, batch, precision=precision, recompute=recompute, grad_accum=grad_accum).total_bytes
        b = _memory(model, base_batch, precision=base_precision, recompute=recompute).total_bytes
        found.append(offset + scale * a / b)
    alt = Finding(found[1], reading="step peaks, seed's setting; no recomputation")
    return Finding(found[0], others=(alt,))


def recompute_saving_pct(model: str, batch: int) -> float:
    """The share of a step's peak that full recomputation saves, in %: 100 x (1 - peak with full
    recomputation / peak without), at the seed's batch (the recomputation setting is what the claim
    compares)."""
    full = _memory(model, batch, recompute="full").total_bytes
    return 100 * (1 - full / _memory(model, batch, recompute="none").total_bytes)


@cache
def _run(model: str, tokens: float, gpu: str, n_gpus: int, price: float | None = None):
    """``training_time`` at the calibrated MFU (chapter 10) and its band, at the seed's price."""
    from .time_cost import training_time

    return training_time(model, tokens=tokens, gpu=gpu, n_gpus=n_gpus, seq=SEQ,
                         price_usd_per_gpu_hour=price or SEED_PRICES_USD.get(gpu))


def _mfu_reading(t) -> str:
    return f"calibrated MFU {t.mfu:.0%} (band {t.mfu_low:.0%} to {t.mfu_high:.0%})"


def _counted(found: "Finding", extra: float, *, slower: bool = True) -> "Finding":
    """``found`` (an offloaded time or cost, or with ``slower=False`` a throughput) with the offload's exposed
    host time counted: ``extra`` added to the value and both ends of its band (a throughput is given as the
    seconds one token takes, ``1 / value``, plus ``extra``), named by :data:`OFFLOAD_COUNTED`."""
    def add(x):
        return x + extra if slower else 1 / (1 / x + extra)

    return Finding(add(found.value), found.reason, f"{found.reading}; {offload_counted(_TOKENS_PER_STEP)}",
                   add(found.low),
                   add(found.high), found.offload)


def _with_counted(found: "Finding", model: str, gpu: str, n_gpus: int, per_token: float,
                  *, slower: bool = True) -> "Finding":
    """``found`` with, as its other reading, the same with the offload's host time counted
    (:func:`_counted`), when the run fits only with CPU offload: the time hidden (the delayed parameter update
    of Ren et al. 2021, Sec. 5.2) and counted (without it) are both tried, one open setting of
    :data:`OPEN_SETTINGS`."""
    if not found.offload:
        return found
    s = _offload_s_per_token(model, gpu, n_gpus, _TOKENS_PER_STEP)
    return replace(found, others=found.others + (_counted(found, s * per_token, slower=slower),))


def _days(model: str, tokens: float, gpu: str, n_gpus: int, *, per: float = 1.0) -> Finding:
    """Days (divided by ``per``: 30.4 for months, 365.25 for years) of the run, over the calibrated MFU band,
    with the fit check; a run that fits only with CPU offload is read with the host's exposed time hidden and,
    as its other reading, counted (:func:`_with_counted`)."""
    t = _run(model, tokens, gpu, n_gpus)
    reason, off, how = _fit(model, gpu, n_gpus)
    reading = _mfu_reading(t) + ("" if how == "fused AdamW" else f"; {how}")
    found = Finding(t.days / per, reason, reading, t.days_low / per, t.days_high / per, off)
    return _with_counted(found, model, gpu, n_gpus, tokens / SECONDS_PER_DAY / per)


def _cost(model: str, tokens: float, gpu: str, n_gpus: int, price: float | None = None) -> Finding:
    """USD of the run at the seed's own price, over the calibrated MFU band, with the fit check (and the
    offload's host time hidden or counted, as :func:`_days`)."""
    t = _run(model, tokens, gpu, n_gpus, price)
    reason, off, how = _fit(model, gpu, n_gpus)
    reading = _mfu_reading(t) + ("" if how == "fused AdamW" else f"; {how}")
    found = Finding(t.cost_usd, reason, reading, t.cost_usd_low, t.cost_usd_high, off)
    return _with_counted(found, model, gpu, n_gpus, tokens * n_gpus * t.price_usd_per_gpu_hour / 3600)


def _tps(model: str, gpu: str, *, n_gpus: int | None = None) -> Finding:
    """Tokens per second over the calibrated MFU band, under the one rule of :data:`RUN_GPUS_RULE`: with
    ``n_gpus`` (the run the seed names), of those GPUs together, with the fit check (and the offload's host
    time hidden or counted, as :func:`_days`); without (a per-GPU rate that names no run), per GPU on the
    fewest ``gpu`` that hold a step without offload (:func:`_min_plan`)."""
    if n_gpus is None:
        n = _min_plan(model, gpu).gpus
        t = _run(model, 1e12, gpu, n)
        tps = t.tokens_per_s_per_gpu
        reading = _mfu_reading(t) + f"; per GPU of {n}, the fewest that hold a step"
        return Finding(tps, "", reading, tps * t.mfu_low / t.mfu, tps * t.mfu_high / t.mfu)
    t = _run(model, 1e12, gpu, n_gpus)
    reason, off, how = _fit(model, gpu, n_gpus)
    tps = t.tokens_per_s_per_gpu * n_gpus
    reading = _mfu_reading(t) + ("" if how == "fused AdamW" else f"; {how}")
    found = Finding(tps, reason, reading, tps * t.mfu_low / t.mfu, tps * t.mfu_high / t.mfu, off)
    return _with_counted(found, model, gpu, n_gpus, 1.0, slower=False)


def _lora_run(model: str, tokens: float, gpu: str, what: str) -> Finding:
    """Days or USD of a LoRA fine-tune (rank 16, all linear layers, sequences of :data:`SEQ` tokens) on one
    GPU at the seed's price (:func:`~llmsizing.finetune_time.finetune_time`), over the fine-tuning range
    (``hours_range``, ``cost_usd_range``: chapter 16's measured 80% range), as every other time is judged
    over its band; the step fits (checked)."""
    from .finetune import finetune_memory
    from .finetune_time import finetune_time
    from .layouts import USABLE_FRACTION

    t = finetune_time(model, gpu=gpu, method="lora", tokens=tokens, seq=SEQ, batch=1,
                      price_usd_per_gpu_hour=SEED_PRICES_USD.get(gpu))
    m = finetune_memory(model, method="lora", batch=1, seq=SEQ, recompute="full")
    fits = m.total_bytes <= USABLE_FRACTION * _gpu(gpu).memory_bytes
    reason = "" if fits else f"a LoRA step of {model} does not fit on one {gpu}"
    low, high = ((h / 24 for h in t.hours_range) if what == "days" else t.cost_usd_range)
    return Finding(t.days if what == "days" else t.cost_usd, reason,
                   f"LoRA (rank 16; {m.total_bytes / GB:.0f} GB per step), MFU {t.mfu:.0%}", low, high)


def _finetune(model: str, tokens: float, gpu: str, what: str) -> Finding:
    """A "fine-tuning" run the seed does not qualify: full fine-tuning (:func:`_days`/:func:`_cost`), with
    LoRA as the other reading."""
    full = _days(model, tokens, gpu, 1) if what == "days" else _cost(model, tokens, gpu, 1)
    named = [replace(g, reading="full fine-tuning, " + g.reading, others=()) for g in (full, *full.others)]
    return replace(named[0], others=(*named[1:], _lora_run(model, tokens, gpu, what)))


def _recompute_flops_factor() -> float:
    """Hardware FLOPs with full recomputation over the model FLOPs (chapter 10: a forward again, about
    4/3)."""
    t = _run_recompute()
    return t.hfu / t.mfu


@cache
def _run_recompute():
    from .time_cost import training_time

    return training_time(_M7, tokens=1e9, gpu=_H100, n_gpus=1, seq=SEQ, recompute="full")


def offload_fit(model: str, gpu: str, n_gpus: int) -> str:
    """How ``n_gpus`` x ``gpu`` hold a training step of ``model`` with CPU offload, in words ("" if no
    ZeRO-Offload layout does): chapter 14's reading of a claim that fits only with the optimizer on the
    CPU."""
    from ._validate import check_int

    return _offload_fit(str(model), str(gpu), check_int("n_gpus", n_gpus, minimum=1))


def _same_gpu_days_cost_ratio() -> Finding:
    """Seed 000's "8 GPUs for 50 days is cheaper than 1 GPU for 400 days": the cost of a run on 8 H100s over
    the same run on one (Mistral 7B on 100B tokens, the seed's own example run), built from both sides'
    :func:`_cost`, each at its central calibrated MFU (a ratio of two runs, :data:`OPEN_SETTINGS`): with the
    offload's host time hidden on both sides, and (the other reading) counted on both. One H100 holds the
    step only with CPU offload, so the claim needs it; it is wrong in kind only if no reading makes the
    8-GPU run cheaper."""
    eight, one = _cost(_M7, 1e11, _H100, 8), _cost(_M7, 1e11, _H100, 1)

    def counted(f: Finding) -> Finding:
        return next((g for g in f.others if g.reading.endswith(offload_counted(_TOKENS_PER_STEP))), f)

    ratios = [eight.value / one.value, counted(eight).value / counted(one).value]
    reason = "" if min(ratios) < 1 else (
        f"8 x 50 and 1 x 400 are both 400 GPU-days: at one price per GPU-hour they cost the same (USD "
        f"{seed_gpu_days_usd(8, 50):,.0f} at the seed's USD {SEED_PRICES_USD[_H100]}), and with the host's "
        "time hidden or counted more GPUs do not make the run cheaper")
    off = "; ".join(f"the {n}-GPU run: {f.offload}" for n, f in ((8, eight), (1, one)) if f.offload)
    reading = "each run at its central calibrated MFU" + ("; CPU offload" if off else "")
    found = [Finding(r, reason, reading, offload=off) for r in ratios]
    if ratios[1] == ratios[0]:
        return found[0]
    tail = offload_counted(_TOKENS_PER_STEP)
    return replace(found[0], others=(replace(found[1], reading=f"{reading}; {tail}"),))


def _b200_speedup() -> float:
    """Days on H100 / days on B200 for the same run, each at its central calibrated MFU (chapter 10), as every
    ratio of two runs is read (:data:`OPEN_SETTINGS`). No published BF16 run on a B200 calibrates the fit
    (torchao's, on eight power-limited B200s, is held out): it gives the B200 the median generation's MFU, so
    the ratio is that of the dense BF16 peaks."""
    from .time_cost import training_time

    kw = dict(tokens=1e12, n_gpus=8, seq=SEQ)
    return training_time(_L3_70, gpu=_H100, **kw).days / training_time(_L3_70, gpu="B200", **kw).days


def _layer_activations_mb() -> float:
    """One layer's saved activations at batch 32 with full recomputation (the least a layer can keep) for the
    catalogue model nearest 10B."""
    from .activations import activation_memory

    return activation_memory("llama-2-13b", batch=32, seq=SEQ, recompute="full").per_layer_bytes / 1e6


def _activations_gb(model: str, batch: int) -> float:
    """All layers' saved activations with full recomputation (the least a step keeps), in GB."""
    from .activations import activation_memory

    return activation_memory(model, batch=batch, seq=SEQ, recompute="full").total_bytes / GB


def _fp8_tps(model: str, gpu: str, precision: str) -> float:
    """Tokens per second per GPU at the calibrated MFU of ``precision``
    (:func:`~llmsizing.time_cost.mfu_estimate` by GPU generation and dtype): the FP8 claims are judged at the
    calibrated estimate, because what they dispute is how much of the FP8 peak a run reaches (chapter 10)."""
    from .time_cost import training_time

    return training_time(model, tokens=1e12, gpu=gpu, n_gpus=8, seq=SEQ,
                         precision=precision).tokens_per_s_per_gpu


def _fp8_speedup(model: str, gpu: str) -> float:
    """Tokens/s per GPU with Transformer Engine's FP8 (``fp8-mixed``) over BF16 on the same GPU."""
    return _fp8_tps(model, gpu, "fp8-mixed") / _fp8_tps(model, gpu, "bf16-mixed")


def _fp8_vram(model: str) -> Finding:
    """Training memory without FP8 over memory with Transformer Engine's FP8, both on the same stack (fp32
    gradients, as Megatron-LM keeps them: ``bf16-mixed-fp32-grads`` against ``fp8-mixed``), one sequence of
    :data:`SEQ` tokens, at each micro-batch of :data:`FP8_BATCHES` with and without recomputation (the seed
    names neither), fused AdamW: one sequence with full recomputation is the central reading (the training
    memory yardstick), the others are tried as alternatives. Wrong
    in kind when the FP8 step needs more memory."""
    found = []
    for batch in FP8_BATCHES:
        for recompute in ("full", "none"):
            kw = dict(batch=batch, recompute=recompute)
            base = _memory(model, precision="bf16-mixed-fp32-grads", **kw).total_bytes
            fp8 = _memory(model, precision="fp8-mixed", **kw).total_bytes
            reason = "" if fp8 < base else (
                "FP8 training keeps the 16-bit weights and adds FP8 copies of the Linear weights (Transformer"
                f" Engine: 2 bytes per weight, with the transpose): a {model} step of {batch} x {SEQ:,}"
                f" tokens needs {fp8 / GB:,.0f} GB with FP8 against {base / GB:,.0f} GB without")
            what = "no" if recompute == "none" else "full"
            reading = f"fused AdamW; micro-batch {batch}, {what} recomputation"
            found.append(Finding(base / fp8, reason, reading))
    return replace(found[0], others=tuple(found[1:]))


# ----------------------------------------------------------------------------- look-ups for particular claims


def _one_gpu_gb(model, batch: int, gpu: str) -> Finding:
    """Training memory of ``model`` at micro-batch ``batch`` on one ``gpu``: without offload, and (the other
    reading) with the least offloaded ZeRO-Offload layout that fits the GPU (:data:`_OFFLOADS`; the one that
    keeps the least on the GPU if none fits) and whose host memory fits :data:`HOST_BYTES_PER_NODE`."""
    from .layouts import USABLE_FRACTION

    plain = Finding(_train_gb(model, batch), reading="fused AdamW, no offload")
    limit = USABLE_FRACTION * _gpu(gpu).memory_bytes
    tried = []
    for zero, what in _OFFLOADS:
        r = _memory(model, batch, _par(dp=1, zero=zero, offload=what))
        if r.host_bytes <= HOST_BYTES_PER_NODE:
            tried.append((r, zero, what))
    if not tried:
        return plain
    r, zero, what = next((t for t in tried if t[0].total_bytes <= limit),
                         min(tried, key=lambda t: t[0].total_bytes))
    name = getattr(model, "name", model)
    off = (f"ZeRO-{zero} with the {what.replace('+', ' and ')} on the CPU keeps {r.total_bytes / GB:,.0f} GB "
           f"of a {name} step on the GPU ({r.host_bytes / 1e12:.2f} TB of host memory)")
    return Finding(plain.value, reading=plain.reading,
                   others=(Finding(r.total_bytes / GB, reading="CPU offload", offload=off),))


def _matrix(model: str, tokens: float, gpu: str, n: int) -> Finding:
    """A recommended GPU count: does it hold a step (:func:`_suffices`), and how long the run would take on
    the ``n`` GPUs the matrix recommends (named in the reading, with ``n``: the layout named first is the
    fewest GPUs', which may be fewer; the matrix gives no time to judge)."""
    f = _suffices(model, gpu, n)
    t = _run(model, tokens, gpu, n)
    return Finding(f.value, f.reason, f"{f.reading}; the run on {n} {gpu} would take {t.days:,.0f} days "
                   f"({t.days_low:,.0f} to {t.days_high:,.0f})", f.low, f.high, f.offload, f.others)


def _clear_caches() -> None:
    for f in (_min_plan, _offload_layout, _offload_fit, _offload_s_per_token, _min_offload_gpus, _run,
              _run_recompute):
        f.cache_clear()


@contextmanager
def at_seq(seq: int):
    """Compute the readings at sequence length ``seq`` instead of :data:`SEQ` (one of :data:`SEQS`), for the
    audit's alternative readings; the cached look-ups are cleared on the way in and out."""
    global SEQ
    if seq not in SEQS:
        raise ValueError(f"seq must be one of {SEQS}, got {seq!r}")
    old, SEQ = SEQ, seq
    _clear_caches()
    try:
        yield
    finally:
        SEQ = old
        _clear_caches()


@contextmanager
def at_offload_batch(tokens_per_step: int):
    """Count an offloaded run's host time at ``tokens_per_step`` tokens per GPU per optimizer step instead
    of :data:`OFFLOAD_TOKENS_PER_STEP` (a multiple of :data:`SEQ` at least :data:`SEQ`): what
    :func:`llmsizing.audit.offload_batch_flip` varies. The cached look-up is keyed by the batch, so nothing
    computed inside depends on what ran before."""
    from ._validate import check_int

    global _TOKENS_PER_STEP
    per_step = check_int("tokens_per_step", tokens_per_step, minimum=SEQ)
    old, _TOKENS_PER_STEP = _TOKENS_PER_STEP, per_step
    try:
        yield
    finally:
        _TOKENS_PER_STEP = old
