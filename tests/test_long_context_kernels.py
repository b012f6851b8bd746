"""The Triton FlashAttention's published speed, and how it fits llm-foundry's A100 rows (issue 34, long24;
reworded after review24a M2).

Dao 2023 (FlashAttention-2, arXiv:2307.08691), Fig. 4, benchmarks the flash-attention repo's Triton kernel
(``flash_attn_triton.py``, the file llm-foundry copied as ``llmfoundry/models/layers/flash_attn_triton.py``)
beside FlashAttention-2 on an A100 80GB, causal, forward + backward: 78 TFLOP/s at head dim 128 and 8K, 80 at
16K, against FlashAttention-2's 182 and 189 (``data/attention_efficiency.csv``, kernel
``flash-attention-triton``; no H100 figure has Triton bars). The rows of llm-foundry's benchmark README say in
their notes that the sweep left ``--attn_impl`` at ``triton``; those notes stay as their source says.

What the step model says, an inference with thin margins, not a finding about what ran: at the calibrated
Ampere efficiency (0.752) the Triton speed fits these rows less well than FlashAttention-2, published /
predicted 1.22 (MPT-7B, 8K) and 1.29 (MPT-13B, 32K) against 0.99 and 0.83. The training-layout range's top
is about 1.20, so priced with Triton they would be misses of a few percent beyond an 80% band, not
impossibilities; and the 32K row lies between the two kernels (FlashAttention-2 prices it 21% too fast, the
direction a slower kernel would explain). A recorded diagnostic, not asserted: with every GEMM at the 0.99
ceiling, Triton prices MPT-7B at 8K 3.6% below its published MFU (0.523 against 0.542), a margin any 4%
change in the step model would close. So the framework keeps FlashAttention-2
(``calibration.attention_kernel_of``), and the long-context gap of llm-foundry's H100 rows (0.75 at 32K,
0.68 at 64K held out) has no published kernel figure to explain it.
"""

import pytest

from llmsizing import step_time
from llmsizing.kernels import attention_efficiency
from llmsizing.calibration import _layout_of, tp_overlap_of
from llmsizing.hardware import kernel_efficiency_row
from llmsizing.run_nodes import run_node
from llmsizing.time_cost import published_runs

TRITON = "flash-attention-triton"


def test_triton_rate_by_hand():
    # Fig. 4(d) at 16K: 80 TFLOP/s in FlashAttention's 3.5-forward convention, x 3 / 3.5, over 312
    assert attention_efficiency("A100 80GB", head_dim=128, seq=16384, kernel=TRITON) == pytest.approx(
        80 * 3 / 3.5 / 312)
    # Fig. 4(c) at 2K, head dim 64: 79; and the Triton kernel runs at 0.43 of FlashAttention-2 at 8K
    assert attention_efficiency("A100 80GB", head_dim=64, seq=2048, kernel=TRITON) == pytest.approx(
        79 * 3 / 3.5 / 312)
    assert attention_efficiency("A100 80GB", head_dim=128, seq=8192, kernel=TRITON) / attention_efficiency(
        "A100 80GB", head_dim=128, seq=8192) == pytest.approx(78 / 182)


def test_the_default_kernels_are_unchanged():
    assert attention_efficiency("A100 80GB", head_dim=128, seq=8192) == pytest.approx(182 * 3 / 3.5 / 312)
    with pytest.raises(ValueError, match="kernel"):
        attention_efficiency("H100 SXM", head_dim=128, seq=8192, kernel=TRITON)


def _row_mfu(name, kernel, efficiency):
    df = published_runs()
    r = next(df[df.run == name].itertuples())
    par, micro, accum, recompute = _layout_of(r)
    st = step_time(r.model, r.gpu, par, batch=micro, seq=int(r.seq), grad_accum=accum,
                   kernel_efficiency=efficiency, recompute=recompute, node=run_node(r), dtype="bf16",
                   async_tp=tp_overlap_of(r), attention_kernel=kernel)
    return st.mfu, r.implied_mfu


MPT7 = "MPT 7b (llm-foundry benchmark), 8 x A100 80GB, seq 8,192"
MPT13 = "MPT 13b (llm-foundry benchmark), 8 x A100 80GB, seq 32,768"


def test_the_32k_row_is_out_of_the_triton_kernels_reach_by_more_than_ten_percent():
    """MPT-13B at 32K, priced with Fig. 4's Triton speed and every GEMM at the 0.99 ceiling, stays more than
    10% below its published MFU (0.438 against 0.513, 17%: the margin left for changes elsewhere in the step
    model is about 6%). The 8K row's 3.6% is too thin to assert (module docstring)."""
    ceiling, published = _row_mfu(MPT13, TRITON, 0.99)
    assert published > 1.10 * ceiling


def test_the_triton_speed_fits_llm_foundrys_a100_rows_less_well_than_flashattention2():
    """At the calibrated Ampere efficiency, the mean |log(published / predicted)| over the two rows: Triton's
    (1.22, 1.29) against FlashAttention-2's (0.99, 0.83), about 0.23 against 0.10. The order holds unless the
    step model came to price these rows about 6% faster than today (all ratios x 0.94: FlashAttention-2's
    0.83 row then weighs more). FlashAttention-2 prices neither row more than 20% too slow."""
    import math
    calibrated = kernel_efficiency_row("A100 80GB", "bf16").kernel_efficiency
    miss = {}
    for kernel in (TRITON, None):
        ratios = [pub / pred for pred, pub in (_row_mfu(n, kernel, calibrated) for n in (MPT7, MPT13))]
        miss[kernel] = sum(abs(math.log(r)) for r in ratios) / 2
        if kernel is None:
            assert all(r < 1.2 for r in ratios)
        else:
            assert all(r > 1 for r in ratios)         # Triton prices both rows slower than published
    assert miss[TRITON] > miss[None]


def test_beyond_the_tables_16k_the_rate_is_held_flat():
    """The published figures stop at 16K; the library holds the 16K rate (kernels._interp). Every table's
    trend is still rising there (FlashAttention-2 on H100, head dim 128: 308 at 8K, 328 at 16K), so any
    extrapolation would price long context faster, not slower: the long-context gap is not this."""
    for gpu in ("A100 80GB", "H100 SXM"):
        at16 = attention_efficiency(gpu, head_dim=128, seq=16384)
        assert attention_efficiency(gpu, head_dim=128, seq=131072) == at16
        assert at16 > attention_efficiency(gpu, head_dim=128, seq=8192)
