"""Chapter 4b's three stacks (llmsizing.step_stacks, issue 38 book38): what FSDP holds gathered in each row.

The autocast row (fp32 weights gathered by FSDP without a mixed-precision policy) wraps the same units as the
Trainer's row, so ``fully_shard``'s default keeps its root unit (embedding, final norm, LM head) gathered from
the forward to the backward as well: FSDP2's ``_lazy_init`` and FSDP1's ``_post_forward_reshard`` decide it
from the root alone, and ``data/fsdp_root_held.csv`` measured it in fp32 without a policy. Before book38 the
row counted one unit at a time."""

from __future__ import annotations

import pytest

from llmsizing import Parallel, training_memory
from llmsizing.step_stacks import STEP_STACKS, step_stacks, step_stacks_table

AMP = "hf, bf16-amp (autocast on fp32 weights)"
TRAINER = "hf, bf16-mixed, fused AdamW (Trainer + FSDP, bf16=True)"
FUSED = "fused, bf16-mixed"

# Llama-3-8B by hand: vocabulary 128,256, hidden 4,096, ffn 14,336, 8 KV heads of 128 (1,024 wide)
EMBED = 128_256 * 4_096                                   # 525,336,576, the LM head the same (untied)
ROOT = 2 * EMBED + 4_096                                  # + the final norm: 1,050,677,248
BLOCK = 2 * 4_096 * 4_096 + 2 * 4_096 * 1_024 + 3 * 4_096 * 14_336 + 2 * 4_096   # 218,112,000


@pytest.fixture(scope="module")
def rows():
    return step_stacks("llama-3-8b", seq=8192, gpu="H100 SXM", dp=8)


def test_the_autocast_row_holds_the_root_unit_in_fp32(rows):
    """fp32 weights and gradients (4 + 4 bytes): the root's weights, 4 x 1,050,677,248 = 4,202,708,992, and
    on top the larger of a block's backward (4 x 218,112,000 weights + 4 x (525,340,672 head and norm +
    218,112,000) gradients = 3,846,258,688) and the root's whole gradient (4,202,708,992): 8,405,417,984
    bytes. One unit at a time (main's row) was (4 + 4) x 525,336,576 = 4,202,692,608: the row's peak is
    4,202,725,376 bytes (3.9 GiB) higher, in the loss backward, where the gathered bytes sit on top."""
    assert BLOCK == 218_112_000 and ROOT == 1_050_677_248
    amp = rows[AMP]
    assert amp.parallel.reshard_after_forward is None
    assert amp.memory.gathered_bytes == 4 * ROOT + max(4 * BLOCK + 4 * (EMBED + 4_096 + BLOCK), 4 * ROOT)
    assert amp.memory.gathered_bytes == 8_405_417_984
    one_unit = training_memory("llama-3-8b", batch=1, seq=8192, parallel=Parallel(dp=8, zero=3), stack="hf",
                               precision="bf16-amp")
    assert one_unit.gathered_bytes == 8 * EMBED == 4_202_692_608
    assert amp.memory.peak_phase == one_unit.peak_phase == "loss backward"
    assert amp.memory.peak_bytes - one_unit.peak_bytes == pytest.approx(8_405_417_984 - 4_202_692_608, abs=1)


def test_the_trainer_row_holds_the_root_in_bf16_and_the_fused_row_one_unit(rows):
    """bf16 weights and gradients (2 + 2 bytes): the Trainer's row 4 x 1,050,677,248 = 4,202,708,992 bytes
    (the root's weights and its whole gradient), the fused row one LM head, 4 x 525,336,576 =
    2,101,346,304."""
    assert rows[TRAINER].memory.gathered_bytes == 4 * ROOT == 4_202_708_992
    assert rows[FUSED].memory.gathered_bytes == 4 * EMBED == 2_101_346_304
    assert [r.holds for r in rows.values()] == ["one unit at a time", "the root unit whole (bf16)",
                                                "the root unit whole (fp32)"]
    assert [r.parallel.reshard_after_forward for r in rows.values()] == [True, None, None]


def test_the_table_has_a_row_per_stack_and_says_what_each_holds(rows):
    table = step_stacks_table(rows)
    assert list(table.index) == list(STEP_STACKS)
    assert table.loc[AMP, "FSDP holds"] == "the root unit whole (fp32)"
    assert table.loc[AMP, "peak in"] == "loss backward"


@pytest.mark.parametrize("kw, error", [(dict(dp=1), ValueError), (dict(seq=0), ValueError),
                                       (dict(dp=8.0), TypeError)])
def test_bad_input_names_the_parameter(kw, error):
    with pytest.raises(error, match=next(iter(kw))):
        step_stacks("llama-3-8b", **kw)


def test_the_phases_figure_draws_the_autocast_row_as_the_table_prices_it(rows):
    """Chapter 4b draws the autocast row's phases next to the table: with the root held (None) its peak is the
    row's, and the default (one unit at a time) is what it drew before."""
    from llmsizing.charts import render_step_phases

    kw = dict(seq=8192, stack="hf", precision="bf16-amp")
    held = render_step_phases("llama-3-8b", reshard_after_forward=None, **kw)
    line = next(x for x in held.summary.splitlines() if x.strip().startswith("loss backward"))
    assert f"{rows[AMP].memory.peak_bytes / 2**30:,.1f} GiB  <- peak" in line
    assert "root unit held" in held.summary and "root unit held" not in render_step_phases("llama-3-8b",
                                                                                         **kw).summary


def test_the_loss_backward_sum_adds_up_by_hand(rows):
    """The fused row's peak, by hand (chapter 4b's worked sum). N = 8,030,261,248 over 8 GPUs; before the
    backward bf16-mixed keeps 2 + 4 + 8 = 14 bytes per parameter (no gradients): 14,052,957,184 bytes. The
    activations: 139,400 bytes per token and layer (fused norms 2 x (2h + 4) = 16,392, the projections' inputs
    4h = 16,384, flash's q, k, v and log-sum-exps 2 x 4,096 + 2 x 2 x 1,024 + 4 x 32 = 12,416, SwiGLU's input,
    gate, up and product 2h + 3 x 2f = 94,208) x 8,192 x 32 layers, plus the fp32 log-probabilities
    4 x 8,192 x 128,256, plus 16,404 bytes per token for the final norm, the head's input, the token ids and
    the targets: 40,879,947,776. The LM head gathered with room for its gradient, 4 x 525,336,576; the
    loss's two fp32 gradients, 8 x 8,192 x 128,256. In GiB to two decimals: 13.09 + 38.07 + 1.96 + 7.83 =
    60.95, and 1 GiB + 1.08 x 60.95 GiB = 66.8 GiB."""
    from llmsizing.step_stacks import loss_backward_sum

    states = 14 * 8_030_261_248 // 8
    act = 139_400 * 8_192 * 32 + 4 * 8_192 * 128_256 + 16_404 * 8_192
    unit, loss = 4 * EMBED, 8 * 8_192 * 128_256
    assert (states, act, unit, loss) == (14_052_957_184, 40_879_947_776, 2_101_346_304, 8_405_385_216)
    text = loss_backward_sum(rows[FUSED].memory)
    assert text.data["parts_bytes"] == {"states": states, "act": act, "unit": unit, "loss": loss}
    assert text.values == {"states": "13.09 GiB", "act": "38.07 GiB", "unit": "1.96 GiB", "loss": "7.83 GiB",
                           "peak": "60.95 GiB", "total": "66.8 GiB"}


def test_the_loss_backward_sum_refuses_a_step_it_does_not_describe():
    """At 512 tokens with full recomputation the optimizer step holds the peak (chapter 4b's exercise 3), and
    the autocast row's loss backward holds autocast copies: neither is the chapter's four-part sum."""
    from llmsizing.prose import ProseOutOfDate
    from llmsizing.step_stacks import loss_backward_sum

    short = training_memory("llama-3-8b", batch=1, seq=512, recompute="full", parallel=Parallel(dp=8, zero=3))
    assert short.peak_phase == "optimizer step"
    with pytest.raises(ProseOutOfDate, match="loss's backward holds the peak"):
        loss_backward_sum(short)
    amp = training_memory("llama-3-8b", batch=1, seq=8192, parallel=Parallel(dp=8, zero=3), stack="hf",
                          precision="bf16-amp")
    with pytest.raises(ProseOutOfDate):
        loss_backward_sum(amp)
    with pytest.raises(TypeError, match="t must be"):
        loss_backward_sum(60.9)


def test_the_fit_margins_by_hand(rows):
    """An H100 SXM reports 85,520,809,984 bytes; less the fixed 1 GiB that leaves 84,447,068,160 for the
    tensors and their fragmentation. The Trainer's row peaks at 83,781,344,256 bytes, so it fits only if the
    allocator reserves under 84,447,068,160 / 83,781,344,256 - 1 = 0.79% more; the fused row's
    65,439,636,480 leave room for 29.0%. The published pairs with the default allocator run from 4.4% to 88%
    (data/allocator_fragmentation.csv: 40 runs, 5 sources), with expandable segments from 7.9%."""
    from llmsizing.step_stacks import fit_margins

    from llmsizing import get_gpu

    cap, fixed = 85_520_809_984, 2**30
    assert get_gpu("H100 SXM").memory_bytes == cap == 81_559 * 2**20
    trainer, fused = rows[TRAINER].memory, rows[FUSED].memory
    assert trainer.peak_bytes == 83_781_344_256 and fused.peak_bytes == 65_439_636_480
    text = fit_margins(fused, trainer, "H100 SXM")
    assert text.data["room"]["trainer"] == pytest.approx((cap - fixed) / 83_781_344_256 - 1)
    assert text.values["room_trainer"] == "0.8%" and text.values["room_fused"] == "29%"
    assert text.values["fixed_only"] == "79.0 GiB"          # (83,781,344,256 + 2**30) / 2**30 = 79.03
    assert (text.values["pub_runs"], text.values["pub_srcs"]) == ("40", "5")
    assert (text.values["pub_lo"], text.values["pub_hi"], text.values["es_lo"]) == ("4.4%", "88%", "7.9%")


def test_the_fit_margins_refuse_a_trainer_row_that_fits():
    """A Trainer's row at 4K tokens fits the H100 with the allowance: 'only the allowance keeps it out' is
    then false, and the text is refused rather than printed."""
    from llmsizing.prose import ProseOutOfDate
    from llmsizing.step_stacks import fit_margins

    rows4k = step_stacks("llama-3-8b", seq=4096, gpu="H100 SXM", dp=8)
    with pytest.raises(ProseOutOfDate, match="less fragmentation"):
        fit_margins(rows4k[FUSED].memory, rows4k[TRAINER].memory)
    with pytest.raises(TypeError, match="trainer must be"):
        fit_margins(rows4k[FUSED].memory, 1.0)
