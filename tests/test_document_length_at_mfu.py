"""cp_sweep.document_length_at_mfu: the mean document length at which a packed 128K step's MFU, counted over
each document, meets a given MFU (chapter 17: Llama 3 405B's 128K step against its 8K step, Table 4 of Dubey
et al. 2024; WLB-LLM, Wang et al. 2025, OSDI, Sec. 2.2, for the documents)."""

import pytest

from llmsizing import LLAMA3_RECIPE, get_gpu, get_model, llama3_405b_layout
from llmsizing.cp_sweep import document_length_at_mfu
from llmsizing.layouts import step_time

L405, H100 = get_model("llama-3.1-405b"), get_gpu("H100 SXM")
S128 = 131072
META = llama3_405b_layout(8, cp=16)            # Table 4's 128K degrees read with dp = 8 (chapter 17)
KW = dict(grad_accum=16, precision=LLAMA3_RECIPE)


def _mfu(a):
    return step_time(L405, H100, META, batch=1, seq=S128, attention_seq=a, **KW).mfu


def test_finds_the_length_whose_mfu_it_was_given():
    # Ask for the MFU of a mean length chosen by hand, 50,000 tokens. Counted to the token, the longest mean
    # still below that MFU is the one just before it, 49,999; counted to 1,024 tokens it lies in the 1,024
    # tokens below 50,000.
    target = _mfu(50_000)
    assert document_length_at_mfu(L405, H100, META, seq=S128, mfu=target, resolution=1, **KW) == 49_999
    got = document_length_at_mfu(L405, H100, META, seq=S128, mfu=target, **KW)
    assert 50_000 - 1024 <= got < 50_000
    assert _mfu(got) < target <= _mfu(got + 1024)


def test_the_8k_tie_lies_beyond_half_the_window():
    # WLB-LLM: documents shorter than half the 128K window hold over 75% of the tokens, so the token-weighted
    # mean document is at most 0.75 x 65,536 + 0.25 x 131,072 = 81,920. At half the window the 128K step runs
    # under the 8K one (test_llama3_405b_step); over the whole window it runs above it: the tie lies between.
    short = step_time(L405, H100, llama3_405b_layout(128), batch=1, seq=8192, **KW).mfu
    assert _mfu(S128 // 2) < short <= _mfu(S128)
    got = document_length_at_mfu(L405, H100, META, seq=S128, mfu=short, resolution=1, **KW)
    assert S128 // 2 < got < S128
    assert _mfu(got) < short <= _mfu(got + 1)


@pytest.mark.parametrize("kw, match", [
    (dict(mfu=0.0), "mfu"), (dict(mfu=1.5), "mfu"), (dict(mfu=0.4, resolution=0), "resolution"),
    (dict(mfu=0.4, longest=2 * S128), "longest"), (dict(mfu=0.4, shortest=S128, longest=65536), "shortest"),
    (dict(mfu=0.05), "shortest"), (dict(mfu=0.95), "longest")])
def test_bad_input_and_no_crossing(kw, match):
    with pytest.raises(ValueError, match=match):
        document_length_at_mfu(L405, H100, META, seq=S128, **KW, **kw)
