"""A search whose GPU set adds types to a set already searched (issues 35 and 38: chapter 17's "GPU types"
control, one type added to the pick's) reuses each GPU type's kept fit (:mod:`llmsizing.plan_fits`) and
priced block (:func:`~llmsizing.plan_pricing.kept_price`), and recomputes the listing, the front and the
order on the merged rows. Its table must be the cold search's, bit for bit: values, dtypes, row order, index
and attrs, whichever types were searched before and in whatever order the types are given.

The cold tables come from a fresh Python process, each searched after ``planner._clear_search()`` and with
the search memories (each GPU type's kept fit and totals) dropped; in this process each union is asked after
the smaller sets of its walk, so its known types come from what those searches kept. Six models: dense and
mixtures of experts, at long context (context parallelism searched: ``cp > 1`` rows asserted), two and three
GPU types in several orders, and a set whose added type fits nothing (its rows asserted absent). The tests
guard equality: the merge changes no number (a stable merge by segment and GPU; the listing per layout, GPU,
micro-batch and ``dp``). They fail when a kept fit is looked up by too little (``plan_fits._fit_key``
without the GPU's memory limit: all six walks fail), not when only the search's internal row order changes
(``plan()`` ranks by cost)."""

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from llmsizing import plan_memory, plan_pricing, planner
from llmsizing.planner import NoPlanError

H100, A10, A100, B200 = "H100 SXM", "A10", "A100 80GB", "B200"

#: (model, seq, global batch, max_gpus, walk of GPU sets): each walk's sets searched in turn, the last ones
#: adding types to those before (chapter 17's defaults: 16M tokens a batch, <= 16,384 GPUs, the ring).
WALKS = (
    ("qwen3-30b-a3b", 131072, 128, 16384, ((H100,), (H100, A10), (A10, H100))),
    ("mistral-7b", 131072, 128, 16384, ((H100,), (A10, H100), (H100, A10, A100))),
    ("llama-3-8b", 32768, 512, 16384, ((A100,), (A100, H100), (B200, A100, H100))),
    ("gpt2", 8192, 2048, 16384, ((B200,), (H100, B200), (B200, H100, A10))),
    ("granite-3.0-1b-a400m", 65536, 256, 256, ((H100,), (H100, B200), (B200, A10, H100))),
    # (the added A10 fits nothing: 70B's states alone need ~35 GB a GPU on 32 GPUs)
    ("llama-2-70b", 4096, 64, 32, ((H100,), (H100, A10), (A10, H100, A100))),
)
#: Every (walk, set) pair, in walk order.
STEPS = tuple((w, s) for w, walk in enumerate(WALKS) for s in range(len(walk[4])))


def _plan(w: int, s: int):
    model, seq, global_batch, max_gpus, sets = WALKS[w]
    return planner.plan(model, tokens=8e11, gpus=sets[s], seq=seq, global_batch=global_batch,
                        max_gpus=max_gpus, cp_comm="p2p")


def _clear():
    planner._clear_search()                       # (the searches, the priced blocks, the layouts)
    assert not plan_pricing._kept_blocks


def _cold():
    """Every kept result the search of several GPU types reuses cleared: the searches, the priced blocks, the
    layouts (``_clear_search``) and the search memories holding each type's kept fit and totals."""
    _clear()
    plan_memory.kept_search_memory.cache_clear()


@pytest.fixture(scope="module")
def cold(tmp_path_factory):
    """Each (walk, set) of :data:`STEPS` planned in a new Python process, each from nothing kept
    (:func:`_cold`)."""
    out = tmp_path_factory.mktemp("gpu_union") / "cold.pkl"
    code = textwrap.dedent(f"""
        import pickle, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_plan_gpu_union import STEPS, _cold, _plan
        got = []
        for w, s in STEPS:
            _cold()
            got.append(_plan(w, s))
        pickle.dump(got, open({str(out)!r}, "wb"))
    """)
    subprocess.run([sys.executable, "-c", code], check=True)
    with open(out, "rb") as f:
        return dict(zip(STEPS, pickle.load(f)))


def _same(new, old):
    pd.testing.assert_frame_equal(new, old, check_exact=True)
    assert new.attrs == old.attrs


@pytest.mark.parametrize("w", range(len(WALKS)), ids=[walk[0] for walk in WALKS])
def test_a_union_after_its_smaller_sets_is_the_cold_search(cold, w):
    _clear()
    for s in range(len(WALKS[w][4])):
        _same(_plan(w, s), cold[w, s])
    for s in reversed(range(len(WALKS[w][4]))):    # (back again: each set now kept or merged anew)
        planner._search.clear_tables()            # (the searches only: the fits and priced blocks stay)
        _same(_plan(w, s), cold[w, s])
    _clear()


def test_the_walks_cover_what_they_claim(cold):
    """The cases the module docstring names are there: cp > 1 rows, three types, a type that fits nothing,
    dense and MoE models, the union rows of each type those of its search alone (where it was one)."""
    assert (cold[0, 1]["cp"] > 1).any() and (cold[1, 1]["cp"] > 1).any()
    assert {"ep"} <= set(cold[0, 2].columns) and "ep" not in cold[1, 2].columns
    assert sum(len(WALKS[w][4][-1]) == 3 for w in range(len(WALKS))) >= 4
    union = cold[5, 1]
    assert set(union["gpu"]) == {H100} and len(union) == len(cold[5, 0])
    with pytest.raises(NoPlanError):
        planner.plan("llama-2-70b", tokens=8e11, gpus=(A10,), seq=4096, global_batch=64, max_gpus=32)
    # (a type's rows in a union: the same count as its own search, as the kept fits claim)
    for w, s in ((0, 1), (1, 1), (2, 1)):
        for gpu in WALKS[w][4][s]:
            if (w, 0) in cold and WALKS[w][4][0] == (gpu,):
                assert (cold[w, s]["gpu"] == gpu).sum() == len(cold[w, 0])


def test_a_union_of_too_many_plans_is_refused_after_its_smaller_sets():
    """Qwen3-30B-A3B at 128K on three GPU types fits more plans than one call prices: refused with the
    union's own message (its three types), its two-type subsets kept before or not."""
    def union():
        return planner.plan("qwen3-30b-a3b", tokens=8e11, gpus=(A10, H100, B200), seq=131072,
                            global_batch=128, max_gpus=16384, cp_comm="p2p")
    _clear()
    with pytest.raises(ValueError, match=r"more than 60,000 plans fit \(global_batch=128 on 3 GPU type"):
        union()
    _clear()
    _plan(0, 0), _plan(0, 1)
    with pytest.raises(ValueError, match=r"more than 60,000 plans fit \(global_batch=128 on 3 GPU type"):
        union()
    _clear()
