"""Each GPU's priced block kept between searches (issues 35 and 38: chapter 17's move from one GPU
type to two priced the first one again). The plans must not move by a bit: a sequence of searches of one model
(a pick, a GPU-set change, a context change, back, the GPUs in the other order) gives frames equal, exactly
and in their attrs, to the same settings searched in a fresh Python process with nothing kept; the kept
arrays cannot be changed by a caller; the kept blocks are bounded; a search that adds a GPU type prices only
the new one."""

import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from llmsizing import plan_pricing, planner

H100, B200, A100 = "H100 SXM", "B200", "A100 80GB"
#: (model, seq, gpus): a mixture of experts' pick, GPU-set change, context change, back, and the other order;
#: the widget's max_gpus and a smaller global batch (the same context: other candidates); then a dense
#: model's.
WALK = (("granite-3.0-1b-a400m", 131072, (H100,)), ("granite-3.0-1b-a400m", 131072, (H100, B200)),
        ("granite-3.0-1b-a400m", 32768, (H100,)), ("granite-3.0-1b-a400m", 32768, (H100, B200)),
        ("granite-3.0-1b-a400m", 131072, (H100,)), ("granite-3.0-1b-a400m", 131072, (B200, H100)),
        ("granite-3.0-1b-a400m", 131072, (B200,)), ("granite-3.0-1b-a400m", 131072, (H100, B200), 4096),
        ("granite-3.0-1b-a400m", 131072, (H100,), 16384, 2**23 // 131072),
        ("llama-3-8b", 8192, (H100,)), ("llama-3-8b", 8192, (A100, H100)),
        ("llama-3-8b", 32768, (A100, H100)))


def _plan(model, seq, gpus, max_gpus=16384, global_batch=None):
    return planner.plan(model, tokens=8e11, gpus=gpus, seq=seq, global_batch=global_batch or 2**24 // seq,
                        max_gpus=max_gpus)


def _clear():
    planner._search.cache_clear()             # (the priced blocks too)
    assert not plan_pricing._kept_blocks


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """Each setting of :data:`WALK` planned in a new Python process (nothing kept from a search before)."""
    out = tmp_path_factory.mktemp("kept_price") / "fresh.pkl"
    code = textwrap.dedent(f"""
        import pickle, sys
        sys.path.insert(0, {str(__import__("pathlib").Path(__file__).parent)!r})
        from test_plan_kept_price import WALK, _clear, _plan
        got = []
        for s in WALK:
            _clear()
            got.append(_plan(*s))
        pickle.dump(got, open({str(out)!r}, "wb"))
    """)
    subprocess.run([sys.executable, "-c", code], check=True)
    with open(out, "rb") as f:
        return pickle.load(f)


def _same(new, old):
    pd.testing.assert_frame_equal(new, old, check_exact=True)
    assert new.attrs == old.attrs


@pytest.mark.parametrize("order", ["forward", "reversed"])
def test_walk_gives_the_fresh_plans(fresh, order):
    _clear()
    steps = list(enumerate(WALK))
    for i, s in (steps if order == "forward" else steps[::-1]):
        planner._search.clear_tables()            # (the search again: only the priced blocks are kept)
        _same(_plan(*s), fresh[i])
    for i, s in steps:                             # (and with the searches kept too)
        _same(_plan(*s), fresh[i])
    _clear()


def test_adding_a_gpu_prices_the_new_one_only(monkeypatch):
    _clear()
    priced = []
    real = plan_pricing._price

    def spy(model, gpu_list, cols, **kw):
        priced.append(tuple(g.name for g in gpu_list))
        return real(model, gpu_list, cols, **kw)

    monkeypatch.setattr(plan_pricing, "_price", spy)
    _plan("granite-3.0-1b-a400m", 131072, (H100,))
    _plan("granite-3.0-1b-a400m", 131072, (H100, B200))
    _plan("granite-3.0-1b-a400m", 131072, (B200, H100))    # (both kept: nothing priced)
    assert priced == [(H100,), (B200,)]
    _clear()


def test_kept_blocks_are_read_only():
    _clear()
    _plan("llama-3-8b", 8192, (A100, H100))
    assert len(plan_pricing._kept_blocks) == 2
    for step, peak in plan_pricing._kept_blocks.values():
        assert not step.flags.writeable and not peak.flags.writeable
        with pytest.raises(ValueError):
            step[0] = 0.0
    _clear()


def test_kept_price_is_price_bit_for_bit_and_writable():
    _clear()
    got = {}
    real = plan_pricing.kept_price

    def both(model, gpu_list, cols, **kw):
        a = real(model, gpu_list, cols, **kw)
        got["a"], got["b"] = a, plan_pricing._price(model, gpu_list, cols, **kw)
        return a

    with pytest.MonkeyPatch.context() as m:
        m.setattr(planner, "kept_price", both)
        for gpus in ((A100, H100, B200), (B200, A100)):
            planner.plan("qwen3-30b-a3b", tokens=8e11, gpus=gpus, seq=32768, global_batch=512,
                         micro_batches=(1,), max_gpus=16384, overlap=0.5)
            for x, y in zip(got["a"], got["b"]):
                assert x.dtype == y.dtype == np.float64
                assert np.array_equal(x.view(np.int64), y.view(np.int64))
                assert x.flags.writeable
            got["a"][0][:] = -1.0                 # (the caller's copy: the kept blocks are not touched)
    for step, peak in plan_pricing._kept_blocks.values():
        assert (step > 0).all() and (peak > 0).all()
    _clear()


def test_kept_blocks_are_bounded(monkeypatch):
    _clear()
    monkeypatch.setattr(plan_pricing, "KEPT_PRICE_BLOCKS", 3)
    for seq in (2048, 4096, 8192):
        _plan("llama-3-8b", seq, (A100, H100))
    assert len(plan_pricing._kept_blocks) == 3
    # the least recently used went first: the last search's two GPUs and the one before's H100 stay
    assert [(k[1].name, dict(k[3])["seq"]) for k in plan_pricing._kept_blocks] == [
        (H100, 4096), (A100, 8192), (H100, 8192)]
    _clear()


def test_clearing_the_search_clears_the_priced_blocks():
    _clear()
    _plan("llama-3-8b", 8192, (H100,))
    planner._search.clear_tables()
    assert len(plan_pricing._kept_blocks) == 1 and planner._search.cache_info().currsize == 0
    _plan("llama-3-8b", 8192, (H100,))
    planner._search.cache_clear()             # (tests and benchmarks: a search from scratch)
    assert len(plan_pricing._kept_blocks) == 0 and planner._search.cache_info().currsize == 0


def test_kept_blocks_are_bounded_in_bytes(monkeypatch):
    _clear()
    _plan("llama-3-8b", 8192, (A100, H100))
    sizes = [sum(a.nbytes for a in v) for v in plan_pricing._kept_blocks.values()]
    assert plan_pricing._kept_blocks.nbytes == sum(sizes) > 0
    # room for the larger block alone: the search before's go, the last one stays whatever its size
    monkeypatch.setattr(plan_pricing, "KEPT_PRICE_BYTES", max(sizes))
    _plan("llama-3-8b", 4096, (H100,))
    assert len(plan_pricing._kept_blocks) == 1
    assert plan_pricing._kept_blocks.nbytes == sum(a.nbytes for v in plan_pricing._kept_blocks.values()
                                                   for a in v)
    monkeypatch.setattr(plan_pricing, "KEPT_PRICE_BYTES", 1)
    df = _plan("llama-3-8b", 2048, (A100, H100))
    assert len(plan_pricing._kept_blocks) == 1 and len(df)
    _clear()
    assert plan_pricing._kept_blocks.nbytes == 0


def test_new_gpus_priced_in_one_call_keep_each_gpus_own_block(monkeypatch):
    """Issue 38: the GPUs whose blocks are not kept are priced in one call (chapter 12's pick of a model, four
    new GPU types); each block kept from it equals that GPU priced alone, bit for bit, and a later search of
    one of them prices nothing."""
    _clear()
    got = {}
    real = plan_pricing.kept_price

    def keep_args(model, gpu_list, cols, **kw):
        got["args"] = (model, gpu_list, cols, kw)
        return real(model, gpu_list, cols, **kw)

    monkeypatch.setattr(planner, "kept_price", keep_args)
    planner.plan("olmoe-1b-7b", tokens=8e11, gpus=(A100, H100, B200), seq=8192, global_batch=512,
                 max_gpus=4096)
    model, gpu_list, cols, kw = got["args"]
    assert len(plan_pricing._kept_blocks) == 3
    price, calls = plan_pricing._price, []
    monkeypatch.setattr(plan_pricing, "_price", lambda *a, **k: calls.append(1) or price(*a, **k))
    for g, gpu in enumerate(gpu_list):
        at = np.flatnonzero(cols["gpu"] == g)
        sub = {k: (np.zeros(len(at), dtype=v.dtype) if k == "gpu" else v[at]) for k, v in cols.items()}
        one = {**kw, "node_of": {gpu.name: kw["node_of"][gpu.name]}}
        kept = real(model, [gpu], sub, **one)                    # (the kept block: nothing priced)
        for x, y in zip(kept, price(model, [gpu], sub, **one)):
            assert np.array_equal(x.view(np.int64), y.view(np.int64))
    assert not calls
    _clear()
