"""Chapter 19's length figure (charts.render_rl_response_length): it draws rl_run's phases, the default run
is one bar of the same height in both panels, the text stays inside the PNG, and the PNG is deterministic."""

import pytest

from llmsizing.charts import RL_LENGTH_CAPS, render_rl_response_length
from llmsizing.rl import rl_run

RUN = dict(gpu="H100 SXM", n_gpus=16, prompts_per_step=128, samples_per_prompt=16, prompt=128)


def _stacks(ax):
    """The stacked bars' tops by x position (the filled rectangles only, not the default's outline)."""
    tops = {}
    for p in ax.patches:
        if p.get_fill() and p.get_height() > 0:
            x = round(p.get_x() + p.get_width() / 2)
            tops[x] = max(tops.get(x, 0.0), p.get_y() + p.get_height())
    return [tops[k] for k in sorted(tops)]


def test_the_bars_are_rl_runs_steps_and_the_default_is_one_height():
    view = render_rl_response_length()
    left, right = view.figure.axes[:2]
    held = [rl_run("llama-3-8b", **RUN, response=(932, c)).step_s for c in RL_LENGTH_CAPS]
    assert _stacks(left) == pytest.approx(held, rel=1e-9)
    i = RL_LENGTH_CAPS.index(3968)
    assert _stacks(right)[i] == pytest.approx(held[i], rel=1e-9)       # the default run, in both panels
    # the right panel's means scale with the cap: 932 x 16,384 / 3,968 = 3,848.3 -> 3,848 (by hand)
    ticks = [t.get_text() for t in right.get_xticklabels()]
    assert ticks[0] == "1,024\nmean 241" and ticks[-1] == "16,384\nmean 3,848"   # 932 x 1,024 / 3,968 = 240.5


def test_with_the_mean_held_generation_grows_with_the_cap_and_training_does_not():
    # n_roll = 2,048 / 16 engines = 128 rollouts an engine, 128 in flight, so the engines have 128 x 932 / 128
    # = 932 steps of work: below every cap, so the decode steps are the cap and generation grows about as the
    # cap (16x from 1,024 to 16,384, less the fixed prefill, more the longer KV reads); the update trains on the
    # same tokens and only its attention lengthens.
    lo, hi = (rl_run("llama-3-8b", **RUN, response=(932, c)) for c in (1024, 16384))
    assert (lo.decode_steps, hi.decode_steps) == (1024, 16384)
    assert 12 < hi.phases["generation"] / lo.phases["generation"] < 17
    assert hi.phases["update"] / lo.phases["update"] < 1.1
    shares = [rl_run("llama-3-8b", **RUN, response=(932, c)).generation_share for c in RL_LENGTH_CAPS]
    assert shares == sorted(shares)
    assert [f"{s:.0%}" for s in shares] == [ln.split("(")[1].split(")")[0]
                                            for ln in render_rl_response_length().summary.splitlines()[2:7]]


def test_the_text_is_inside_the_png_readable_and_the_png_is_deterministic():
    from tests.test_chart_text_inside import _texts_outside     # issue 38's check, on this figure

    view = render_rl_response_length()
    outside, small = _texts_outside(view.figure)
    assert not outside and not small, (outside, small)
    assert view.png() == render_rl_response_length().png()


@pytest.mark.parametrize("caps", [(), (0, 1024), (1024.5,), (-8,)])
def test_bad_caps_are_refused(caps):
    with pytest.raises(ValueError, match="caps"):
        render_rl_response_length(caps=caps)
