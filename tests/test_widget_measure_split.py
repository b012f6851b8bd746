"""Chapter 9's widget (llmsizing.widgets.collective_time_widget), driven from pytest: its default is the
chapter's checked figure and the chapter's gloo fit; the measured numbers it shows are the committed CSV's and
the saved nccl-tests log's, read here without the library; one line is worked by hand from nccl-tests' own
formula; a new sweep moves the collective and the ranks to what it timed; a collective or rank count a sweep
did not time shows the library's message, naming the control, instead of a figure; a move takes a fraction
of the 50 ms asked for."""

from __future__ import annotations

import csv
import html

import pytest

pytest.importorskip("ipywidgets")

from llmsizing import charts, widgets
from llmsizing.alpha_beta import gloo_fits, published_log
from llmsizing.dist_compare import (GLOO_SWEEP, TIME_LINES, collective_time_at, collective_time_fit,
                                    collective_time_line, collective_time_sweeps)
from llmsizing.measurements import DATA_DIR
from llmsizing.widgets import collective_time_widget

MiB, GiB = 2**20, 2**30
DEFAULT = charts.COLLECTIVE_TIME_DEFAULT
NVLINK = "a100_sxm4_8gpu_nvlink_oci_all_reduce"


@pytest.fixture(scope="module")
def w():
    return collective_time_widget()


def _set(w, **values):
    for k, v in values.items():
        w.controls[k].value = v


def _text(w) -> str:
    return html.unescape(w.summary.value)


def _log_row(size_bytes: int) -> list[str]:
    """The saved A100 NVLink log's table row for ``size_bytes``, split on blanks (not the library's parser)."""
    rows = [ln.split() for ln in published_log(f"{NVLINK}.txt").splitlines()
            if ln.split()[:1] == [str(size_bytes)]]
    assert len(rows) == 1, size_bytes
    return rows[0]


def test_default_is_the_chapters_figure(w):
    assert w.values() == DEFAULT
    assert list(w.controls) == ["sweep", "collective", "n_ranks", "size_bytes", "line"]
    assert w.error.layout.display == "none" and bytes(w.image.value).startswith(b"\x89PNG")
    assert w.summary.value == widgets.summary_html(charts.render_collective_time().summary)


def test_default_numbers_are_the_csv_and_the_chapters_fit(w):
    """The measured time at 1 MiB is the CSV's median, read with the csv module; the line's alpha and bus
    bandwidth are those of the chapter's table (``gloo_fits``, one line per collective and rank count)."""
    with open(DATA_DIR / "gloo_collective_times.csv", newline="") as f:
        row = [r for r in csv.DictReader(f) if (r["collective"], r["n_ranks"], r["size_bytes"])
               == ("all_reduce", "2", str(MiB))]
    assert len(row) == 1
    measured_s = float(row[0]["time_s_median"])
    assert measured_s == pytest.approx(1.012916e-3)
    text = _text(w)
    assert "nearest measured size 1 MiB: 1.01 ms measured" in text
    assert f"median of {row[0]['repeats']} repeats" in text
    fit = gloo_fits().set_index(["collective", "n_ranks"]).loc[("all_reduce", 2)]
    assert f"alpha {fit['alpha_us']:,.2f} µs a step, bus bandwidth {fit['busbw_gbps']:,.2f} GB/s" in text
    r = collective_time_at(**DEFAULT)
    assert r["gap"] == pytest.approx(r["row_predicted_s"] / measured_s - 1)
    assert f"gap {r['gap']:+.1%}" in text


def test_one_line_by_hand_from_the_nccl_tests_log(w):
    """Independent of the library's fit: nccl-tests prices a ring all-reduce over n = 8 ranks as
    2(n-1) = 14 latency steps plus 2(n-1)/n = 1.75 x S / busbw (doc/PERFORMANCE.md). The model line's bus
    bandwidth must be what the log itself reports for its large messages (230.08 GB/s at 1 GiB, 235.14 at
    8 GiB), and at 1 GiB the line, 14 x alpha + 1.75 x 2^30 B / busbw, must give the log's 8,166.8 us to
    within a fraction of a percent; at 1 MiB (76.71 us in the log, the knee) it gives about half."""
    big, knee = _log_row(GiB), _log_row(MiB)
    assert (float(big[5]), float(big[7])) == (8166.8, 230.08) and float(knee[5]) == 76.71
    assert float(_log_row(8 * GiB)[7]) == 235.14
    _set(w, sweep=NVLINK, line="model line", size_bytes=GiB)
    try:
        assert (w.controls["collective"].value, w.controls["n_ranks"].value) == ("all_reduce", 8)
        r = collective_time_at(NVLINK, "all_reduce", 8, GiB, "model line")
        assert 230.08 < r["busbw_gbps"] < 235.14
        by_hand = 14 * r["alpha_s"] + 1.75 * GiB / (r["busbw_gbps"] * 1e9)
        assert r["predicted_s"] == pytest.approx(by_hand, rel=1e-12)
        assert abs(by_hand / 8166.8e-6 - 1) < 0.005
        text = _text(w)
        assert "nearest measured size 1 GiB: 8.17 ms measured" in text
        _set(w, size_bytes=MiB)
        text = _text(w)
        assert "nearest measured size 1 MiB: 76.7 µs measured" in text
        r = collective_time_at(NVLINK, "all_reduce", 8, MiB, "model line")
        assert 0.4 < r["predicted_s"] / 76.71e-6 < 0.6
        assert "the small-message line alone is off by" in text and "does not reach" in text
    finally:
        _set(w, **DEFAULT)


def test_a_new_sweep_brings_the_collective_and_ranks_it_timed(w):
    _set(w, sweep="rtx2080ti_2gpu_pcie3_all_gather")
    try:
        assert (w.controls["collective"].value, w.controls["n_ranks"].value) == ("all_gather", 2)
        assert w.error.layout.display == "none"
        _set(w, sweep=GLOO_SWEEP)            # gloo timed all_gather on 2 ranks too: nothing moves
        assert (w.controls["collective"].value, w.controls["n_ranks"].value) == ("all_gather", 2)
        _set(w, n_ranks=4, sweep=NVLINK)     # the log timed all_reduce on 8 ranks only
        assert (w.controls["collective"].value, w.controls["n_ranks"].value) == ("all_reduce", 8)
    finally:
        _set(w, **DEFAULT)
    assert w.values() == DEFAULT


@pytest.mark.parametrize("values, named", [
    (dict(n_ranks=8), "n_ranks=8 was not timed in the sweep 'gloo, this CPU' for all_reduce: it timed "
                      "all_reduce on 2, 4 ranks"),
    (dict(sweep=NVLINK, collective="reduce_scatter"), f"collective='reduce_scatter' was not timed in the sweep "
                                                      f"'{NVLINK}': it timed all_reduce on 8 ranks"),
    (dict(sweep=NVLINK, n_ranks=16), "n_ranks=16 was not timed"),
])
def test_untimed_settings_show_the_library_message_naming_the_control(w, values, named):
    _set(w, **values)
    try:
        shown = html.unescape(w.error.value + w.summary.value)
        assert named in shown, shown
        assert "Traceback" not in shown and 'File "' not in shown
        assert bytes(w.image.value) == b"" and w.error.layout.display != "none"
    finally:
        _set(w, **DEFAULT)
    assert w.error.layout.display == "none" and bytes(w.image.value)


def test_every_timed_sweep_and_size_is_offered():
    """Every (sweep, collective, ranks) timed is a setting of the controls, and every measured size is a
    stop of the size slider (so the ring can sit on each measured row)."""
    board = collective_time_widget()
    sizes = set(board.controls["size_bytes"]._options_values)
    df = collective_time_sweeps()
    for key, g in df.groupby(["sweep", "collective", "n_ranks"]):
        for control, v in zip(("sweep", "collective", "n_ranks"), key):
            assert v in board.controls[control]._options_values, (control, v)
        assert set(g["size_bytes"]) <= sizes, key
    assert set(board.controls["line"]._options_values) == set(TIME_LINES)


def test_the_nearest_row_the_gap_and_extrapolation():
    """Between two measured sizes the nearer on a log scale is taken (the smaller on a tie); outside the
    sizes timed the line is marked extrapolated; the gap is the line at the row over the row."""
    r = collective_time_at(GLOO_SWEEP, "all_reduce", 2, 3 * MiB)        # 1 and 4 MiB timed: 4 is nearer
    assert r["row_size_bytes"] == 4 * MiB and r["inside"]
    r = collective_time_at(GLOO_SWEEP, "all_reduce", 2, 2 * MiB)        # a tie: the smaller
    assert r["row_size_bytes"] == MiB
    r = collective_time_at(GLOO_SWEEP, "all_reduce", 2, GiB, "model line")
    assert r["row_size_bytes"] == 64 * MiB and not r["inside"]
    assert r["gap"] == pytest.approx(r["row_predicted_s"] / r["measured_s"] - 1)
    line = collective_time_line(GLOO_SWEEP, "all_reduce", 2, [64 * MiB, GiB], "model line")
    assert line[0] == pytest.approx(r["row_predicted_s"]) and line[1] == pytest.approx(r["predicted_s"])
    fit = collective_time_fit(GLOO_SWEEP, "all_reduce", 2)
    assert r["errors"]["cheaper of two"] == pytest.approx(fit.predict_protocols(64 * MiB) / r["measured_s"] - 1)
    text = charts.render_collective_time(GLOO_SWEEP, "all_reduce", 2, GiB, "model line").summary
    assert "outside the sizes timed: extrapolated" in text


def test_the_library_refuses_bad_input():
    with pytest.raises(ValueError, match="line"):
        collective_time_at(GLOO_SWEEP, "all_reduce", 2, MiB, "two lines")
    with pytest.raises(ValueError, match="size_bytes"):
        collective_time_at(GLOO_SWEEP, "all_reduce", 2, 0)
    with pytest.raises(ValueError, match="sweep"):
        collective_time_fit("nvlink", "all_reduce", 8)
    with pytest.raises(TypeError, match="collective must be a string"):
        collective_time_fit(GLOO_SWEEP, ["all_reduce"], 2)
    with pytest.raises(TypeError, match="n_ranks"):
        collective_time_fit(GLOO_SWEEP, "all_reduce", 2.0)
    with pytest.raises(ValueError, match=r"sizes_bytes\[1\]"):
        collective_time_line(GLOO_SWEEP, "all_reduce", 2, [MiB, -1])


# How long a move of collective_time_widget takes is measured by benchmarks/bench_widget_moves.py --only
# collective_time_widget, a benchmark, not a timed test (the guide's principle 6; session 39 removed the
# guard).
