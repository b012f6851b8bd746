"""Chapter 17's figure of sliding-window and hybrid attention (issue 38: the section had glued numbers but no
figure): keys a query attends to against the context length, for full causal attention, a sliding window in
every layer (Mistral 7B v0.1, w = 4,096) and a hybrid (gpt-oss-120b: 18 of its 36 layers windowed at 128).

Expected values by hand. Causally, a query at position i of a sequence of s tokens attends to i keys, s / 2 on
average; with a window w it attends to min(i, w), whose mean over the sequence is w - w^2 / (2 s) for s >= w
(the band's area over s: Beltagy et al. 2020, Longformer, Sec. 3.1; Jiang et al. 2023, Mistral 7B, Sec. 2)."""

from __future__ import annotations

import pytest

from llmsizing import charts

FULL, WINDOW, HYBRID = "llama-3.1-405b", "mistral-7b", "gpt-oss-120b"
S = 131072


def _lines(view) -> dict[str, tuple]:
    ax = view.figure.axes[0]
    return {line.get_label().split(":")[0]: (tuple(line.get_xdata()), tuple(line.get_ydata()))
            for line in ax.get_lines()}


def test_the_lines_are_the_hand_counts():
    view = charts.render_attention_keys()
    lines = _lines(view)
    assert set(lines) == {FULL, WINDOW, HYBRID}
    xs = lines[FULL][0]
    assert xs[0] == 1024 and xs[-1] == 524288 and S in xs
    at = {name: dict(zip(*lines[name])) for name in lines}
    assert at[FULL][S] == pytest.approx(S / 2)                                         # 65,536
    assert at[WINDOW][S] == pytest.approx(4096 - 4096**2 / (2 * S))                   # 4,032
    assert at[WINDOW][4096] == pytest.approx(2048)                # within the window: full causal attention
    windowed = 128 - 128**2 / (2 * S)                              # 127.94: half of gpt-oss's layers ...
    assert at[HYBRID][S] == pytest.approx((18 * windowed + 18 * S / 2) / 36)           # ... 32,832
    # a window levels off at w; a hybrid keeps growing at a constant share of the full count
    assert at[WINDOW][524288] < 4096 < at[FULL][16384]
    assert at[HYBRID][524288] / at[FULL][524288] == pytest.approx(0.5, abs=0.001)
    assert "131,072" in view.summary and "4,032" in view.summary


def test_labels_come_from_the_models_fields():
    labels = [line.get_label() for line in charts.render_attention_keys().figure.axes[0].get_lines()]
    assert labels == [f"{FULL}: full causal attention", f"{WINDOW}: sliding window w = 4,096 in every layer",
                      f"{HYBRID}: hybrid, 18 of 36 layers windowed at w = 128"]


def test_the_caption_is_inside_the_png_and_every_text_readable():
    from test_chart_text_inside import _texts_outside

    caption = ("Keys a query attends to on average, causal, against the context length: full attention grows "
               "with the context, a sliding window levels off at its width, a hybrid keeps growing. " * 2)
    view = charts.render_attention_keys(caption=caption)
    words = [t for t in view.figure.texts if t.get_gid() == "caption"]
    assert len(words) == 1 and " ".join(words[0].get_text().split()) == " ".join(caption.split())
    outside, small = _texts_outside(view.figure)
    assert not outside and not small, (outside, small)
    assert "Keys a query attends to on average" in charts.figure_alt_text(view)
    assert view.figure.get_figheight() > charts.render_attention_keys().figure.get_figheight()


@pytest.mark.parametrize("kw, exc, word", [(dict(models=()), ValueError, "models"),
                                           (dict(models="mistral-7b"), ValueError, "models"),
                                           (dict(seqs=(4096,)), ValueError, "seqs"),
                                           (dict(caption=3), TypeError, "caption")])
def test_bad_input_is_refused_by_name(kw, exc, word):
    with pytest.raises(exc, match=word):
        charts.render_attention_keys(**kw)
