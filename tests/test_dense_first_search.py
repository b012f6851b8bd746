"""pick49 (issues 35, 38): what a dense model's first search works out for the model itself (its layouts and
their checks, its gradient-bucket counts) is cheaper, with the same bits.

* ``grad_buckets._kept_prepare``: a chunk's pieces prepared once per their sizes (shared by every pipeline
  depth), and one bucket count where ``apart`` reads nothing (no tied embedding under a pipeline);
* ``Parallel``: a Python int or bool in range is kept as its check would return it;
* ``_compat.keep_hash``: the fields' tuple formed by ``operator.attrgetter``.

The oracles: the full walk over every parameter (``megatron_bucket_assignment``) for the counts; the checks
themselves for the layouts; and for the planner, each model's search made from nothing (every kept result of
the library cleared) against the same search made after the model's search at another context (its
per-model work kept), compared exactly.
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pandas as pd
import pytest

from llmsizing import grad_buckets, planner
from llmsizing.catalog import get_model, list_models
from llmsizing.grad_buckets import (DP_BUCKET_MIN_PARAMS, megatron_bucket_assignment, megatron_buckets,
                                    megatron_calls_of)
from llmsizing.parallel import Parallel


def _clear_every_kept_result() -> None:
    """Every kept result of the library's loaded modules (``functools`` caches and the planner's kept
    blocks): the next search starts from nothing."""
    for name, mod in list(sys.modules.items()):
        if not name.startswith("llmsizing") or mod is None:
            continue
        for value in list(vars(mod).values()):
            if isinstance(value, type):                 # (a class of kept tables: its instances are cleared)
                continue
            clear = getattr(value, "cache_clear", None)
            if callable(clear) and getattr(value, "__module__", name) == name:
                clear()
    from llmsizing import plan_moe
    plan_moe._kept_units.clear()


def _dense_models(n: int) -> list[str]:
    """``n`` dense models of the catalogue spread over its list (not chosen by name)."""
    dense = [m for m in list_models() if not get_model(m).is_moe]
    step = len(dense) / n
    return [dense[int(i * step)] for i in range(n)]


def _plan(model: str, seq: int):
    return planner.plan(model, tokens=8e11, gpus=("H100 SXM",), seq=seq, global_batch=max(2**24 // seq, 1),
                        max_gpus=16384, cp_comm="p2p")


@pytest.mark.parametrize("model", _dense_models(6))
def test_a_search_after_the_models_own_work_is_kept_is_the_cold_search(model):
    _clear_every_kept_result()
    cold = _plan(model, 131072)
    _clear_every_kept_result()
    _plan("llama-3.1-405b", 131072)              # (another model's work kept too, as in the widget)
    _plan(model, 262144)                        # (the model's layouts, states and bucket counts kept)
    planner._search.cache_clear()               # (the search itself made again, from the kept parts)
    kept = _plan(model, 131072)
    pd.testing.assert_frame_equal(kept, cold, check_exact=True)
    assert kept.attrs == cold.attrs
    assert len(cold) > 100                      # (a real search: hundreds to thousands of plans)


def test_the_models_picked_are_dense_and_spread():
    got = _dense_models(6)
    assert len(set(got)) == 6 and not any(get_model(m).is_moe for m in got)


@pytest.mark.parametrize("name,tied", [("llama-2-7b", False), ("llama-2-7b", True), ("gpt2", True),
                                       ("gpt2", False), ("mistral-7b", False)])
def test_kept_bucket_counts_are_the_full_walks(name, tied):
    """Each count of ``megatron_calls_of`` (prepared pieces shared by every pipeline depth, ``apart`` folded
    where no tied embedding is split off) is the number of buckets of the walk over every parameter, for
    ZeRO 0 (no alignment) and 1 (64-element alignment; a tied embedding under a pipeline is a bucket of its
    own), pipelines whose rank 0 holds 1 to all layers, and buckets from 40M parameters to the whole chunk."""
    model = dataclasses.replace(get_model(name), tied_embeddings=tied)
    for kept in vars(grad_buckets).values():     # (its kept counts too: a count kept by an earlier test in
        if hasattr(kept, "cache_clear") and kept.__module__ == grad_buckets.__name__:   # this process would
            kept.cache_clear()                      # skip the pieces, and their sharing)
    checked = 0
    for tp in (1, 2):
        for pp in (1, 2, 4):
            for zero in (0, 1):
                for dp in (8, 64, 512, 4096):
                    bucket = max(DP_BUCKET_MIN_PARAMS, 1_000_000 * dp)
                    par = Parallel(tp=tp, pp=pp, dp=dp, zero=zero)
                    full = max(1, len(megatron_bucket_assignment(model, par, bucket_params=bucket)))
                    got = megatron_calls_of(model, tp, pp, 1, zero, float(bucket))
                    assert got == full, (tp, pp, zero, dp)
                    assert megatron_buckets(model, par, bucket_params=bucket) == full
                    checked += 1
    assert checked == 48
    assert grad_buckets._kept_prepare.cache_info().hits > 0     # (the pieces were shared)


def test_a_tied_embedding_under_a_pipeline_keeps_its_own_bucket():
    """Llama-2-7B tied, pp = 2, dp = 8 (test_megatron_buckets' case by hand): 49 buckets without the
    distributed optimizer, 50 with it (the shared embedding a bucket of its own); untied, 49 either way: the
    folded key must not mix the two."""
    untied = get_model("llama-2-7b")
    tied = dataclasses.replace(untied, tied_embeddings=True)
    b = float(DP_BUCKET_MIN_PARAMS)
    assert megatron_calls_of(untied, 1, 2, 1, 1, b) == megatron_calls_of(untied, 1, 2, 1, 0, b) == 49
    assert megatron_calls_of(tied, 1, 2, 1, 0, b) == 49
    assert megatron_calls_of(tied, 1, 2, 1, 1, b) == 50


def test_prepared_pieces_are_read_only_and_the_same_floats():
    sizes = np.array([4096.0 * 4096, 4096.0, 11008.0 * 4096, 11008.0 * 4096])
    got = grad_buckets._kept_prepare(sizes.tobytes(), 64)
    want = grad_buckets._prepare(sizes, 64)
    assert got[-1] == 64 and len(got) == len(want) + 1
    for a, b in zip(got[:-1], want):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype and not a.flags.writeable
    assert grad_buckets._kept_prepare(sizes.tobytes(), 64) is got


@pytest.mark.parametrize("field,value,error", [
    ("tp", 0, ValueError), ("dp", -1, ValueError), ("cp", 2.0, TypeError), ("ep", True, TypeError),
    ("pp", 1025, ValueError), ("zero", 4, ValueError), ("zero", -1, ValueError),
    ("virtual_stages", 0, ValueError), ("tp", "2", TypeError), ("sp", 1, TypeError),
    ("expert_tp", "no", TypeError), ("account_for_loss", 0, TypeError)])
def test_a_layout_out_of_range_is_still_refused(field, value, error):
    with pytest.raises(error, match=field):
        Parallel(**{field: value})


def test_numpy_values_are_stored_as_python_ones():
    p = Parallel(tp=np.int64(2), pp=np.int32(2), dp=np.int64(4), zero=np.int8(1), sp=np.bool_(True),
                 cp=np.int64(2), virtual_stages=np.int64(1))
    for f in ("tp", "pp", "dp", "zero", "cp", "virtual_stages"):
        assert type(getattr(p, f)) is int, f
    assert p.sp is True
    assert p == Parallel(tp=2, pp=2, dp=4, zero=1, sp=True, cp=2) and hash(p) == hash(
        Parallel(tp=2, pp=2, dp=4, zero=1, sp=True, cp=2))


def test_a_kept_hash_is_the_hash_of_the_fields_tuple():
    p = Parallel(tp=4, pp=4, dp=8, zero=1, sp=True, cp=2)
    names = [f.name for f in dataclasses.fields(Parallel) if (f.compare if f.hash is None else f.hash)]
    assert hash(p) == hash(tuple(getattr(p, n) for n in names))
