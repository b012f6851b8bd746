"""The planner's fast search (planner._search: candidates chosen with NumPy over all GPU types at once, step times
priced by planner._price from pieces the candidates share) gives exactly the frame of the direct search it
replaced: one step_time per candidate, one GPU type at a time. That direct search is kept below, as it stood
before the change (only its plan-count limit lifted), and whole plan() frames are compared through both: same
rows in the same order, the same dtypes, every number within 1e-9 relative."""

import functools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from llmsizing import catalog, planner
from llmsizing.flops import RECOMPUTE, training_flops_per_token
from llmsizing.layouts import _divisors, step_time
from llmsizing.memory import training_memory
from llmsizing.parallel import Parallel, check_layout
from llmsizing.pipeline_schedule import pipelined_zero_fields
from llmsizing.precision import RECIPES
from llmsizing.planner import _cp_coefficients, _memory_coefficients, _total_bytes, plan


def _reference_search(model, gpu_list, seq, global_batch, max_gpus, micros, rcs, zeros, precision, optimizer,
                      attention, stack, frac, eff, overlap, prices, nodes, max_pp, optimizer_impl="foreach", cps=(1,),
                      cp_comm="p2p", partial=False, vps=(1,), shard_pp=False):
    """planner._search as it stood before it was vectorised (commit 0a2cc1e), its plan-count limit lifted: for
    each layout, micro-batch and GPU type the lightest recomputation that fits, then one step_time per plan.
    With ``partial`` (issue 23), a plan that needs full recomputation gets the fewest layers per stage for which
    a direct training_memory call fits (a bisection over 1 .. layers per stage: the memory falls with them), its
    memory from that call and its step time from step_time with recompute_layers. Issue 34: interleaved pipelines
    (``vps``, each layout's chunks from planner.stage_chunk_options, micro-batches a multiple of pp) and the splits
    that count the embedding and the loss as a layer's place (plan_pricing.pipeline_split), every plan priced by
    step_time and weighed by training_memory on its own Parallel (recompute_layers per model chunk)."""
    from llmsizing.plan_pricing import chunk_top, pipeline_degrees, pipeline_split
    import pandas as pd

    kw = dict(seq=seq, precision=precision, optimizer=optimizer, attention=attention, stack=stack,
              optimizer_impl=optimizer_impl)
    model_flops_step = training_flops_per_token(model, seq=seq) * global_batch * seq
    node_of = dict(nodes)
    domains = {g.name: node_of[g.name].scaleup_domain_gpus for g in gpu_list}

    layouts = []                                          # (tp, pp, zero, v) the model and the engines allow
    for tp in sorted({t for d in set(domains.values()) for t in _divisors(d)}):
        for pp in pipeline_degrees(model, max_pp):
            try:
                check_layout(model, tp=tp, pp=pp)
            except ValueError:
                continue
            for zero in zeros:
                # (issue 34: a dense model's ZeRO-2/3 under a pipeline with plan(shard_under_pipeline=True))
                if zero >= 2 and pp > 1 and (model.is_moe or not shard_pp):
                    continue
                places = (model.layers + 2 * bool(pipeline_split(model, pp))) // pp
                for v in planner.stage_chunk_options(places, vps) if pp > 1 else (1,):
                    layouts.append((tp, pp, zero, v))

    if len({lay[:3] for lay in layouts}) * len(rcs) > planner.MAX_LAYOUTS * (1 + shard_pp):
        raise ValueError(
            f"plan() would weigh {len(layouts):,} layouts x {len(rcs)} recomputations of {model.name}, more than "
            f"the {planner.MAX_LAYOUTS:,} it searches in one call: lower max_pp={max_pp} (its {model.layers:,} layers "
            "have many divisors), or give fewer zero_stages, recomputes or gpus_per_node")

    candidates = []                 # (gpu, tp, cp, pp, zero, micro, dp, grad_accum, recompute, total bytes, layers)
    coef_cache: dict = {}
    for tp, pp, zero, v in layouts:
        split, top = pipeline_split(model, pp), chunk_top(model, pp, v)
        for cp, b in ((cp, b) for cp in cps for b in micros):
            if global_batch % b:
                continue
            dps = np.array([d for d in _divisors(global_batch // b) if global_batch // (b * d) >= pp
                            and (v == 1 or global_batch // (b * d) % pp == 0)], dtype=float)
            if max_gpus is not None:
                dps = dps[tp * cp * pp * dps <= max_gpus]
            if not len(dps):
                continue
            m = global_batch // (b * dps.astype(int))
            # memory depends on grad_accum only through "more than one micro-batch" (the gradients are then
            # alive in the forward) and the micro-batches in flight, which saturate at pp: two classes at most
            # (interleaved: the whole step in flight at m = pp, the warm-up's count from 2 pp on)
            accum_class = np.where(m > 1, max(2, pp), 1) if v == 1 else np.where(m > pp, 2 * pp, pp)
            totals: dict = {}

            def total(rc, b=b, dps=dps, accum_class=accum_class, tp=tp, pp=pp, zero=zero, totals=totals, cp=cp, v=v):
                """Per-GPU totals for each dp with recomputation rc: worked out when a GPU first needs them."""
                if rc not in totals:
                    t = np.empty(len(dps))
                    for c in np.unique(accum_class):
                        key = (tp, pp, zero, v, rc, int(c), cp)
                        if key not in coef_cache:
                            one = key[:-1] + (1,)
                            if one not in coef_cache:
                                coef_cache[one] = _memory_coefficients(model, {**kw, "recompute": rc}, tp, pp,
                                                                       zero, int(c), v=v)
                            if cp > 1:           # every degree of cp at once, from cp = 1 and two degrees
                                for d, coef in _cp_coefficients(model, {**kw, "recompute": rc}, tp, pp, zero,
                                                                int(c), cps, cp_comm, coef_cache[one],
                                                                v=v).items():
                                    coef_cache[key[:-1] + (d,)] = coef
                        sel = accum_class == c
                        t[sel] = _total_bytes(coef_cache[key], np.full(sel.sum(), float(b)), dps[sel])
                    totals[rc] = t
                return totals[rc]

            for g in gpu_list:
                if domains[g.name] % tp:                 # tensor parallelism stays inside the scale-up domain
                    continue
                limit = frac * g.memory_bytes
                chosen = np.zeros(len(dps), dtype=bool)
                for rc in rcs:                          # the lightest recomputation that fits, per dp
                    if chosen.all():                    # (a heavier one is never kept: not worked out)
                        break
                    fits = (total(rc) <= limit) & ~chosen
                    for j in np.flatnonzero(fits):
                        if zero and dps[j] * cp == 1:   # ZeRO over one data-parallel rank is no ZeRO at all
                            continue
                        n_rc, t = (top if rc == "full" else None), float(total(rc)[j])
                        # (issue 34: partial recomputation on even splits; an autocast recipe's only without
                        # interleaving, whose states depend on the layers rerun)
                        if rc == "full" and partial and n_rc > 1 and not split and (
                                v == 1 or not RECIPES[precision].autocast):
                            n_rc, t = _fewest_layers(model, g, Parallel(tp=tp, pp=pp, dp=int(dps[j]), zero=zero,
                                                                        sp=tp > 1, cp=cp, cp_comm=cp_comm,
                                                                        virtual_stages=v,
                                                                        **pipelined_zero_fields(zero, pp)),
                                                     b, int(m[j]), limit, kw)
                        candidates.append((g, tp, cp, pp, zero, b, int(dps[j]), int(m[j]), rc, t, n_rc, v))
                    chosen |= fits
    if not candidates:
        return None

    out, price_of = [], dict(prices)
    for g, tp, cp, pp, zero, b, dp, m, rc, total, n_rc, v in candidates:
        par = Parallel(tp=tp, pp=pp, dp=dp, zero=zero, sp=tp > 1, cp=cp, cp_comm=cp_comm, virtual_stages=v,
                       **pipeline_split(model, pp), **pipelined_zero_fields(zero, pp))
        st = step_time(model, g, par, batch=b, seq=seq, grad_accum=m, kernel_efficiency=eff, overlap=overlap,
                       recompute=rc, precision=precision, node=node_of[g.name],
                       recompute_layers=n_rc if n_rc is not None and n_rc < chunk_top(model, pp, v) else None)
        out.append((g.name, par.gpus, dp, tp, cp, pp, v, zero, tp > 1, b, m, rc, n_rc, total, float(g.memory_bytes),
                    st.step_s, price_of[g.name], st.peak_flops))
    df = pd.DataFrame(out, columns=["gpu", "n_gpus", "dp", "tp", "cp", "pp", "virtual_stages", "zero", "sp",
                                    "micro_batch", "grad_accum",
                                    "recompute", "recompute_layers", "memory_per_gpu_bytes", "capacity_bytes",
                                    "step_time_s", "price", "peak"])
    df["recompute_layers"] = df["recompute_layers"].astype("Int64")
    df["mfu"] = model_flops_step / (df["step_time_s"] * df["n_gpus"] * df["peak"])
    return df


@functools.cache
def _partial_total(model, par, batch, grad_accum, n, kw_items):
    """A direct training_memory call's total with ``n`` layers per stage recomputed. It depends on its arguments
    alone (not on the GPU type): memoised, so that a layout the reference weighs on several GPU types, and the
    bisection's last point, are worked out once (the same call, the same number)."""
    return training_memory(model, batch=batch, grad_accum=grad_accum, parallel=par, recompute="full",
                           recompute_layers=n, **{k: v for k, v in kw_items if k != "recompute"}).total_bytes


def _fewest_layers(model, gpu, par, batch, grad_accum, limit, kw):
    """The fewest layers per stage (1 .. layers per stage) whose partial recomputation fits ``limit``, by
    bisection on direct training_memory calls (:func:`_partial_total`), and the total there."""
    def total(n):
        return _partial_total(model, par, batch, grad_accum, n, tuple(sorted(kw.items())))

    # total(hi) fits: the search found full recomputation fits (hi: a model chunk's layers, an even split's)
    lo, hi = 1, model.layers // (par.pp * par.virtual_stages)
    while lo < hi:
        mid = (lo + hi) // 2
        if total(mid) <= limit:
            hi = mid
        else:
            lo = mid + 1
    return lo, total(lo)


def _both(monkeypatch, **kw):
    """plan(**kw) through the direct reference search and through the library's, each from scratch."""
    planner._search.cache_clear()
    with monkeypatch.context() as mp:
        mp.setattr(planner, "_search", _reference_search)
        slow = plan(**kw)
    planner._search.cache_clear()
    fast = plan(**kw)
    return slow, fast


def _assert_same(slow, fast):
    assert list(fast.columns) == list(slow.columns)
    assert list(fast.dtypes) == list(slow.dtypes)
    assert len(fast) == len(slow) > 0
    assert fast.attrs == slow.attrs
    for col in slow.columns:
        a, b = slow[col].to_numpy(), fast[col].to_numpy()
        if str(slow[col].dtype) == "Int64":              # recompute_layers: <NA> for none and selective
            a, b = slow[col].fillna(-1).to_numpy(), fast[col].fillna(-1).to_numpy()
        if slow[col].dtype.kind == "f":
            np.testing.assert_allclose(b, a, rtol=1e-9, atol=0, err_msg=col)
        else:
            assert (a == b).all(), col


SETTINGS = {
    # (256 sequences, not 512 as before testfast34: the same four GPU types, ZeRO stages 0-3, pipeline degrees
    # 1-41, chunk counts 1-40, micro-batches 1-4, recomputations none/selective/full, partial recomputation with
    # and without a pipeline, ZeRO-2/3 under pipelines with and without interleaving, and 902 of the 938
    # (GPU, tp, pp, ZeRO, chunks, recomputation) combinations; only data-parallel degree 512 goes: 4,992 rows
    # instead of 6,388, 1,717 partial plans instead of 2,293, the reference's search 4.0 s CPU instead of 5.9)
    "70b, four GPU types, every ZeRO stage and pipeline": dict(
        model="llama-3-70b", tokens=1e12, gpus=("H100 SXM", "A100 80GB", "V100", "MI300X"), seq=4096,
        global_batch=256, max_gpus=2048, shard_under_pipeline=True),
    "8b, whole catalogue, one overlap share, own node": dict(
        model="llama-3-8b", tokens=1e11, gpus=("A10", "L40S", "RTX 4090", "A100 40GB", "H100 SXM", "MI250X GCD"),
        seq=2048, global_batch=96, max_gpus=256, overlap=0.5, gpus_per_node=4, inter_node_gbps=12.5,
        kernel_efficiency=0.4),
    "70b at 32K, context parallelism by all-gather": dict(
        model="llama-3-70b", tokens=1e12, gpus=("H100 SXM", "B200"), seq=32768, global_batch=32, max_gpus=4096,
        cp_comm="all_gather"),
    "70b at 64K in FP8, the ring": dict(
        model="llama-3-70b", tokens=1e12, gpus=("H100 SXM", "H200"), seq=65536, global_batch=32, max_gpus=4096,
        precision="fp8-mixed"),
    # (every layer recomputed here: the reference's bisection for 4,400 partial plans would take a minute; the
    # other settings hold 240 to 970 partial plans each, with pipelines, cp, FP8 and a given overlap. The three
    # long-context settings take 32, 32 and 64 sequences, half the batch they took before issue 32's test-time
    # work: their frames still hold every ZeRO stage, cp degree and GPU type they held, with 1,950, 2,050 and
    # 360 rows instead of 2,960, 3,110 and 570, and the reference's bisections cost about 40% less)
    "405b over the whole catalogue at 8K, no GPU limit, full recomputation of every layer": dict(
        model="llama-3.1-405b", tokens=15e12, gpus=tuple(catalog.list_gpus()), seq=8192, global_batch=2048,
        partial_recompute=False),
    "405b at 128K on H100s (issue 23)": dict(
        model="llama-3.1-405b", tokens=8e11, gpus=("H100 SXM",), seq=131072, global_batch=64, max_gpus=16384),
    # (accounted splits whose slowest stage by time is the last while a middle one has the most FLOPs:
    # review22 M6, tests/test_slowest_stage.py; the fast search prices a few candidate stages per layout. A
    # 1.5B model fits without recomputing: no partial recomputation to compare)
    "zb-gpt-1.5b, accounted splits slowest at the loss": dict(
        model="zb-gpt-1.5b", tokens=1e11, gpus=("H100 SXM", "A100 80GB"), seq=4096, global_batch=64,
        max_gpus=96, partial_recompute=False),
    "8b, chosen micro-batches, recomputations, ZeRO stages and cp degrees": dict(
        model="llama-3-8b", tokens=1e11, gpus=("A100 80GB", "L40S"), seq=16384, global_batch=48,
        micro_batches=(1, 3), recomputes=("selective", "full"), zero_stages=(1, 3), cp_degrees=(1, 2, 4)),
}


@functools.cache
def _frames(name: str):
    """_both for SETTINGS[name], worked out once per setting and shared by the tests below, which only read the
    two frames (a test that changes one changes a copy). Under xdist, conftest.SHARED_UNITS sends
    test_the_comparison_can_fail to the worker that compares its setting."""
    with pytest.MonkeyPatch.context() as mp:
        return _both(mp, **SETTINGS[name])


@pytest.mark.parametrize("name", list(SETTINGS))
def test_fast_search_equals_the_direct_one(name):
    slow, fast = _frames(name)
    _assert_same(slow, fast)


def test_the_comparison_can_fail():
    """A step time off by one part in a million is caught."""
    slow, fast = _frames("70b at 32K, context parallelism by all-gather")
    off = fast.copy()
    off.loc[3, "step_time_s"] *= 1 + 1e-6
    with pytest.raises(AssertionError):
        _assert_same(slow, off)
    with pytest.raises(AssertionError):
        _assert_same(slow, fast.iloc[1:])
    off = fast.copy()                                   # one partial plan with one layer more recomputed
    i = off.index[off["recompute_layers"].fillna(0) > 1][0]
    off.loc[i, "recompute_layers"] += 1
    with pytest.raises(AssertionError):
        _assert_same(slow, off)


def test_the_settings_hold_partial_recomputation():
    """The comparisons above cover partial recomputation (issue 23) with pipelines, context parallelism and every
    ZeRO stage: fewer layers recomputed than a stage holds, on some plans of each kind."""
    for name, kw in SETTINGS.items():
        if not kw.get("partial_recompute", True):
            continue
        df = plan(**kw)
        layers = {"llama-3-70b": 80, "llama-3-8b": 32, "llama-3.1-405b": 126}[kw["model"]]
        part = df[(df["recompute"] == "full") & (df["recompute_layers"] < layers // df["pp"])]
        assert (part["pp"] > 1).any() and (part["pp"] == 1).any(), name
        assert part["recompute_layers"].min() >= 1, name
        if kw["seq"] >= 16384:
            assert (part["cp"] > 1).any(), name


def test_the_settings_hold_zero_2_and_3_under_pipelines():
    """Issue 34: the comparisons above cover ZeRO-2 and ZeRO-3 under a pipeline (FSDP as Meta ran it), with and
    without interleaving, listed where they can win: the setting with plan(shard_under_pipeline=True). The
    others search as before (the option is off by default) and hold none."""
    for name, kw in SETTINGS.items():
        df = plan(**kw)
        new = df[(df["zero"] >= 2) & (df["pp"] > 1)]
        if kw.get("shard_under_pipeline"):
            assert set(new["zero"]) == {2, 3}, name
            assert (new["virtual_stages"] > 1).any() and (new["virtual_stages"] == 1).any(), name
        else:
            assert new.empty, name


def test_405b_at_128k_over_the_whole_catalogue_is_searched():
    """Issue 23: at 128K tokens the planner searches context parallelism over every GPU type of the catalogue
    instead of refusing because too many plans fit (17,000 or so, beyond the old limit of 10,000)."""
    seq = 131072
    df = plan("llama-3.1-405b", tokens=8e11, gpus=catalog.list_gpus(), seq=seq, global_batch=128)
    assert len(df) > 10_000
    assert set(df["cp"]) >= {1, 2, 4, 8, 16, 32}
    assert (seq % (2 * df["cp"]) == 0).all() and (seq // df["cp"] >= 4096).all()
    assert (df["tp"] * df["cp"] * df["pp"] * df["dp"] == df["n_gpus"]).all()
    assert (df["micro_batch"] * df["grad_accum"] * df["dp"] == 128).all()
    assert (df["memory_per_gpu_bytes"] <= 0.9 * df["capacity_bytes"]).all()
    assert df["pareto"].any() and (df.loc[df["pareto"], "cp"] > 1).any()


# ---- issue 35: frames frozen before the search was made faster (tools/freeze_plans.py) ----
#: The settings whose plan() frames tests/reference/plans.npz holds, frozen on main (ccad0f5) before issue 35's
#: speed work touched the search: dense 8B, 70B and 405B, Mixtral-8x7B at 32K with its experts split by tp,
#: Qwen3-30B-A3B at 64K and DeepSeek-V3 over the whole catalogue. A faster search must give the same rows in
#: the same order, integers and strings equal, every float within 1e-9 relative.
FROZEN = {
    "8b, catalogue": dict(
        model="llama-3-8b", tokens=1e12, seq=8192, global_batch=512, max_gpus=1024,
        gpus=("A10", "L40S", "RTX 4090", "A100 40GB", "A100 80GB", "H100 SXM", "H200", "B200", "MI300X")),
    "70b, four GPU types": dict(
        model="llama-3-70b", tokens=1e12, seq=8192, global_batch=1024, max_gpus=4096,
        gpus=("H100 SXM", "H200", "B200", "A100 80GB")),
    "405b, catalogue": dict(
        model="llama-3.1-405b", tokens=15e12, seq=8192, global_batch=2048, gpus=tuple(catalog.list_gpus())),
    "mixtral at 32K, expert_tp, half hidden": dict(
        model="mixtral-8x7b", tokens=1e12, seq=32768, global_batch=64, gpus=("H100 SXM", "B200"),
        expert_tp=True, ep_overlap=0.5),
    "qwen3-30b-a3b at 64K": dict(
        model="qwen3-30b-a3b", tokens=1e12, seq=65536, global_batch=64, gpus=("H100 SXM",)),
    "deepseek-v3, catalogue": dict(
        model="deepseek-v3", tokens=14.8e12, seq=4096, global_batch=1920, gpus=tuple(catalog.list_gpus())),
}

#: One setting frozen with plan(shard_under_pipeline=True) (issue 34, off by default), in its own file so that
#: plans.npz stays the frames of the default search.
FROZEN_SHARDED = {
    "405b, catalogue, shard_under_pipeline": dict(FROZEN["405b, catalogue"], shard_under_pipeline=True)}

REFERENCE = Path(__file__).resolve().parent / "reference" / "plans.npz"
REFERENCE_SHARDED = REFERENCE.with_name("plans_sharded.npz")

#: The catalogue's prices when the frames were frozen (data/gpu_prices.csv before issue 38's re-check of
#: 2026-12-01): the frozen Pareto flags and row order rank plans by cost, so a price update is not a change
#: of the search. The frozen comparisons run at these prices (catalog.use_prices), the frozen file untouched.
FROZEN_PRICES = {"A10": 0.75, "L40S": 0.86, "RTX 4090": 0.69, "A100 40GB": 1.29, "A100 80GB": 1.79,
                 "H100 SXM": 2.99, "H200": 3.99, "B200": 4.99, "MI300X": 1.85, "H800": 2,
                 "H100 PCIe": 2.49, "H20": 1.5, "A100 PCIe 80GB": 1.64, "V100": 3.9, "L4": 0.43,
                 "RTX 6000 Ada": 0.77, "GB200": 10.5, "B300": 5.99, "MI250X GCD": 1.1, "MI325X": 1.95,
                 "MI355X": 2.95}


@pytest.fixture
def frozen_prices():
    catalog.use_prices(FROZEN_PRICES)
    yield
    catalog.use_prices(None)


#: The columns kept (the others follow from them and the settings: n_gpus, grad_accum, sp, capacity, and days,
#: MFU and cost from the step time); the GPU and the recomputation as their index in the setting's list.
FROZEN_COLUMNS = ("gpu", "dp", "tp", "cp", "pp", "ep", "virtual_stages", "zero", "micro_batch", "recompute",
                  "recompute_layers", "pareto", "step_time_s", "memory_per_gpu_bytes")


def frozen_columns(df, kw) -> dict:
    """The :data:`FROZEN_COLUMNS` of a plan() frame of the setting ``kw`` as NumPy arrays (small integers, the
    step time and memory as float64)."""
    names = [g if isinstance(g, str) else g.name for g in kw["gpus"]]
    out = {"gpu": np.array([names.index(g) for g in df["gpu"]], dtype=np.int16),
           "recompute": np.array([RECOMPUTE.index(r) for r in df["recompute"]], dtype=np.int8),
           "recompute_layers": df["recompute_layers"].fillna(-1).to_numpy(dtype=np.int16),
           "pareto": df["pareto"].to_numpy(dtype=bool)}
    for col in ("dp", "tp", "cp", "pp", "ep", "virtual_stages", "zero", "micro_batch"):
        out[col] = (df[col] if col in df else pd.Series(np.ones(len(df)))).to_numpy(dtype=np.int32)
    for col in ("step_time_s", "memory_per_gpu_bytes"):
        out[col] = df[col].to_numpy(dtype=float)
    return out


def _frozen_same(name, df, ref) -> None:
    """``df`` (a plan() frame of FROZEN[name]) against the frozen columns of ``name`` in ``ref``."""
    got = frozen_columns(df, {**FROZEN, **FROZEN_SHARDED}[name])
    assert sorted(k.split("|", 1)[1] for k in ref.files if k.split("|", 1)[0] == name) == sorted(got), name
    n = (df["tp"] * df["cp"] * df["pp"] * df["dp"]).to_numpy()
    assert (df["n_gpus"].to_numpy() == n).all()
    for col in FROZEN_COLUMNS:
        want = ref[f"{name}|{col}"]
        assert len(got[col]) == len(want), (name, col, len(got[col]), len(want))
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got[col], want, rtol=1e-9, atol=0, err_msg=f"{name}: {col}")
        else:
            assert (got[col] == want).all(), (name, col, int((got[col] != want).sum()))


@pytest.mark.parametrize("name", list(FROZEN) + list(FROZEN_SHARDED))
def test_search_equals_the_frozen_frames(name, frozen_prices):
    """Same rows, same order, every number within 1e-9 relative of the frame frozen before issue 35."""
    with np.load(REFERENCE if name in FROZEN else REFERENCE_SHARDED) as ref:
        _frozen_same(name, plan(**{**FROZEN, **FROZEN_SHARDED}[name]), ref)


def test_the_frozen_comparison_can_fail(frozen_prices):
    """A step time off by one part in a million, two rows swapped, or a GPU renamed is caught."""
    name = "mixtral at 32K, expert_tp, half hidden"
    df = plan(**FROZEN[name])
    with np.load(REFERENCE) as ref:
        _frozen_same(name, df, ref)
        off = df.copy()
        off.loc[2, "step_time_s"] *= 1 + 1e-6
        with pytest.raises(AssertionError):
            _frozen_same(name, off, ref)
        with pytest.raises(AssertionError):
            _frozen_same(name, df.iloc[[1, 0, *range(2, len(df))]].reset_index(drop=True), ref)
        off = df.copy()
        off.loc[0, "gpu"] = "B200" if off.loc[0, "gpu"] != "B200" else "H100 SXM"
        with pytest.raises(AssertionError):
            _frozen_same(name, off, ref)


def test_row_links_are_group_link_row_by_row():
    """plan_pricing._row_links (one group_link per GPU, GPUs of the group per scale-up domain and leaving it or
    not) gives every row what its own group_link call gives: GPUs with NVLink, a mesh (MI300X), PCIe and an
    NVL72 rack, groups inside and across domains, strides that do not divide the domain."""
    from llmsizing.network import get_node, group_link
    from llmsizing.plan_pricing import _row_links

    gpus = [catalog.get_gpu(n) for n in ("H100 SXM", "MI300X", "L40S", "GB200")]
    node_of = {g.name: get_node(None, g) for g in gpus}
    grid = [(g, size, stride) for g in range(len(gpus)) for size in (1, 2, 3, 4, 8, 16, 64, 96)
            for stride in (1, 2, 3, 4, 8, 16, 72)]
    gi, size, stride = (np.array(c) for c in zip(*grid))
    bw, alpha, across, per = _row_links(gpus, node_of, gi, size, stride)
    for j, (g, n, s) in enumerate(grid):
        gl = group_link(gpus[g], node_of[gpus[g].name], size=n, stride=s)
        want = (gl.bandwidth_gbps, gl.alpha_s, gl.across, gl.per_domain if gl.across else 1)
        assert (bw[j], alpha[j], across[j], per[j]) == want, (gpus[g].name, n, s)
    assert across.any() and (~across).any() and len(set(bw)) > 8


def test_searches_sharing_memory_coefficients_equal_fresh_ones():
    """plan_memory.kept_search_memory shares one SearchMemory between searches of the same model and recipe
    (issue 35: cost_by_gpu's search per GPU type, chapter 17's widget). A search after others that filled it
    (another GPU set, global batch and GPU limit) gives the frame a search from an empty one gives."""
    from llmsizing import plan_memory

    kw = dict(model="mixtral-8x7b", tokens=1e12, seq=32768, gpus=("H100 SXM", "B200"), global_batch=64)
    plan_memory.kept_search_memory.cache_clear()
    planner._search.cache_clear()
    fresh = plan(**kw)
    plan_memory.kept_search_memory.cache_clear()
    planner._search.cache_clear()
    plan(**{**kw, "gpus": ("A100 80GB",), "global_batch": 32})
    plan(**{**kw, "gpus": ("H100 SXM",), "max_gpus": 64})
    info = plan_memory.kept_search_memory.cache_info()
    assert info.hits == 1 and info.misses == 1                # the second search reused the first's
    shared = plan(**kw)
    assert plan_memory.kept_search_memory.cache_info().hits == 2
    pd.testing.assert_frame_equal(shared, fresh, check_exact=True)
