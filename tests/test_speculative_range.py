"""fleetsum34 (issue 34, "every worked budget in the book shows its range"): chapter 15's speculative-decoding
times and rates carry the engine speed's stated range through the one helper, ``serve.serving_ends``.

Expected ends are worked here from the stored bounds (``data/serving_intervals.csv``, read with csv: group
``all``, 0.796-1.338) and from the round's parts, never from the ``_low``/``_high`` values themselves. Chapter
15's case: Llama-3-70B with a Llama-3-8B draft, fp8 on one H200, k = 4, acceptance 0.8, batch 1. A round yields
(1 - 0.8^5) / (1 - 0.8) = (1 - 0.32768) / 0.2 = 3.3616 tokens (Leviathan et al. 2023, Eq. 1) and takes
4 x (draft + t0) + verify + t0 = 4 x (2.5695 + 0.3) + 22.3095 + 0.3 = 34.087 ms, so the ITL is 10.140 ms:
10.140 / 1.338 = 7.579 ms at the fast end and 10.140 / 0.796 = 12.739 ms at the slow end; 98.62 tokens/s
becomes 98.62 x 0.796 = 78.50 and 98.62 x 1.338 = 131.95. Plain decoding, one target step plus t0 = 22.609
ms, is 44.23 tokens/s: 35.21 to 59.18.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from llmsizing.serve import serving, serving_ends
from llmsizing.speculative import RANGED_FIGURES, speculative_decoding

INTERVALS = Path(__file__).resolve().parents[1] / "data" / "serving_intervals.csv"
PAIR = dict(model="llama-3-70b", draft="llama-3-8b", gpu="H200", weights="fp8", k=4, acceptance=0.8)


def _bounds() -> tuple[float, float]:
    with open(INTERVALS, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["low"] and r["high"]]
    assert [r["group"] for r in rows] == ["all"]
    lo, hi = float(rows[0]["low"]), float(rows[0]["high"])
    assert (lo, hi) == (0.796, 1.338)                   # the worked figures in the docstring use these
    return lo, hi


def test_speculative_itl_and_tokens_per_s_ends_by_hand():
    lo, hi = _bounds()
    sp = speculative_decoding(**PAIR, batch=1)
    tokens = (1 - 0.8 ** 5) / (1 - 0.8)
    assert tokens == pytest.approx(3.3616, abs=1e-12)
    round_s = 4 * (sp.draft_step_s + sp.step_overhead_s) + sp.verify_step_s + sp.step_overhead_s
    assert round_s == pytest.approx(34.087e-3, abs=5e-7)              # the docstring's worked figure
    itl = round_s / tokens
    e = serving_ends(sp)
    assert set(e) == {f"{n}_{end}" for n in RANGED_FIGURES for end in ("low", "high")}
    assert (e["itl_s_low"], e["itl_s_high"]) == pytest.approx((itl / hi, itl / lo), rel=1e-12)
    assert (e["itl_s_low"], e["itl_s_high"]) == pytest.approx((7.579e-3, 12.739e-3), abs=5e-7)
    assert (e["round_s_low"], e["round_s_high"]) == pytest.approx((round_s / hi, round_s / lo), rel=1e-12)
    # a rate: the slow end's is the low
    assert (e["tokens_per_s_low"], e["tokens_per_s_high"]) == pytest.approx((lo / itl, hi / itl), rel=1e-12)
    assert (e["tokens_per_s_low"], e["tokens_per_s_high"]) == pytest.approx((78.50, 131.95), abs=5e-3)
    plain = sp.target_step_s + sp.step_overhead_s
    assert plain == pytest.approx(22.609e-3, abs=5e-7)
    assert (e["plain_itl_s_low"], e["plain_itl_s_high"]) == pytest.approx((plain / hi, plain / lo), rel=1e-12)
    assert (e["plain_tokens_per_s_low"], e["plain_tokens_per_s_high"]) == pytest.approx((35.21, 59.18),
                                                                                        abs=5e-3)
    for step in ("target_step_s", "draft_step_s", "verify_step_s"):
        v = getattr(sp, step)
        assert (e[f"{step}_low"], e[f"{step}_high"]) == pytest.approx((v / hi, v / lo), rel=1e-12)
    # every time the same speed divides is exactly the stored width apart, so the speed-up, a ratio of two
    # of them, is the same at both ends: it carries no range of its own and is refused
    assert e["itl_s_high"] / e["itl_s_low"] == pytest.approx(hi / lo, rel=1e-12)
    assert e["plain_itl_s_low"] / e["itl_s_low"] == pytest.approx(sp.speedup, rel=1e-12)


def test_speculative_refuses_figures_the_speed_does_not_set():
    sp = speculative_decoding(**PAIR, batch=1)
    for name in ("speedup", "cost_ratio", "tokens_per_step", "acceptance"):
        with pytest.raises(ValueError, match="names: .* carries no stated range"):
            serving_ends(sp, (name,))
    with pytest.raises(ValueError, match="names"):                   # a Serving's figure is not a Speculative's
        serving_ends(sp, ("ttft_s",))
    with pytest.raises(TypeError, match="s must be a Serving result .* a Speculative one"):
        serving_ends(PAIR)
    # a Serving keeps its own table (the default names unchanged)
    one = serving("llama-3-8b", "H100 SXM", batch=1, prompt=1024, output=256)
    assert "ttft_s_low" in serving_ends(one) and "round_s_low" not in serving_ends(one)


def test_speculative_steps_are_the_serving_models_steps_at_batch_1():
    """Why the range may be carried over (speculative.RANGED_FIGURES' comment): the plain step plus overhead
    and the draft's are the serving model's decode steps at the same mean context (768 + 512 // 2 = 1,024)
    within 0.2% and 0.5% at batch 1. At batch 64, where the KV cache read is priced at the MBU here and at the
    fitted attention share in serving, they are 8% and 18% slower: the comment says so, and this holds it to
    what it says."""
    for batch, (gap_t, gap_d) in ((1, (0.002, 0.005)), (64, (0.09, 0.19))):
        sp = speculative_decoding(**PAIR, batch=batch)
        target = serving("llama-3-70b", "H200", weights="fp8", prompt=768, output=512, batch=batch)
        draft = serving("llama-3-8b", "H200", weights="fp8", prompt=768, output=512, batch=batch)
        assert sp.step_overhead_s == target.step_overhead_s == draft.step_overhead_s
        t = sp.plain_itl_s / target.decode_step_s - 1
        d = (sp.draft_step_s + sp.step_overhead_s) / draft.decode_step_s - 1
        assert 0 <= t < gap_t and 0 <= d < gap_d, (batch, t, d)
        if batch == 64:
            assert t > 0.07 and d > 0.17
