"""best_published_run: the highest-MFU published run per GPU (chapter 6's "best published runs").

Expected values come from the sources' own printed figures, not from the library: Megatron-LM's README table
prints 489.1 TFLOP/s per H100 for its GPT 16B on 192 H100s (489.1 / 989.4 = 49.4%, the table's "MFU 49%");
the FlashAttention-2 paper (Dao 2023, Table 1) prints 225 TFLOP/s per A100 for GPT3-2.7B at 8K context
(225 / 312 = 72.1%)."""

import pytest

from llmsizing.mfu_published import best_published_run


def test_best_h100_bf16_run_is_megatron_core_gpt_16b():
    best = best_published_run("H100 SXM")
    assert best.run.startswith("GPT 16B, 192 H100s")
    assert best.n_gpus == 192
    assert best.mfu == pytest.approx(489.1 / 989.4, abs=0.002)
    # far above Llama 3 405B's 38-43% (Dubey et al. 2024, Table 4: 380-430 TFLOP/s of 989.4)
    assert best.mfu > 430 / 989.4


def test_best_a100_run_is_flash_attention_2_at_8k():
    best = best_published_run(("A100 80GB", "A100 40GB"))
    assert "GPT3-2.7B 8k" in best.run and best.n_gpus == 8
    assert best.mfu == pytest.approx(225 / 312, abs=0.002)
    assert best.among > best_published_run("A100 80GB").among   # the 40 GB runs were compared too


@pytest.mark.parametrize("bad, error", [((), ValueError), (3, TypeError), ("Z100", ValueError)])
def test_bad_gpu_names_the_parameter(bad, error):
    with pytest.raises(error, match="gpu|GPU"):
        best_published_run(bad)


def test_no_matching_run_is_an_error():
    with pytest.raises(ValueError, match="no published"):
        best_published_run("H20")
    with pytest.raises(ValueError, match="kind"):
        best_published_run("H100 SXM", kind="fine-tuning")
