"""Chapter 18's widget (llmsizing.widgets.moe_layout_widget), driven from pytest: its default is the chapter's
checked figure, each control moves what the library says it should, and a layout the library refuses shows the
refusal (naming the parameter) instead of a figure."""

from __future__ import annotations

import html

import pytest

pytest.importorskip("ipywidgets")

import llmsizing as L
from llmsizing import charts
from llmsizing import widgets
from llmsizing.widgets import moe_layout_widget


@pytest.fixture(scope="module")
def w():
    return moe_layout_widget()


def _set(w, **values):
    for k, v in values.items():
        w.controls[k].value = v


def test_default_is_the_chapters_figure(w):
    assert w.values() == {k: v for k, v in charts.MOE_LAYOUT_DEFAULT.items() if k != "seq"}
    assert w.summary.value and w.error.layout.display == "none" and bytes(w.image.value).startswith(b"\x89PNG")
    assert w.summary.value == widgets.summary_html(charts.render_moe_layout().summary)     # (issue 25: wrapped)


def test_summary_is_the_library(w):
    _set(w, ep=4, dp=16, zero=1)
    try:
        par = L.Parallel(dp=16, ep=4, zero=1)
        t = L.training_memory("mixtral-8x7b", batch=1, seq=4096, grad_accum=8, recompute="full", parallel=par)
        st = L.step_time("mixtral-8x7b", "H100 SXM", par, batch=1, seq=4096, grad_accum=8, recompute="full")
        text = w.summary.value
        assert f"{t.total_bytes / 2**30:,.1f} GiB" in text and f"step time {st.step_s:.3f} s" in text
        assert "2 of 8 experts per GPU" in text and "edp=4" in text        # 8 / ep; 16 / 4 GPUs per expert
    finally:
        _set(w, **{k: charts.MOE_LAYOUT_DEFAULT[k] for k in ("ep", "dp", "zero")})


def test_more_expert_parallelism_holds_fewer_experts_and_adds_all_to_all(w):
    """Each GPU holds 8 / ep experts of each layer: from ep = 1 to 8 the weights per GPU fall by 7/8 of the
    experts' 45.1B bf16 parameters (90.2 GB x 7/8), and an all-to-all appears."""
    _set(w, ep=1)
    try:
        one = L.training_memory("mixtral-8x7b", batch=1, seq=4096, grad_accum=8, recompute="full",
                                parallel=L.Parallel(dp=32, ep=1, zero=1)).states.weights_bytes
        eight = L.training_memory("mixtral-8x7b", batch=1, seq=4096, grad_accum=8, recompute="full",
                                  parallel=L.Parallel(dp=32, ep=8, zero=1)).states.weights_bytes
        assert one - eight == pytest.approx(2 * 45_097_156_608 * 7 / 8)
        assert "all-to-all 0.000 s" in w.summary.value
    finally:
        _set(w, ep=8)
    assert "all-to-all 0.000 s" not in w.summary.value


@pytest.mark.parametrize("values, words", [
    (dict(dp=2, tp=2, ep=8), "ep=8"),              # ep must divide tp x dp (Mixtral's ep=16 is not offered)
    (dict(dp=2, ep=8), "ep=8"),                    # ep must divide tp x dp
    (dict(zero=2, recompute="none", dp=1, ep=1), "does NOT fit"),      # a summary, not an error
])
def test_bad_layouts_show_the_refusal(w, values, words):
    _set(w, **values)
    try:
        shown = w.error.value + w.summary.value
        assert words in shown and "Traceback" not in shown
        if "NOT" not in words:
            assert bytes(w.image.value) == b"" and w.error.layout.display != "none"
    finally:
        _set(w, **{k: charts.MOE_LAYOUT_DEFAULT[k] for k in values})
    assert w.error.layout.display == "none" and bytes(w.image.value)


def test_dualpipe_overlap_hides_the_all_to_all(w):
    _set(w, ep_overlap=1.0)
    try:
        assert "exposed 0.000 s (100% hidden" in w.summary.value
    finally:
        _set(w, ep_overlap=0.0)


def test_deepseek_layout_with_node_limited_routing(w):
    _set(w, model="deepseek-v3", gpu="H800", pp=16, dp=128, ep=64, grad_accum=128)
    try:
        assert w.error.layout.display == "none", w.error.value
        assert "each token to at most 4 nodes" in w.summary.value
        assert "4 of 256 experts" in w.summary.value                        # 256 / 64
    finally:
        _set(w, **{k: charts.MOE_LAYOUT_DEFAULT[k] for k in ("model", "gpu", "pp", "dp", "ep", "grad_accum")})


def test_a_dense_model_is_refused():
    with pytest.raises(ValueError, match="dense"):
        moe_layout_widget("llama-3-8b")


def test_ep_slider_offers_only_degrees_that_divide_the_models_experts():
    """Issue 25 (moving a control changes the figure or says why): the ep slider once offered 16 for Mixtral's 8
    experts, a move that could only give the library's refusal. It offers the divisors of the chosen model's
    routed experts, and a degree the reader chose comes back when a model with more experts is picked."""
    from llmsizing.catalog import get_model, list_models
    from llmsizing.widgets import moe_layout_widget

    box = moe_layout_widget()
    for name in list_models(moe=True):
        box.controls["model"].value = name
        experts = get_model(name).experts
        options = list(box.controls["ep"].options)
        assert options and all(experts % e == 0 for e in options), (name, options)
        assert max(options) == max(2**k for k in range(9) if experts % 2**k == 0)
    box.controls["model"].value = "deepseek-v3"           # 256 routed experts
    box.controls["ep"].value = 64
    box.controls["model"].value = "mixtral-8x7b"          # 8: ep falls to 8
    assert box.controls["ep"].value == 8
    box.controls["model"].value = "deepseek-v3"
    assert box.controls["ep"].value == 64


def test_dispatcher_toggle_moves_the_step_as_the_library_says(w):
    """Issue 35: the dispatcher toggle gives step_time(dispatcher=) of the same layout. At ep=4 each GPU holds
    two of Mixtral's eight experts; a token's two distinct experts share a GPU with probability
    4 x C(2,2) / C(8,2) = 1/7, so it reaches 2 - 1/7 = 13/7 GPUs and DeepEP's one copy per GPU sends 13/14 of
    alltoall's k = 2 copies (by hand). The summary names the dispatcher and gives alltoall's all-to-all beside
    it, the figure changes, and back to alltoall the chapter's figure returns."""
    from llmsizing.all_to_all import DISPATCHERS

    assert list(w.controls["dispatcher"].options) == list(DISPATCHERS)
    par = L.Parallel(dp=32, ep=4, zero=1)
    kw = dict(batch=1, seq=4096, grad_accum=8, recompute="full")
    steps = {d: L.step_time("mixtral-8x7b", "H100 SXM", par, dispatcher=d, **kw) for d in DISPATCHERS}
    rows = {d: [c for c in st.communication.collectives if c.group == "ep"] for d, st in steps.items()}
    assert rows["deepep"] and len(rows["deepep"]) == len(rows["alltoall"])
    for a, b in zip(rows["alltoall"], rows["deepep"]):
        assert b.message_bytes == pytest.approx(a.message_bytes * 13 / 14, rel=1e-12)
    a2a, a2a0 = (steps[d].comm_by_group_s["ep"] for d in ("deepep", "alltoall"))
    assert a2a < a2a0
    _set(w, ep=4)
    try:
        before = bytes(w.image.value)
        _set(w, dispatcher="deepep")
        text = w.summary.value
        assert w.error.layout.display == "none", w.error.value
        assert f"step time {steps['deepep'].step_s:.3f} s" in text and f"all-to-all {a2a:.3f} s" in text
        assert "deepep dispatcher" in text and f"all-to-all {a2a0:.3f} s)" in text
        assert bytes(w.image.value) != before
    finally:
        _set(w, dispatcher="alltoall", ep=charts.MOE_LAYOUT_DEFAULT["ep"])
    assert w.summary.value == widgets.summary_html(charts.render_moe_layout().summary)
