"""fleetsum34 (issue 34, "every worked budget in the book shows its range"): chapter 15's speculative-decoding
times and rates carry the engine speed's stated range through the one helper, ``serve.serving_ends``.

Expected ends are worked here from the stored bounds (``data/serving_intervals.csv``, read with csv: group
``all``, 0.772-1.309) and from the round's parts, never from the ``_low``/``_high`` values themselves. Chapter
15's case: Llama-3-70B with a Llama-3-8B draft, fp8 on one H200, k = 4, acceptance 0.8, batch 1. A round yields
(1 - 0.8^5) / (1 - 0.8) = (1 - 0.32768) / 0.2 = 3.3616 tokens (Leviathan et al. 2023, Eq. 1) and takes
4 x (draft + t0) + verify + t0 = 4 x (2.7020 + 0) + 23.5547 + 0 = 34.363 ms (vLLM's fitted t0 is 0 since
serve43's refit), so the ITL is 10.222 ms: 10.222 / 1.309 = 7.809 ms at the fast end and 10.222 / 0.772 =
13.241 ms at the slow end; 97.83 tokens/s becomes 97.83 x 0.772 = 75.52 and 97.83 x 1.309 = 128.06. Plain
decoding, one target step plus t0 = 23.554 ms, is 42.45 tokens/s: 32.78 to 55.57. (spec34: the steps are
serving()'s, the KV cache read at the fitted attention share: the target step is (72,656,371,712 - 128,255 x
16,384) B / (4.8 TB/s x 0.626) + 1,024 x 327,680 B / (4.8 TB/s x 0.95) = 23.5544 ms, the draft's
(9,081,200,640 - 128,255 x 8,192) / (4.8e12 x 0.626) + 1,024 x 131,072 / (4.8e12 x 0.95) = 2.7020 ms, the
verify step the target's plus 4 x (16,384 / 0.626 + 327,680 / 0.95) / 4.8e12 s = 23.5547 ms; at 0.632 and
0.947 before the refit that priced Megatron-LM's backward TP overlap, 23.3317, 2.6767 and 23.3320 ms; before
serve43, at 0.662 and 0.962 with t0 = 0.3 ms, 22.2765, 2.5563 and 22.2768 ms.)
"""

from __future__ import annotations


import pytest

from _serving_bounds import stored_bounds

from llmsizing.serve import serving, serving_ends
from llmsizing.speculative import RANGED_FIGURES, speculative_decoding

PAIR = dict(model="llama-3-70b", draft="llama-3-8b", gpu="H200", weights="fp8", k=4, acceptance=0.8)




def test_speculative_itl_and_tokens_per_s_ends_by_hand():
    lo, hi = stored_bounds()
    sp = speculative_decoding(**PAIR, batch=1)
    tokens = (1 - 0.8 ** 5) / (1 - 0.8)
    assert tokens == pytest.approx(3.3616, abs=1e-12)
    round_s = 4 * (sp.draft_step_s + sp.step_overhead_s) + sp.verify_step_s + sp.step_overhead_s
    assert round_s == pytest.approx(34.363e-3, abs=5e-7)              # the docstring's worked figure
    itl = round_s / tokens
    e = serving_ends(sp)
    assert set(e) == {f"{n}_{end}" for n in RANGED_FIGURES for end in ("low", "high")}
    assert (e["itl_s_low"], e["itl_s_high"]) == pytest.approx((itl / hi, itl / lo), rel=1e-12)
    assert (e["itl_s_low"], e["itl_s_high"]) == pytest.approx((7.809e-3, 13.241e-3), abs=5e-7)
    assert (e["round_s_low"], e["round_s_high"]) == pytest.approx((round_s / hi, round_s / lo), rel=1e-12)
    # a rate: the slow end's is the low
    assert (e["tokens_per_s_low"], e["tokens_per_s_high"]) == pytest.approx((lo / itl, hi / itl), rel=1e-12)
    assert (e["tokens_per_s_low"], e["tokens_per_s_high"]) == pytest.approx((75.52, 128.06), abs=5e-3)
    plain = sp.target_step_s + sp.step_overhead_s
    assert plain == pytest.approx(23.554e-3, abs=5e-7)
    assert (e["plain_itl_s_low"], e["plain_itl_s_high"]) == pytest.approx((plain / hi, plain / lo), rel=1e-12)
    assert (e["plain_tokens_per_s_low"], e["plain_tokens_per_s_high"]) == pytest.approx((32.78, 55.57),
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


def test_speculative_steps_are_the_serving_models_steps():
    """spec34 (one answer per question): the plain step plus overhead and the draft's are exactly the serving
    model's decode steps at the same mean context (768 + 512 // 2 = 1,024), at batches 1, 8 and 64 (before,
    with the KV cache read at the MBU, 8% and 18% slower at batch 64). serving() is the reference."""
    for batch in (1, 8, 64):
        sp = speculative_decoding(**PAIR, batch=batch)
        target = serving("llama-3-70b", "H200", weights="fp8", prompt=768, output=512, batch=batch)
        draft = serving("llama-3-8b", "H200", weights="fp8", prompt=768, output=512, batch=batch)
        assert target.running_batch == draft.running_batch == batch        # no queue: the step at `batch`
        assert sp.step_overhead_s == target.step_overhead_s == draft.step_overhead_s
        assert sp.plain_itl_s == pytest.approx(target.decode_step_s, rel=1e-12), batch
        assert sp.draft_step_s + sp.step_overhead_s == pytest.approx(draft.decode_step_s, rel=1e-12), batch
