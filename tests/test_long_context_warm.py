"""Chapter 17's widget built warm (issue 35): ``long_context_widget(warm=True)`` makes the searches of
its drop-down's mixtures of experts at the other defaults before its first view, so that a reader's pick
of one is answered without a new search; the answer (PNG and summary) must be the very one the cold widget
gives. And ``charts.render_plan`` reading the plans' columns from a frame without ``attrs`` (``_bare``)
draws the same."""

from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets")

from _plan_calls import counting_plan_calls

import llmsizing.planner as planner_module
from llmsizing import charts
from llmsizing.catalog import get_model, list_models
from llmsizing.charts import plan_groups, time_money_plan
from llmsizing.widgets import long_context as lc
from llmsizing.widgets import long_context_widget

#: Mixtures of experts of the catalogue, named by hand from their papers and model cards (Mixtral 8x7B,
#: Jiang et al. 2024; Qwen3-30B-A3B, Qwen3 technical report 2025; DeepSeek-V2, DeepSeek-AI 2024; gpt-oss-120b,
#: OpenAI 2025; granite-3.0-1b-a400m, IBM 2024) and dense models (Llama 3, Dubey et al. 2024).
SOME_MOE = ("mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v2", "gpt-oss-120b", "granite-3.0-1b-a400m")
SOME_DENSE = ("llama-3-8b", "llama-3.1-405b")


def test_the_warm_models_are_the_drop_downs_mixtures_of_experts():
    warm = lc.long_context_warm_models(list_models())
    assert set(SOME_MOE) <= set(warm) and not set(SOME_DENSE) & set(warm)
    assert list(warm) == [m for m in list_models() if m in warm]            # (the drop-down's order)
    assert all(get_model(m).is_moe for m in warm)
    assert lc.long_context_warm_models(["llama-3-8b"]) == ()


def test_warm_must_be_a_bool():
    with pytest.raises(TypeError, match="warm"):
        long_context_widget("llama-3-8b", warm=1)




def test_a_warm_widgets_pick_of_a_mixture_of_experts_is_no_new_search(monkeypatch):
    calls = counting_plan_calls(monkeypatch)
    w = long_context_widget("llama-3-8b")
    built = list(calls)
    assert set(SOME_MOE) <= set(built)                # searched when built, before any move
    for m in SOME_MOE:
        w.controls["model"].value = m
        assert w.error.layout.display == "none"
    assert calls == built                                              # no search at the picks
    w.controls["seq"].value = 32768                                    # another setting: a search, as before
    assert len(calls) == len(built) + 1


def test_the_warm_settings_are_one_step_of_context_exchange_or_batch_from_the_model_s():
    values = dict(model="llama-3-8b", seq=131072, gpus=("H100 SXM",), batch_tokens=2**24, max_gpus=16384,
                  cp_comm="p2p")
    got = lc.long_context_warm_settings(values, 16384)
    # each differs from the setting in exactly one of the context, the exchange and the tokens per batch
    for key in got:
        changed = {name for name, a, b in zip(("model", "seq", "gpus", "batch_tokens", "max_gpus", "cp_comm"),
                                              key, (values[k] for k in ("model", "seq", "gpus", "batch_tokens",
                                                                       "max_gpus", "cp_comm"))) if a != b}
        assert len(changed) == 1 and changed <= {"seq", "cp_comm", "batch_tokens"}, key
    assert len(got) == len(set(got)) == ((len(lc.LONG_CONTEXT_SEQS) - 1) + 1
                                         + (len(lc.LONG_CONTEXT_BATCH_TOKENS) - 1))
    assert got[0][1] in (65536, 262144)                  # (the slider's neighbours first)


def test_a_warm_widgets_steps_from_the_defaults_are_no_new_search(monkeypatch):
    calls = counting_plan_calls(monkeypatch)
    w = long_context_widget("llama-3-8b")
    built = list(calls)
    for name, values in (("seq", lc.LONG_CONTEXT_SEQS), ("cp_comm", ("all_gather",)),
                         ("batch_tokens", [b for _, b in lc.LONG_CONTEXT_BATCH_TOKENS])):
        default = w.controls[name].value
        for v in values:
            w.controls[name].value = v
            assert w.error.layout.display == "none", (name, v)
        w.controls[name].value = default
    assert calls == built                                              # no search at these steps
    w.controls["gpus"].value = ("H100 SXM", "H200")                    # two GPU types: a search, as before
    assert len(calls) == len(built) + 1


def test_a_cold_widget_searches_at_the_pick(monkeypatch):
    calls = counting_plan_calls(monkeypatch)
    w = long_context_widget("llama-3-8b", warm=False)
    assert calls == ["llama-3-8b"]
    w.controls["model"].value = "qwen3-30b-a3b"
    assert calls == ["llama-3-8b", "qwen3-30b-a3b"]


def test_warm_and_cold_widgets_show_the_same_answers():
    warm, cold = long_context_widget("llama-3-8b"), long_context_widget("llama-3-8b", warm=False)
    for m in (*SOME_MOE, "llama-3-8b"):
        for w in (warm, cold):
            w.controls["model"].value = m
        assert bytes(warm.image.value) == bytes(cold.image.value), m
        assert warm.summary.value == cold.summary.value, m
    for name, v in (("seq", 32768), ("seq", 262144), ("cp_comm", "all_gather"), ("batch_tokens", 2**22)):
        for w in (warm, cold):                          # (the settings warmed one step from the defaults)
            default = w.controls[name].value
            w.controls[name].value = v
        assert bytes(warm.image.value) == bytes(cold.image.value), (name, v)
        assert warm.summary.value == cold.summary.value, (name, v)
        for w in (warm, cold):
            w.controls[name].value = default


def test_render_plan_draws_the_same_with_or_without_the_bare_table(monkeypatch):
    plans = planner_module.plan("qwen3-30b-a3b", tokens=lc.LONG_CONTEXT_TOKENS, gpus=("H100 SXM",), seq=32768,
                                global_batch=512, max_gpus=4096)
    assert plans.attrs                                       # (plan()'s tables carry attrs: the case here)
    kw = dict(tokens=lc.LONG_CONTEXT_TOKENS, gpus=("H100 SXM",), seq=32768, global_batch=512, max_gpus=4096,
              plans=plans)
    new = charts.render_plan("qwen3-30b-a3b", **kw)
    time_money_plan._PLAN_GROUPS_KEPT.clear()
    monkeypatch.setattr(time_money_plan, "_bare", lambda table: table)
    monkeypatch.setattr(plan_groups, "_bare", lambda table: table)       # (_plan_groups' own, session 25)
    old = charts.render_plan("qwen3-30b-a3b", **kw)
    assert new.summary == old.summary
    assert new.png() == old.png()


def test_bare_shares_the_values_and_leaves_the_table_alone():
    plans = planner_module.plan("mixtral-8x7b", tokens=1e11, gpus=("H100 SXM",), seq=8192, global_batch=256,
                                max_gpus=512)
    attrs = dict(plans.attrs)
    bare = time_money_plan._bare(plans)
    assert bare.attrs == {} and plans.attrs == attrs
    assert bare.index.equals(plans.index) and list(bare.columns) == list(plans.columns)
    for name in plans.columns:
        assert bare[name].equals(plans[name]) and bare[name].dtype == plans[name].dtype
    assert time_money_plan._bare(bare) is bare
