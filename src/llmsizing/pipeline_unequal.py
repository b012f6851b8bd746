"""Pipeline schedules on stages of unequal work (issue 35; chapter 8): the step of ``m`` micro-batches when
each stage takes its own time (the first with the embedding, the last with the output layer, the loss and
DeepSeek's MTP module), in closed form where one is derived, and the fixed-order timing the layouts use.

* 1F1B: :func:`unbalanced_1f1b_makespan`, ``m x max + (sum - max) / v`` (session 39, phi39).
* ZB-H1 (the step model's ``"zb1p"``), a third of each stage's time forward, a third input gradient, a third
  weight gradient (:func:`~llmsizing.moe_time.schedule_bubble`'s ``F = 1, B = 2, W = 1``):
  :func:`zb1p_makespan`, ``m x max + (sum - max) / 3`` (zb40). Exact when the slowest stage is the last or all
  are equal (Qi et al.'s ``(p - 1) F`` of idle), an upper bound otherwise (tests/test_unequal_stages.py).
* DualPipe: no closed form is derived. A rank runs half the micro-batches through each of its two stages and
  pairs one direction's forward with the other's backward, so a slow stage paired with a fast one slows the
  chains through it, not its rank; on random stage sets (zb40) the table's bubble at the slowest rank's speed
  is short by up to 7% of the step or long by up to 15%. The step model takes the layout's own step
  (:func:`~llmsizing.pipeline_schedule.dualpipe_makespan`).

Both ZB-H1 and DualPipe are fixed orders: a stage (a rank, for DualPipe) runs its operations in the order the
schedule prescribes, each as soon as its inputs exist, and never reorders them for a late input. DualPipe's
order is its reference's ``step``; ZB-H1's is the order Qi et al. (2024, arXiv:2401.10241, Sec. 2.1, Fig. 3)
draw for equal stages, computed before the run, which :func:`~llmsizing.pipeline_schedule.pipeline_schedule`
times at each stage's own times with :func:`fixed_order_times`. A layout that let a stage fill any wait with
a weight gradient instead made the step jump by a weight gradient when a stage was 0.1% slower (zb40).
"""

from __future__ import annotations

from ._validate import check_int, check_number


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
    layer and the loss: :func:`~llmsizing.pipeline_schedule.pipeline_schedule` lays it out the same), an
    upper bound elsewhere (a slow
    first stage hides the drain behind its own deferred weight gradients; tests/test_unequal_stages.py
    checks the bound on random stage sets). Before zb40 the step model charged the table's ``(p - 1) / (3m)``
    at the slowest stage's speed, ``(p - 1)(max - mean of the others) / 3`` longer."""
    m = check_int("micro_batches", micro_batches)
    t = _times(stage_times)
    return m * max(t) + (sum(t) - max(t)) / 3


def unbalanced_1f1b_makespan(stage_times, micro_batches: int, virtual_stages: int = 1) -> float:
    """A 1F1B step of ``micro_batches`` micro-batches whose stages take ``stage_times`` each (a micro-batch's
    forward and backward on that stage, first stage first): ``m x max + (sum - max) / v``. The slowest stage
    runs its ``m`` micro-batches back to back; the fill before its first and the drain after its last pass
    through every other stage once, at that stage's own speed. Interleaved (``v`` chunks a stage, each
    ``1/v`` of the stage's time), the fill and drain pass one chunk of each other stage: ``(sum - max) / v``,
    where equal stages give Narayanan et al.'s ``(pp - 1) t / v``. Exact when the slowest stage is the last
    (the output layer and the loss: :func:`~llmsizing.pipeline_schedule.pipeline_schedule` lays it out the
    same to the last digit, tests/test_unbalanced_pipeline.py; moved here from there by zb40), an upper
    bound when it sits elsewhere; equal stages give ``(m + (pp - 1) / v) t``, the ``(pp - 1) / (v m)``
    bubble. Charged at the slowest stage's speed, as the step model did before session 39, the bubble was
    ``(pp - 1)(max - mean of the others) / v`` longer
    (phi39, issue 35: prompted by the Phi-3.5-MoE row, whose last stage holds two layers and the output
    layer; :func:`llmsizing.moe_evidence.fill_drain_overcharge`). The step model's bubble
    (:func:`llmsizing.moe_time.schedule_bubble`) is this less ``m x max``, over ``m x max``. Checked against
    megatron-core's own schedules run under gloo (data/megatron_schedule_measured.csv, session 40): exact with
    the slowest stage last; with it first and ``m >= pp``, Megatron's step (and
    :func:`~llmsizing.pipeline_schedule.pipeline_schedule`'s) is ``(pp - 1) min(its forward, another stage's
    t)`` shorter: its warm-up forwards hide part of the fill (tests/test_megatron_schedule.py)."""
    m, v = check_int("micro_batches", micro_batches), check_int("virtual_stages", virtual_stages)
    t = _times(stage_times)
    return m * max(t) + (sum(t) - max(t)) / v
