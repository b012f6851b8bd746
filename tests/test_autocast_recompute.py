"""Autocast's bf16 weight copies under full recomputation (mem05, session 17).

``torch.autocast`` caches one bf16 copy of each fp32 weight a matrix multiply reads and empties the cache
when the outermost autocast region exits (``torch/amp/autocast_mode.py``: ``if
torch.autocast_decrement_nesting() == 0: torch.clear_autocast_cache()``). Without recomputation each linear
layer also saves its copy for the backward, so the copies outlive the forward; a checkpointed layer saves
nothing, so its copies die with the cache, and the backward's recomputation (run under autocast again:
``torch/utils/checkpoint.py``'s ``recompute_fn``) makes one layer's copies while that layer's backward runs.
The LM head is not checkpointed: its copy stays.

Every expected byte count here is worked out by hand from the models' shapes and checked against the
measured columns of ``data/step_measurements.csv`` (``weight_copy_forward_end_bytes``: the copies alive when
the forward has left autocast; ``weight_copy_max_bytes``: all of them), never read off the library.
"""

from __future__ import annotations

import pytest
from test_planner_speed import _assert_same, _both

from llmsizing.measurements import STEP_RECIPES, load_steps, predict_step, step_model
from llmsizing.memory import training_memory

# By hand, 2 bytes per bf16 copy. step-gpt2: h = 256, ffn 1024, vocab 16384, biases, LM head tied to the
# embedding; a layer's matrix multiplies read QKV (h x 3h + 3h), the output projection (h x h + h), the MLP
# (h x 4h + 4h and 4h x h + h): 12 h^2 + 9 h weights.
GPT2_HEAD_COPY = 2 * 16384 * 256                                   # 8,388,608 B = 8 MiB
GPT2_LAYER_COPY = 2 * (12 * 256**2 + 9 * 256)                      # 1,577,472 B
# step-llama: h = 256, 8 query heads and 2 KV heads of 32, ffn 688 (gated), vocab 32000, no biases, untied:
# q and o are h x h, k and v h x 64, the MLP three h x 688 matrices.
LLAMA_HEAD_COPY = 2 * 32000 * 256                                  # 16,384,000 B = 15.625 MiB
LLAMA_LAYER_COPY = 2 * (2 * 256**2 + 2 * 256 * 64 + 3 * 256 * 688)  # 1,384,448 B


def _rows(recompute: str):
    df = load_steps()
    return df[(df["mode"] == "autocast-bf16") & (df["recompute"] == recompute)]


def test_hand_counts_are_the_measured_copies():
    """The hand counts above are what the measurement saw (so the tests below compare with it)."""
    rows = _rows("full")
    for model, head, layer in (("step-gpt2", GPT2_HEAD_COPY, GPT2_LAYER_COPY),
                               ("step-llama", LLAMA_HEAD_COPY, LLAMA_LAYER_COPY)):
        sub = rows[rows["model"] == model]
        assert len(sub) >= 3
        assert (sub["weight_copy_forward_end_bytes"] == head).all(), model
        assert (sub["weight_copy_max_bytes"] - sub["weight_copy_forward_end_bytes"] == 4 * layer).all(), model


@pytest.mark.parametrize("model,head,layer", [("step-gpt2", GPT2_HEAD_COPY, GPT2_LAYER_COPY),
                                              ("step-llama", LLAMA_HEAD_COPY, LLAMA_LAYER_COPY)])
def test_full_recompute_keeps_only_the_head_copy_after_the_forward(model, head, layer):
    """Forward: all copies (the cache is full inside autocast); loss backward: the LM head's alone (the old
    library kept all four layers' too: +6.0 MiB on GPT-2, +5.3 MiB on Llama); backward start: the head's is
    gone and the rebuilt layer's is there."""
    for _, row in _rows("full")[lambda d: d["model"] == model].iterrows():
        phases = predict_step(row).pieces
        assert phases["forward"]["autocast copies"] == pytest.approx(head + 4 * layer, rel=1e-12)
        assert phases["loss backward"]["autocast copies"] == pytest.approx(head, rel=1e-12)
        assert phases["backward (start)"]["autocast copies"] == pytest.approx(layer, rel=1e-12)


def test_without_recompute_every_copy_stays():
    """No recomputation: every layer saved its copy for its backward, as before."""
    row = _rows("none")[lambda d: (d["model"] == "step-gpt2") & (d["stack"] == "hf")].iloc[0]
    phases = predict_step(row).pieces
    assert phases["loss backward"]["autocast copies"] == pytest.approx(GPT2_HEAD_COPY + 4 * GPT2_LAYER_COPY,
                                                                      rel=1e-12)
    assert phases["backward (start)"]["autocast copies"] == pytest.approx(4 * GPT2_LAYER_COPY, rel=1e-12)


def test_loss_backward_of_the_gpt2_sdpa_row_by_hand():
    """GPT-2, HF, SDPA, 2 x 256, full recomputation: the library's loss backward is the measured one
    (201,769,176 B, its ``head_backward_max_bytes``) to 0.01%; the old one, 6.0 MiB of layer copies over, was
    +3.1%."""
    row = _rows("full")[lambda d: (d["model"] == "step-gpt2") & (d["stack"] == "hf")
                        & (d["attention"] == "sdpa") & (d["seq"] == 256)].iloc[0]
    measured = max(row["loss_backward_max_bytes"], row["head_backward_max_bytes"])
    assert measured == 201_769_176
    got = predict_step(row).phases_bytes["loss backward"]
    assert abs(got / measured - 1) < 1e-4
    assert (got + 4 * GPT2_LAYER_COPY) / measured - 1 > 0.03          # what the old count gave


def test_partial_recompute_frees_only_the_rerun_layers_copies():
    """Two of the four layers recomputed: the loss backward keeps the head's and two layers' copies, the
    backward's start the two plain layers' and the rebuilt one's."""
    row = _rows("full")[lambda d: (d["model"] == "step-gpt2") & (d["stack"] == "hf")].iloc[0]
    tm = training_memory(step_model(row), batch=2, seq=256, precision=STEP_RECIPES["autocast-bf16"],
                         attention="flash", recompute="full", recompute_layers=2, stack="hf",
                         overhead_bytes=0.0)
    assert tm.pieces["loss backward"]["autocast copies"] == pytest.approx(
        GPT2_HEAD_COPY + 2 * GPT2_LAYER_COPY, rel=1e-12)
    assert tm.pieces["backward (start)"]["autocast copies"] == pytest.approx(3 * GPT2_LAYER_COPY, rel=1e-12)


def test_planner_search_with_autocast_equals_the_direct_one(monkeypatch):
    """The planner's kept coefficients (plan_memory) read autocast's states per recomputation: its plans are
    the direct search's, partial recomputation included (sharing the states across recomputations, as other
    recipes do, gives other plans)."""
    slow, fast = _both(monkeypatch, model="llama-3-8b", tokens=1e11, gpus=("A100 80GB", "L40S"), seq=8192,
                       global_batch=32, max_gpus=128, precision="bf16-amp")
    _assert_same(slow, fast)
    partial = (fast["recompute"] == "full") & (fast["recompute_layers"] < 32 // fast["pp"])
    assert partial.any() and (fast["recompute"] == "none").any()
