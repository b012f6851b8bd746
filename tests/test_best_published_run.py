"""best_published_run: the highest-MFU published run per GPU (chapter 6's "best published runs").

Expected values come from the sources' own printed figures, not from the library: Megatron-LM's README table
prints 489.1 TFLOP/s per H100 for its GPT 16B on 192 H100s (489.1 / 989.4 = 49.4%, the table's "MFU 49%");
the FlashAttention-2 paper (Dao 2023, Table 1) prints 225 TFLOP/s per A100 for GPT3-2.7B at 8K context
(225 / 312 = 72.1%)."""

import pytest

from llmsizing.mfu_published import best_published_run


def test_best_h100_bf16_run_is_maxtext_llama2_7b_on_one_a3():
    # rows31 added MaxText's A3 table (configs/a3/llama_2_7b/README.md at efb6d9e4a): 492 TFLOP/s per chip on
    # one A3 (8 H100s) in MaxText's count, 6 x 6,738,415,616 + 6 x 32 x 32 x 128 x 4,096 = 43,651,719,168 FLOPs
    # a token (causal attention); in the library's count, 6 x (6,738,415,616 - 32,000 x 4,096 input embedding)
    # + 12 x 32 x 4,096 x 4,096 = 46,086,512,640 (the whole score matrix, as PaLM counts): MFU = 492 x
    # 46,086,512,640 / 43,651,719,168 / 989.4 = 0.5250, above Megatron-Core's GPT 16B on 192 H100s (489.1 /
    # 989.4 = 0.494), the best before
    best = best_published_run("H100 SXM")
    assert best.run.startswith("Llama 2 7B, 8 H100 (MaxText on 1x A3")
    assert best.n_gpus == 8
    assert best.mfu == pytest.approx(492 * 46_086_512_640 / 43_651_719_168 / 989.4, abs=0.002)
    assert best.mfu > 489.1 / 989.4
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


def test_causal_count_of_the_flash_attention_run_by_hand():
    """FlashAttention-2's GPT3-2.7B at 8K (Dao 2023, Sec. 4.2): the paper counts 6 x seqlen x params +
    12 x layers x hidden x seqlen^2 FLOPs per sequence, the whole score matrix. A causal kernel computes half of
    it (chapter 4): 6 x layers x hidden x seqlen^2. With 2.7e9 parameters, 32 layers, hidden 2,560 and 8,192
    tokens, per token: 16.2e9 + 8.05e9 counted, 16.2e9 + 4.03e9 run, so 225/312 x 0.834 = 60%."""
    best = best_published_run(("A100 80GB", "A100 40GB"))
    p, layers, hidden, seq = 2.7e9, 32, 2560, 8192
    full = 6 * p + 12 * layers * hidden * seq
    causal = 6 * p + 6 * layers * hidden * seq
    assert best.mfu_causal == pytest.approx(225 / 312 * causal / full, abs=0.005)
    assert f"{best.mfu_causal:.0%}" == "60%"
    # at 4K the H100 run's attention share is small: the two counts stay within a few points
    h100 = best_published_run("H100 SXM")
    assert 0.9 < h100.mfu_causal / h100.mfu < 1


def test_a_run_without_a_gpu_count_says_none_not_zero(monkeypatch):
    """BestPublishedRun.n_gpus is None (not 0, which reads as a count) where the source gives no count."""
    from llmsizing import mfu_published

    df = mfu_published.published_runs()
    monkeypatch.setattr(mfu_published, "published_runs", lambda: df.assign(n_gpus=float("nan")))
    assert mfu_published.best_published_run("H100 SXM").n_gpus is None
