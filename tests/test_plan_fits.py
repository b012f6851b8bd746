"""Issue 35 (fast17c): the planner's memory fit on several GPU types from each GPU type's fit alone, kept
(``plan_fits.fitting_plans``).

The oracle of the fit is :func:`llmsizing.plan_memory.fitting_plans` weighing all GPU types at once, on a
memory of its own (nothing shared with the path under test), compared exactly: columns, totals and order.
The oracle of the frame is plan() with the kept fits bypassed, each setting from scratch, against a walk
that keeps them, forward and reversed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from llmsizing import plan_fits, plan_memory, planner
from llmsizing.catalog import get_gpu, get_model
from llmsizing.network import get_node
from llmsizing.moe_layouts import ep_candidates
from llmsizing.plan_space import MAX_MOE_PLANS, MAX_PLANS, default_cp_degrees

GPUS = ("H100 SXM", "B200", "A100 80GB")


def _fit_args(model_name: str, seq: int, global_batch: int, gpus, **over):
    """The arguments plan()'s search gives fitting_plans, on a SearchMemory of its own."""
    model = get_model(model_name)
    gpu_list = [get_gpu(g) for g in gpus]
    domains = {g.name: get_node(None, g).scaleup_domain_gpus for g in gpu_list}
    tps = tuple(sorted({t for d in set(domains.values()) for t in planner._divisors(d)}))
    eps = ep_candidates(model, None) if model.is_moe else (1,)
    layouts = list(planner._kept_layouts(model, tps, 64, (0, 1, 2, 3), eps, False, False, (1,)))
    cps = default_cp_degrees(seq)
    kw = dict(seq=seq, precision="bf16-mixed", optimizer="adamw", attention="flash", stack="fused",
              optimizer_impl="foreach")
    by_ep = model.is_moe and len(eps) > 2

    def memory():
        return plan_memory.SearchMemory(model, kw, cps, "p2p", eps, False, by_ep)

    args = dict(gpu_list=gpu_list, domains=domains, limits=np.array([0.9 * g.memory_bytes for g in gpu_list]),
                global_batch=global_batch, max_gpus=16384, micros=(1, 2, 4), cps=cps,
                rcs=("none", "selective", "full"), partial=False, expert_tp=False,
                most=MAX_MOE_PLANS if model.is_moe else MAX_PLANS)
    args.update(over)
    return model, layouts, memory, args


def _same(a, b) -> None:
    cols_a, tot_a = a
    cols_b, tot_b = b
    assert (cols_a is None) == (cols_b is None)
    if cols_a is None:
        return
    assert list(cols_a) == list(cols_b)
    for k in cols_a:
        assert cols_a[k].dtype == cols_b[k].dtype == np.int64, k
        np.testing.assert_array_equal(cols_a[k], cols_b[k], err_msg=k)
    assert tot_a.dtype == tot_b.dtype
    assert tot_a.tobytes() == tot_b.tobytes()


@pytest.mark.parametrize("model_name, seq, global_batch", [
    ("granite-3.0-1b-a400m", 131072, 128), ("granite-3.0-1b-a400m", 32768, 512), ("olmoe-1b-7b", 32768, 256),
    ("llama-3-8b", 65536, 256)])
@pytest.mark.parametrize("gpus", [GPUS[:2], GPUS[::-1], GPUS[1:]])
def test_each_gpu_type_alone_gives_the_fit_of_all_at_once(model_name, seq, global_batch, gpus):
    model, layouts, memory, args = _fit_args(model_name, seq, global_batch, gpus, most=10**6)
    want = plan_memory.fitting_plans(model, layouts, memory(), **args)
    mem = memory()
    # the first GPU type alone first (a pick), then all of them: the first one's fit is kept
    one = {**args, "gpu_list": args["gpu_list"][:1], "limits": args["limits"][:1]}
    _same(plan_fits.fitting_plans(model, layouts, mem, **one),
          plan_memory.fitting_plans(model, layouts, memory(), **one))
    _same(plan_fits.fitting_plans(model, layouts, mem, **args), want)
    assert len(mem.__dict__["_plan_fits"]) == len(gpus)
    _same(plan_fits.fitting_plans(model, layouts, mem, **args), want)             # (all kept now)
    _same(plan_fits.fitting_plans(model, layouts, memory(), **args), want)        # (nothing kept)


@pytest.mark.parametrize("model_name, seq, global_batch", [
    ("granite-3.0-1b-a400m", 131072, 128), ("olmoe-1b-7b", 32768, 256), ("llama-3-8b", 65536, 256)])
def test_kept_totals_under_smaller_and_larger_limits_give_each_fit(model_name, seq, global_batch):
    """One memory's candidates weighed under limits that fall, rise and fall again (GPU types of one domain,
    each alone): a floor kept as total under a smaller limit is weighed again under a larger one, a total
    weighed under a larger one is reused under a smaller; each fit equals the fit on a memory of its own."""
    model, layouts, memory, args = _fit_args(model_name, seq, global_batch, ("H100 SXM",), most=10**6)
    mem = memory()
    for scale in (1.0, 2.4, 1.7, 0.5, 3.0, 1.0):
        one = {**args, "limits": args["limits"] * scale}
        _same(plan_fits.fitting_plans(model, layouts, mem, **one),
              plan_memory.fitting_plans(model, layouts, memory(), **one))
    assert len(mem.__dict__["_plan_totals"]) == 1          # (one set of candidates, every limit)


def test_candidates_beyond_a_larger_limit_are_not_weighed_again_under_a_smaller(monkeypatch):
    """Issue 38: a candidate whose floor was found beyond a limit is beyond any smaller limit too, so under a
    limit no larger than the largest before, no candidate is weighed again with a recomputation it was
    weighed with (every total kept, or a floor beyond); under a larger limit those beyond are weighed again.
    Each fit equals the fit on a memory of its own."""
    model, layouts, memory, args = _fit_args("llama-3-8b", 65536, 256, ("H100 SXM",), most=10**6)
    weighed = []
    real = plan_memory.table_totals

    def counted(memory, keys, rc, coef_id, rows, *a, **k):
        weighed.append((rc, rows.copy()))
        return real(memory, keys, rc, coef_id, rows, *a, **k)

    monkeypatch.setattr(plan_memory, "table_totals", counted)
    mem = memory()
    seen: dict = {}
    for scale, again in ((0.05, False), (0.02, False), (0.04, False), (0.05, False), (0.1, True),
                         (0.07, False)):
        weighed.clear()
        one = {**args, "limits": args["limits"] * scale}
        got = plan_fits.fitting_plans(model, layouts, mem, **one)
        twice = sum(len(np.intersect1d(rows, seen.get(rc, []))) for rc, rows in weighed)
        assert (twice > 0) == again, (scale, twice)
        for rc, rows in weighed:
            seen[rc] = np.union1d(seen.get(rc, []), rows)
        weighed.clear()
        _same(got, plan_memory.fitting_plans(model, layouts, memory(), **one))


@pytest.mark.parametrize("gpus", [GPUS, ("H100 SXM", "H200", "B200", "A100 80GB"), GPUS[1:]])
def test_a_fit_of_all_at_once_keeps_each_gpu_types_own_fit(gpus):
    """Issue 38: a search of several GPU types none of whose fits is kept (chapter 12's model pick) fits them
    all at once and keeps each GPU type's rows as its fit (one per distinct limit of the domain); each
    GPU type alone, and any two, then equal their fits on a memory of its own."""
    model, layouts, memory, args = _fit_args("olmoe-1b-7b", 8192, 512, gpus, most=10**6)
    mem = memory()
    _same(plan_fits.fitting_plans(model, layouts, mem, **args),
          plan_memory.fitting_plans(model, layouts, memory(), **args))
    assert len(mem.__dict__["_plan_fits"]) == len({float(x) for x in args["limits"]})
    called = []
    real = plan_fits._one_fit
    plan_fits._one_fit = lambda *a, **k: called.append(1) or real(*a, **k)
    try:
        for pick in [[k] for k in range(len(gpus))] + [[0, len(gpus) - 1], [len(gpus) - 1, 0]]:
            sub = {**args, "gpu_list": [args["gpu_list"][k] for k in pick], "limits": args["limits"][pick]}
            _same(plan_fits.fitting_plans(model, layouts, mem, **sub),
                  plan_memory.fitting_plans(model, layouts, memory(), **sub))
    finally:
        plan_fits._one_fit = real
    assert not called                                   # (every one of them kept)


def test_the_limit_on_plans_is_checked_on_all_gpu_types_with_the_same_message():
    model, layouts, memory, args = _fit_args("granite-3.0-1b-a400m", 32768, 512, GPUS[:2])
    cols, _ = plan_memory.fitting_plans(model, layouts, memory(), **args)
    n = len(cols["gpu"])
    per_gpu = max(np.bincount(cols["gpu"]))
    most = (per_gpu + n) // 4            # each GPU type's own rows within 2 x most, both together not
    assert per_gpu <= 2 * most < n
    args.update(most=most, in_all=2)
    with pytest.raises(ValueError) as want:
        plan_memory.fitting_plans(model, layouts, memory(), **args)
    with pytest.raises(ValueError) as got:
        plan_fits.fitting_plans(model, layouts, memory(), **args)
    assert str(got.value) == str(want.value)
    assert "on 2 GPU type(s)" in str(got.value)


def test_gpu_types_of_different_domains_take_the_fit_of_all_at_once(monkeypatch):
    model, layouts, memory, args = _fit_args("granite-3.0-1b-a400m", 32768, 512, GPUS[:2])
    domains = dict(args["domains"])
    domains["B200"] = 4                                  # (a made-up node: the layouts differ by GPU type)
    args["domains"] = domains
    monkeypatch.setattr(plan_fits, "_kept_fit", lambda *a: pytest.fail("kept per GPU type"))
    _same(plan_fits.fitting_plans(model, layouts, memory(), **args),
          plan_memory.fitting_plans(model, layouts, memory(), **args))


def test_the_kept_fits_are_bounded():
    model, layouts, memory, args = _fit_args("granite-3.0-1b-a400m", 32768, 512, GPUS[:1])
    mem = memory()
    for k in range(plan_fits.FITS_KEPT + 3):
        plan_fits.fitting_plans(model, layouts, mem, **{**args, "limits": args["limits"] * (1 - 0.01 * k)})
    assert len(mem.__dict__["_plan_fits"]) == plan_fits.FITS_KEPT


@pytest.mark.parametrize("values", [[0, 127], [-128, 5], [0, 128], [-129, 0], [0, 32767], [0, 32768],
                                    [-2**31, 2**31 - 1], [0, 2**31], [-2**40, 7]])
def test_narrowed_columns_hold_the_same_integers(values):
    x = np.array(values, dtype=np.int64)
    got = plan_fits._narrow(x)
    assert got.astype(np.int64).tolist() == values
    assert got.dtype.itemsize == min(s for s in (1, 2, 4, 8) if all(
        np.iinfo(f"int{8 * s}").min <= v <= np.iinfo(f"int{8 * s}").max for v in values))


MODEL = "granite-3.0-1b-a400m"
SETTINGS = (
    dict(seq=131072, global_batch=128, gpus=("H100 SXM",)),
    dict(seq=131072, global_batch=128, gpus=("H100 SXM", "B200")),
    dict(seq=131072, global_batch=128, gpus=("B200",)),
    dict(seq=32768, global_batch=512, gpus=("B200", "A100 80GB")),
    dict(seq=32768, global_batch=512, gpus=("H100 SXM", "B200"), cp_comm="all_gather"),
    dict(seq=32768, global_batch=256, gpus=("A100 80GB", "H100 SXM")),
)


def _clear() -> None:
    planner._search.cache_clear()
    plan_memory.kept_search_memory.cache_clear()


def _plan(setting):
    return planner.plan(MODEL, tokens=8e11, max_gpus=16384, **setting)


@pytest.fixture(scope="module")
def fresh():
    """Each setting planned from scratch with all GPU types weighed at once (the kept fits bypassed)."""
    out = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(planner, "fitting_plans", plan_memory.fitting_plans)
        for s in SETTINGS:
            _clear()
            out.append(_plan(s))
    _clear()
    return out


@pytest.mark.parametrize("order", ["forward", "reversed"])
def test_a_walk_keeping_the_fits_plans_the_same_frames(fresh, order):
    at = list(range(len(SETTINGS)))
    _clear()
    for i in at if order == "forward" else at[::-1]:
        got = _plan(SETTINGS[i])
        pd.testing.assert_frame_equal(got, fresh[i], check_exact=True)
        assert got.attrs == fresh[i].attrs
