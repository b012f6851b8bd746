"""The split of an RL step's trainer time between a forward-only pass and the update, against the published
splits, and its range measured by leaving whole sources out (chapter 19).

The frameworks time the policy's log-probability pass and the update apart (verl's ``timing_s/old_log_prob``
and ``timing_s/update_actor``, slime's ``log_probs`` and ``actor_train``), over the same rollouts and, in
slime, the same micro-batches (``get_data_iterator`` feeds both, ``slime/backends/megatron_utils/actor.py``).
Their ratio needs no response length, so every published split in ``data/rl_published.csv`` can be checked,
not only the rows whose whole setup is published:

* **predicted** (:func:`predicted_forward_share`): what :func:`llmsizing.rl.rl_run` charges for one forward
  pass over what it charges for the update. A row with its setup checked runs :func:`llmsizing.rl.row_run`;
  a mixture of experts otherwise is priced on its published layout or
  :func:`~llmsizing.rl_trainer.default_layout` (:func:`~llmsizing.rl_trainer.layout_trainer`: the FLOPs' share
  of the busy time, each group's forward share of its communication), every rollout taken at the cap (a ratio:
  the micro-batch count cancels); a dense model without a layout gets the FLOPs' share with full
  recomputation (2N of 8N). A row's ``architecture`` names the catalogue model of the same shapes.
* **the range** (:func:`forward_split_interval`): the log of published over predicted, corrected by the median
  of the other sources' (as :func:`llmsizing.rl.rl_interval` does for the step), with conformal bounds whose
  units are rows (three sources are too few for source units) and whose coverage is measured leaving whole
  sources out, nested (:func:`llmsizing.intervals.loso_check`). Nothing is widened by hand. Only the rows
  marked ``calibrate = yes`` enter it (:func:`llmsizing.rl.may_calibrate`): an NVIDIA NeMo / Megatron-Bridge
  performance summary stays out of every fit (issue 35). No such row publishes a split today.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .catalog import get_gpu, resolve_model
from .flops import forward_flops_per_token, training_flops_per_token
from .network import get_node
from .rl import PUBLISHED_CSV, RL_COVERAGES, RLInterval, may_calibrate, row_run
from .rl_trainer import TRAIN_RECOMPUTE, default_layout, layout_parallel, layout_trainer

#: A dense model's forward share of its update by FLOPs when its shapes are not in the catalogue: 2N of 8N
#: with full recomputation, of 6N without (the backward's matmuls cost twice the forward's; Kaplan et al.
#: 2020, :mod:`llmsizing.flops`); attention's share shifts it by under 1% at these lengths.
DENSE_FORWARD_SHARE = {"full": 0.25, "none": 1 / 3}


def predicted_forward_share(r) -> float:
    """One forward-only pass's seconds over the update's, as :func:`llmsizing.rl.rl_run` prices them, for a
    row (``itertuples``) of ``data/rl_published.csv`` (module docstring), with the update's recomputation of
    the row's ``train_recompute`` (read from each framework's defaults and scripts; full when not given)."""
    import pandas as pd

    if r.checked == "yes":
        run = row_run(r)
        return run.phases["log_probs"] / run.phases["update"]
    recompute = r.train_recompute if isinstance(r.train_recompute, str) else TRAIN_RECOMPUTE
    if r.architecture == "dense":
        # no catalogue shapes: every matmul runs forward, (recomputed forward,) backward at twice the forward
        return DENSE_FORWARD_SHARE[recompute]
    name = r.architecture if isinstance(r.architecture, str) and r.architecture else r.model
    m = resolve_model(name, moe=True)
    prompt = 0 if pd.isna(r.prompt_tokens) else int(r.prompt_tokens)
    seq = prompt + int(r.response_max)
    if not m.is_moe:
        full = training_flops_per_token(m, seq=seq, recompute=recompute)
        return forward_flops_per_token(m, seq=seq) / full
    g = get_gpu(r.gpu)
    node = get_node(None, g)
    n = int(r.n_gpus)
    vals = (r.train_tp, r.train_cp, r.train_ep, r.train_pp)
    layout = (default_layout(m, n, node.gpus_per_node) if any(pd.isna(v) for v in vals)
              else tuple(int(v) for v in vals))
    rollouts = int(r.rollouts_per_step)
    _, share = layout_trainer(m, g, node, layout_parallel(m, layout, n), tokens=rollouts * seq,
                              rollouts=rollouts, seq=seq, recompute=recompute)
    return share


def forward_splits(published=None):
    """The rows of ``data/rl_published.csv`` that publish both the policy's log-probability pass and the
    update: ``published_share`` (log-probs over update), ``predicted_share``
    (:func:`predicted_forward_share`), their ``ratio``, the row's ``source_key``
    (:func:`llmsizing.intervals.source_key`) and ``calibrate`` (whether a fit may read it)."""
    import pandas as pd

    from .intervals import source_key

    d = pd.read_csv(PUBLISHED_CSV) if published is None else published
    d = d[d["published_log_probs_s"].notna() & d["published_update_s"].notna()].copy()
    d["published_share"] = d["published_log_probs_s"] / d["published_update_s"]
    d["predicted_share"] = [predicted_forward_share(r) for r in d.itertuples()]
    d["ratio"] = d["published_share"] / d["predicted_share"]
    d["source_key"] = [source_key(s) for s in d["source"]]
    return d[["run", "model", "gpu", "n_gpus", "framework", "published_log_probs_s", "published_update_s",
              "published_share", "predicted_share", "ratio", "source_key",
              "calibrate"]].reset_index(drop=True)


@dataclass(frozen=True)
class SplitInterval(RLInterval):
    """The forward/update split's range (:func:`forward_split_interval`), read as :class:`~llmsizing.rl.
    RLInterval` with the predicted share in place of the step; ``held_out`` maps each run to ``(low, high,
    inside)`` without its source."""

    held_out: dict


def forward_split_interval(coverage: float | None = None, splits=None) -> SplitInterval:
    """The range of the published forward/update split around the predicted one, measured leaving whole
    sources out (module docstring). ``coverage=None`` takes the highest of :data:`llmsizing.rl.RL_COVERAGES`
    for which every nested fold keeps :func:`~llmsizing.intervals.min_units` rows. Only the splits marked
    ``calibrate = yes`` are read (:func:`llmsizing.rl.may_calibrate`; ``held_out`` has no entry for the
    others)."""
    import numpy as np

    from .intervals import median_factor_check, min_units

    d = forward_splits() if splits is None else splits
    d = d[may_calibrate(d)]
    y = np.log(d["ratio"].to_numpy(float))
    src = d["source_key"].to_numpy(object)
    keys = list(dict.fromkeys(src))
    fewest = min(int((src != k).sum()) for k in keys)
    if coverage is None:
        ok = [c for c in RL_COVERAGES if fewest >= min_units(c)]
        if not ok:
            raise ValueError(f"the published splits leave {fewest} rows in a fold: a bound needs 3")
        coverage = ok[0]

    chk, lo, hi = median_factor_check(y, src, coverage, unit="row")
    fac = np.exp(y - chk.residuals)       # each row's out-of-source correction
    held = {run: (float(f * math.exp(a)), float(f * math.exp(b)), bool(i))
            for run, f, a, b, i in zip(d["run"], fac, chk.low_log, chk.high_log, chk.inside)}
    return SplitInterval(lo, hi, coverage, chk.measured_coverage, chk.median_width, len(y),
                         len(keys), held)


__all__ = ["DENSE_FORWARD_SHARE", "predicted_forward_share", "forward_splits", "SplitInterval",
           "forward_split_interval"]
