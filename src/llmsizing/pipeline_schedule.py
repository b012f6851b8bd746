"""Pipeline schedules, slot by slot (chapter 8): when each stage runs each micro-batch's forward and backward.

:func:`~llmsizing.parallel.pipeline_bubble` gives the bubble of a schedule as one number; this module lays the
schedule out in time, so that a figure can draw it and a test can check the number against the picture. Every
stage runs its operations in the order the schedule prescribes, each as soon as the stage is free and its
inputs exist: a forward needs the previous (virtual) stage's forward of the same micro-batch, a backward the
next stage's backward. Times are in units of one forward of one stage (``forward=1``; a backward costs
``backward=2``, the usual two matrix multiplies per forward one).

* ``"1f1b"``: PipeDream-Flush (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
  Clusters Using Megatron-LM", Sec. 2.2): stage ``i`` runs ``p - i - 1`` warm-up forwards, then one forward
  and one backward in turn, then the remaining backwards. Bubble ``(p - 1) / m``.
* ``"interleaved"``: Megatron-LM's interleaved 1F1B with ``v`` model chunks per stage (same paper, Sec. 2.2.2;
  ``megatron/core/pipeline_parallel/schedules.py``: warm-up ``2(p - i - 1) + (v - 1)p`` chunk forwards,
  micro-batches in groups of ``p``, chunk after chunk). Bubble ``(p - 1) / (v m)``; needs ``m`` a multiple
  of ``p``.
* ``"zero-bubble"``: ZB-H1 (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", ICLR, Sec. 3): the backward is
  split into the input gradient ``B`` (half of it) and the weight gradient ``W``; ``B`` keeps 1F1B's place and
  each ``W`` is deferred to fill the stage's idle slots (here: the first idle slot after its ``B``), which
  removes most of the cool-down bubble at 1F1B's memory.

DeepSeek's DualPipe (DeepSeek-V3 report, arXiv:2412.19437, Sec. 3.2.1) feeds micro-batches from both ends of
the pipeline and overlaps one forward with one backward chunk; it is not laid out here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._validate import check_choice, check_int, check_number

#: The schedules :func:`pipeline_schedule` lays out.
SCHEDULES = ("1f1b", "interleaved", "zero-bubble")


@dataclass(frozen=True)
class PipelineOp:
    """One operation of one stage: ``kind`` ``"F"`` (forward), ``"B"`` (backward, or its input-gradient half
    in the zero-bubble schedule) or ``"W"`` (the weight-gradient half), of ``micro_batch`` in model ``chunk``,
    from ``start`` to ``end`` (units of one stage's forward)."""

    stage: int
    kind: str
    micro_batch: int
    chunk: int
    start: float
    end: float


@dataclass(frozen=True)
class PipelineSchedule:
    """A schedule laid out in time (:func:`pipeline_schedule`)."""

    name: str
    pp: int
    micro_batches: int
    virtual_stages: int
    forward: float
    backward: float
    ops: tuple

    @property
    def makespan(self) -> float:
        """Time from the first forward to the last operation."""
        return max(o.end for o in self.ops)

    @property
    def ideal(self) -> float:
        """One stage's own work: ``m`` forwards and backwards of its layers (no bubble)."""
        return self.micro_batches * (self.forward + self.backward)

    @property
    def bubble_fraction(self) -> float:
        """Idle time over the ideal time, as :func:`~llmsizing.parallel.pipeline_bubble` counts it."""
        return (self.makespan - self.ideal) / self.ideal


def _order(kind: str, p: int, m: int, v: int, i: int) -> list[tuple[str, int, int]]:
    """Stage ``i``'s operations in schedule order: (kind, micro-batch, chunk)."""
    if kind == "interleaved":
        total = m * v

        def fwd(k):
            return ("F", (k // (p * v)) * p + k % p, (k // p) % v)

        def bwd(k):
            return ("B", (k // (p * v)) * p + k % p, v - 1 - (k // p) % v)
        warm = min(2 * (p - i - 1) + (v - 1) * p, total)
    else:
        total = m

        def fwd(k):
            return ("F", k, 0)

        def bwd(k):
            return ("B", k, 0)
        warm = min(p - i - 1, total)
    out = [fwd(k) for k in range(warm)]
    for j in range(total - warm):
        out += [fwd(warm + j), bwd(j)]
    return out + [bwd(j) for j in range(total - warm, total)]


def pipeline_schedule(kind: str = "1f1b", *, pp: int = 4, micro_batches: int = 8, virtual_stages: int = 2,
                      forward: float = 1.0, backward: float = 2.0) -> PipelineSchedule:
    """Lay out one schedule (:data:`SCHEDULES`) of ``pp`` stages and ``micro_batches`` micro-batches in time
    (``virtual_stages`` model chunks per stage for ``"interleaved"``, whose chunks take ``1/v`` of a stage's
    times; ignored otherwise). Chapter 8."""
    kind = check_choice("kind", kind, SCHEDULES)
    p = check_int("pp", pp, maximum=64)
    m = check_int("micro_batches", micro_batches, maximum=512)
    v = check_int("virtual_stages", virtual_stages, maximum=16) if kind == "interleaved" else 1
    if kind == "interleaved" and m % p:
        raise ValueError(f"micro_batches must be a multiple of pp ({p}) for the interleaved schedule, "
                         f"got {m}")
    tf = check_number("forward", forward, allow_equal=False, maximum=1e6) / v
    tb = check_number("backward", backward, allow_equal=False, maximum=1e6) / v
    split = kind == "zero-bubble"
    orders = [_order(kind, p, m, v, i) for i in range(p)]
    done: dict[tuple[str, int, int], float] = {}          # (kind, virtual stage, micro-batch) -> end
    free = [0.0] * p
    pos = [0] * p
    pending_w: list[list[tuple[int, int]]] = [[] for _ in range(p)]
    ops: list[PipelineOp] = []

    def deps(i, op):
        what, mb, c = op
        vs = c * p + i
        if what == "F":
            return [("F", vs - 1, mb)] if vs > 0 else []
        return [("B", vs + 1, mb)] if vs < p * v - 1 else [("F", vs, mb)]

    def run(i, what, mb, c, start, length):
        ops.append(PipelineOp(i, what, mb, c, start, start + length))
        done[(what, c * p + i, mb)] = start + length
        free[i] = start + length

    while any(pos[i] < len(orders[i]) or pending_w[i] for i in range(p)):
        progress = False
        for i in range(p):
            if pos[i] < len(orders[i]):
                op = orders[i][pos[i]]
                need = deps(i, op)
                if all(d in done for d in need):
                    start = max([free[i]] + [done[d] for d in need])
                    if split and pending_w[i] and start > free[i]:   # an idle slot: fill it with a W
                        mb, c = pending_w[i].pop(0)
                        run(i, "W", mb, c, free[i], tb / 2)
                    else:
                        what, mb, c = op
                        run(i, what, mb, c, start, tf if what == "F" else (tb / 2 if split else tb))
                        if split and what == "B":
                            pending_w[i].append((mb, c))
                        pos[i] += 1
                    progress = True
                elif split and pending_w[i]:
                    mb, c = pending_w[i].pop(0)
                    run(i, "W", mb, c, free[i], tb / 2)
                    progress = True
            elif pending_w[i]:
                mb, c = pending_w[i].pop(0)
                run(i, "W", mb, c, free[i], tb / 2)
                progress = True
        if not progress:                                   # cannot happen for these schedules; a guard
            raise RuntimeError(f"the {kind} schedule deadlocked (pp={p}, micro_batches={m}, v={v})")
    name = {"1f1b": "1F1B", "interleaved": f"interleaved 1F1B (v = {v})",
            "zero-bubble": "zero bubble (ZB-H1)"}
    return PipelineSchedule(name[kind], p, m, v, forward, backward, tuple(sorted(ops, key=lambda o: o.start)))
