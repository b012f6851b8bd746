"""Issue 38: chapter 4b teaches that the loss backward sets the peak (the fp32 upcast: 4 bytes a logit kept by
the forward, 8 more written by its backward), and its largest-micro-batch widget now offers the loss as the
code computes it (``max_micro_batch(loss=...)``, :data:`llmsizing.footprint.LOSS_KINDS`): "fp32 upcast" (the
default: the chapter's printed numbers stay), "bf16" (no upcast, 8 bytes a logit) and "compiled (torchtitan)"
(4). Driven as a reader drives it: the control moved, the answer read off the widget's summary."""

from __future__ import annotations

import html
import math
import re

import numpy as np
import pytest

from llmsizing import Parallel, get_gpu, get_model, training_memory
from llmsizing.charts import render_max_micro_batch
from llmsizing.memory import FIXED_OVERHEAD_BYTES, FRAGMENTATION, max_micro_batch
from llmsizing.widgets import max_micro_batch_widget

SHOWN = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)     # the summary's columns
ROW = re.compile(r"(flash|eager)\s+(none|selective|full)\s+((?:\d+\s+){7}\d+)")


def shown(board) -> dict:
    """{(recompute, attention): the largest micro-batch at each of :data:`SHOWN`} read off the summary the
    reader sees (its HTML's text)."""
    text = html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<style>.*?</style>", " ", board.summary.value,
                                                         flags=re.S)))
    rows = {(rc, att): [int(x) for x in nums.split()] for att, rc, nums in ROW.findall(text)}
    assert len(rows) == 6, text
    return rows


@pytest.fixture(scope="module")
def board():
    return max_micro_batch_widget()


def test_the_loss_control_offers_each_loss_with_a_readable_label_and_defaults_to_the_fp32_upcast(board):
    loss = board.controls["loss"]
    assert loss.value == "fp32"
    assert dict(loss.options) == {"fp32 upcast": "fp32", "bf16 (no upcast)": "bf16",
                                  "compiled (torchtitan)": "compiled"}


def test_each_loss_shows_what_max_micro_batch_answers_and_redraws(board):
    c = board.controls
    fsdp8 = Parallel(dp=8, zero=3)
    calls = []
    real = board.render

    def counted(**kw):
        calls.append(kw["loss"])
        return real(**kw)

    board.render = counted
    try:
        before = (board.image.value, board.summary.value)
        answers, drawn = {}, {}
        for loss in ("compiled", "bf16", "fp32"):
            n = len(calls)
            c["loss"].value = loss
            drawn[loss] = calls[n:]                 # (before the figure is read: that brings it up to date)
            assert board.error.value == ""
            answers[loss] = shown(board)
            for (rc, att), got in answers[loss].items():
                want = max_micro_batch("llama-3-8b", "H100 SXM", np.array(SHOWN), precision="bf16-mixed",
                                       attention=att, recompute=rc, parallel=fsdp8, stack="fused", loss=loss)
                assert got == list(want), (loss, rc, att)
            title = board.figure.axes[0].get_legend().get_title().get_text()
            if loss != "fp32":                            # the summary and the legend's title name it
                assert f"{loss} loss" in board.summary.value and title == f"{loss} loss"
            else:
                assert title == ""
        # one redraw a move (the default was drawn when the widget was built; back to it: the kept answer)
        assert drawn == {"compiled": ["compiled"], "bf16": ["bf16"], "fp32": []}
        assert (board.image.value, board.summary.value) == before             # the default view is back
        assert " loss," not in board.summary.value                           # the default names no loss
    finally:
        board.render = real
        c["loss"].value = "fp32"
    # each cheaper loss fits at least as many sequences everywhere, and more somewhere
    for cheap, dear in (("bf16", "fp32"), ("compiled", "bf16")):
        for k in answers["fp32"]:
            assert all(a >= b for a, b in zip(answers[cheap][k], answers[dear][k])), (cheap, k)
        assert any(answers[cheap][k] != answers[dear][k] for k in answers["fp32"]), cheap


def test_full_recomputation_at_8k_worked_by_hand(board):
    """Llama-3-8B, H100, 8K tokens, full recomputation, flash, states over 8 GPUs: the loss backward holds
    the peak, ``A + b x B`` with ``B`` one more sequence's bytes. Each loss changes ``B`` by its bytes a logit
    against the fp32 upcast's 4 + 8 = 12 (bf16: 4 + 4 = 8, compiled: 2 + 2 = 4) x 8,192 x the vocabulary
    (tensor parallelism 1: every logit on the GPU), and the largest micro-batch is the largest ``b`` with
    1 GiB + 1.08 x (A + b x B) within the GPU."""
    llama3, fsdp8, seq = get_model("llama-3-8b"), Parallel(dp=8, zero=3), 8192
    assert (FIXED_OVERHEAD_BYTES, FRAGMENTATION) == (2**30, 0.08)
    piece = [training_memory(llama3, batch=b, seq=seq, recompute="full", parallel=fsdp8)
             .phases_bytes["loss backward"] for b in (1, 2)]                  # the fp32 upcast, as chapter 4b
    per_seq = piece[1] - piece[0]
    fixed = piece[0] - per_seq
    room = (get_gpu("H100 SXM").memory_bytes - 2**30) / 1.08
    logits = seq * llama3.vocab
    assert llama3.vocab == 128256
    by_hand = {loss: math.floor((room - fixed) / (per_seq - (12 - bytes_a_logit) * logits))
               for loss, bytes_a_logit in (("fp32", 12), ("bf16", 8), ("compiled", 4))}
    assert by_hand == {"fp32": 4, "bf16": 5, "compiled": 9}
    c = board.controls
    try:
        for loss, want in by_hand.items():
            c["loss"].value = loss
            assert shown(board)["full", "flash"][SHOWN.index(seq)] == want, loss
    finally:
        c["loss"].value = "fp32"


def test_a_loss_the_library_refuses_is_its_message_in_the_widget(board):
    """The drop-down offers only the library's losses; a bad one reaching the render (as a caller's) is the
    library's ValueError, naming ``loss`` and the allowed values, which the dashboard shows instead of a
    figure. A non-string is a TypeError, also naming ``loss``."""
    with pytest.raises(ValueError, match=r"unknown loss 'fp16'.*Allowed: fp32, bf16, compiled"):
        render_max_micro_batch(loss="fp16")
    with pytest.raises(TypeError, match="loss must be a string"):
        render_max_micro_batch(loss=["fp32"])
    state, message = board._draw({**board.values(), "loss": "fp16"})
    assert state == "error" and "unknown loss" in message and "Allowed: fp32, bf16, compiled" in message
