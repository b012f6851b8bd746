"""The fuzz harness of test_fuzz.py, pushed to the edges (issue 20, "no silent wrong number"):

* **edge values** on every numeric argument of every public function the harness knows: subnormal floats
  (5e-324, 1e-311), the smallest normal float, tiny and huge numbers (1e-300, 2**53, 1e300) and huge integers
  (2**40, 2**53). Each call must refuse (``ValueError``/``TypeError`` with a message) or return only finite,
  non-negative figures, within the per-call CPU limit (:data:`test_fuzz.CALL_LIMIT_S`);
* **hand-made GPUs** (:class:`llmsizing.GPU` built field by field): a bad field is refused when the GPU is
  made, naming the field; a valid one, however slow, small or large, gives finite figures everywhere a
  catalogued GPU is accepted;
* **invariants between calls**: every ``plan()`` row fits when re-checked with ``training_memory``;
  ``min_gpus`` fits and one GPU fewer does not; more data-parallel GPUs never raise the per-GPU states under
  ZeRO; every cost is GPU-hours x price.

The example counts follow ``LLMSIZING_FUZZ_EXAMPLES`` (small in CI; ``make fuzz`` runs many more).
"""

from __future__ import annotations

import dataclasses
import math
import sys

import numpy as np
import pytest
from conftest import small_models
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fuzz import (ALLOWED, CH6_FUNCTIONS, EXAMPLES, FUNCTIONS, FUZZ, PART3_FUNCTIONS, RETURNED, Arg, Spec,
                       _call, _close, figures, valid_kwargs)

import llmsizing as L
from llmsizing import cost, hardware, memory, serve, time_cost
from llmsizing.catalog import LINK_DIRECTIONS, MAX_GPU_MIB, MIN_GPU_SPEED
from llmsizing.layouts import USABLE_FRACTION

# ----------------------------------------------------------------------------- the functions
SPECS: dict[str, Spec] = {**FUNCTIONS, **CH6_FUNCTIONS, **PART3_FUNCTIONS}


def _sibling_specs() -> dict[str, Spec]:
    """The specs kept beside their chapters' tests (serving, chapters 7 and 11), charts left out (slow)."""
    import test_ch7_data_parallel
    import test_ch11_cost
    import test_fuzz_serving

    out = {**test_fuzz_serving.SPECS, **test_ch7_data_parallel.SPECS, **test_ch11_cost._fuzz_specs()}
    return {k: v for k, v in out.items() if not k.startswith("render")}


SPECS.update(_sibling_specs())
# a GPU type on which nothing fits is a row of NaN with fits=False and a why, by design: keep the rows that fit
SPECS["cost_by_gpu"] = SPECS["cost_by_gpu"]._replace(func=lambda **kw: time_cost.cost_by_gpu(**kw).query("fits"))

EDGE_FLOATS = (5e-324, -5e-324, 1e-311, sys.float_info.min, 1e-300, 1e-100, 1e-30, 1e-9, 2.0**31, 2.0**53,
               1e15, 1e300, sys.float_info.max)
EDGE_INTS = (2**16, 2**20, 2**31, 2**40, 2**53, 10**15)


def _is_number(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def _numeric_slots(kwargs: dict) -> list[tuple]:
    """(key, index or None, kind) for every number among the arguments, one level into lists and tuples."""
    slots = []
    for k, v in kwargs.items():
        if _is_number(v):
            slots.append((k, None, "int" if isinstance(v, (int, np.integer)) else "float"))
        elif isinstance(v, (list, tuple)):
            slots += [(k, i, "int" if isinstance(x, (int, np.integer)) else "float")
                      for i, x in enumerate(v) if _is_number(x)]
    return slots


@st.composite
def edge_calls(draw, spec: Spec):
    """A valid set of arguments with one number (or one number in a list) replaced by an edge value."""
    kwargs = valid_kwargs(draw, spec)
    slots = _numeric_slots(kwargs)
    if not slots:
        return kwargs, None
    key, i, kind = draw(st.sampled_from(slots))
    edge = draw(st.sampled_from(EDGE_INTS if kind == "int" else EDGE_FLOATS + EDGE_INTS))
    if i is None:
        kwargs[key] = edge
    else:
        items = list(kwargs[key])
        items[i] = edge
        kwargs[key] = type(kwargs[key])(items)
    return kwargs, key


def check_edge_call(name: str, spec: Spec, kwargs: dict) -> None:
    """Refused with a message, or finite non-negative figures (the CPU limit is _call's)."""
    try:
        result = _call(f"{name} (edge values)", spec.func, kwargs)
    except ALLOWED as exc:
        assert str(exc), f"{name}: an empty error message"
        return
    RETURNED[f"{name} (edge values)"] = RETURNED.get(f"{name} (edge values)", 0) + 1
    for x in figures(result):
        assert math.isfinite(x), f"{name}({kwargs}) returned a non-finite figure: {x}"
        if not name.startswith("fmt_"):
            assert x >= 0, f"{name}({kwargs}) returned a negative figure: {x}"
    _close(result)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_fuzz_edge_values(name):
    spec = SPECS[name]
    slow = name in ("plan", "cost_by_gpu", "cost_vs_gpus", "serving_cost_by_gpu", "replicas_for")

    @settings(FUZZ, max_examples=max(3, EXAMPLES // 5) if slow else EXAMPLES)
    @given(edge_calls(spec))
    def run(call):
        check_edge_call(name, spec, call[0])
    run()


# ----------------------------------------------------------------------------- hand-made GPUs
_SPEEDS = st.one_of(st.floats(MIN_GPU_SPEED, 1e5), st.sampled_from([MIN_GPU_SPEED, 1e5, 2.0**53]))


@st.composite
def hand_made_gpus(draw, name: str | None = None) -> L.GPU:
    """A valid hand-made GPU: any speed from a GFLOP/s (a MB/s) up, any memory from 1 MiB to 1 PiB, priced or
    not."""
    return L.GPU(
        name=name or draw(st.sampled_from(["Custom", "Tiny GPU", "Huge GPU"])), vendor="x",
        memory_marketed_gb=draw(st.one_of(st.none(), st.floats(1e-3, 1e6))),
        memory_mib=draw(st.one_of(st.integers(1, MAX_GPU_MIB), st.sampled_from([1, 1024, 81920, MAX_GPU_MIB]))),
        memory_source="", memory_bandwidth_gbps=draw(_SPEEDS), bf16_dense_tflops=draw(_SPEEDS),
        fp8_dense_tflops=draw(st.one_of(st.none(), _SPEEDS)), link="x", link_bandwidth_gbps=draw(_SPEEDS),
        link_direction=draw(st.sampled_from(LINK_DIRECTIONS)),
        price_usd_per_gpu_hour=draw(st.one_of(st.none(), st.just(0.0), st.floats(0, 1e3, allow_subnormal=False))),
        price_source="",
        spec_source="", as_of="")


#: For each field of a GPU, values that must be refused when a GPU is made (naming the field).
BAD_GPU_FIELDS = {
    "name": ["", None, 3],
    "vendor": [None, 3],
    "memory_mib": [0, -1024, 2.0, 81920.5, None, "80", True, MAX_GPU_MIB + 1, np.float64(1024)],
    "memory_bandwidth_gbps": [0, -1, float("nan"), float("inf"), None, "3350", 5e-324, 1e-300, 1e300],
    "bf16_dense_tflops": [0, 0.0, -989.4, float("nan"), None, "989", True, 5e-324, 1e300],
    "fp8_dense_tflops": [0, -1, float("nan"), "1979", 5e-324],
    "link_bandwidth_gbps": [0, -900, float("nan"), None, 5e-324],
    "price_usd_per_gpu_hour": [-1, -0.01, float("nan"), float("inf"), "2.99", True, 5e-324],
    "memory_marketed_gb": [0, -80, float("nan"), "80"],
    "link_direction": ["both", "", None, 2],
}


@given(st.sampled_from(sorted((f, i) for f, vs in BAD_GPU_FIELDS.items() for i in range(len(vs)))))
@settings(FUZZ, max_examples=max(EXAMPLES, sum(map(len, BAD_GPU_FIELDS.values()))))
def test_fuzz_hand_made_gpu_fields(field_and_index):
    field, i = field_and_index
    value = BAD_GPU_FIELDS[field][i]
    with pytest.raises(ALLOWED) as e:
        _call("GPU (a bad field)", lambda **kw: dataclasses.replace(L.get_gpu("H100 SXM"), **kw), {field: value})
    assert field in str(e.value), f"GPU({field}={value!r}) was refused without naming {field}: {e.value}"


#: Functions that take one GPU, with the rest of a valid call (small inputs: the GPU is what varies).
GPU_CALLS = {
    "min_gpus": lambda g, m: L.min_gpus(m, g, batch=1, seq=256, max_gpus=4096),
    "training_time": lambda g, m: L.training_time(m, tokens=1e9, gpu=g, n_gpus=8, seq=256,
                                                  price_usd_per_gpu_hour=None if g.price_usd_per_gpu_hour
                                                  is not None else 1.0),
    "step_time": lambda g, m: L.step_time(m, g, None, batch=1, seq=256, grad_accum=4),
    "communication": lambda g, m: L.communication(m, L.Parallel(tp=1, dp=16, zero=3), batch=1, seq=256, gpu=g),
    "decode_step_roofline": lambda g, m: L.decode_step_roofline(m, g, batch=4, context=1024),
    "serving": lambda g, m: L.serving(m, g, prompt=256, output=64, batch=4),
    "serving_sweep": lambda g, m: L.serving_sweep(m, g, prompt=256, output=64),
    "replicas_for": lambda g, m: L.replicas_for(m, g, users=100, prompt=256, output=64, ttft_s=10, itl_s=1),
    "max_micro_batch": lambda g, m: L.max_micro_batch(m, g, 256),
    "min_gpus_for_bytes": lambda g, m: memory.min_gpus_for_bytes(1e12, g),
    "gpu_comparison": lambda g, m: hardware.gpu_comparison([g]),
    "cost_by_gpu": lambda g, m: L.cost_by_gpu(m, tokens=1e9, seq=256, gpus=[g], prices=None if
                                              g.price_usd_per_gpu_hour is not None else {g: 2.0}).query("fits"),
    "plan": lambda g, m: L.plan(m, tokens=1e9, gpus=[g], seq=256, global_batch=16, max_gpus=64, explain=False,
                                prices=None if g.price_usd_per_gpu_hour is not None else {g.name: 2.0}),
    "compare_gpus": lambda g, m: cost.compare_gpus("H100 SXM", g, prices={g: 1.5}),
}


@pytest.mark.parametrize("name", sorted(GPU_CALLS))
def test_fuzz_hand_made_gpus(name):
    spec = Spec(lambda gpu, model: GPU_CALLS[name](gpu, model), {})

    @settings(FUZZ, max_examples=max(3, EXAMPLES // 5) if name in ("plan", "cost_by_gpu") else EXAMPLES)
    @given(gpu=hand_made_gpus(), model=st.one_of(st.sampled_from(["gpt2", "llama-2-7b"]), small_models()))
    def run(gpu, model):
        check_edge_call(f"{name} (hand-made GPU)", spec, dict(gpu=gpu, model=model))
    run()


def test_fuzz_hand_made_gpu_without_a_price_is_refused_where_a_price_is_needed():
    g = dataclasses.replace(L.get_gpu("H100 SXM"), name="No price", price_usd_per_gpu_hour=None)
    assert L.min_gpus("llama-2-7b", g, batch=1, seq=4096).gpus >= 1          # memory needs no price
    for call, word in ((lambda: L.training_time("llama-2-7b", tokens=1e12, gpu=g, n_gpus=8, seq=4096),
                        "price_usd_per_gpu_hour"),
                       (lambda: L.serving("llama-2-7b", g), "price_usd_per_gpu_hour"),
                       (lambda: L.cost_by_gpu("llama-2-7b", tokens=1e12, seq=4096, gpus=[g]), "prices"),
                       (lambda: L.plan("llama-2-7b", tokens=1e12, gpus=[g], seq=4096, global_batch=64), "prices")):
        with pytest.raises(ValueError, match=word):
            call()


# ----------------------------------------------------------------------------- invariants between calls
FEW = settings(FUZZ, max_examples=max(3, EXAMPLES // 5))
GPUS = st.sampled_from(["A10", "A100 80GB", "H100 SXM", "B200"])
SMALL = st.one_of(st.just("gpt2"), small_models())


@FEW
@given(model=SMALL, gpu=GPUS, seq=st.sampled_from([128, 512, 2048]), gb=st.sampled_from([8, 16, 64]),
       max_gpus=st.integers(1, 64), price=st.one_of(st.none(), st.floats(0.01, 100)), data=st.data())
def test_fuzz_plan_rows_fit_when_rechecked(model, gpu, seq, gb, max_gpus, price, data):
    """Each plan() row's per-GPU memory is training_memory's for that row, within the usable share of the GPU;
    the layout reaches the global batch; its cost is GPU-hours x price; only Pareto rows are marked."""
    prices = None if price is None else {gpu.lower(): price}              # any spelling get_gpu takes
    df = _call("plan (invariants)", L.plan, dict(model=model, tokens=1e10, gpus=(gpu,), seq=seq, global_batch=gb,
                                                  max_gpus=max_gpus, prices=prices, explain=False))
    g = L.get_gpu(gpu)
    p = g.price_usd_per_gpu_hour if price is None else price
    for i in data.draw(st.lists(st.integers(0, max(len(df) - 1, 0)), max_size=3, unique=True)) if len(df) else []:
        r = df.iloc[i]
        par = L.job.Job.from_plan_row(r, model, seq=seq).parallel           # (its interleaving: issue 34)
        t = L.training_memory(model, batch=int(r.micro_batch), seq=seq, grad_accum=int(r.grad_accum),
                              parallel=par, **L.planner.recompute_kwargs(r))
        assert t.total_bytes == pytest.approx(r.memory_per_gpu_bytes, rel=1e-6)
        assert t.total_bytes <= USABLE_FRACTION * g.memory_bytes * (1 + 1e-9)
        assert r.n_gpus == r.tp * r.cp * r.pp * r.dp and r.micro_batch * r.grad_accum * r.dp == gb
        assert r.n_gpus <= max_gpus
        assert r.cost_usd == pytest.approx(r.gpu_hours * p, rel=1e-9)
        assert 0 < r.mfu <= 1


@FEW
@given(model=SMALL, gpu=GPUS, batch=st.integers(1, 8), seq=st.sampled_from([256, 1024, 4096]),
       recompute=st.sampled_from(["none", "selective", "full"]), offload=st.booleans())
def test_fuzz_min_gpus_fits_and_one_fewer_does_not(model, gpu, batch, seq, recompute, offload):
    kw = dict(batch=batch, seq=seq, recompute=recompute, offload=offload)
    try:
        p = _call("min_gpus (invariants)", L.min_gpus, dict(model=model, gpu=gpu, **kw))
    except ValueError:
        return                                                           # nothing fits within 65,536 GPUs
    t = L.training_memory(model, batch=batch, seq=seq, recompute=recompute, parallel=p.parallel)
    assert t.total_bytes <= USABLE_FRACTION * L.get_gpu(gpu).memory_bytes
    assert t.total_bytes == pytest.approx(p.total_bytes, rel=1e-12)
    if p.gpus > 1:
        with pytest.raises(ValueError, match="max_gpus"):
            L.min_gpus(model, gpu, max_gpus=p.gpus - 1, **kw)


@settings(FUZZ, max_examples=EXAMPLES)
@given(model=SMALL, zero=st.integers(0, 3), dps=st.lists(st.integers(1, 4096), min_size=2, max_size=2, unique=True),
       precision=st.sampled_from(["bf16-mixed", "fp32", "fp16-mixed"]), tp=st.sampled_from([1, 2]))
def test_fuzz_more_gpus_never_raise_the_per_gpu_states(model, zero, dps, precision, tp):
    lo, hi = sorted(dps)
    def states(dp):
        return _call("model_states (invariants)", L.model_states,
                     dict(model=model, precision=precision, parallel=L.Parallel(tp=tp, dp=dp, zero=zero, sp=tp > 1)))
    try:
        a, b = states(lo), states(hi)
    except ValueError:
        return                                                           # tp=2 that the heads refuse
    assert b.total_bytes <= a.total_bytes * (1 + 1e-12)
    for part in ("weights_bytes", "gradients_bytes", "optimizer_bytes"):
        assert getattr(b, part) <= getattr(a, part) * (1 + 1e-12)


@settings(FUZZ, max_examples=EXAMPLES)
@given(model=st.sampled_from(["gpt2", "llama-2-7b", "llama-3-70b"]), gpu=GPUS, tokens=st.floats(1e6, 1e13),
       n_gpus=st.integers(1, 65536), mfu=st.one_of(st.none(), st.floats(0.01, 0.7)),
       price=st.one_of(st.none(), st.floats(0, 100, allow_subnormal=False)))
def test_fuzz_cost_is_gpu_hours_times_price(model, gpu, tokens, n_gpus, mfu, price):
    t = _call("training_time (invariants)", L.training_time,
              dict(model=model, tokens=tokens, gpu=gpu, n_gpus=n_gpus, seq=2048, mfu=mfu,
                   price_usd_per_gpu_hour=price))
    p = L.get_gpu(gpu).price_usd_per_gpu_hour if price is None else price
    assert t.price_usd_per_gpu_hour == p
    for h, c in ((t.gpu_hours, t.cost_usd), (t.gpu_hours_low, t.cost_usd_low), (t.gpu_hours_high, t.cost_usd_high)):
        assert c == pytest.approx(h * p, rel=1e-12)
    assert t.gpu_hours == pytest.approx(t.days * 24 * n_gpus, rel=1e-12)
    s = serve.serving(model, gpu, price_usd_per_gpu_hour=price)
    assert s.usd_per_hour == pytest.approx(p * s.tp, rel=1e-12)


@FEW
@given(model=st.sampled_from(["gpt2", "llama-2-7b"]), gpus=st.lists(GPUS, min_size=1, max_size=3, unique=True),
       price=st.floats(0.01, 100), data=st.data())
def test_fuzz_cost_by_gpu_prices_every_spelling(model, gpus, price, data):
    """A price given under any spelling get_gpu accepts is the one used: cost = GPU-hours x that price."""
    priced = data.draw(st.sampled_from(gpus))
    spelling = data.draw(st.sampled_from([priced, priced.lower(), priced.upper(), priced.replace(" ", "-")]))
    df = _call("cost_by_gpu (invariants)", time_cost.cost_by_gpu,
               dict(model=model, tokens=1e11, seq=1024, gpus=gpus, prices={spelling: price}))
    assert sorted(df["gpu"]) == sorted(gpus)                              # one row per GPU
    for r in df[df["fits"]].itertuples():
        p = price if r.gpu == priced else L.get_gpu(r.gpu).price_usd_per_gpu_hour
        assert r.price_usd_per_gpu_hour == p
        assert r.cost_usd == pytest.approx(r.gpu_hours * p, rel=1e-12)
