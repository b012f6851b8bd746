"""Issue 38 (speed25): chapter 12's widget answers a lower GPU limit than a search it made at the other
settings with a cut of that search (planner.plans_within), no new search. The oracle is a widget built with
the cut switched off (its plans_within finds nothing, so each limit is its own plan() search): the same PNG,
summary, error and plan selector."""

from __future__ import annotations

import hashlib

import matplotlib
import pytest

matplotlib.use("Agg")

from llmsizing import planner  # noqa: E402
from llmsizing.widgets import planner_widget  # noqa: E402


def _shown(w) -> tuple:
    return (hashlib.sha256(w.image.value).hexdigest(), w.summary.value, w.error.value,
            list(w.controls["choice"].options))


@pytest.mark.parametrize("model, limits", [("llama-3-8b", (2048, 64, 8)), ("mixtral-8x7b", (1024, 16))])
def test_a_lower_gpu_limit_is_a_cut_of_the_search_and_shows_the_same(model, limits, monkeypatch):
    calls = []
    real = planner.plan
    monkeypatch.setattr(planner, "plan", lambda *a, **k: calls.append(k.get("max_gpus")) or real(*a, **k))
    w = planner_widget(model)                    # (its search at 4,096 GPUs, through the spy)
    monkeypatch.undo()
    assert calls == [4096]
    monkeypatch.setattr(planner, "plans_within", lambda plans, max_gpus: plans.iloc[:0])
    searched = planner_widget(model)             # (the oracle: no cut, a search at each limit)
    monkeypatch.undo()
    for limit in limits:
        w.controls["max_gpus"].value = limit
        searched.controls["max_gpus"].value = limit
        assert _shown(w) == _shown(searched), limit
    # no new search (but where a cut leaves no plan: plan() then says why)
    assert all(m <= 16 for m in calls[1:]), calls
