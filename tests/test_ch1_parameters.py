"""Chapter 1 helpers: the 12 L h^2 shortcut, the parameter charts and the parameter-count widget."""

import pytest
from traitlets import TraitError

from llmsizing import Model, get_model, list_models
from llmsizing.charts import render_parameter_counts, render_parameter_shares
from llmsizing.model import approx_params_12lh2


def test_12lh2_is_the_block_count_of_a_gpt_block_without_biases():
    # a GPT-style block with f = 4h, no GQA, no biases and no norms' share: exactly 12 h^2 per block
    m = get_model("gpt3-175b")
    assert approx_params_12lh2(m) == 12 * 96 * 12288**2
    assert abs(approx_params_12lh2(m) - m.n_params) / m.n_params < 0.005  # within 0.5% for GPT-3


def test_12lh2_undercounts_small_models_with_big_vocabularies():
    for name, lo, hi in (("gpt2", 0.30, 0.33), ("llama-3-8b", 0.19, 0.21), ("qwen2-7b", 0.42, 0.44)):
        m = get_model(name)
        err = (m.n_params - approx_params_12lh2(m)) / m.n_params
        assert lo < err < hi, (name, err)


def test_12lh2_rejects_non_models():
    with pytest.raises(TypeError, match="model"):
        approx_params_12lh2("llama-2-7b")


def test_parameter_shares_cover_the_catalogue_and_sum_to_100():
    v = render_parameter_shares()
    lines = v.summary.splitlines()
    assert len(lines) == 1 + len(list_models())
    for name in list_models():
        parts = get_model(name).param_breakdown()
        assert sum(parts.values()) == get_model(name).n_params


def test_parameter_shares_bad_input():
    with pytest.raises(TypeError, match="models"):
        render_parameter_shares("llama-2-7b")
    with pytest.raises(ValueError, match="models"):
        render_parameter_shares([])
    with pytest.raises(ValueError, match="unknown model"):
        render_parameter_shares(["llama-9"])


def test_parameter_shares_accepts_models():
    m = Model("tiny", layers=2, hidden=64, heads=4, ffn_hidden=256, vocab=1000)
    assert "tiny" in render_parameter_shares([m, "gpt2"]).summary


def test_parameter_counts_names_the_changes():
    v = render_parameter_counts("llama-2-7b", layers=40)
    assert v.summary.startswith("llama-2-7b with layers=40: 8,357,482,496 parameters")
    assert render_parameter_counts().summary.startswith("llama-2-7b: 6,738,415,616 parameters")


def test_parameter_counts_widget_defaults_changes_and_errors():
    from llmsizing.widgets import parameter_counts_widget

    w = parameter_counts_widget()
    assert "6,738,415,616" in w.summary.value and w.error.value == ""
    w.controls["kv_heads"].value = 8
    assert "with kv_heads=8" in w.summary.value
    with pytest.raises(TraitError):  # 7 does not divide 32 heads: the slider does not offer it
        w.controls["kv_heads"].value = 7
    assert w.error.value == "" and "with kv_heads=8" in w.summary.value
    w.controls["model"].value = "gpt2"  # a preset resets every control
    assert "124,439,808" in w.summary.value and w.error.value == ""


def test_parameter_shares_leave_no_empty_rows():
    """read39b: the 55-model figure had 2.7 empty bar rows above its first bar and below its last (the
    axes' default 5% margins, ylim 57.14 to -3.14); the axis now spans the bars: 55 rows, -0.5 to 54.5, first
    on top."""
    names = list_models(moe=False)
    ax = render_parameter_shares(names).figure.axes[0]
    low, high = ax.get_ylim()
    assert (low, high) == (len(names) - 0.5, -0.5)
