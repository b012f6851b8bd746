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
  ``megatron/core/pipeline_parallel/schedules.py``: warm-up ``2(p - i - 1) + (v - 1)N`` chunk forwards,
  micro-batches in groups of ``N``, chunk after chunk; ``N = p`` unless ``microbatch_group`` says otherwise:
  :func:`check_microbatch_group`). Bubble ``(p - 1) / (v m)`` for every group size Megatron-Core accepts.
* ``"zero-bubble"``: ZB-H1 (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", ICLR, arXiv:2401.10241,
  Sec. 2.1, Fig. 3 top): the backward is split into the input gradient ``B`` (half of it) and the weight
  gradient ``W``; ``B`` keeps 1F1B's place, so the backward chain comes back sooner, and each ``W`` is
  deferred to the stage's idle slots, but no stage holds more than ``p`` micro-batches whose ``W`` is still to
  run (1F1B's first stage: the paper's memory bound), so a stage runs a pending ``W`` before a forward that
  would exceed it. Bubble ``(p - 1)(F + B - W)``, ``(p - 1) / (3m)`` at the default times.

* ``"dualpipe"``: DeepSeek's DualPipe (DeepSeek-V3 report, arXiv:2412.19437, Sec. 3.2.1, Fig. 5; the
  ``deepseek-ai/DualPipe`` reference's ``step``, its eight phases). Half of the micro-batches enter at the
  first rank, half at the last; rank ``i`` holds stage ``i`` of the first direction and stage ``p - 1 - i`` of
  the second (two copies of the weights), so a "stage" row here is a rank and ``chunk`` the direction. In the
  steady state a rank runs a forward of one direction together with a backward of the other (drawn back to
  back: overlapping hides communication, not compute, so the pair takes ``F + B``); the ramp-down splits
  backwards into ``B`` and ``W`` as zero bubble does. Needs ``p`` even and ``m >= 2p`` even. Bubble ``(p/2 -
  1)(F&B + B - 3W)`` (the report's Table 2), ``2 (p/2 - 1) / (3m)`` of the ideal at the default times (``F =
  1, B = 2, W = 1``; tests/test_pipeline_schedule.py). At other ratios the layout's bubble can differ from the
  table's (``B = 3F``: 6.5 against 7.5 at ``p = 8``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ._validate import check_choice, check_int, check_number

#: The most pipeline stages a layout may have: 1,024 (published runs use at most 64 or so; Megatron-LM's
#: 1T-parameter run has 64). Every stage is a row of the per-stage memory, so the bound keeps every call fast.
#: :mod:`llmsizing.parallel` re-exports it.
MAX_PP = 1024

#: The schedules :func:`pipeline_schedule` lays out.
SCHEDULES = ("1f1b", "interleaved", "zero-bubble", "dualpipe")


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
    forward: float | tuple           # a time per stage (1F1B only: pipeline_schedule) or one for all
    backward: float | tuple
    ops: tuple

    @property
    def makespan(self) -> float:
        """Time from the first forward to the last operation."""
        return max(o.end for o in self.ops)

    @property
    def ideal(self) -> float:
        """One stage's own work: ``m`` forwards and backwards of its layers (no bubble); with times per stage
        (:func:`pipeline_schedule`), the slowest stage's, the library's ``compute_s``."""
        f, b = _per_stage(self.forward, self.pp), _per_stage(self.backward, self.pp)
        return self.micro_batches * max(x + y for x, y in zip(f, b))

    @property
    def bubble_fraction(self) -> float:
        """Idle time over the ideal time, as :func:`~llmsizing.parallel.pipeline_bubble` counts it."""
        return (self.makespan - self.ideal) / self.ideal

    @property
    def in_flight(self) -> tuple:
        """Per stage (a rank, for DualPipe), the most micro-batches whose activations it holds at once, in
        units of one micro-batch through the stage's layers (an interleaved chunk counts ``1/v``): each is
        held from its forward's start to the end of its weight gradient ``W``, or of its backward where the
        backward is not split. A release at the same instant as a forward's start is counted first. The
        papers' counts: 1F1B ``p - i`` on stage ``i`` (Narayanan et al. 2021), ZB-H1 at most ``p`` (Qi et al.
        2024, Sec. 2.1), DualPipe ``p + 1`` (DeepSeek-V3 report, Table 2). Chapter 8."""
        out = []
        for i in range(self.pp):
            ops = [o for o in self.ops if o.stage == i]
            split = {(o.micro_batch, o.chunk) for o in ops if o.kind == "W"}
            events = sorted([(o.start, 1) for o in ops if o.kind == "F"]
                            + [(o.end, -1) for o in ops
                               if o.kind == "W" or (o.kind == "B" and (o.micro_batch, o.chunk) not in split)])
            held = peak = 0
            for _, step in events:
                held += step
                peak = max(peak, held)
            out.append(peak / self.virtual_stages)
        return tuple(out)


def check_microbatch_group(pp: int, micro_batches: int, group: int | None = None, *,
                           name: str = "micro_batches") -> int:
    """The micro-batch group of the interleaved schedule, checked as Megatron-Core checks it, or a
    :class:`ValueError` naming the parameter and the rule. Megatron-Core runs the micro-batches in groups of
    ``N`` (``microbatch_group_size_per_vp_stage``, ``--microbatch-group-size-per-virtual-pipeline-stage``;
    ``None``: its default ``N = pp``) and refuses ``N`` outside ``[pp, m]`` or a last group ``m mod N`` of
    1 to ``pp - 1`` micro-batches ("dependency bubbles in the pipeline"). So ``m >= pp`` always, and at the
    default ``m`` must be a multiple of ``pp``, as Megatron-LM required of every run before November 2024
    (MR !2117, commit 4295be1a, lifted it). Source: ``megatron/core/pipeline_parallel/schedules.py``,
    ``forward_backward_pipelining_with_interleaving``; ``model_parallel_config.py`` (the default);
    commit d98e8a6 (2026-08). Chapter 8."""
    p, m = check_int("pp", pp), check_int(name, micro_batches)
    if m < p:
        raise ValueError(f"{name}={m} is fewer than pp={p}: the interleaved schedule needs at least pp "
                         "micro-batches per step (Megatron-Core: microbatch_group_size_per_vp_stage in "
                         "[pp, m])")
    n = p if group is None else check_int("microbatch_group", group, minimum=p, maximum=m)
    if 0 < m % n < p:
        raise ValueError(f"{name}={m} in groups of microbatch_group={n} leaves a last group of {m % n}, "
                         f"fewer than pp={p}: Megatron-Core refuses it (m mod N must be 0 or at least pp)"
                         + ("; set microbatch_group (N, pp <= N <= m) to run a count that is not a multiple "
                            "of pp" if group is None else ""))
    return n


def pipeline_bubble(pp: int, microbatches: int, virtual_stages: int = 1, *,
                    microbatch_group: int | None = None) -> float:
    """The pipeline bubble of a 1F1B schedule, as a fraction of the ideal step time: ``(pp - 1) / m`` with
    ``m`` micro-batches, or ``(pp - 1) / (v * m)`` with ``v`` interleaved model chunks per stage (Narayanan et
    al. 2021, Sec. 2.2, Eq. 1 and the interleaved schedule). To report the bubble as a share of the actual
    step, use ``b / (1 + b)``.

    Interleaved (``v > 1``), ``m`` must be a count Megatron-Core runs (:func:`check_microbatch_group`):
    ``m >= pp``, and with ``microbatch_group`` given, the groups it allows (``None``: any it allows). A count
    that is not a multiple of ``pp`` runs with a group size set (e.g. ``m = 6``, ``pp = 4``: one group of 6,
    ``microbatch_group=6``; Megatron-Core's default ``N = pp`` refuses it), and laid out
    (:func:`pipeline_schedule`) its bubble is still ``(pp - 1) / (v m)``; the group sizes Megatron-Core
    refuses leave stages waiting for their own earlier chunks (tests/test_pipeline_schedule.py). Lives here
    since issue 34; :mod:`llmsizing.parallel` re-exports it."""
    pp = check_int("pp", pp, maximum=MAX_PP)
    m, v = check_int("microbatches", microbatches), check_int("virtual_stages", virtual_stages)
    if v > 1 and pp > 1:                               # None: m itself (one group) is allowed for any m >= pp
        check_microbatch_group(pp, m, m if microbatch_group is None and m % pp else microbatch_group,
                               name="microbatches")
    return (pp - 1) / (v * m)


def schedule_table(m: int, v: int, group: int) -> list[tuple[int, int]]:
    """Megatron-Core's ``get_schedule_table``: the interleaved schedule's forwards in order, as (micro-batch,
    chunk): micro-batches in groups of ``group`` (``microbatch_group_size_per_vp_stage``), each group through
    chunk 0, then chunk 1, ...; the last group holds ``m mod group`` micro-batches (``group`` if none are
    left over). Source: ``megatron/core/pipeline_parallel/schedules.py`` (as :func:`check_microbatch_group`).
    Chapter 8."""
    out = []
    for lo in range(0, m, group):
        hi = m if lo + group >= m else lo + group
        out += [(mb, c) for c in range(v) for mb in range(lo, hi)]
    return out


def _order(kind: str, p: int, m: int, v: int, i: int, group: int) -> list[tuple[str, int, int]]:
    """Stage ``i``'s operations in schedule order: (kind, micro-batch, chunk)."""
    if kind == "interleaved":
        total, table = m * v, schedule_table(m, v, group)

        def fwd(k):
            return ("F", *table[k])

        def bwd(k):                      # Megatron-Core's get_model_chunk_id(forward=False): chunks reversed
            return ("B", table[k][0], v - 1 - table[k][1])
        warm = min(2 * (p - i - 1) + (v - 1) * group, total)
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
                      forward: float | tuple = 1.0, backward: float | tuple = 2.0,
                      microbatch_group: int | None = None) -> PipelineSchedule:
    """Lay out one schedule (:data:`SCHEDULES`) of ``pp`` stages and ``micro_batches`` micro-batches in time
    (``virtual_stages`` model chunks per stage for ``"interleaved"``, whose chunks take ``1/v`` of a stage's
    times; ignored otherwise; their micro-batches in groups of ``microbatch_group``, ``pp`` by default,
    checked by :func:`check_microbatch_group`). ``"1f1b"`` and ``"interleaved"`` also take ``forward`` and
    ``backward`` as one time per stage (``pp`` of each: stages of unequal work, e.g. the last one holding the
    output layer and the loss, each of its chunks ``1/v`` of it; :func:`unbalanced_1f1b_makespan`).
    Chapter 8."""
    kind = check_choice("kind", kind, SCHEDULES)
    p = check_int("pp", pp, maximum=64)
    m = check_int("micro_batches", micro_batches, maximum=512)
    if kind not in ("1f1b", "interleaved") and not (_scalar(forward) and _scalar(backward)):
        raise TypeError(f"forward and backward per stage are for kind='1f1b' or 'interleaved' only, got "
                        f"kind={kind!r}")
    if kind == "dualpipe":
        return _dualpipe(p, m, check_number("forward", forward, allow_equal=False, maximum=1e6),
                         check_number("backward", backward, allow_equal=False, maximum=1e6))
    v = check_int("virtual_stages", virtual_stages, maximum=16) if kind == "interleaved" else 1
    group = check_microbatch_group(p, m, microbatch_group) if kind == "interleaved" else 0
    forward, backward = _stage_times("forward", forward, p), _stage_times("backward", backward, p)
    tfs, tbs = [x / v for x in _per_stage(forward, p)], [x / v for x in _per_stage(backward, p)]
    split = kind == "zero-bubble"
    orders = [_order(kind, p, m, v, i, group) for i in range(p)]
    done: dict[tuple[str, int, int], float] = {}          # (kind, virtual stage, micro-batch) -> end
    free = [0.0] * p
    pos = [0] * p
    pending_w: list[list[tuple[int, int]]] = [[] for _ in range(p)]
    held = [0] * p
    ops: list[PipelineOp] = []

    def deps(i, op):
        what, mb, c = op
        vs = c * p + i
        if what == "F":
            return [("F", vs - 1, mb)] if vs > 0 else []
        return [("B", vs + 1, mb)] if vs < p * v - 1 else [("F", vs, mb)]

    def run(i, what, mb, c, start, length):
        held[i] += {"F": 1, "W": -1}.get(what, 0) if split else 0   # micro-batches whose W is still to run
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
                    full = op[0] == "F" and held[i] >= p          # ZB-H1: no more in flight than 1F1B's p
                    if split and pending_w[i] and (start > free[i] or full):   # an idle slot, or memory: a W
                        mb, c = pending_w[i].pop(0)
                        run(i, "W", mb, c, free[i], tbs[i] / 2)
                    else:
                        what, mb, c = op
                        tf, tb = tfs[i], tbs[i]
                        run(i, what, mb, c, start, tf if what == "F" else (tb / 2 if split else tb))
                        if split and what == "B":
                            pending_w[i].append((mb, c))
                        pos[i] += 1
                    progress = True
                elif split and pending_w[i]:
                    mb, c = pending_w[i].pop(0)
                    run(i, "W", mb, c, free[i], tbs[i] / 2)
                    progress = True
            elif pending_w[i]:
                mb, c = pending_w[i].pop(0)
                run(i, "W", mb, c, free[i], tbs[i] / 2)
                progress = True
        if not progress:                                   # cannot happen for these schedules; a guard
            raise RuntimeError(f"the {kind} schedule deadlocked (pp={p}, micro_batches={m}, v={v})")
    name = {"1f1b": "1F1B", "interleaved": f"interleaved 1F1B (v = {v})",
            "zero-bubble": "zero bubble (ZB-H1)"}
    return PipelineSchedule(name[kind], p, m, v, forward, backward, tuple(sorted(ops, key=lambda o: o.start)))


def _scalar(x) -> bool:
    return not isinstance(x, (tuple, list))


def _stage_times(name: str, value, p: int):
    """``value`` checked: one positive time, or ``p`` of them (a tuple)."""
    if _scalar(value):
        return check_number(name, value, allow_equal=False, maximum=1e6)
    if len(value) != p:
        raise ValueError(f"{name} per stage needs pp={p} times, got {len(value)}")
    return tuple(check_number(f"{name}[{i}]", x, allow_equal=False, maximum=1e6) for i, x in enumerate(value))


def _per_stage(value, p: int) -> tuple:
    return (value,) * p if _scalar(value) else tuple(value)


def unbalanced_1f1b_makespan(stage_times, micro_batches: int, virtual_stages: int = 1) -> float:
    """A 1F1B step of ``micro_batches`` micro-batches whose stages take ``stage_times`` each (a micro-batch's
    forward and backward on that stage, first stage first): ``m x max + (sum - max) / v``. The slowest stage
    runs its ``m`` micro-batches back to back; the fill before its first and the drain after its last pass
    through every other stage once, at that stage's own speed. Interleaved (``v`` chunks a stage, each
    ``1/v`` of the stage's time), the fill and drain pass one chunk of each other stage: ``(sum - max) / v``,
    where equal stages give Narayanan et al.'s ``(pp - 1) t / v``. Exact when the slowest stage is the last
    (the output layer and the loss: :func:`pipeline_schedule` lays it out the same to the last digit,
    tests/test_unbalanced_pipeline.py), an upper bound when it sits elsewhere; equal stages give
    ``(m + (pp - 1) / v) t``, the ``(pp - 1) / (v m)`` bubble. Charged at the slowest stage's speed, as the
    step model did before session 39, the bubble was ``(pp - 1)(max - mean of the others) / v`` longer
    (phi39, issue 35: prompted by the Phi-3.5-MoE row, whose last stage holds two layers and the output
    layer; :func:`llmsizing.moe_evidence.fill_drain_overcharge`). The step model's bubble
    (:func:`llmsizing.moe_time.schedule_bubble`) is this less ``m x max``, over ``m x max``. Checked against
    megatron-core's own schedules run under gloo (data/megatron_schedule_measured.csv, session 40): exact with
    the slowest stage last; with it first and ``m >= pp``, Megatron's step (and :func:`pipeline_schedule`'s)
    is ``(pp - 1) min(its forward, another stage's t)`` shorter: its warm-up forwards hide part of the fill
    (tests/test_megatron_schedule.py)."""
    m, v = check_int("micro_batches", micro_batches), check_int("virtual_stages", virtual_stages)
    if _scalar(stage_times) or not len(stage_times):
        raise TypeError(f"stage_times must be a tuple of one time per stage, got {stage_times!r}")
    t = [check_number(f"stage_times[{i}]", x, allow_equal=False) for i, x in enumerate(stage_times)]
    return m * max(t) + (sum(t) - max(t)) / v


def _dualpipe_blocks(p: int, m: int, rank: int) -> list:
    """DualPipe's operations on ``rank``, phase by phase (the reference's ``step``): blocks of (kind,
    direction, micro-batch) run back to back once all their inputs exist; ``"Bz"`` is a backward whose
    weight gradient is deferred to a later ``"W"``. Phase 0: the direction entering on this half's end."""
    nh, hr = p // 2, min(rank, p - 1 - rank)
    direction = (0, 1) if rank < nh else (1, 0)
    nf, nb = [0, 0], [0, 0]

    def f(ph):
        nf[ph] += 1
        return ("F", direction[ph], nf[ph] - 1)

    def b(ph, zb=False):
        nb[ph] += 1
        return ("Bz" if zb else "B", direction[ph], nb[ph] - 1)

    w, ramp = ("W", None, None), nh - hr - 1
    out = [[f(0)] for _ in range(2 * ramp)]                       # 1: forwards of phase 0
    for _ in range(hr + 1):                                       # 2: both directions' forwards
        out += [[f(0)], [f(1)]]
    for _ in range(ramp):                                         # 3: B, W, F of phase 1 (zero bubble)
        out += [[b(1, True)], [w], [f(1)]]
    for i in range(m // 2 - p + hr + 1):                          # 4: the steady state, F and B paired
        out += [[f(0)], [b(1)]] if i == 0 and rank in (nh - 1, nh) else [[f(0), b(1)]]
        out += [[f(1), b(0)]]
    for _ in range(ramp):                                         # 5
        out += [[b(1)], [f(1), b(0)]]
    zb = False
    for i in range(hr + 1):                                       # 6: backwards, the later ones split
        if i == (hr + 1) // 2 and hr % 2 == 1:
            zb = True
        out += [[b(1, zb)]]
        if i == (hr + 1) // 2 and hr % 2 == 0:
            zb = True
        out += [[b(0, zb)]]
    for _ in range(ramp):                                         # 7
        out += [[w], [b(0, True)]]
    return out + [[w] for _ in range(hr + 1)]                     # 8: the deferred weight gradients


def _dualpipe(p: int, m: int, tf: float, tb: float) -> PipelineSchedule:
    if p % 2 or m % 2 or m < 2 * p:
        raise ValueError(f"the dualpipe schedule needs an even pp and an even micro_batches >= 2 pp "
                         f"(DualPipe's own assertions), got pp={p}, micro_batches={m}")
    blocks = [_dualpipe_blocks(p, m, r) for r in range(p)]
    done: dict = {}
    free, pos, later = [0.0] * p, [0] * p, [[] for _ in range(p)]
    ops: list[PipelineOp] = []

    def stage(r, d):
        return r if d == 0 else p - 1 - r

    def deps(r, op):
        kind, d, j = op
        if kind == "W":
            return []
        s = stage(r, d)
        if kind == "F":
            return [("F", d, s - 1, j)] if s > 0 else []
        return [("B", d, s + 1, j)] if s < p - 1 else [("F", d, s, j)]

    while any(pos[r] < len(blocks[r]) for r in range(p)):
        progress = False
        for r in range(p):
            if pos[r] == len(blocks[r]):
                continue
            need = [x for op in blocks[r][pos[r]] for x in deps(r, op)]
            if not all(x in done for x in need):
                continue
            t = max([free[r]] + [done[x] for x in need])
            for kind, d, j in blocks[r][pos[r]]:
                if kind == "W":
                    d, j = later[r].pop(0)
                length = tf if kind == "F" else (tb if kind == "B" else tb / 2)
                ops.append(PipelineOp(r, "B" if kind == "Bz" else kind, j + d * (m // 2), d, t, t + length))
                if kind != "W":
                    done[("F" if kind == "F" else "B", d, stage(r, d), j)] = t + length
                if kind == "Bz":
                    later[r].append((d, j))
                t += length
            free[r], pos[r], progress = t, pos[r] + 1, True
        if not progress:                                   # cannot happen for DualPipe's phases; a guard
            raise RuntimeError(f"the dualpipe schedule deadlocked (pp={p}, micro_batches={m})")
    return PipelineSchedule("DualPipe", p, m, 1, tf, tb, tuple(sorted(ops, key=lambda o: o.start)))


def published_bubble(kind: str, pp: int, *, virtual_stages: int = 1, forward: float = 1.0,
                     backward: float = 2.0, weight: float | None = None,
                     forward_backward: float | None = None) -> float:
    """A schedule's idle time per stage as its paper prints it, in the units of ``forward`` (one stage's
    forward), ``backward`` (its full backward), ``weight`` (the weight-gradient part of it, default half) and
    ``forward_backward`` (a forward and a backward run together, default their sum: overlap hides
    communication, not compute). The layouts of :func:`pipeline_schedule` are checked against these.

    * ``"1f1b"``: ``(p - 1)(F + B)`` (Narayanan et al. 2021, Sec. 2.2; DeepSeek-V3 report, Table 2).
    * ``"interleaved"``: ``(p - 1)(F + B) / v`` (Narayanan et al. 2021, Sec. 2.2.2).
    * ``"zero-bubble"``: ``(p - 1)(F + B - 2W)`` (the report's Table 2, its ZB1P; Qi et al. 2024, Sec. 2.1,
      write it ``(p - 1)(T_F + T_B - T_W)`` with their ``T_B`` the input-gradient part only).
    * ``"dualpipe"``: ``(p/2 - 1)(F&B + B - 3W)`` (the report's Table 2; ``p`` even).

    Chapter 8 quotes the DualPipe row."""
    kind = check_choice("kind", kind, SCHEDULES)
    p = check_int("pp", pp, maximum=64)
    v = check_int("virtual_stages", virtual_stages, maximum=16)
    f = check_number("forward", forward, allow_equal=False, maximum=1e6)
    b = check_number("backward", backward, allow_equal=False, maximum=1e6)
    w = b / 2 if weight is None else check_number("weight", weight, allow_equal=False, maximum=b)
    fb = f + b if forward_backward is None else check_number("forward_backward", forward_backward,
                                                             allow_equal=False, maximum=f + b)
    if kind == "1f1b":
        return (p - 1) * (f + b)
    if kind == "interleaved":
        return (p - 1) * (f + b) / v
    if kind == "zero-bubble":
        idle = (p - 1) * (f + b - 2 * w)
    else:
        if p % 2:
            raise ValueError(f"pp must be even for the dualpipe schedule (each rank holds two stages), "
                             f"got {p}")
        idle = (p / 2 - 1) * (fb + b - 3 * w)
    if idle < 0:
        raise ValueError(f"weight={w:g} is too large a share of backward={b:g}: the {kind} formula "
                         f"goes negative ({idle:g})")
    return idle


def dualpipe_rank_mean(per_stage) -> tuple:
    """DualPipe's per-rank mean of stages ``i`` and ``pp - 1 - i``: rank ``i`` holds both and runs half the
    micro-batches through each (:func:`~llmsizing.comm.step_compute_time_s`)."""
    n = len(per_stage)
    return tuple((per_stage[i] + per_stage[n - 1 - i]) / 2 for i in range(n))


def _run_ends(order) -> list[bool]:
    """For each operation of ``order`` (:func:`_order`): whether it is a backward that ends a run of its
    chunk's consecutive backwards (the next backward in the order is of another chunk, or there is none)."""
    bwd = [n for n, op in enumerate(order) if op[0] == "B"]
    ends = [False] * len(order)
    for a, b in zip(bwd, bwd[1:] + [None]):
        ends[a] = b is None or order[b][2] != order[a][2]
    return ends


def grad_reduce_runs(pp: int, micro_batches: int, virtual_stages: int) -> int:
    """How many times a model chunk's gradient is reduce-scattered per step with ``grad_reduce="chunk_run"``
    (:class:`~llmsizing.parallel.Parallel`): the runs of consecutive backwards of one chunk in the schedule
    (:func:`_order`; the same on every stage). Megatron-LM's interleaved order runs each chunk's backward for
    ``pp`` micro-batches in a row, so ``micro_batches / pp`` runs; plain 1F1B (one chunk) one run."""
    p, m = check_int("pp", pp), check_int("micro_batches", micro_batches)
    return _runs(p, m, check_int("virtual_stages", virtual_stages))


@functools.lru_cache(maxsize=1024)
def _runs(p: int, m: int, v: int) -> int:
    """:func:`grad_reduce_runs` of checked arguments, kept per schedule (a whole number of the schedule
    alone)."""
    return sum(_run_ends(_order("interleaved" if v > 1 else "1f1b", p, m, v, 0, p))) // v


def grad_reduces(parallel, micro_batches: int) -> int:
    """ZeRO-3's gradient reduce-scatters per FSDP unit and step: one per micro-batch, or with
    ``grad_reduce="chunk_run"`` one per run of the unit's chunk (:func:`grad_reduce_runs`)."""
    if getattr(parallel, "grad_reduce", "") != "chunk_run":
        return micro_batches
    return grad_reduce_runs(parallel.pp, micro_batches, parallel.virtual_stages)


def reduce_scatter_windows(pp: int, micro_batches: int, virtual_stages: int, stage: int, units: int,
                           forward: float, backward: float, per_run: bool = False) -> tuple:
    """The window of each per-unit gradient reduce-scatter of one step on pipeline ``stage`` under
    (interleaved) 1F1B with FSDP2, in the units of ``forward`` and ``backward`` (one micro-batch's forward
    and backward on this stage, ``units`` FSDP units on it: one call per unit, chunk and micro-batch).

    FSDP2 (PyTorch ``torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py``, ``post_backward``) makes
    the compute stream wait for the previous reduce-scatter only when it issues the next one, after the next
    unit's backward; ``_fsdp_state.py``'s ``_root_post_backward_final_callback`` waits for the last one only
    at the step's last backward (``set_is_last_backward``). So a reduce-scatter's window is the compute
    between its issue and the next issue: one unit's backward inside a chunk's backward; for a chunk's last
    unit, every forward chunk the schedule (:func:`_order`) runs before the next backward, plus that
    backward's first unit; nothing after the step's last backward. Idle time is not counted (the bubble is
    its own term). ``per_run`` (``grad_reduce="chunk_run"``): only the backward that ends a run of its chunk
    (:func:`grad_reduce_runs`) issues the chunk's reduce-scatters, and a chunk's last unit's window runs to
    the next run's end. Used by :func:`zero3_exposed_s`; tests/test_reduce_scatter_window.py."""
    p, m = check_int("pp", pp), check_int("micro_batches", micro_batches)
    v, k = check_int("virtual_stages", virtual_stages), check_int("units", units)
    i = check_int("stage", stage, minimum=0, maximum=p - 1)
    if v > k:
        raise ValueError(f"units must be at least virtual_stages ({v}), got {k}")
    fwd = check_number("forward", forward) / k
    bwd = check_number("backward", backward) / k
    out = []
    for units_before, n_f, n_b, whole in _window_counts(p, m, v, i, k, bool(per_run)):
        out += [bwd] * units_before
        out.append(bwd + fwd * n_f + bwd * n_b if whole else 0.0)
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def _window_counts(p: int, m: int, v: int, i: int, k: int, per_run: bool) -> tuple:
    """:func:`reduce_scatter_windows`' schedule in whole numbers, one row per reduce-scatter issue of stage
    ``i``'s order (:func:`_order`): ``(units_before, n_f, n_b, whole)``, the issuing chunk's units but its
    last (each a window of one unit's backward), the units of the forwards and of the backwards between this
    issue and the next, and whether a next issue follows (a window of 0 after the step's last). The counts
    depend on the schedule alone, not on the seconds: kept per schedule (a pure function of its arguments,
    so the windows are the same floats whatever was asked before), and each stretch between two issues is
    counted once instead of the rest of the order scanned per issue (the planner's step times call this
    for every stage of every ZeRO-3 layout under a pipeline)."""
    per_chunk = [k // v + (c < k % v) for c in range(v)]
    order = _order("interleaved" if v > 1 else "1f1b", p, m, v, i, p)
    issues = _run_ends(order) if per_run else [op[0] == "B" for op in order]
    at = [n for n, issued in enumerate(issues) if issued]
    rows = []
    for n, nxt in zip(at, at[1:] + [None]):
        between = order[n + 1:nxt] if nxt is not None else []
        n_f = sum(per_chunk[op[2]] for op in between if op[0] == "F")
        n_b = sum(per_chunk[op[2]] for op in between if op[0] == "B")
        rows.append((per_chunk[order[n][2]] - 1, n_f, n_b, nxt is not None))
    return tuple(rows)


def zero3_exposed_s(parallel, micro_batches: int, units: int, forward_s: float, backward_s: float,
                    traffic_s: float, per_run: bool | None = None) -> float:
    """Seconds of ZeRO-3's per-micro-batch backward traffic (``traffic_s`` per step: the gradient
    reduce-scatters, with the backward gathers if resharded) the step waits for, ``units`` calls per
    micro-batch on a stage whose micro-batch takes ``forward_s`` and ``backward_s``. Without a pipeline, each
    micro-batch's calls against its backward; under one (``parallel.pp > 1``), each call against its own
    window (:func:`reduce_scatter_windows`), on the stage that waits longest (the first: its cool-down is the
    longest), since every stage's last wait comes before the step's optimizer. ``per_run`` (default: the
    layout's ``grad_reduce == "chunk_run"``): ``units`` calls per run of a chunk's backwards instead."""
    m, p = micro_batches, parallel.pp
    run = getattr(parallel, "grad_reduce", "") == "chunk_run" if per_run is None else per_run
    if p == 1 and not run:
        return m * max(0.0, traffic_s / m - backward_s)
    ws = [reduce_scatter_windows(p, m, parallel.virtual_stages, i, units, forward_s, backward_s, run)
          for i in range(p)]
    return max(sum(max(0.0, traffic_s / len(w) - x) for x in w) for w in ws)


#: The :class:`~llmsizing.parallel.Parallel` fields of ZeRO-3 under a pipeline as the planner searches it
#: (issue 34), the form of :func:`~llmsizing.parallel.llama3_405b_layout` (Dubey et al. 2024, Sec. 3.3.2):
#: FSDP that gathers a stage's weights once per step and keeps them (``reshard_after_forward=False``, what
#: torchtitan's ``apply_fsdp`` does with PP; :class:`~llmsizing.parallel.Parallel` cites it) and
#: reduce-scatters a chunk's gradients once per run of its backwards (``grad_reduce="chunk_run"``,
#: :func:`grad_reduce_runs`).
PIPELINED_FSDP = {"reshard_after_forward": False, "grad_reduce": "chunk_run"}


def pipelined_zero_fields(zero: int, pp: int) -> dict:
    """The :class:`~llmsizing.parallel.Parallel` fields beyond ``zero`` of the planner's ZeRO stage ``zero``
    on ``pp`` stages: :data:`PIPELINED_FSDP` for ZeRO-3 under a pipeline, none otherwise (ZeRO-3 without one
    reshards after the forward, FSDP's default)."""
    return PIPELINED_FSDP if zero == 3 and pp > 1 else {}
