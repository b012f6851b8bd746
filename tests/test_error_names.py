"""Errors name what the caller gave (issue 20, class 9): a parameter or a sum of parameters, never an internal
variable (``context``, ``message_bytes``) that the caller never passed."""

from __future__ import annotations

import re

import pytest

import llmsizing as L
from llmsizing.comm import communication

MAX = 2**53
INTERNAL = re.compile(r"\b(context|message_bytes|kv_heads|n_params)\b")


@pytest.mark.parametrize("kwargs, words", [
    (dict(prompt=MAX, output=MAX // 2), "prompt + output"),
    (dict(prompt=MAX // 2 + 1, output=MAX // 2), "prompt + output"),
    (dict(prompt=2**50, tp=2), "batch x prompt"),
])
def test_serving_names_prompt_and_output_not_context(kwargs, words):
    with pytest.raises(ValueError) as e:
        L.serving("llama-3-8b", "H100 SXM", **kwargs)
    assert words in str(e.value) and not INTERNAL.search(str(e.value)), str(e.value)


def test_a_huge_batch_is_served_in_waves_not_refused():
    """Until queue29 (session 29) a batch of 2**50 was prefilled at once and refused ("batch x prompt"); vLLM
    admits at most max_num_seqs (1,024 on an 80 GB GPU, vLLM V1's default) and queues the rest, so it is
    2**50 / 2**10 = 2**40 waves, every time finite."""
    import math

    # (kv30: at 1,024 + 256 tokens two H100s hold fewer than 1,024 sequences, and the KV room sets the waves;
    # 128 + 64-token requests leave the cap to set them)
    s = L.serving("llama-3-8b", "H100 SXM", batch=2**50, tp=2, prompt=128, output=64)
    assert s.running_batch == 1024 and s.waves == 2**40 and s.running_bound == "max_num_seqs"
    assert math.isfinite(s.cycle_s) and s.cycle_s > 0
    k = L.serving("llama-3-8b", "H100 SXM", batch=2**50, tp=2)
    assert k.running_batch == k.kv_batch < 1024 and k.waves == -(-2**50 // k.kv_batch)
    assert math.isfinite(k.cycle_s) and k.cycle_s > s.cycle_s


@pytest.mark.parametrize("parallel", [L.Parallel(tp=2), L.Parallel(pp=2), L.Parallel(tp=2, pp=2, sp=True)])
def test_communication_names_batch_and_seq_not_message_bytes(parallel):
    with pytest.raises(ValueError) as e:
        communication("llama-3-8b", parallel, batch=2**40, seq=2**20, gpu="H100 SXM")
    msg = str(e.value)
    assert "batch x seq" in msg and not INTERNAL.search(msg), msg


def test_communication_of_a_huge_model_names_its_parameters():
    huge = L.Model("huge", layers=2**20, hidden=2**16, heads=2**9, ffn_hidden=2**18, vocab=2**10)
    with pytest.raises(ValueError) as e:
        communication(huge, L.Parallel(dp=2), batch=1, seq=1, gpu="H100 SXM")
    msg = str(e.value)
    assert "parameters on one GPU" in msg and not INTERNAL.search(msg), msg
