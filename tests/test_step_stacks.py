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
