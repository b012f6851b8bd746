"""Issue 20, "no silent wrong number", round 2: one test per defect the fuzz found, and one per class where a
class can be enumerated (every flag of every public function, every field of a GPU, every GPU list).

Each expected number is derived from the library's own inputs (a catalogue price, GPU-hours), never copied from
its output. The new bounds are imported inside the tests, so that each test fails on its own (not at import)
against the code before the fix.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import pkgutil
import signal
import sys
from contextlib import contextmanager

import numpy as np
import pandas as pd
import pytest

import llmsizing as L
from llmsizing import audit, charts, comm, cost, finetune, hardware, memory, planner, serve, time_cost

H100 = L.get_gpu("H100 SXM")


@contextmanager
def cpu_limit(seconds: float = 1.0):
    """Fail (instead of hanging) if the block uses more than ``seconds`` of CPU time."""
    def stop(signum, frame):
        raise TimeoutError(f"more than {seconds} s of CPU time")
    previous = signal.signal(signal.SIGPROF, stop)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


# ============================================================================ 1. a flag given as a string
@pytest.mark.parametrize("bad", ["none", "false", "True", 0, 1, None])
def test_min_gpus_offload_is_a_flag(bad):
    with pytest.raises(TypeError, match="offload"):
        L.min_gpus("llama-2-7b", "H100 SXM", batch=1, seq=4096, offload=bad)


def test_min_gpus_offload_none_string_no_longer_means_offload():
    plain = L.min_gpus("llama-2-7b", "H100 SXM", batch=1, seq=4096)
    assert plain.parallel.offload == "none"
    assert L.min_gpus("llama-2-7b", "H100 SXM", batch=1, seq=4096, offload=False) == plain
    assert L.min_gpus("llama-2-7b", "H100 SXM", batch=1, seq=4096, offload=np.bool_(False)) == plain


#: A valid value for every required argument of the public functions below, by name.
REQUIRED = dict(model="llama-2-7b", gpu="H100 SXM", gpu_a="H100 SXM", gpu_b="A100 80GB", batch=1, seq=256,
                tokens=1e9, global_batch=64, n_bytes=1e9, n_params=10**6, optimizer="adamw", method="lora",
                claimed=1.0, library=1.0, context=256, kind="all-reduce", message_bytes=1e6, n=2, dp=2, zero=1,
                pp=2, microbatches=4, compute_s=1.0, comm_s=0.5, price_usd_per_gpu_hour=2.0, discount=0.1,
                m=2, k=2, achieved_tflops=1.0, dtype="bf16", prices=(2.0,), mfus=(0.4,),
                n_gpus=8, one_way_gbps=100.0, link="PCIe", cases=[("gpt2", 1, 128)])
#: Modules whose public functions are audited (charts and widgets draw; cli, prose and the measurement
#: readers take no flags of their own).
AUDITED = ("activations", "comm", "cost", "finetune", "flops", "hardware", "inference", "layouts", "memory",
           "parallel", "planner", "runs", "serve", "serve_step", "time_cost",
           # where issue 32 moved functions the modules above had (each function is audited where it is defined)
           "act_terms", "states", "footprint", "mfu", "job", "all_to_all",
           # and where the 600-line rule moved them in session 21
           "gpu_states", "zero_traffic",
           # and where min_gpus moved in session 23 (above the planner's arrays it weighs an MoE on)
           "fewest_gpus")
#: String parameters that are labels, not choices.
NOT_A_CHOICE = {("gpu_with_link", "link"), ("cost_vs_gpus", "gpu"), ("audit_cost_table", "gpu"),
                ("plan", "max_nodes"), ("step_time", "max_nodes")}   # (an int, None or "model": the model's own
#                                                                       node limit; 3 is valid)


def _public_functions():
    for mod_name in AUDITED:
        mod = importlib.import_module(f"llmsizing.{mod_name}")
        for name, f in sorted(vars(mod).items()):
            if name.startswith("_") or not inspect.isfunction(f) or f.__module__ != mod.__name__:
                continue
            sig = inspect.signature(f)
            params = [p for p in sig.parameters.values() if not p.name.startswith("_")
                      and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
            if any(p.default is p.empty and p.name not in REQUIRED for p in params):
                continue                          # takes an object (a StepTime, a Parallel): not auto-callable
            yield f"{mod_name}.{name}", f, params


def _cases(kind):
    out = []
    for qual, f, params in _public_functions():
        for p in params:
            if kind == "flag" and isinstance(p.default, bool):
                out.append(pytest.param(f, p.name, id=f"{qual}-{p.name}"))
            if kind == "choice" and isinstance(p.default, str) and (f.__name__, p.name) not in NOT_A_CHOICE:
                out.append(pytest.param(f, p.name, id=f"{qual}-{p.name}"))
    return out


#: Optional arguments some functions need for a valid call (one of two alternatives).
EXTRA = {"implied_mfu": dict(tokens=1e12, gpu_hours=1e8),
         "training_time": dict(n_gpus=8, tokens=1e9, seq=128),    # (or stages=[(tokens, seq), ...])
         "run_time": dict(n_gpus=8, tokens=1e9, seq=128),
         "replicas_for": dict(users=10)}                         # (or requests_per_s=)


def _required(f):
    kw = {p.name: REQUIRED[p.name] for p in inspect.signature(f).parameters.values()
          if p.default is p.empty and p.name in REQUIRED}
    return {**kw, **EXTRA.get(f.__name__, {})}


#: Flags that also take a few strings (a kind: footprint.GRAD_BUFFERS): another string is a bad value of a type
#: they take, a ValueError naming them; a non-bool of another type is still a TypeError.
FLAG_KINDS = {"grad_buffer"}


@pytest.mark.parametrize("func, flag", _cases("flag"))
def test_every_flag_of_every_public_function_refuses_a_non_bool(func, flag):
    """The class of defect 1: a flag goes through check_bool, so "none" (truthy) or 0 is refused, named."""
    kw = _required(func)
    func(**kw)                                    # the call is valid as it stands...
    for bad in ("none", "false", 1, None):        # ...and each non-bool flag is refused, naming the flag
        err = ValueError if flag in FLAG_KINDS and isinstance(bad, str) else TypeError
        with pytest.raises(err, match=flag):
            func(**{**kw, flag: bad})


@pytest.mark.parametrize("func, choice", _cases("choice"))
def test_every_choice_of_every_public_function_is_checked(func, choice):
    kw = _required(func)
    func(**kw)
    for bad in ("nonsense", 3):
        with pytest.raises((TypeError, ValueError), match=choice):
            func(**{**kw, choice: bad})


def test_the_flag_audit_covers_the_flags_the_issue_names():
    covered = {p.values[1] for p in _cases("flag")}
    assert {"offload", "causal", "lora_dropout", "dropout", "sp", "delayed_update"} - covered <= {"delayed_update"}


def test_choices_checked_where_they_change_nothing():
    with pytest.raises(ValueError, match="optimizer"):
        finetune.bytes_per_param("lora", optimizer="adamw8bit")
    with pytest.raises(ValueError, match="flops_convention"):
        L.implied_mfu("llama-2-7b", gpu="H100 SXM", seq=4096, tokens=1e12, gpu_hours=1e6, flops_convention="hfu")
    with pytest.raises(ValueError, match="compute"):
        L.decode_step_roofline("llama-2-7b", "H100 SXM", batch=1, context=1024, compute="int4")


# ============================================================================ 2. names and keys ignored
def test_cost_by_gpu_uses_a_price_under_any_spelling():
    df = time_cost.cost_by_gpu("llama-2-7b", tokens=1e11, seq=4096, gpus=["H100 SXM"], prices={"h100 sxm": 100})
    r = df.iloc[0]
    assert r.price_usd_per_gpu_hour == 100
    assert r.cost_usd == pytest.approx(r.gpu_hours * 100, rel=1e-12)
    catalogue = time_cost.cost_by_gpu("llama-2-7b", tokens=1e11, seq=4096, gpus=["H100 SXM"]).iloc[0]
    assert r.cost_usd == pytest.approx(catalogue.cost_usd * 100 / H100.price_usd_per_gpu_hour, rel=1e-12)


@pytest.mark.parametrize("call", [
    lambda p: time_cost.cost_by_gpu("gpt2", tokens=1e9, seq=1024, gpus=["H100 SXM"], prices=p),
    lambda p: L.plan("gpt2", tokens=1e9, seq=1024, global_batch=8, gpus=["H100 SXM"], prices=p),
    lambda p: cost.compare_gpus("H100 SXM", "B200", prices=p),
], ids=["cost_by_gpu", "plan", "compare_gpus"])
def test_price_keys_are_checked(call):
    with pytest.raises(ValueError, match="prices.*unknown GPU 'H100'.*Did you mean 'H100 SXM'"):
        call({"H100": 2.0})
    with pytest.raises(ValueError, match="prices gives the GPU 'H100 SXM' twice"):
        call({"H100 SXM": 2.0, "h100-sxm": 3.0})
    with pytest.raises(TypeError, match="prices must be a dict"):
        call([("H100 SXM", 2.0)])
    with pytest.raises(ValueError, match=r"prices\['h100 sxm'\]"):
        call({"h100 sxm": -2.0})


def test_plan_uses_a_price_under_any_spelling():
    df = L.plan("gpt2", tokens=1e9, seq=1024, global_batch=8, gpus=["H100 SXM"], prices={"H100-SXM": 7.0})
    assert np.allclose(df["cost_usd"], df["gpu_hours"] * 7.0, rtol=1e-12)


def test_a_hand_made_gpu_is_priced_by_its_own_name():
    mine = dataclasses.replace(H100, name="My GPU", price_usd_per_gpu_hour=None)
    df = time_cost.cost_by_gpu("gpt2", tokens=1e9, seq=1024, gpus=[mine], prices={"my gpu": 4.0})
    assert df.iloc[0].cost_usd == pytest.approx(df.iloc[0].gpu_hours * 4.0, rel=1e-12)


@pytest.mark.parametrize("call", [
    lambda g: time_cost.cost_by_gpu("gpt2", tokens=1e9, seq=1024, gpus=g),
    lambda g: L.plan("gpt2", tokens=1e9, seq=1024, global_batch=8, gpus=g),
    lambda g: serve.serving_cost_by_gpu("gpt2", gpus=g),
    lambda g: hardware.gpu_comparison(g),
    lambda g: charts.render_model_states("gpt2", gpus=g),
], ids=["cost_by_gpu", "plan", "serving_cost_by_gpu", "gpu_comparison", "render_model_states"])
def test_a_gpu_listed_twice_is_refused(call):
    with pytest.raises(ValueError, match="'H100 SXM' twice.*'H100 SXM'.*'h100 sxm'"):
        call(["H100 SXM", "A100 80GB", "h100 sxm"])


def test_cost_by_gpu_checks_prices_and_tokens_even_when_nothing_fits():
    kw = dict(seq=4096, gpus=["A10"], max_gpus=1)
    nothing = time_cost.cost_by_gpu("llama-3.1-405b", tokens=1e12, **kw)
    assert not nothing["fits"].any()                        # (nothing fits: the rows say why)
    with pytest.raises(ValueError, match="prices"):
        time_cost.cost_by_gpu("llama-3.1-405b", tokens=1e12, prices={"A10": -1}, **kw)
    with pytest.raises(ValueError, match="tokens"):
        time_cost.cost_by_gpu("llama-3.1-405b", tokens=-1, **kw)
    with pytest.raises(TypeError, match="tokens"):
        time_cost.cost_by_gpu("llama-3.1-405b", tokens="1e12", **kw)
    with pytest.raises(ValueError, match="mfu"):
        time_cost.cost_by_gpu("llama-3.1-405b", tokens=1e12, mfu=1.5, **kw)


# ============================================================================ 3. impossible results
def _hours_at(mfu, model="llama-2-7b", seq=4096, tokens=1e12):
    """GPU-hours an H100 needs for ``tokens`` at ``mfu`` (from FLOPs per token and the catalogue's peak)."""
    return tokens * L.training_flops_per_token(model, seq=seq) / (H100.bf16_dense_tflops * 1e12 * mfu) / 3600


def test_implied_mfu_is_the_inverse_of_the_hours():
    assert L.implied_mfu("llama-2-7b", gpu="H100 SXM", seq=4096, tokens=1e12,
                         gpu_hours=_hours_at(0.4)) == pytest.approx(0.4, rel=1e-12)


@pytest.mark.parametrize("mfu", [1.0001, 5.05, 216.8])
def test_implied_mfu_above_one_is_refused(mfu):
    with pytest.raises(ValueError, match="MFU of .* > 1"):
        L.implied_mfu("llama-2-7b", gpu="H100 SXM", seq=4096, tokens=1e12, gpu_hours=_hours_at(mfu))
    with pytest.raises(ValueError, match="tflops_per_gpu.*> 1"):
        L.implied_mfu("llama-2-7b", gpu="H100 SXM", seq=4096, tflops_per_gpu=H100.bf16_dense_tflops * mfu)


def test_a_breakeven_mfu_above_one_is_refused():
    c = cost.compare_gpus("A100 80GB", "H100 SXM", prices={"H100 SXM": 100.0})
    expected = 0.4 * c.price_ratio / c.peak_ratio
    assert expected > 1
    with pytest.raises(ValueError, match="cannot"):
        c.breakeven_mfu(0.4)
    cheap = cost.compare_gpus("A100 80GB", "H100 SXM")
    assert cheap.breakeven_mfu(0.4) == pytest.approx(0.4 * cheap.price_ratio / cheap.peak_ratio)


# ============================================================================ 4. searches that grow with n
def test_divisors_are_the_divisors():
    from llmsizing.layouts import _divisors

    for n in list(range(1, 400)) + [720720, 2**22, 999983]:
        brute = [d for d in range(1, n + 1) if n % d == 0] if n < 10**6 else None
        got = _divisors(n)
        assert got == sorted(set(got)) and all(n % d == 0 for d in got)
        if brute is not None:
            assert got == brute
        for limit in (1, 7, 64):
            assert _divisors(n, limit) == [d for d in got if d <= limit]
    with cpu_limit(1.0):                           # sqrt(n) steps, not n (2**40: a million, not a trillion)
        assert _divisors(2**40) == [2**k for k in range(41)]
        for n in (2**53 - 1, 3 * 2**51, 720720 * 12345):                      # or limit steps
            assert _divisors(n, 1024) == [d for d in range(1, 1025) if n % d == 0]


@pytest.mark.parametrize("gb", [4_194_304, 2**40])
def test_a_global_batch_in_tokens_is_refused_at_once(gb):
    with cpu_limit(1.0), pytest.raises(ValueError, match="global_batch .*sequences"):
        L.plan("llama-2-7b", tokens=1e12, seq=4096, global_batch=gb)


def test_plan_refuses_a_search_too_large_for_one_call():
    with cpu_limit(1.5), pytest.raises(ValueError, match="more than .* plans fit.*max_gpus"):
        L.plan("llama-2-7b", tokens=1e12, seq=4096, global_batch=55440, gpus=["H100 SXM", "A100 80GB"])
    many = L.Model("many-divisors", layers=720720, hidden=256, heads=8, ffn_hidden=512, vocab=1000)
    with cpu_limit(1.0), pytest.raises(ValueError, match="max_pp"):
        L.plan(many, tokens=1e9, seq=128, global_batch=64)
    with cpu_limit(1.0):
        assert len(L.plan(many, tokens=1e9, seq=128, global_batch=64, max_pp=8)) > 0


@pytest.mark.parametrize("call", [
    lambda: L.pipeline_in_flight(10**7, 4),
    lambda: L.pipeline_bubble(10**7, 4),
    lambda: L.Parallel(pp=10**7),
    lambda: L.plan("gpt2", tokens=1e9, seq=128, global_batch=8, max_pp=10**7),
], ids=["pipeline_in_flight", "pipeline_bubble", "Parallel", "plan"])
def test_pipeline_stages_are_bounded(call):
    with cpu_limit(1.0), pytest.raises(ValueError, match="pp"):
        call()


@pytest.mark.parametrize("call", [
    lambda: L.min_gpus("gpt2", "H100 SXM", batch=1, seq=128, gpus_per_node=10**7),
    lambda: L.plan("gpt2", tokens=1e9, seq=128, global_batch=8, gpus_per_node=10**7),
], ids=["min_gpus", "plan"])
def test_gpus_per_node_is_bounded(call):
    with cpu_limit(1.0), pytest.raises(ValueError, match="gpus_per_node"):
        call()


def test_min_gpus_on_a_layer_count_with_many_divisors_answers_fast():
    many = L.Model("many-divisors", layers=720720, hidden=256, heads=8, ffn_hidden=512, vocab=1000)
    with cpu_limit(1.0):
        p = L.min_gpus(many, "H100 SXM", batch=1, seq=128)
    assert L.training_memory(many, batch=1, seq=128, parallel=p.parallel).total_bytes <= 0.9 * H100.memory_bytes
    with cpu_limit(1.0), pytest.raises(ValueError, match="max_gpus"):
        L.min_gpus(many, "H100 SXM", batch=1, seq=128, max_gpus=p.gpus - 1)


# ============================================================================ 7. hand-made GPUs
@pytest.mark.parametrize("field, value", [
    ("bf16_dense_tflops", 0), ("bf16_dense_tflops", -1.0), ("memory_bandwidth_gbps", 0),
    ("link_bandwidth_gbps", 0), ("fp8_dense_tflops", 0), ("memory_mib", -1024), ("memory_mib", 0),
    ("memory_mib", 81559.5), ("memory_mib", True), ("price_usd_per_gpu_hour", -1), ("price_usd_per_gpu_hour", "2"),
    ("price_usd_per_gpu_hour", float("nan")), ("memory_marketed_gb", 0), ("link_direction", "both"),
    ("bf16_dense_tflops", None), ("vendor", None), ("name", ""),
])
def test_a_hand_made_gpu_is_checked_when_it_is_made(field, value):
    with pytest.raises((TypeError, ValueError), match=field.split("_")[0] if field == "name" else field):
        dataclasses.replace(H100, **{field: value})


def test_a_hand_made_gpu_keeps_python_numbers():
    g = dataclasses.replace(H100, memory_mib=np.int32(81559), bf16_dense_tflops=np.float32(989.4))
    assert type(g.memory_mib) is int and g.memory_bytes == 81559 * 2**20    # (np.int32 * 2**20 wraps)
    assert type(g.bf16_dense_tflops) is float


def test_a_gpu_without_a_price_is_accepted_and_refused_only_where_a_price_is_needed(tmp_path, monkeypatch):
    """A GPU with no row in data/gpu_prices.csv is a GPU without a price: it loads, and sizes, and is never
    priced at 0."""
    from llmsizing import catalog

    rows = (catalog.DATA_DIR / "gpus.csv").read_text().splitlines()
    h100 = next(r for r in rows if r.startswith("H100 SXM,"))
    import csv
    import io

    fields = next(csv.reader([h100]))
    fields[0] = "H100 unpriced"
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(fields)
    (tmp_path / "gpus.csv").write_text("\n".join(rows) + "\n" + out.getvalue())
    for f in ("models.csv", "gpu_prices.csv"):         # the new GPU has no row in the price table either
        (tmp_path / f).write_text((catalog.DATA_DIR / f).read_text())
    monkeypatch.setattr(catalog, "DATA_DIR", tmp_path)
    catalog._gpus.cache_clear()
    try:
        g = L.get_gpu("H100 unpriced")
        assert g.price_usd_per_gpu_hour is None
        assert L.min_gpus("llama-2-7b", g, batch=1, seq=4096).gpus == L.min_gpus("llama-2-7b", H100, batch=1,
                                                                                   seq=4096).gpus
        with pytest.raises(ValueError, match="price_usd_per_gpu_hour"):
            L.training_time("llama-2-7b", tokens=1e12, gpu=g, n_gpus=8, seq=4096)
        with pytest.raises(ValueError, match="price_usd_per_gpu_hour"):
            L.serving("llama-2-7b", g)
        with pytest.raises(ValueError, match="prices"):
            L.plan("llama-2-7b", tokens=1e12, gpus=[g], seq=4096, global_batch=64)
        t = L.training_time("llama-2-7b", tokens=1e12, gpu=g, n_gpus=8, seq=4096, price_usd_per_gpu_hour=3.0)
        assert t.cost_usd == pytest.approx(t.gpu_hours * 3.0)
    finally:
        catalog._gpus.cache_clear()


# ============================================================================ 8. subnormals and tiny numbers
@pytest.mark.parametrize("value", [5e-324, 1e-311, 1e-300, 1e-5])
def test_serving_refuses_a_tiny_mbu_or_mfu(value):
    for name in ("mbu", "mfu"):
        with pytest.raises(ValueError, match=name):
            L.serving("llama-2-7b", "H100 SXM", **{name: value})


def test_the_smallest_mbu_gives_finite_times():
    from llmsizing._validate import MIN_FRACTION

    s = L.serving("llama-2-7b", "H100 SXM", mbu=MIN_FRACTION, mfu=MIN_FRACTION)
    assert math.isfinite(s.itl_s) and math.isfinite(s.ttft_s) and s.itl_s > 0


@pytest.mark.parametrize("rate", [1e-300, 1e-12, 1e-3])
def test_any_request_rate_needs_at_least_one_replica(rate):
    p = L.replicas_for("llama-2-7b", "H100 SXM", requests_per_s=rate)
    assert p.replicas >= 1 and p.gpus >= p.tp
    with pytest.raises(ValueError, match="requests_per_s"):
        L.replicas_for("llama-2-7b", "H100 SXM", requests_per_s=5e-324)


@pytest.mark.parametrize("eff", [1e-311, 5e-324, 1e-300])
def test_plan_refuses_a_tiny_kernel_efficiency_at_once(eff):
    with cpu_limit(1.0), pytest.raises(ValueError, match="kernel_efficiency"):
        L.plan("llama-2-7b", tokens=1e12, seq=4096, global_batch=64, kernel_efficiency=eff)


def test_the_pareto_sweep_always_advances_and_never_marks_a_nan():
    days = np.array([np.nan, 1.0, np.nan, 2.0])
    cost_ = np.array([1.0, np.nan, 3.0, 1.0])
    with cpu_limit(1.0):
        front = planner._pareto(days, cost_, np.ones(4))
    assert list(front) == [False, False, False, True]


@pytest.mark.parametrize("call, name", [
    (lambda v: L.training_time("gpt2", tokens=1e9, gpu="H100 SXM", n_gpus=1, seq=128, mfu=v), "mfu"),
    (lambda v: L.step_time("gpt2", "H100 SXM", batch=1, seq=128, kernel_efficiency=v), "kernel_efficiency"),
    (lambda v: L.min_gpus("gpt2", "H100 SXM", batch=1, seq=128, usable_fraction=v), "usable_fraction"),
    (lambda v: memory.min_gpus_for_bytes(1e15, "H100 SXM", usable_fraction=v), "usable_fraction"),
    (lambda v: cost.effective_price_usd_per_gpu_hour(2.0, utilisation=v), "utilisation"),
    (lambda v: cost.cost_vs_gpus("gpt2", tokens=1e9, gpu="H100 SXM", seq=128, global_batch=8, tp=1,
                                 kernel_efficiency=v), "kernel_efficiency"),
    (lambda v: L.communication("gpt2", L.Parallel(dp=16), batch=1, seq=128, gpu="H100 SXM", inter_node_gbps=v),
     "inter_node_gbps"),
    (lambda v: comm.gpu_with_link("H100 SXM", "PCIe", v, "pcie"), "one_way_gbps"),
    (lambda v: cost.compare_gpus("H100 SXM", "B200", speedup=v), "speedup"),
    (lambda v: cost.compare_gpus("H100 SXM", "B200", prices={"H100 SXM": v}), "prices"),
    (lambda v: hardware.matmul_intensity_flops_per_byte(2**20, 2**20, 2**20, v), "bytes_per_element"),
    (lambda v: audit.verdict(1e15, v), "library"),
], ids=["training_time", "step_time", "min_gpus", "min_gpus_for_bytes", "effective_price", "cost_vs_gpus",
        "communication", "gpu_with_link", "compare_gpus-speedup", "compare_gpus-prices", "matmul_intensity",
        "verdict"])
@pytest.mark.parametrize("tiny", [5e-324, 1e-311, 1e-300])
def test_a_tiny_divisor_is_refused_naming_it(call, name, tiny):
    with pytest.raises(ValueError, match=name):
        call(tiny)


# ============================================================================ 11. audit_cost_table's gpus
def _table(gpus):
    t = cost.seed_cost_tables().head(1).copy()
    t["gpus"] = pd.Series([gpus], dtype=object)
    return t


@pytest.mark.parametrize("bad, error", [(7.9, ValueError), (True, TypeError), ("8", TypeError),
                                        (None, TypeError), (float("nan"), ValueError), (0, ValueError),
                                        (np.float64(8.5), ValueError)])
def test_audit_cost_table_refuses_a_gpu_count_that_is_not_whole(bad, error):
    with pytest.raises(error, match=r"gpus \(row 0 of table\)"):
        cost.audit_cost_table(_table(bad))


def test_audit_cost_table_takes_a_whole_number_from_a_float_column():
    n = int(cost.seed_cost_tables().head(1)["gpus"].iloc[0])
    as_int, as_float = (cost.audit_cost_table(_table(v)) for v in (n, float(n)))
    assert as_float["gpu_hours_library"].iloc[0] == as_int["gpu_hours_library"].iloc[0]
    assert as_float["cost_per_day_from_price"].iloc[0] == pytest.approx(
        n * as_int["price_usd_per_gpu_hour"].iloc[0] * 24)


def test_audit_cost_table_errors_name_the_row():
    t = cost.seed_cost_tables().head(2).copy()
    t["tokens_per_s"] = t["tokens_per_s"].astype(float)
    t.loc[1, "tokens_per_s"] = 5e-324
    with pytest.raises(ValueError, match=r"tokens_per_s \(row 1 of table\)"):
        cost.audit_cost_table(t)
    t = cost.seed_cost_tables().head(2).copy()
    t.loc[1, "model"] = "llama-9"
    with pytest.raises(ValueError, match="row 1 of table: unknown model"):
        cost.audit_cost_table(t)


# ============================================================================ every public call is checked
def test_check_number_refuses_subnormals_by_name():
    from llmsizing._validate import check_number

    for v in (5e-324, -5e-324, 1e-311, np.float64(1e-320)):
        with pytest.raises(ValueError, match="x=.*subnormal"):
            check_number("x", v, minimum=None)
    assert check_number("x", sys.float_info.min) == sys.float_info.min and check_number("x", 0.0) == 0.0


def test_render_pipeline_bubble_names_pps():
    """Found by `make fuzz`: a bare int raised "'int' object is not iterable"."""
    with pytest.raises(TypeError, match="pps"):
        charts.render_pipeline_bubble(pps=3)
    with pytest.raises(ValueError, match="pps"):
        charts.render_pipeline_bubble(pps=(2, 10**7))


def test_render_dp_scaling_names_seq_and_mfu():
    """Found by `make fuzz`: seq=None failed formatting the summary ("unsupported format string")."""
    with pytest.raises(TypeError, match="seq"):
        charts.render_dp_scaling(seq=None)
    with pytest.raises(TypeError, match="mfu"):
        charts.render_dp_scaling(mfu=None)


# --------------------------------------------------------------------------- class 4: lists as long as the input
def test_a_list_argument_is_bounded_so_a_call_answers_or_refuses_at_once():
    """serving_sweep(batches=range(1, 10**7)) computed ten million serving points (about 400 s) before this bound;
    every list argument goes through check_sequence, which reads at most MAX_ITEMS + 1 items, even of an
    endless iterable: counted here, item by item, before the refusal (MAX_ITEMS = 1,024: 1,025 read, then
    refused).
    How fast the refusal is (well under 1 s of CPU) is measured by benchmarks/bench_moved_guards.py, not here
    (the guide's principle 6; suite40)."""
    import itertools

    from llmsizing._validate import MAX_ITEMS, check_sequence

    read = []

    def counted(items):
        for x in items:
            read.append(x)
            yield x

    with pytest.raises(ValueError, match=r"batches may hold at most 1,024 items"):
        L.serving_sweep("llama-3-8b", "H100 SXM", batches=range(1, 10**7))
    with pytest.raises(ValueError, match=r"batches may hold at most 1,024 items"):
        L.serving_sweep("llama-3-8b", "H100 SXM", batches=counted(range(1, 10**7)))
    assert MAX_ITEMS == 1024 and len(read) == 1024 + 1       # read no further than one item past the bound
    read.clear()
    with pytest.raises(ValueError, match=r"counts may hold at most"):
        check_sequence("counts", counted(itertools.count(1)), example="(8, 64)")
    assert len(read) == 1024 + 1                             # an endless iterable: the same
    assert len(check_sequence("batches", range(MAX_ITEMS), example="(1, 8)")) == MAX_ITEMS   # the bound itself passes
