"""Issue 26's Part I findings, against what was measured (no torch needed).

* A padded batch on Hugging Face's SDPA path: data/masked_sdpa.csv (``tools/measure_memory.py mask``), the storages
  one decoder layer of a small HF Llama (GQA 8/2) saved, without a mask, with an all-ones mask and with a padded
  batch's mask, in fp32, bf16 and under autocast. ``layer_terms(..., stack="hf", attention_mask=...)`` must give
  every row to the byte (the count is exact tensor by tensor, as for the unmasked listing in test_measurements).
* The fused SwiGLU: data/fused_swiglu_saved.csv (``tools/measure_memory.py swiglu``) ran Megatron-LM's own
  ``SwiGLUFunction`` between two matrix multiplies; the fused stack's MLP count must equal what it saved, and the
  ``hf`` stack's what the unfused PyTorch code saved.
"""

import pandas as pd
import pytest

from llmsizing import Model, training_memory
from llmsizing.activations import activation_memory, layer_terms, masked_sdpa_extra_bytes
from llmsizing.measurements import FUSED_SWIGLU_CSV as SWIGLU_CSV
from llmsizing.measurements import MASKED_SDPA_CSV as MASK_CSV


def _shape(r):
    return Model(str(r["model"]), layers=int(r["layers"]), hidden=int(r["hidden"]), heads=int(r["heads"]),
                 kv_heads=int(r["kv_heads"]), ffn_hidden=int(r["ffn"]), vocab=int(r["vocab"]), gated_mlp=True,
                 tied_embeddings=False, norm="rmsnorm", max_seq=512)


def test_mask_csv_covers_the_sweep():
    df = pd.read_csv(MASK_CSV)
    assert set(df["mask"]) == {"none", "ones", "padded"}
    assert set(df["mode"]) == {"fp32", "bf16", "autocast-bf16"}
    assert len(df) == 3 * 3 * 2 * 3
    # HF drops an all-ones mask: only the padded batch reaches SDPA with one
    assert (df["mask_passed"] == (df["mask"] == "padded")).all()
    # ... and then K and V are saved at the query heads' width (a*d), otherwise at the KV heads' (g*d)
    heads_width = df["heads"] * df["head_dim"]
    kv_width = df["kv_heads"] * df["head_dim"]
    assert (df["kv_width"] == df["mask_passed"].map({True: 1, False: 0}) * (heads_width - kv_width) + kv_width).all()


def test_masked_layer_matches_the_measured_bytes():
    df = pd.read_csv(MASK_CSV)
    for _, r in df.iterrows():
        kw = dict(batch=int(r["batch"]), seq=int(r["seq"]), dtype="fp32" if r["mode"] == "fp32" else "bf16",
                  attention="flash", stack="hf", autocast=r["mode"] == "autocast-bf16",
                  attention_mask=bool(r["mask_passed"]))
        assert sum(layer_terms(_shape(r), **kw).values()) == r["saved_layer_bytes"], r.to_dict()


def test_mask_extra_is_kv_repeat_plus_one_mask_copy():
    """The measured difference padded - none, by hand: K and V grow from g*d to a*d columns (2 tensors) and the
    boolean b x 1 x s x s mask is saved as an additive one in the activations' dtype (fp32: 4 bytes, bf16 and
    autocast: 2), once per layer."""
    df = pd.read_csv(MASK_CSV).set_index(["mode", "mask", "batch", "seq"])
    for (mode, mask, b, s), r in df.iterrows():
        if mask != "padded":
            continue
        p = 4 if mode == "fp32" else 2
        hand = 2 * p * b * s * (r["heads"] - r["kv_heads"]) * r["head_dim"] + p * b * s * s
        assert r["saved_layer_bytes"] - df.loc[(mode, "none", b, s), "saved_layer_bytes"] == hand
        assert masked_sdpa_extra_bytes(_shape(r.to_dict() | {"model": "x"}), batch=b, seq=s,
                                       dtype="fp32" if mode == "fp32" else "bf16",
                                       autocast=mode == "autocast-bf16") == hand


def test_llama3_8b_at_8k_masked():
    """Llama-3-8B (32 layers, 32 query heads over 8 KV heads of 128) at 8,192 tokens, bf16: the mask adds
    2 x 2 x 8192 x 24 x 128 B (96 MiB) of K/V and 2 x 8192^2 B (128 MiB) of mask per layer: 7 GiB in all."""
    plain = training_memory("llama-3-8b", batch=1, seq=8192, precision="bf16", stack="hf")
    masked = training_memory("llama-3-8b", batch=1, seq=8192, precision="bf16", stack="hf", attention_mask=True)
    assert masked.activations_bytes - plain.activations_bytes == pytest.approx(32 * (96 + 128) * 2**20)
    # the eager path repeats K and V and adds its causal mask either way: no change
    kw = dict(batch=1, seq=1024, stack="hf", attention="eager")
    assert (activation_memory("llama-3-8b", **kw, attention_mask=True).total_bytes
            == activation_memory("llama-3-8b", **kw).total_bytes)


def test_attention_mask_bad_input():
    with pytest.raises(ValueError, match="attention_mask"):
        training_memory("llama-3-8b", batch=1, seq=1024, attention_mask=True)          # the fused stack
    with pytest.raises(TypeError, match="attention_mask"):
        activation_memory("llama-3-8b", batch=1, seq=1024, stack="hf", attention_mask="yes")
    with pytest.raises(ValueError, match="attention_mask"):
        activation_memory("mixtral-8x7b", batch=1, seq=1024, stack="hf", attention_mask=True)


def test_fused_swiglu_is_what_megatron_saves():
    df = pd.read_csv(SWIGLU_CSV)
    assert set(df["variant"]) == {"megatron-fused", "unfused"}
    assert df["megatron_commit"].str.len().eq(40).all()
    assert (df.loc[df["variant"] == "megatron-fused", "saved_f_columns"] == 3).all()
    assert (df.loc[df["variant"] == "unfused", "saved_f_columns"] == 4).all()
    for _, r in df.iterrows():
        m = Model("mlp", layers=1, hidden=int(r["hidden"]), heads=4, ffn_hidden=int(r["ffn"]), vocab=1000,
                  gated_mlp=True, norm="rmsnorm")
        stack = "fused" if r["variant"] == "megatron-fused" else "hf"
        dtype = "fp32" if r["dtype"] == "float32" else "bf16"
        mlp = layer_terms(m, batch=1, seq=int(r["tokens"]), dtype=dtype, stack=stack)["mlp"]
        assert mlp == r["saved_bytes"], r.to_dict()


@pytest.mark.parametrize("split", ["model", "seq"])
def test_held_out_peak_errors(split):
    """Chapter 5's Hugging Face model on configurations its fitted constant (the backward's working set) never
    saw: the peak stays within the in-sample bound the chapter states for it, 5%."""
    from llmsizing.measurements import held_out_step_errors

    t = held_out_step_errors(split)
    assert t.loc["held out", "configs"] == 54 and t.loc["fit", "configs"] == 108
    assert 0.0 <= t.loc["fit", "working_set"] <= 1.0
    assert abs(t.loc["held out", "worst_peak_error"]) <= 0.05
    with pytest.raises(ValueError, match="split"):
        held_out_step_errors("layers")


def test_max_micro_batch_with_a_padded_batch():
    """max_micro_batch takes attention_mask too, and its answer is the largest micro-batch training_memory fits (the
    mask's copies are b s^2 per layer: quadratic in s, linear in b, which the exact solution assumes)."""
    from llmsizing import get_gpu
    from llmsizing.memory import max_micro_batch

    cap = get_gpu("H100 SXM").memory_bytes
    from llmsizing import Parallel

    kw = dict(precision="bf16", stack="hf", parallel=Parallel(dp=8, zero=3))
    for seq in (2048, 4096):
        plain = max_micro_batch("llama-3-8b", "H100 SXM", seq, **kw)
        masked = max_micro_batch("llama-3-8b", "H100 SXM", seq, attention_mask=True, **kw)
        assert 1 <= masked <= plain and (masked < plain) == (seq == 4096)     # 2 -> 1 sequences at 4K
        assert training_memory("llama-3-8b", batch=masked, seq=seq, attention_mask=True, **kw).total_bytes <= cap
        assert training_memory("llama-3-8b", batch=masked + 1, seq=seq, attention_mask=True, **kw).total_bytes > cap


def test_working_set_fit_is_the_minimax_over_every_row():
    """Chapter 5 says what the Hugging Face rows ask of the backward's working set (issue 38). The refit over
    all 162 rows (3 models x 54 configurations, the held-out splits' 108 + 54) is a minimax: a grid step
    either side is no better, and it beats the library's half layer, which over-predicts the rows that want
    less. Each row's own exact value lies in 0..1 layers and the refit lies among them."""
    import numpy as np

    from llmsizing.measurements import _working_set_terms, working_set_fit
    from llmsizing.memory import LAYER_WORKING_SET

    fit = working_set_fit()
    assert fit["configs"] == 162
    assert fit["worst_backward_error"] < fit["library_worst_backward_error"]
    assert 0.0 <= fit["per_row_min"] <= fit["working_set"] <= fit["per_row_max"] <= 1.0
    assert fit["per_row_min"] <= fit["per_row_median"] < LAYER_WORKING_SET    # most rows want less than 0.5
    _, layer, bp, bm, _ = _working_set_terms()

    def worst(w):
        return np.abs((bp + (w - LAYER_WORKING_SET) * layer) / bm - 1).max()

    assert abs(worst(fit["working_set"]) - fit["worst_backward_error"]) < 1e-12
    step = 0.005                                                     # the refit's grid
    assert worst(fit["working_set"] - step) >= fit["worst_backward_error"] <= worst(fit["working_set"] + step)
    assert abs(worst(LAYER_WORKING_SET) - fit["library_worst_backward_error"]) < 1e-12
