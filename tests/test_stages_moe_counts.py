"""stages.moe_default_layout at several GPU counts (issue 35, fast10: chapter 10's chart asks seven counts a
move). One plan() per global batch answers every count that shares it, and the fewest-GPU layout is searched
up to the count asked: the answers must be those of the old way (a search up to each count, and min_gpus over
every count), whatever was asked before in the process."""

import dataclasses

import pytest

from llmsizing import fewest_gpus, stages
from llmsizing.catalog import get_gpu, resolve_model
from llmsizing.parallel import Parallel
from llmsizing.planner import plan


def _clear():
    for f in (stages._kept_moe_layout, stages._kept_fewest, stages._kept_fastest):
        f.cache_clear()


def _old_way(model, gpu, seq, n):
    """_moe_default_layout as it was before fast10: plan() up to n GPUs, else min_gpus over every count."""
    gb = n * -(-stages.MOE_DEFAULT_BATCH_TOKENS // (seq * n))
    rows = plan(model, tokens=1e12, gpus=(gpu,), seq=seq, global_batch=gb, max_gpus=n, recomputes=("none",),
                explain=False)
    rows = rows[rows["n_gpus"] == n]
    if len(rows):
        r = rows.loc[rows["step_time_s"].idxmin()]
        return (Parallel(tp=int(r["tp"]), cp=int(r["cp"]), pp=int(r["pp"]), dp=int(r["dp"]),
                         zero=int(r["zero"]), sp=bool(r["sp"]), ep=int(r["ep"])), gb, int(r["micro_batch"]))
    try:
        one = fewest_gpus.min_gpus(model, gpu, batch=1, seq=seq).parallel
    except ValueError:
        return None
    if n % one.gpus:
        return None
    par = dataclasses.replace(one, dp=one.dp * (n // one.gpus))
    return par, stages.moe_default_global_batch(par, seq=seq), 1


COUNTS = (1, 8, 64, 512, 1024, 4096)


@pytest.mark.parametrize("model, gpu, seq", [("deepseek-v3", "H100 SXM", 8192),
                                             ("mixtral-8x7b", "A100 80GB", 4096)])
def test_counts_answer_as_the_search_up_to_each(model, gpu, seq):
    _clear()
    new = {n: stages.moe_default_layout(model, gpu, seq=seq, n_gpus=n) for n in COUNTS}
    assert any(v is None for v in new.values()) and any(v is not None for v in new.values())
    for n in COUNTS:
        assert new[n] == _old_way(model, gpu, seq, n), n
    _clear()                                             # any order: the same answers
    assert {n: stages.moe_default_layout(model, gpu, seq=seq, n_gpus=n) for n in reversed(COUNTS)} == new
    _clear()


def test_fewest_searched_up_to_a_count():
    """min_gpus(max_gpus=n) is min_gpus's layout when that has at most n GPUs, and refuses otherwise."""
    m, g = resolve_model("deepseek-v3", moe=True), get_gpu("H100 SXM")
    full = fewest_gpus.min_gpus(m, g, batch=1, seq=8192)
    fewest = full.parallel.gpus                          # (whatever it is: the relations below are the test)
    for n in (1, fewest // 2, fewest - 1):
        with pytest.raises(ValueError, match="max_gpus"):
            fewest_gpus.min_gpus(m, g, batch=1, seq=8192, max_gpus=n)
    for n in (fewest, fewest + 12, 4096):
        assert fewest_gpus.min_gpus(m, g, batch=1, seq=8192, max_gpus=n) == full


def test_a_refused_wide_search_falls_back_to_the_count(monkeypatch):
    """Where plan() refuses the search of the counts sharing the global batch (more plans than one call weighs),
    the search of the count alone answers (fast10b; up to the count before), with the old way's answer."""
    from llmsizing import planner

    real = planner.plan

    def refusing(model, **kw):
        if kw["max_gpus"] == kw["global_batch"] and kw["max_gpus"] > 64:
            raise ValueError("more than MAX_MOE_PLANS plans fit (test)")
        return real(model, **kw)

    _clear()
    want = _old_way("mixtral-8x7b", "H100 SXM", 4096, 64)
    monkeypatch.setattr(planner, "plan", refusing)
    assert want is not None
    assert stages.moe_default_layout("mixtral-8x7b", "H100 SXM", seq=4096, n_gpus=64) == want
    assert stages._kept_fastest.cache_info().currsize == 1           # the search up to 64 GPUs, kept
    _clear()


def test_fastest_per_count_is_idxmin():
    """stages._Fastest reads each count's fastest row as ``rows[rows.n_gpus == n].step_time_s.idxmin()``: the
    least, NaN skipped, the first in the table's order on a tie."""
    import numpy as np
    import pandas as pd

    rows = pd.DataFrame({"n_gpus": [8, 16, 8, 8, 16, 32], "step_time_s": [2.0, np.nan, 1.5, 1.5, 3.0, 1.0],
                         "tp": [1, 2, 4, 8, 1, 2], "cp": 1, "pp": 1, "dp": [8, 8, 2, 1, 16, 16], "zero": 1,
                         "sp": [False, True, True, True, False, True], "ep": 1,
                         "micro_batch": [1, 2, 4, 1, 2, 1]})
    got = stages._Fastest(rows)
    for n in (8, 16, 32):
        r = rows.loc[rows[rows["n_gpus"] == n]["step_time_s"].idxmin()]
        par, micro = got.get(n)
        assert (par.tp, par.dp, par.sp, micro) == (r["tp"], r["dp"], r["sp"], r["micro_batch"])
    assert got.get(8)[0].tp == 4 and got.get(64) is None                 # the tie: the first of the two
    assert stages._Fastest(pd.DataFrame(columns=list(rows.columns))).get(8) is None
