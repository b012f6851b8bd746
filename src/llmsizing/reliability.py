"""Interruptions, checkpoints and goodput: what a long run on many GPUs loses to failures (Part III, "Cost",
section "Interruptions and goodput").

* **How often.** Failures are counted per GPU-day: a job on ``n`` GPUs for ``t`` days expects
  ``λ x n x t`` interruptions, with ``λ`` calibrated on a published log (``data/interruption_logs.csv``):
  Llama 3 405B's 54-day snapshot on 16,384 H100s, 419 unexpected interruptions (Dubey et al. 2024,
  Sec. 3.3.4), so ``λ = 419 / (16,384 x 54)``, about one every 5.8 years per GPU. The job's mean time between
  interruptions is ``1 / (λ n)``: 3.1 hours for that run. OPT-175B's logbook (Zhang et al. 2022, Sec. 2.5: at
  least 35 manual and an estimated 70+ automatic restarts in 2 months on 992 A100s) is held out to check it,
  and shows that the rate is a property of the cluster and its age, not a constant: that run failed about four
  times as often per GPU. Meta's research-cluster study (Kokolis et al. 2024: a mean time to failure of 7.9
  hours for 1,024-GPU jobs on two A100 clusters) is held out too: about six times Llama 3's rate.
* **What a checkpoint costs.** It holds the weights and the optimizer states (the master copy and the moments;
  not the gradients): :func:`checkpoint_bytes`, from :func:`~llmsizing.gpu_states.model_states`. Written at
  the storage bandwidth you name, it takes ``δ = bytes / bandwidth`` (synchronous; an asynchronous checkpoint
  only stalls for the copy out of GPU memory, so pass that time instead: :func:`goodput` takes ``write_s``).
* **When to write one.** Young (1974) and Daly (2006): the interval that minimises the time lost is
  ``τ = sqrt(2 δ M)`` for a mean time between interruptions ``M`` (:func:`optimal_checkpoint_interval_s`;
  Daly's higher-order optimum subtracts ``δ``, a small change while ``δ << M``).
* **Goodput.** Each interruption costs the restart ``R`` plus, on average, half a checkpoint period of work
  redone; checkpoints cost ``δ`` every ``τ``. The useful share of wall time is (Daly 2006, first order)
  ``goodput = (1 - (R + (τ + δ)/2) / M) / (1 + δ / τ)``, and :func:`~llmsizing.time_cost.training_time`
  divides its days and GPU-hours by it (``goodput=``), in place of the flat 10-20% allowance.

**Where this is an approximation.** Interruptions are taken as a Poisson process at a constant rate per GPU
(real failures cluster early in a cluster's life and around bad hosts); the restart time ``R`` has no
published value for these runs and is yours to give; the first-order model ignores interruptions during a
restart or a redo (:attr:`Goodput.goodput_exponential` counts them, Daly 2006's complete model). Llama 3
reports "higher than 90% effective training time" for its snapshot, the one published goodput to compare with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ._validate import check_bool, check_int, check_number
from .catalog import resolve_model
from .model import Model

DATA = Path(__file__).resolve().parents[2] / "data"
LOGS_CSV = DATA / "interruption_logs.csv"
CAUSES_CSV = DATA / "llama3_interruption_causes.csv"

#: Seconds in a day.
DAY_S = 86400.0


@cache
def _logs():
    import pandas as pd

    return pd.read_csv(LOGS_CSV)


def failure_rate_per_gpu_day(*, include_planned: bool = False) -> float:
    """Interruptions per GPU per day, from the calibration log of ``data/interruption_logs.csv`` (Llama 3's
    snapshot): ``unexpected / (n_gpus x days)``, or all interruptions with ``include_planned=True`` (planned
    ones, firmware upgrades and the like, can be scheduled around checkpoints, so they are left out by
    default)."""
    include_planned = check_bool("include_planned", include_planned)
    row = _logs().query("role == 'calibration'").iloc[0]
    count = row["interruptions"] if include_planned else row["unexpected"]
    return float(count) / (float(row["n_gpus"]) * float(row["days"]))


@dataclass(frozen=True)
class Interruptions:
    """The interruptions a run expects (:func:`interruptions`)."""

    n_gpus: int
    days: float
    rate_per_gpu_day: float
    expected: float

    @property
    def mtbf_hours(self) -> float:
        """The job's mean time between interruptions, in hours: ``24 / (rate x n_gpus)``."""
        return 24.0 / (self.rate_per_gpu_day * self.n_gpus)

    @property
    def sd(self) -> float:
        """The count's standard deviation if interruptions are a Poisson process: ``sqrt(expected)``."""
        return math.sqrt(self.expected)


def interruptions(*, n_gpus: int, days: float, include_planned: bool = False,
                  rate_per_gpu_day: float | None = None) -> Interruptions:
    """The expected number of interruptions of a job on ``n_gpus`` GPUs for ``days`` days: a rate per GPU-day
    (:func:`failure_rate_per_gpu_day`, calibrated on Llama 3's log, unless ``rate_per_gpu_day`` is given)
    times the GPU-days. Llama 3's own run gives back its 419 (its calibration); OPT-175B's is the held-out
    check (:func:`interruption_logs`). Taught in chapter 11."""
    n_gpus = check_int("n_gpus", n_gpus)
    days = check_number("days", days, allow_equal=False)
    if rate_per_gpu_day is None:
        rate = failure_rate_per_gpu_day(include_planned=include_planned)
    else:
        rate = check_number("rate_per_gpu_day", rate_per_gpu_day, allow_equal=False, maximum=24.0)
    return Interruptions(n_gpus, days, rate, rate * n_gpus * days)


def interruption_logs():
    """The published logs of ``data/interruption_logs.csv`` (source and date on each) with the count the
    calibrated rate predicts for each (``predicted``: unexpected interruptions) and ``ratio`` = published /
    predicted. The calibration row agrees by construction; the held-out rows test the rate."""
    df = _logs().copy()
    df["predicted"] = [interruptions(n_gpus=int(n), days=float(d)).expected
                       for n, d in zip(df["n_gpus"], df["days"])]
    df["ratio"] = df["unexpected"] / df["predicted"]
    return df


def interruption_causes():
    """Table 5 of Dubey et al. 2024 (``data/llama3_interruption_causes.csv``): the root causes of Llama 3's
    419 unexpected interruptions, with the paper's own percentages (which sum to 94.9%, not 100%; the counts
    sum to 419)."""
    import pandas as pd

    return pd.read_csv(CAUSES_CSV)


def checkpoint_bytes(model: Model | str, *, precision: str = "bf16-mixed", optimizer: str = "adamw") -> float:
    """Bytes of one full checkpoint of a training run: the weights and the optimizer's states (master copy and
    moments) of :func:`~llmsizing.gpu_states.model_states` for the whole model, without the gradients
    (recomputed after a restart) or FP8 weight copies (rebuilt from the master). 14 bytes per parameter for
    ``bf16-mixed`` AdamW (2 + 4 + 8), as a Megatron-LM or torch.distributed.checkpoint sharded save of those
    states writes."""
    from .memory import model_states

    st = model_states(resolve_model(model, moe=True), precision=precision, optimizer=optimizer)
    return st.weights_bytes + st.optimizer_bytes


def checkpoint_write_s(model: Model | str, *, storage_gb_per_s: float, precision: str = "bf16-mixed",
                       optimizer: str = "adamw") -> float:
    """Seconds to write :func:`checkpoint_bytes` at ``storage_gb_per_s`` (decimal GB/s, the aggregate write
    bandwidth of the file system as the job sees it: Llama 3's storage fabric sustains 2,000 GB/s, peaks at
    7,000; Dubey et al. 2024, Sec. 3.3.1)."""
    bw = check_number("storage_gb_per_s", storage_gb_per_s, allow_equal=False)
    return checkpoint_bytes(model, precision=precision, optimizer=optimizer) / (bw * 1e9)


def optimal_checkpoint_interval_s(write_s: float, mtbf_s: float) -> float:
    """Young's (1974) optimal checkpoint interval ``sqrt(2 x write_s x mtbf_s)``: the compute time between two
    checkpoints that minimises the time lost to writing them plus the work redone after an interruption
    (Daly 2006 gives the same to first order)."""
    write_s = check_number("write_s", write_s, allow_equal=False)
    mtbf_s = check_number("mtbf_s", mtbf_s, allow_equal=False)
    return math.sqrt(2.0 * write_s * mtbf_s)


@dataclass(frozen=True)
class Goodput:
    """The goodput of a run (:func:`goodput`): the useful share of wall time, and its parts."""

    goodput: float
    n_gpus: int
    mtbf_s: float
    write_s: float
    interval_s: float
    restart_s: float
    checkpoint_bytes: float

    @property
    def lost_per_interruption_s(self) -> float:
        """The restart plus, on average, half a checkpoint period (interval and write) of work redone."""
        return self.restart_s + (self.interval_s + self.write_s) / 2

    @property
    def checkpoint_share(self) -> float:
        """The share of wall time spent writing checkpoints."""
        return self.goodput * self.write_s / self.interval_s

    @property
    def interruption_share(self) -> float:
        """The share of wall time lost to interruptions (restarts and work redone)."""
        return self.lost_per_interruption_s / self.mtbf_s

    @property
    def goodput_exponential(self) -> float:
        """Daly's (2006) complete model at the same interval, where interruptions also strike during a restart
        or a redo (exponential times between them): ``τ / (M e^(R/M) (e^((τ + δ)/M) - 1))``. It tends to
        :attr:`goodput` while ``R + τ << M``; chapter 11 shows how far the two part as ``M`` shrinks."""
        m, tau = self.mtbf_s, self.interval_s
        return tau / (m * math.exp(self.restart_s / m) * math.expm1((tau + self.write_s) / m))


def goodput(model: Model | str, *, n_gpus: int, restart_min: float, storage_gb_per_s: float | None = None,
            write_s: float | None = None, interval_min: float | None = None, precision: str = "bf16-mixed",
            optimizer: str = "adamw", include_planned: bool = False,
            rate_per_gpu_day: float | None = None) -> Goodput:
    """The useful share of a run's wall time on ``n_gpus`` GPUs: ``(1 - (R + (τ + δ)/2) / M) / (1 + δ / τ)``
    with ``M`` the job's mean time between interruptions (:func:`interruptions`), ``R`` the restart
    (``restart_min`` minutes: reschedule, reload, warm up; yours to give), ``δ`` the checkpoint's write time
    (``write_s``, or :func:`checkpoint_write_s` at ``storage_gb_per_s``) and ``τ`` the interval
    (``interval_min``, default Young's optimum :func:`optimal_checkpoint_interval_s`). Raises when an
    interruption costs more than the time between two: the run would make no progress. Taught in chapter
    11."""
    model = resolve_model(model, moe=True)
    n_gpus = check_int("n_gpus", n_gpus)
    restart_s = 60.0 * check_number("restart_min", restart_min)
    if (storage_gb_per_s is None) == (write_s is None):
        raise ValueError("give storage_gb_per_s (the file system's write bandwidth) or write_s (seconds the "
                         "run stalls per checkpoint), not both or neither")
    nbytes = checkpoint_bytes(model, precision=precision, optimizer=optimizer)
    if write_s is None:
        write_s = checkpoint_write_s(model, storage_gb_per_s=storage_gb_per_s, precision=precision,
                                     optimizer=optimizer)
    else:
        write_s = check_number("write_s", write_s, allow_equal=False)
    mtbf_s = interruptions(n_gpus=n_gpus, days=1.0, include_planned=include_planned,
                           rate_per_gpu_day=rate_per_gpu_day).mtbf_hours * 3600
    if interval_min is None:
        interval_s = optimal_checkpoint_interval_s(write_s, mtbf_s)
    else:
        interval_s = 60.0 * check_number("interval_min", interval_min, allow_equal=False)
    lost = restart_s + (interval_s + write_s) / 2
    if not lost < mtbf_s:
        raise ValueError(f"each interruption costs {lost / 60:,.1f} min (restart_min={restart_min:g} plus "
                         f"half a checkpoint period) but they come every {mtbf_s / 60:,.1f} min on "
                         f"{n_gpus:,} GPUs: the run makes no progress (restart faster, checkpoint more "
                         "often, or use fewer GPUs)")
    value = (1 - lost / mtbf_s) / (1 + write_s / interval_s)
    return Goodput(value, n_gpus, mtbf_s, write_s, interval_s, restart_s, nbytes)
