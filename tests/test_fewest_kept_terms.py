"""min_gpus keeps what does not depend on the GPU across GPU types (cost49): each layout's dp terms (every
piece's bytes at dp = a, fixed and sharded parts; fewest_gpus._kept_dp_terms), and under DualPipe the
every-rank total read off the runs its fit already weighed instead of one more training_memory. A speed change
only: the expected answers are the reference path's, the code before the change (_smallest_dp weighing its
runs on each call, copied below as the oracle, and training_memory of the winner), computed here, never
typed in; equal to the last digit (the repr of the whole Plan), asked GPU type after GPU type as
cost_by_gpu asks them."""

from __future__ import annotations

import math

import pytest

from llmsizing import fewest_gpus
from llmsizing.fewest_gpus import dualpipe_fewest_accum, min_gpus
from llmsizing.memory import training_memory

V3 = dict(precision="fp8-deepseek", comm_sms=20, mtp_depth=1)
CASES = (
    ("deepseek-v3", dict(batch=1, seq=4096, grad_accum=32, recompute="full", schedule="dualpipe", **V3)),
    ("deepseek-v3", dict(batch=1, seq=4096, grad_accum=8, recompute="full")),
    ("qwen3-30b-a3b", dict(batch=1, seq=4096, grad_accum=dualpipe_fewest_accum("qwen3-30b-a3b"),
                           schedule="dualpipe")),
    ("qwen3-30b-a3b", dict(batch=2, seq=8192, grad_accum=8, recompute="selective", accounted_split=True)),
    ("llama-3-70b", dict(batch=1, seq=8192, grad_accum=16)),
    ("llama-3-8b", dict(batch=1, seq=4096, grad_accum=64, schedule="dualpipe")),
)
GPUS = ("H800", "H100 SXM", "A100 80GB", "MI300X")


def _old_smallest_dp(par, limit, kw, model, unit=1, stages=None, first=None):
    """fewest_gpus._smallest_dp before cost49, as it was."""
    from llmsizing.memory import peak_room_bytes

    room = peak_room_bytes(limit)
    a = unit
    first = par(a) if first is None else first
    stages = (0, first.pp - 1) if stages is None else stages
    one = fewest_gpus._stage_runs(model, first, stages, kw)
    if first.zero == 0:
        return a if all(v <= room for r in one for v in r.pieces_bytes.values()) else None
    two = fewest_gpus._stage_runs(model, par(2 * a), stages, kw)
    dp = 1
    for r1, r2 in zip(one, two):
        for k, t1 in r1.pieces_bytes.items():
            t2 = r2.pieces_bytes[k]
            fixed, sharded = 2 * t2 - t1, 2 * a * (t1 - t2)
            if t1 <= room:
                continue
            if fixed >= room or sharded <= 0:
                return None
            dp = max(dp, math.ceil(sharded / (room - fixed) - 1e-9))
    return dp if a == 1 else a * math.ceil(dp / a)


def _outcome(model, gpu, kw):
    try:
        return repr(min_gpus(model, gpu, **kw))
    except ValueError as e:
        return f"ValueError: {e}"


def _clear():
    fewest_gpus._kept_stage_runs.cache_clear()
    fewest_gpus._kept_dp_terms.cache_clear()


@pytest.mark.parametrize("model, kw", CASES)
def test_min_gpus_gpu_after_gpu_equals_the_reference_path(monkeypatch, model, kw):
    ref = {}
    with monkeypatch.context() as mp:
        mp.setattr(fewest_gpus, "_smallest_dp", _old_smallest_dp)
        for g in GPUS:
            _clear()                                          # (each GPU weighed afresh)
            ref[g] = _outcome(model, g, kw)
    _clear()
    assert {g: _outcome(model, g, kw) for g in GPUS} == ref       # (the terms kept from GPU to GPU)
    assert {g: _outcome(model, g, kw) for g in reversed(GPUS)} == ref


@pytest.mark.parametrize("model, kw", [c for c in CASES if c[1].get("schedule") == "dualpipe"])
def test_dualpipe_total_is_training_memorys(model, kw):
    for g in GPUS[:2]:
        p = min_gpus(model, g, **kw)
        mem_kw = {k: v for k, v in kw.items() if k not in ("comm_sms",)}
        assert p.total_bytes == training_memory(model, parallel=p.parallel, **mem_kw).total_bytes


@pytest.mark.parametrize("model, kw", [c for c in CASES if c[1].get("schedule") == "dualpipe"
                                       or not c[0].startswith(("deepseek", "qwen3"))])
def test_every_smallest_dp_equals_the_reference(monkeypatch, model, kw):
    """Each layout's solved dp (min_gpus' starting point, which its fit check then corrects), on every call of
    the search, GPU after GPU: the kept terms' answer and the reference's (a mixture of experts under 1F1B
    solves its dp on fewest_arrays' arrays, not here)."""
    new, seen = fewest_gpus._smallest_dp, []

    def both(*args, **kws):
        got = new(*args, **kws)
        seen.append((got, _old_smallest_dp(*args, **kws)))
        return got

    _clear()
    with monkeypatch.context() as mp:
        mp.setattr(fewest_gpus, "_smallest_dp", both)
        for g in GPUS:
            _outcome(model, g, kw)
    assert seen and all(a == b for a, b in seen)
    assert any(a is not None for a, _ in seen)
