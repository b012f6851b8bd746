"""Chapter 19's widget (llmsizing.widgets.rl_widget), driven from pytest: its default is the chapter's
checked figure, each control moves what the library says it should, and a setting the library refuses shows
the refusal (naming the parameter) instead of a figure."""

from __future__ import annotations


import pytest

pytest.importorskip("ipywidgets")

from llmsizing import charts, widgets
from llmsizing.rl import rl_run
from llmsizing.widgets import RL_MODES, rl_widget


@pytest.fixture(scope="module")
def w():
    return rl_widget()


def _set(w, **values):
    for k, v in values.items():
        w.controls[k].value = v


def _default(w, *names):
    _set(w, **{k: charts.RL_DEFAULT[k] if k != "mode" else "colocated" for k in names})


def test_default_is_the_chapters_figure(w):
    d = charts.RL_DEFAULT
    expected = {k: v for k, v in d.items() if k not in ("prompt", "colocated", "off_policy_steps")}
    assert w.values() == expected | {"mode": "colocated"}
    assert RL_MODES[w.values()["mode"]] == (d["colocated"], d["off_policy_steps"])
    assert w.error.layout.display == "none" and bytes(w.image.value).startswith(b"\x89PNG")
    assert w.summary.value == widgets.summary_html(charts.render_rl_step().summary)


def test_summary_is_the_library(w):
    _set(w, n_gpus=32, algorithm="ppo")
    try:
        r = rl_run("llama-3-8b", gpu="H100 SXM", n_gpus=32, prompts_per_step=128, samples_per_prompt=16,
                   prompt=128, response=(932, 3968), steps=1000, algorithm="ppo")
        text = w.summary.value
        assert f"step {r.step_s:,.1f} s" in text and f"{r.gpu_hours:,.0f} GPU-hours" in text
        assert "PPO" in text and "engines: 32 of tp=1" in text
    finally:
        _default(w, "n_gpus", "algorithm")


def test_a_longer_tail_lengthens_generation(w):
    """Same mean, longest response 3,968 -> 16,384 tokens: the decode steps follow the longest (16,384)."""
    _set(w, response_max=16384)
    try:
        assert "16,384 decode steps" in w.summary.value
    finally:
        _default(w, "response_max")


@pytest.mark.parametrize("values, words", [
    (dict(response_mean=8192, response_max=1024), "needs mean &lt;= longest"),
    (dict(prompts_per_step=8, samples_per_prompt=1, n_gpus=1, mode="split"), "n_gpus &gt;= 2"),
])
def test_refusals_show_the_library_message(w, values, words):
    _set(w, **values)
    try:
        shown = w.error.value + w.summary.value
        assert words in shown and "Traceback" not in shown
        assert bytes(w.image.value) == b"" and w.error.layout.display != "none"
    finally:
        _default(w, *values)
    assert w.error.layout.display == "none" and bytes(w.image.value)


def test_split_pools_off_policy_is_offered(w):
    _set(w, mode="split, 1 off")
    try:
        assert w.error.layout.display == "none", w.error.value
        assert "split pools, 1 step(s) off policy" in w.summary.value
    finally:
        _default(w, "mode")


# How long a move of rl_widget takes is measured by benchmarks/bench_rl_widget.py, a benchmark, not a timed
# test (the guide's principle 6; the 100 ms CPU guard that stood here was removed in session 39).
