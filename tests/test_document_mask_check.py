"""cp_sweep.document_mask_check: Llama 3 405B's packed 128K step (Dubey et al. 2024, Table 4) under WLB-LLM's
document statistic (Wang et al. 2025, OSDI, Sec. 2.2: over 75% of the tokens in documents shorter than half the
window), counted over each document and over the whole row, against the 8K step (chapter 17)."""

from functools import cache

import pytest

from llmsizing import LLAMA3_RECIPE, get_gpu, get_model, llama3_405b_layout
from llmsizing.cp_sweep import DocumentMaskCheck, document_mask_check
from llmsizing.layouts import step_time

L405, H100 = get_model("llama-3.1-405b"), get_gpu("H100 SXM")
S128 = 131072
META = llama3_405b_layout(8, cp=16)            # Table 4's 128K degrees read with dp = 8 (chapter 17)
KW = dict(grad_accum=16, precision=LLAMA3_RECIPE)


@cache
def _short_mfu():
    return step_time(L405, H100, llama3_405b_layout(128), batch=1, seq=8192, **KW).mfu


@cache
def _check():
    return document_mask_check(L405, H100, META, seq=S128, mfu=_short_mfu(), share=0.75,
                               shorter_than=S128 // 2, **KW)


def _mfu(a):
    return step_time(L405, H100, META, batch=1, seq=S128, attention_seq=a, **KW).mfu


def test_the_bound_is_wlb_llms_statistic_worked_by_hand():
    # 75% of the tokens in documents just under 65,536, the rest in whole-row documents:
    # 0.75 x 65,536 + 0.25 x 131,072 = 49,152 + 32,768 = 81,920
    got = _check()
    assert isinstance(got, DocumentMaskCheck)
    assert got.mean_bound == 81_920


def test_counted_over_the_window_the_flops_grow_by_the_attention_term_alone():
    # Training FLOPs per token 6N + 12 L a d s (PaLM's count): the same step counted over the whole row instead of
    # over 81,920-token documents gains 12 x 126 x 128 x 128 x (131,072 - 81,920) = 1.2176e12 on
    # 6 x 405e9 + 12 x 126 x 16,384 x 81,920 = 2.430e12 + 2.0294e12 = 4.459e12: a factor 1.273.
    got = _check()
    assert got.mfu_over_window / got.mfu_per_document == pytest.approx(1.273, abs=0.005)


def test_per_document_mfus_are_the_steps_at_those_means():
    got = _check()
    assert got.mfu_per_document == _mfu(81_920)
    assert got.mfu_half_window == _mfu(S128 // 2)
    assert got.mfu_half_window < got.mfu_per_document     # shorter documents: less attention, lower MFU


def test_the_crossing_is_the_last_mean_below_the_8k_step_to_the_token():
    got = _check()
    assert S128 // 2 < got.crossing < S128
    assert _mfu(got.crossing) < _short_mfu() <= _mfu(got.crossing + 1)


@pytest.mark.parametrize("kw, word", [
    (dict(share=1.5, shorter_than=S128 // 2), "share"),
    (dict(share=0.75, shorter_than=2 * S128), "shorter_than"),
    (dict(share=0.75, shorter_than=S128 // 2, mfu=0.99), "mfu"),
])
def test_bad_input_names_the_parameter(kw, word):
    args = dict(seq=S128, mfu=_short_mfu(), **KW) | kw
    with pytest.raises(ValueError, match=word):
        document_mask_check(L405, H100, META, **args)
