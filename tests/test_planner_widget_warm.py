"""Chapter 12's widget built warm (moefast34, issue 38): ``planner_widget(warm=True)`` makes the searches of
its drop-down's mixtures of experts at the other defaults before its first view and keeps their tables, so
that a reader's pick of one is answered without a new search; the answer (PNG and summary) must be the very
one the cold widget gives, which searches at the pick."""

from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets")

from _plan_calls import counting_plan_calls

from llmsizing.catalog import get_model, list_models
from llmsizing.widgets import planner_warm_models, planner_widget

#: Mixtures of experts of the catalogue, named by hand from their papers and model cards (Mixtral 8x7B,
#: Jiang et al. 2024; Qwen3-30B-A3B, Qwen3 technical report 2025; DeepSeek-V2, DeepSeek-AI 2024; OLMoE,
#: Muennighoff et al. 2024; granite-3.0-1b-a400m, IBM 2024) and dense models (Llama 3, Dubey et al. 2024).
SOME_MOE = ("mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v2", "olmoe-1b-7b", "granite-3.0-1b-a400m")
SOME_DENSE = ("llama-3-8b", "llama-3-70b")


def test_the_warm_models_are_the_drop_downs_mixtures_of_experts():
    warm = planner_warm_models(list_models())
    assert set(SOME_MOE) <= set(warm) and not set(SOME_DENSE) & set(warm)
    assert list(warm) == [m for m in list_models() if m in warm]            # (the drop-down's order)
    assert all(get_model(m).is_moe for m in warm)
    assert planner_warm_models(["llama-3-8b"]) == ()


def test_warm_must_be_a_bool():
    with pytest.raises(TypeError, match="warm"):
        planner_widget("llama-3-8b", warm=1)




def test_a_warm_widgets_pick_of_a_mixture_of_experts_is_no_new_search(monkeypatch):
    calls = counting_plan_calls(monkeypatch)
    w = planner_widget("llama-3-8b", warm=True)
    built = list(calls)
    assert set(SOME_MOE) <= set(built)                # searched when built, before any move
    for m in SOME_MOE:
        w.controls["model"].value = m
        assert w.error.layout.display == "none"
    assert calls == built                                              # no search at the picks
    w.controls["seq"].value = 4096                                     # another setting: a search, as before
    assert len(calls) == len(built) + 1


def test_a_cold_widget_searches_at_the_pick(monkeypatch):
    calls = counting_plan_calls(monkeypatch)
    w = planner_widget("llama-3-8b")
    assert calls == ["llama-3-8b"]
    w.controls["model"].value = "qwen3-30b-a3b"
    assert calls == ["llama-3-8b", "qwen3-30b-a3b"]


def test_warm_and_cold_widgets_show_the_same_answers():
    """Every mixture of experts the drop-down offers, picked in both, then a token budget, a deadline and a
    GPU limit on a warmed table: the same PNG and summary."""
    warm, cold = planner_widget("llama-3-8b", warm=True), planner_widget("llama-3-8b")
    for m in (*planner_warm_models(warm.controls["model"].options), "llama-3-8b"):
        for w in (warm, cold):
            w.controls["model"].value = m
        assert bytes(warm.image.value) == bytes(cold.image.value), m
        assert warm.summary.value == cold.summary.value, m
    for w in (warm, cold):
        w.controls["model"].value = "mixtral-8x7b"
    for name in ("tokens", "deadline", "max_gpus"):
        for w in (warm, cold):
            options = [o[1] if isinstance(o, tuple) else o for o in w.controls[name].options]
            w.controls[name].value = next(v for v in options if v != w.controls[name].value)
        assert bytes(warm.image.value) == bytes(cold.image.value), name
        assert warm.summary.value == cold.summary.value, name
