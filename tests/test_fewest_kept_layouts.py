"""min_gpus and fits_on build their dense layouts through parallel.kept_parallel (issue 38: chapter 10's
figure asks the same layouts on every GPU count). The expected answers are the reference path's: the same
calls with every layout built anew (fewest_gpus.kept_parallel swapped for Parallel), computed here on a grid,
never typed in; equal to the last digit (the repr of the whole Plan)."""

from __future__ import annotations

import itertools

import pytest

from llmsizing import fewest_gpus
from llmsizing.fewest_gpus import fits_on, min_gpus
from llmsizing.parallel import Parallel

MODELS = ("gpt2", "llama-3-8b", "llama-3-70b", "llama-3.1-405b")
GPUS = ("H100 SXM", "A100 80GB")
#: (batch, seq, recompute, offload): chapter 10's question, longer and shorter sequences, offloading
ASKS = ((1, 8192, "full", False), (2, 4096, "none", False), (1, 2048, "selective", True))
COUNTS = (1, 8, 24, 64, 512, 1000, 4096)


def _outcome(fn):
    try:
        return repr(fn())
    except ValueError as e:
        return f"ValueError: {e}"


@pytest.mark.parametrize("model, gpu", list(itertools.product(MODELS, GPUS)))
def test_min_gpus_and_fits_on_equal_the_reference_path(monkeypatch, model, gpu):
    calls = [lambda b=b, s=s, r=r, o=o: min_gpus(model, gpu, batch=b, seq=s, recompute=r, offload=o)
             for b, s, r, o in ASKS]
    calls += [lambda n=n: fits_on(model, gpu, n, seq=8192) for n in COUNTS]
    with monkeypatch.context() as mp:
        mp.setattr(fewest_gpus, "kept_parallel", Parallel)
        ref = [_outcome(f) for f in calls]
    assert [_outcome(f) for f in calls] == ref
    assert [_outcome(f) for f in calls] == ref              # and again, from the kept layouts
