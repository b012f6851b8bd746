"""Partial recomputation's fit on tables (llmsizing.plan_tables.least_fit, fit39) gives what the loop it
replaced gives (plan_memory._least_scalar: one ``coefficients`` call and one stacked array per (layout,
pair)), bit for bit: call by call on the same memory, and whole searches from scratch (the entries then made
by least_fit's own asks, in its order), over dense models, recipes (an autocast one: one memory per
recomputation), contexts, GPU types, interleavings and limits. And the memory fit's ``per_micro`` table read
off rows kept on the memory between searches (plan_tables.micro_rows, fit39) is what one call per key gives,
search after search."""

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from _same_plans import same_plans, searched_with
from llmsizing import plan_memory, plan_tables, planner

DENSE = ("llama-3-8b", "llama-3-70b", "llama-3.1-405b", "llama-2-13b", "mistral-7b", "gpt2", "qwen-14b")
GPUS = (("H100 SXM",), ("A100 40GB", "B200"), ("H100 SXM", "L40S"), ("A10", "L4"))


def _scalar_least(memory, parts, rows, *, keys=None, **kw):
    """plan_memory._least through the loop (keys dropped)."""
    return plan_memory._least_scalar(memory, parts, rows, **kw)


def _searched(reference: bool, **kw):
    return searched_with(reference, [(plan_memory, "_least", _scalar_least)],
                         [planner._search, plan_memory.kept_search_memory], **kw)


def _settings(model, seq, batch_tokens, gpus, max_gpus, precision, vs):
    return dict(model=model, seq=seq, global_batch=max(batch_tokens // seq, 1), gpus=gpus, max_gpus=max_gpus,
                precision=precision, virtual_stages=vs)


GRID = dict(model=st.sampled_from(DENSE), seq=st.sampled_from((2048, 8192, 32768, 131072)),
            batch_tokens=st.sampled_from((2**21, 2**23, 2**24)), gpus=st.sampled_from(GPUS),
            max_gpus=st.sampled_from((256, 4096, 16384)),
            precision=st.sampled_from(("bf16-mixed", "bf16-amp", "fp8-mixed", "fp16-mixed")),
            vs=st.sampled_from((None, (2,), (2, 4, 8))))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**GRID)
def test_whole_searches_from_scratch_give_the_loops_plans(model, seq, batch_tokens, gpus, max_gpus, precision,
                                                          vs):
    """From scratch (no kept memory), each search through least_fit and through the loop: the same frame,
    or the same refusal."""
    same_plans(_searched, **_settings(model, seq, batch_tokens, gpus, max_gpus, precision, vs))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**GRID)
def test_each_call_gives_the_loops_answer(model, seq, batch_tokens, gpus, max_gpus, precision, vs):
    """Every call plan() makes, answered again by the loop on the same memory: the same layers and totals,
    bit for bit (dtype, shape and bytes)."""
    calls = []
    real = plan_memory._least

    def caught(memory, parts, rows, **kw):
        got = real(memory, parts, rows, **kw)
        calls.append((memory, parts, rows, kw, got))
        return got

    with pytest.MonkeyPatch.context() as m:
        m.setattr(plan_memory, "_least", caught)
        try:
            planner.plan(tokens=8e11, **_settings(model, seq, batch_tokens, gpus, max_gpus, precision, vs))
        except ValueError:
            pass
    for memory, parts, rows, kw, got in calls:
        assert kw.get("keys") is not None                   # (plan() takes the tables' path)
        for a, b in zip(got, _scalar_least(memory, parts, rows, **kw)):
            assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_the_tables_path_is_taken_and_finds_partial_plans():
    """Llama-3-70B at 32K on H100s: partial recomputation is searched through least_fit (not the loop), and
    some plan recomputes fewer layers than its stage holds (the path is not vacuous)."""
    seen = []
    real = plan_memory.least_fit

    def counted(*a, **k):
        seen.append(1)
        return real(*a, **k)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(plan_memory, "least_fit", counted)
        planner._search.cache_clear()
        df = planner.plan("llama-3-70b", tokens=8e11, gpus=("H100 SXM",), seq=32768, global_batch=256,
                          max_gpus=4096)
        planner._search.cache_clear()
    assert seen
    part = df[(df["recompute"] == "full") & df["recompute_layers"].notna()]
    # (Llama-3-70B's 80 layers: a model chunk holds 80 / (pp x virtual_stages))
    chunk = 80 // (part["pp"] * part["virtual_stages"])
    assert (part["recompute_layers"] < chunk).any()


def _direct_micro_rows(memory, rc, keys, width):
    """plan_tables.micro_rows as written before fit39: one per_micro call per key, one new table."""
    return plan_tables.padded([memory.per_micro(tp, pp, rc, c, cp, v) for tp, pp, c, cp, v in keys], 0.0,
                              width)


WALK = [dict(seq=32768, global_batch=512, gpus=("H100 SXM",)),
        dict(seq=32768, global_batch=256, gpus=("H100 SXM",)),
        dict(seq=131072, global_batch=128, gpus=("H100 SXM", "B200")),
        dict(seq=8192, global_batch=1024, gpus=("A100 80GB", "L40S")),
        dict(seq=32768, global_batch=512, gpus=("H100 SXM", "A10"), cp_comm="all_gather")]


@pytest.mark.parametrize("model", ["llama-3-8b", "qwen3-30b-a3b", "llama-3.1-405b"])
def test_searches_in_a_row_read_the_kept_micro_rows_as_the_calls(model):
    """A walk of searches of one model (the memory kept between them, so later searches read rows kept by
    earlier ones, and add to them): every frame the same as with one per_micro call per key, and every table
    micro_rows gave the same floats as those calls give afterwards."""
    from llmsizing import planner

    def walk(direct: bool):
        out = []
        with pytest.MonkeyPatch.context() as m:
            if direct:
                m.setattr(plan_tables, "micro_rows", _direct_micro_rows)
            for c in (planner._search, plan_memory.kept_search_memory):
                c.cache_clear()
            for kw in WALK:
                try:
                    out.append(planner.plan(model, tokens=8e11, max_gpus=16384, **kw))
                except ValueError as exc:
                    out.append(str(exc))
            for c in (planner._search, plan_memory.kept_search_memory):
                c.cache_clear()
        return out

    seen = []
    real = plan_tables.micro_rows

    def caught(memory, rc, keys, width):
        got = real(memory, rc, keys, width)
        seen.append((memory, rc, list(keys), width, got))
        return got

    with pytest.MonkeyPatch.context() as m:
        m.setattr(plan_tables, "micro_rows", caught)
        fast = walk(False)
    assert len({id(x[0]) for x in seen}) < len(seen)          # (a memory asked more than once: rows kept)
    for memory, rc, keys, width, got in seen:
        want = _direct_micro_rows(memory, rc, keys, width)
        assert got.shape == want.shape and got.tobytes() == want.tobytes()
    for a, b in zip(fast, walk(True)):
        if isinstance(a, str):
            assert a == b
        else:
            pd.testing.assert_frame_equal(a, b, check_exact=True)
