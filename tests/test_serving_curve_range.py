"""srvcurve34 (issue 34, "every worked budget in the book shows its range"): chapter 15's latency/throughput
curve and its widget's summary carry the one 80% range the library states for a serving prediction, the
engine's speed over the model's (``data/serving_intervals.csv``, group ``all``: 0.772-1.309 today;
0.79-1.319 before the refit that priced Megatron-LM's backward TP overlap), never a
range of their own and never a wider one.

Expected values are worked out here from the stored bounds, read from the CSV with the csv module (not through
the library), and the library's point figures: a time (TTFT, ITL) is divided by the speed, so its low is
``t / 1.309`` and its high ``t / 0.772``; a rate (tokens/s) is multiplied, ``r x 0.772`` to ``r x 1.309``; a
price per token is the price over a rate, so its low is ``usd / 1.309`` and its high ``usd / 0.772``. Worked,
chapter 15's Llama-3-8B on one H100 at batch 1 (1,024 + 256 tokens): ITL 7.205 ms, so 7.205 / 1.309 =
5.504 ms and 7.205 / 0.772 = 9.333 ms (the band's first batch). The widget's text is also read back alone:
each printed low times 1.309 and high times 0.772 must give the printed point again, within the rounding of
the print."""

from __future__ import annotations

import csv
import html
import re
from pathlib import Path

import numpy as np
import pytest
from matplotlib.patches import Polygon

from _serving_bounds import stored_bounds

from llmsizing import serve as S

ROOT = Path(__file__).resolve().parents[1]


def _itl_batch1_by_hand_ms() -> float:
    """Chapter 15's ITL at batch 1 worked from the model's shape and the catalogues, not from the library's
    code: Llama-3-8B (Dubey et al. 2024; 32 layers, hidden 4,096, 32 heads of 128 of which 8 K/V heads, MLP
    14,336, vocabulary 128,256, untied) has N = 32 x (2 x 4,096^2 + 2 x 4,096 x 1,024 + 3 x 4,096 x 14,336 +
    2 x 4,096) + 2 x 128,256 x 4,096 + 4,096 = 8,030,261,248 parameters. A bf16 decode step reads the weights
    but the input embedding's table (only its row of the token: 2 (N - V h) + 2 h bytes at batch 1) at the
    fitted weights' share of HBM bandwidth, and the K/V cache at the mean decode context (1,024 + 256 / 2 =
    1,152 tokens x 2 x 32 x 8 x 128 x 2 B) at the attention's share, plus one step overhead; at batch 1 no
    other prompt's prefill rides along. Bandwidth from data/gpus.csv, shares and overhead from
    data/serving_model.csv (read with csv)."""
    h, layers, kv, d, ffn, vocab = 4096, 32, 8, 128, 14336, 128256
    n = layers * (2 * h * h + 2 * h * kv * d + 3 * h * ffn + 2 * h) + 2 * vocab * h + h
    assert n == 8_030_261_248                                   # the HF config's count (model card: 8.03B)
    with open(ROOT / "data" / "gpus.csv", newline="") as f:
        row = next(r for r in csv.DictReader(f) if r["name"] == "H100 SXM")
    bw = float(row["memory_bandwidth_gbps"]) * 1e9
    with open(ROOT / "data" / "serving_model.csv", newline="") as f:
        c = {r["constant"]: float(r["value"]) for r in csv.DictReader(f)}
    weights = 2 * (n - vocab * h) + 2 * h
    kv_cache = (1024 + 256 // 2) * 2 * layers * kv * d * 2
    step_s = weights / (bw * c["weights_bu"]) + kv_cache / (bw * c["attention_bu"]) + c["step_overhead_s"]
    return step_s * 1e3


def _text(widget) -> str:
    """The widget's summary as plain text (its HTML without tags)."""
    return html.unescape(re.sub(r"<[^>]+>", " ", widget.summary.value))


def _point_low_high(text: str, name: str, unit: str = "", suffix: str = "") -> tuple[float, float, float, int]:
    """(point, low, high, decimals) of ``name``'s "point (low-high)" in ``text``."""
    num = r"([\d,]+(?:\.(\d+))?)"
    u = re.escape(unit)
    m = re.search(rf"{name}{u}{num}{re.escape(suffix)} \({u}{num}-{u}{num}\)", text)
    assert m, f"no '{name} point (low-high)' in: {text}"
    vals = [float(m.group(i).replace(",", "")) for i in (1, 3, 5)]
    return (*vals, len(m.group(2) or ""))


def test_the_serving_widget_summary_gives_each_figure_as_point_low_high():
    """Driven as a participant does: the default view, then the batch, the GPU, tp and the model moved. At
    each setting the TTFT, ITL, tokens/s (per replica and per GPU) and the prices per million output and
    input tokens read "point (low-high)", the ends worked out by hand from the stored bounds, and the engine
    named."""
    from llmsizing.widgets import serving_widget

    lo, hi = stored_bounds()
    w = serving_widget()
    for moves in ({}, {"batch": 64}, {"gpu": "A100 80GB", "batch": 4}, {"tp": 4, "model": "llama-3-70b"},
                  {"prompt": 4096, "output": 1024, "batch": 256}):
        for k, v in moves.items():
            w.controls[k].value = v
        assert w.error.value == ""
        text = _text(w)
        c = {k: ctl.value for k, ctl in w.controls.items()}
        s = S.serving(c["model"], c["gpu"], tp=c["tp"], weights=c["weights"], prompt=c["prompt"],
                      output=c["output"], batch=c["batch"])
        # by hand: times over the speed's ends, rates times them, prices per token over them
        t, i, u_out, u_in = s.ttft_s * 1e3, s.itl_s * 1e3, s.usd_per_million_output_tokens, \
            s.usd_per_million_input_tokens
        r, g = s.output_tokens_per_s, s.output_tokens_per_s_per_gpu
        assert f"TTFT {t:,.1f} ms ({t / hi:,.1f}-{t / lo:,.1f})" in text
        assert f"ITL {i:,.2f} ms ({i / hi:,.2f}-{i / lo:,.2f})" in text
        assert f"{r:,.0f} ({r * lo:,.0f}-{r * hi:,.0f}) output tokens/s per replica" in text
        assert f"{g:,.0f} ({g * lo:,.0f}-{g * hi:,.0f}) per GPU" in text
        assert f"${u_out:,.3f} (${u_out / hi:,.3f}-${u_out / lo:,.3f}) per million output tokens" in text
        assert f"${u_in:,.3f} (${u_in / hi:,.3f}-${u_in / lo:,.3f}) per million input tokens" in text
        assert "stated 80% range" in text and "vLLM/continuous" in text
        # the printed text alone: low x 1.309 and high x 0.772 give the printed point back (a time), within
        # the print's rounding (half a unit of the last digit on each figure); no wider range passes this
        for name, suffix in (("TTFT ", " ms"), ("ITL ", " ms")):
            p, a, b, d = _point_low_high(text, name, suffix=suffix)
            half = 0.5 * 10**-d
            assert abs(a * hi - p) <= half * (1 + hi) and abs(b * lo - p) <= half * (1 + lo), (name, p, a, b)
        p, a, b, d = _point_low_high(text, "", unit="$")      # the output price: a price, like a time
        half = 0.5 * 10**-d
        assert abs(a * hi - p) <= half * (1 + hi) and abs(b * lo - p) <= half * (1 + lo)


def test_the_serving_curve_band_runs_from_the_fast_engines_curve_to_the_slow_ones():
    """The shaded band of chapter 15's curve (the book's figure: Llama-3-8B, one H100, 1,024 + 256 tokens):
    the sweep's points at the fast end of the stated range (tokens/s x 1.309, ITL / 1.309), then at the slow
    end back (x 0.772, / 0.772), so at every batch it spans exactly the stated width in ITL (1.309 / 0.772 =
    1.695x), and at batch 1 it runs from 5.504 to 9.333 ms (7.205 ms, worked above). The whole band is
    inside the axes, and the legend names it."""
    from llmsizing.charts import render_serving_curve

    lo, hi = stored_bounds()
    kw = dict(prompt=1024, output=256)
    ax = render_serving_curve("llama-3-8b", "H100 SXM", batch=16, **kw).figure.axes[0]
    bands = [p for p in ax.patches if isinstance(p, Polygon)]
    assert len(bands) == 1
    xy = bands[0].get_xy()
    sweep = S.serving_sweep("llama-3-8b", "H100 SXM", **kw)
    n = len(sweep)
    fast = [(s.output_tokens_per_s_per_gpu * hi, s.itl_s / hi * 1e3) for s in sweep]
    slow = [(s.output_tokens_per_s_per_gpu * lo, s.itl_s / lo * 1e3) for s in sweep][::-1]
    assert np.allclose(xy[:2 * n], fast + slow, rtol=1e-12, atol=0)
    itl = _itl_batch1_by_hand_ms()
    assert itl == pytest.approx(7.205, abs=5e-4)                      # the docstring's worked figure
    assert sweep[0].batch == 1 and sweep[0].itl_s * 1e3 == pytest.approx(itl, rel=1e-9)
    assert xy[0][1] == pytest.approx(itl / hi, rel=1e-9)               # 5.504 ms
    assert xy[2 * n - 1][1] == pytest.approx(itl / lo, rel=1e-9)       # 9.333 ms
    assert np.allclose(xy[2 * n - 1:n - 1:-1, 1] / xy[:n, 1], hi / lo, rtol=1e-12)   # never wider
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    assert x0 < xy[:, 0].min() and xy[:, 0].max() < x1 and y0 <= xy[:, 1].min() and xy[:, 1].max() < y1
    assert [t.get_text() for t in ax.get_legend().get_texts()][1] == "stated 80% range (engine speed)"


def test_the_widget_redraws_the_band_for_its_setting():
    """A move redraws the band into the widget's kept figure: after moving the GPU and the batch, the one
    band there is the new setting's (its batch-1 corner at the fast end, worked from the stored high bound),
    not the last one's."""
    from llmsizing.widgets import serving_widget

    lo, hi = stored_bounds()
    w = serving_widget()
    w.controls["gpu"].value = "A100 80GB"
    w.controls["batch"].value = 8
    ax = w._figure.axes[0]
    bands = [p for p in ax.patches if isinstance(p, Polygon)]
    assert len(bands) == 1
    first = S.serving("llama-3-8b", "A100 80GB", batch=1, prompt=1024, output=256)
    assert bands[0].get_xy()[0] == pytest.approx((first.output_tokens_per_s_per_gpu * hi, first.itl_s / hi * 1e3),
                                                 rel=1e-12)


def test_the_worst_itl_beside_the_curve_takes_the_per_token_range():
    """Chapter 15's prose beside the curve quotes a plain decode step, the loaded ITL and a step carrying a full
    prefill chunk (the worst ITL a running sequence sees), each with the stated range: all three are
    per-token times, so each is divided by the speed's ends (t / 1.309 to t / 0.772), the same range, never
    its own."""
    lo, hi = stored_bounds()
    s = S.serving("llama-3-8b", "H100 SXM", batch=64, prompt=1024, output=256)
    e = S.serving_ends(s, ("decode_step_s", "itl_s", "chunk_step_s"))
    for n in ("decode_step_s", "itl_s", "chunk_step_s"):
        v = getattr(s, n)
        assert (e[f"{n}_low"], e[f"{n}_high"]) == pytest.approx((v / hi, v / lo), rel=1e-12), n
    assert s.decode_step_s < s.itl_s < s.chunk_step_s       # (three different figures)


def _sum_of_steps_over(s, speed: float) -> tuple[float, float]:
    """(whole batch s, last request's first token s) of the queued ``s`` worked from its steps alone, every
    step divided by ``speed``: each wave is its running batch's prompts' prefill and ``output`` decode steps,
    ``batch_prefill_s + output x decode_step_s``; the waves run one after the other, and the last request
    waits for every wave before its own, then its wave's prefill (the last wave's own steps when it is not
    full). The cap and the KV room set the waves; the speed does not."""
    full = (s.batch_prefill_s + s.output * s.decode_step_s) / speed
    last = s.last_wave or s
    last_prefill = last.batch_prefill_s / speed
    last_wave = last_prefill + s.output * last.decode_step_s / speed
    wait = (s.waves - 1) * full
    return wait + last_wave, wait + last_prefill


@pytest.mark.parametrize("batch", [2048, 1500])
def test_a_queued_batch_time_and_its_last_first_token_take_the_steps_range(batch):
    """srvqueue34 (issue 34): chapter 15's queue (Llama-3-8B on one H100, 128 + 64 tokens, vLLM's cap of 1,024
    sequences): 2,048 requests run in two full waves, 1,500 in a full one and one of 476. The whole batch's
    time and its last request's first token are sums of engine steps, prefill and decode, and the stated
    range divides every step by the engine's speed, so the ends are the same sums with each step over 1.309
    (low) and over 0.772 (high), worked here from the steps (``_sum_of_steps_over``), not from ``cycle_s``.
    Chapter 15's prose: 9.4 s whole, so 9.4 / 1.309 = 7.2 s to 9.4 / 0.772 = 12.2 s; the last first token
    7.8 s, so 6.0 to 10.1 s."""
    lo, hi = stored_bounds()
    s = S.serving("llama-3-8b", "H100 SXM", prompt=128, output=64, batch=batch)
    assert s.running_batch == 1024 and s.waves == 2 and (s.last_wave is None) == (batch == 2048)
    e = S.serving_ends(s, ("cycle_s", "last_ttft_s"))
    for end, speed in (("low", hi), ("high", lo)):
        cycle, last = _sum_of_steps_over(s, speed)
        assert e[f"cycle_s_{end}"] == pytest.approx(cycle, rel=1e-12), end
        assert e[f"last_ttft_s_{end}"] == pytest.approx(last, rel=1e-12), end
    # the point is the same sum at speed 1 (the model's own figures), so the ends are exactly the stated width
    # apart, never wider
    assert (s.cycle_s, s.last_ttft_s) == pytest.approx(_sum_of_steps_over(s, 1.0), rel=1e-12)
    assert e["cycle_s_high"] / e["cycle_s_low"] == pytest.approx(hi / lo, rel=1e-12)
    if batch == 2048:     # the figures chapter 15's prose prints, rounded as it prints them
        assert f"{s.cycle_s:.1f} ({e['cycle_s_low']:.1f}-{e['cycle_s_high']:.1f})" == \
            f"{s.cycle_s:.1f} ({s.cycle_s / 1.309:.1f}-{s.cycle_s / 0.772:.1f})"


def test_the_widget_queued_line_gives_the_whole_batch_and_the_last_wait_as_point_low_high():
    """The serving widget moved to a batch over vLLM's cap (chapter 15's queue: 128 + 64 tokens, 2,048
    requests): its "queued" line gives the whole batch's time and the last request's first token as "point
    (low-high)", each end the point over 1.309 and over 0.772 (the stored bounds). Read back from the text
    alone, low x 1.309 and high x 0.772 give the printed point within the print's rounding. A batch that runs
    at once has no queued line."""
    from llmsizing.widgets import serving_widget

    lo, hi = stored_bounds()
    w = serving_widget()
    assert "queued:" not in _text(w)
    for k, v in {"prompt": 128, "output": 64, "batch": 2048}.items():
        w.controls[k].value = v
    assert w.error.value == ""
    text = _text(w)
    s = S.serving("llama-3-8b", "H100 SXM", prompt=128, output=64, batch=2048)
    c, t = s.cycle_s, s.last_ttft_s
    assert (f"queued: 2 waves of up to 1,024; the whole batch takes {c:,.1f} s ({c / hi:,.1f}-{c / lo:,.1f}), "
            f"its last request's first token comes after {t:,.1f} s ({t / hi:,.1f}-{t / lo:,.1f})") in text
    for name in ("batch takes ", "comes after "):
        p, a, b, d = _point_low_high(text, name, suffix=" s")
        half = 0.5 * 10**-d
        assert abs(a * hi - p) <= half * (1 + hi) and abs(b * lo - p) <= half * (1 + lo), (name, p, a, b)


def test_the_widget_over_the_kv_room_gives_the_waves_and_never_counts_the_churn(monkeypatch):
    """churn35, ttft35: over the KV room the whole batch's time (``cycle_s``) counts vLLM's preemption churn
    and the last request's first token (``last_ttft_s``) vLLM's admissions, from the same run, which takes up
    to 1.5 s a setting, far over the 100 ms a widget move may take. The serving widget moved to 1,024 requests
    of 1,024 + 256 tokens (three waves of the room of 346) states the waves' two figures (``waves_s``,
    ``waves_last_ttft_s``), each as "point (low-high)" over 1.309 and 0.772, names them the waves' and says
    vLLM's admissions and preemptions are not counted (its last first token can fall either side of the
    waves': read35); the churn is never computed (the estimate is
    replaced by one that fails)."""
    import llmsizing.serve_result as R
    from llmsizing.widgets import serving_widget

    lo, hi = stored_bounds()

    def refuse(*args, **kwargs):
        raise AssertionError("the widget counted the churn")

    monkeypatch.setattr(R, "churn_estimate", refuse)
    w = serving_widget()
    w.controls["batch"].value = 1024
    assert w.error.value == ""
    text = _text(w)
    s = S.serving("llama-3-8b", "H100 SXM", prompt=1024, output=256, batch=1024)
    assert s.running_bound == "kv" and s.waves == 3
    v, t = s.waves_s, s.waves_last_ttft_s
    assert (f"queued: 3 waves of up to 346; the waves take {v:,.1f} s ({v / hi:,.1f}-{v / lo:,.1f}) and would "
            f"give the last request its first token after {t:,.1f} s ({t / hi:,.1f}-{t / lo:,.1f}); vLLM's "
            "admissions as blocks fit and its KV preemptions are not counted here") in text
    assert "whole batch takes" not in text and "comes after" not in text
