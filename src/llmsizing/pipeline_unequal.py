"""Zero bubble and DualPipe on pipeline stages of unequal work (issue 35, zb40; chapter 8): the step of ``m``
micro-batches when each stage takes its own time (the first with the embedding, the last with the output
layer, the loss and DeepSeek's MTP module), laid out and in closed form.

Both schedules are fixed orders: a stage (a rank, for DualPipe) runs its operations in the order the schedule
prescribes, each as soon as its inputs exist, and never reorders them for a late input. DualPipe's order is
its reference's ``step`` (:func:`~llmsizing.pipeline_schedule.pipeline_schedule` already lays it out so);
ZB-H1's is the order Qi et al. (2024, arXiv:2401.10241, Sec. 2.1, Fig. 3) draw for stages of equal times,
computed before the run. :func:`zero_bubble_unequal` lays that order out at the stages' own times
(:func:`fixed_order_times`).

* ZB-H1 (the step model's ``"zb1p"``), with each stage's forward a third of its time and the input and weight
  gradients a third each (:func:`~llmsizing.moe_time.schedule_bubble`'s ``F = 1, B = 2, W = 1``):
  :func:`zb1p_makespan`, ``m x max + (sum - max) / 3``. Exact when the slowest stage is the last or all are
  equal (the paper's ``(p - 1) F`` of idle), an upper bound otherwise (tests/test_unequal_stages.py).
* DualPipe: no closed form is derived. A rank runs half the micro-batches through each of its two stages and
  pairs one direction's forward with the other's backward, so a slow stage paired with a fast one slows the
  chains through it, not its rank; on random stage sets (zb40) the table's bubble at the slowest rank's speed
  is short by up to 7% of the step or long by up to 15%. :func:`dualpipe_makespan` is the layout's own step.
"""

from __future__ import annotations

from functools import lru_cache

from ._validate import check_int, check_number
from .pipeline_schedule import PipelineOp, PipelineSchedule, dualpipe_rank_mean, pipeline_schedule


def fixed_order_times(orders, deps, length) -> list[tuple]:
    """Each operation of ``orders`` (per stage, its operations in order, hashable) timed as soon as its stage
    is free and every input ``deps(stage, op)`` (keys ``(stage, op)``) has ended, taking ``length(stage,
    op)``: a list of ``(stage, op, start, end)``. A stage waits for an input not there yet; a
    :class:`RuntimeError` if no stage can move (an order that deadlocks)."""
    p = len(orders)
    end: dict = {}
    free, pos, out = [0.0] * p, [0] * p, []
    while any(pos[i] < len(orders[i]) for i in range(p)):
        progress = False
        for i in range(p):
            while pos[i] < len(orders[i]):
                op = orders[i][pos[i]]
                need = deps(i, op)
                if not all(d in end for d in need):
                    break
                start = max([free[i]] + [end[d] for d in need])
                free[i] = start + length(i, op)
                end[(i, op)] = free[i]
                out.append((i, op, start, free[i]))
                pos[i] += 1
                progress = True
        if not progress:
            raise RuntimeError("the fixed order deadlocked: an operation waits for one that comes after it")
    return out


def zero_bubble_unequal(p: int, m: int, forward: tuple, backward: tuple) -> PipelineSchedule:
    """ZB-H1 on ``p`` stages whose ``forward`` and full ``backward`` differ (a time per stage; the input and
    weight gradients half the backward each): the order ZB-H1 lays out at the stages' mean times, each stage
    running it at its own times (:func:`fixed_order_times`). Equal stages give the equal-time layout itself.
    :func:`~llmsizing.pipeline_schedule.pipeline_schedule` calls this for ``kind="zero-bubble"``."""
    base = pipeline_schedule("zero-bubble", pp=p, micro_batches=m, forward=sum(forward) / p,
                             backward=sum(backward) / p)
    orders = [[(o.kind, o.micro_batch) for o in base.ops if o.stage == i] for i in range(p)]

    def deps(i, op):
        what, mb = op
        if what == "F":
            return [(i - 1, op)] if i else []
        if what == "W":
            return [(i, ("B", mb))]
        return [(i + 1, op)] if i < p - 1 else [(i, ("F", mb))]

    times = fixed_order_times(orders, deps, lambda i, op: forward[i] if op[0] == "F" else backward[i] / 2)
    ops = [PipelineOp(i, op[0], op[1], 0, a, b) for i, op, a, b in times]
    return PipelineSchedule("zero bubble (ZB-H1)", p, m, 1, tuple(forward), tuple(backward),
                            tuple(sorted(ops, key=lambda o: o.start)))


def _times(stage_times) -> list[float]:
    if isinstance(stage_times, (int, float)) or not len(stage_times):
        raise TypeError(f"stage_times must be a tuple of one time per stage, got {stage_times!r}")
    return [check_number(f"stage_times[{i}]", x, allow_equal=False) for i, x in enumerate(stage_times)]


def zb1p_makespan(stage_times, micro_batches: int) -> float:
    """ZB-H1's step of ``micro_batches`` micro-batches on stages taking ``stage_times`` each (a micro-batch's
    forward and backward there, first stage first; a third forward, a third input gradient, a third weight
    gradient): ``m x max + (sum - max) / 3``. The slowest stage runs its ``m`` micro-batches back to back;
    the fill reaches it and the drain leaves it through each other stage's forward once, at that stage's own
    speed (ZB-H1 fills the rest of the drain with deferred weight gradients). Equal stages give Qi et al.'s
    ``(p - 1) F`` of idle, the ``(p - 1) / (3m)`` bubble. Exact when the slowest stage is the last (the output
    layer and the loss: :func:`zero_bubble_unequal` lays it out the same), an upper bound elsewhere (a slow
    first stage hides the drain behind its own deferred weight gradients; tests/test_unequal_stages.py
    checks the bound on random stage sets). Before zb40 the step model charged the table's ``(p - 1) / (3m)``
    at the slowest stage's speed, ``(p - 1)(max - mean of the others) / 3`` longer."""
    m = check_int("micro_batches", micro_batches)
    t = _times(stage_times)
    return m * max(t) + (sum(t) - max(t)) / 3


def dualpipe_makespan(stage_times, micro_batches: int) -> float:
    """DualPipe's step of ``micro_batches`` micro-batches (even, at least twice the stages) on stages taking
    ``stage_times`` each (a micro-batch's forward and backward through that stage, first stage first; a third
    forward, two thirds backward), as :func:`~llmsizing.pipeline_schedule.pipeline_schedule` lays DualPipe
    out: no closed form is derived (module docstring). At least ``m`` x the slowest rank's mean of its two
    stages (:func:`~llmsizing.pipeline_schedule.dualpipe_rank_mean`, the step model's compute); equal
    stages give the report's Table 2 bubble. Kept per (stage times over their largest, ``m``): the layout
    scales with the times."""
    m = check_int("micro_batches", micro_batches)
    t = _times(stage_times)
    top = max(t)
    return top * _dualpipe_unit(tuple(x / top for x in t), m)


@lru_cache(maxsize=256)
def _dualpipe_unit(ratios: tuple, m: int) -> float:
    f = tuple(x / 3 for x in ratios)
    return pipeline_schedule("dualpipe", pp=len(ratios), micro_batches=m, forward=f,
                             backward=tuple(2 * x for x in f)).makespan


__all__ = ["fixed_order_times", "zero_bubble_unequal", "zb1p_makespan", "dualpipe_makespan",
           "dualpipe_rank_mean"]
