"""torchtitan's op-level selective activation checkpointing, ``recompute="op-sac"`` (issues 34/38).

The policy is read from torchtitan at 9dec370ad26b (the version of its 2024-12 H100 benchmarks):
``torchtitan/parallelisms/parallelize_llama.py`` l.214-264 saves the outputs of SDPA (flash, efficient),
reduce-scatters, abs/max, and of the ``aten.mm`` calls whose per-block forward count is odd
(``not (func == mm and count % 2 == 0)``); ``torchtitan/models/llama/model.py`` calls ``wq, wk, wv`` (l.189),
``wo`` (l.214) and ``w2(silu(w1(x)) * w3(x))`` (l.253). Llama-3-8B's sizes are its config.json
(meta-llama/Meta-Llama-3-8B: hidden 4096, 32 heads, 8 KV heads, intermediate 14336, 32 layers). Every
expected value below is worked out by hand from those; none is read off the library.
"""

import warnings

import pytest

from llmsizing.activations import activation_memory, op_sac_layer_bytes, op_sac_matmuls
from llmsizing.catalog import get_model
from llmsizing.flops import stage_attention_flops_per_token, training_flops_per_token

H, HEADS, KV, D, F, L = 4096, 32, 8, 128, 14336, 32
GiB = 2**30


def _policy_saves(calls):
    """torchtitan's _custom_policy on a block's forward: the counter goes up on every mm, and an mm is
    saved unless its count is even."""
    count, saved = 0, []
    for name in calls:
        count += 1
        if count % 2 != 0:
            saved.append(name)
    return saved


def test_llama_3_8b_is_its_config():
    m = get_model("llama-3-8b")
    assert (m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn_hidden, m.layers) == (H, HEADS, KV, D, F, L)


def test_the_policy_saves_wq_wv_w1_w2():
    calls = ["wq", "wk", "wv", "wo", "w1", "w3", "w2"]          # model.py l.189, 214, 253
    assert _policy_saves(calls) == ["wq", "wv", "w1", "w2"]
    got = op_sac_matmuls("llama-3-8b")
    assert [n for n, *_ in got] == calls
    assert [n for n, _, _, saved in got if saved] == _policy_saves(calls)
    widths = {"wq": (H, HEADS * D), "wk": (H, KV * D), "wv": (H, KV * D), "wo": (HEADS * D, H),
              "w1": (H, F), "w3": (H, F), "w2": (F, H)}
    assert {n: (i, o) for n, i, o, _ in got} == widths


def test_saved_bytes_per_layer_by_hand():
    # bf16, micro-batch 2 of 8,192 tokens: the block input, wq's output (4096), wv's (8 x 128), SDPA's
    # output (32 x 128), w1's (14336) and w2's (4096), 2 bytes each, plus SDPA's fp32 log-sum-exp per head
    tokens = 2 * 8192
    kept = 2 * tokens * (4096 + 4096 + 1024 + 4096 + 14336 + 4096) + 4 * tokens * 32
    assert kept == 1_042_284_544
    assert op_sac_layer_bytes("llama-3-8b", batch=2, seq=8192) == kept
    a = activation_memory("llama-3-8b", batch=2, seq=8192, recompute="op-sac")
    assert a.per_layer_bytes == kept
    assert a.layer_count == L
    assert sum(a.breakdown.values()) == pytest.approx(a.total_bytes)


def test_op_sac_sits_between_full_and_none():
    kw = dict(batch=2, seq=8192)
    none, full = (activation_memory("llama-3-8b", recompute=r, **kw) for r in ("none", "full"))
    op = activation_memory("llama-3-8b", recompute="op-sac", **kw)
    assert full.total_bytes < op.total_bytes < none.total_bytes
    # one layer rebuilt at a time: more than nothing, less than a whole plain layer
    assert 0 < op.rebuilt_bytes < none.per_layer_bytes
    assert op.embedding_bytes == none.embedding_bytes and op.logits_bytes == none.logits_bytes


def test_recompute_flops_are_the_unsaved_matmuls_forward():
    # wk (4096 x 1024), wo (4096 x 4096) and w3 (4096 x 14336) again, 2 FLOPs per multiply-add, 32 layers
    extra = 32 * 2 * (4096 * 1024 + 4096 * 4096 + 4096 * 14336)
    assert extra == 5_100_273_664
    got = (training_flops_per_token("llama-3-8b", seq=8192, recompute="op-sac")
           - training_flops_per_token("llama-3-8b", seq=8192))
    assert got == pytest.approx(extra, rel=1e-12)


def test_sdpa_output_is_saved_so_no_attention_rerun():
    kw = dict(seq=8192, causal=True)
    assert (stage_attention_flops_per_token("llama-3-8b", recompute="op-sac", **kw)
            == stage_attention_flops_per_token("llama-3-8b", recompute="none", **kw))
    assert (stage_attention_flops_per_token("llama-3-8b", recompute="selective", **kw)
            > stage_attention_flops_per_token("llama-3-8b", recompute="none", **kw))


def test_every_pointwise_kernel_reruns():
    from llmsizing.parallel import Parallel
    from llmsizing.pointwise import stage_pointwise_bytes_per_token

    m, par = get_model("llama-3-8b"), Parallel()
    assert (stage_pointwise_bytes_per_token(m, par, recompute="op-sac")
            == stage_pointwise_bytes_per_token(m, par, recompute="full"))


@pytest.mark.parametrize("kw, name", [
    (dict(model="mixtral-8x7b"), "recompute"),
    (dict(model="gpt2"), "bias"),
    (dict(model="qwen2-7b"), "qkv_bias"),
    (dict(tp=16), "tp=16"),                     # torchtitan's wk/wv split 8 KV heads: tp must divide them
    (dict(attention="eager"), "attention"),
    (dict(stack="hf"), "stack"),
    (dict(dropout=True), "dropout"),
])
def test_what_is_not_modelled_is_refused_by_name(kw, name):
    args = dict(model="llama-3-8b", batch=1, seq=4096, recompute="op-sac") | kw
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=name):
            activation_memory(args.pop("model"), **args)


def test_partial_recompute_and_other_models_refuse_it():
    from llmsizing.mfu import mfu_estimate

    with pytest.raises(ValueError, match="recompute"):
        activation_memory("llama-3-8b", batch=1, seq=4096, recompute="op-sac", recompute_layers=2)
    with pytest.raises(ValueError, match="recompute"):
        mfu_estimate("llama-3-8b", gpu="H100 SXM", seq=8192, recompute="op-sac")


def test_the_planner_does_not_search_it():
    from llmsizing.parallel import OP_SAC, OP_SAC_SDPA_RERUN, RECOMPUTE, RECOMPUTE_MODES

    assert OP_SAC not in RECOMPUTE and OP_SAC_SDPA_RERUN not in RECOMPUTE
    assert set(RECOMPUTE_MODES) == set(RECOMPUTE) | {OP_SAC, OP_SAC_SDPA_RERUN}


def test_torchtitan_rows_fit_and_their_peak_is_below_the_measured_reserve():
    """The two torchtitan 8B runs of the 2024-12 benchmark fit once priced with op SAC; their measured
    'Memory(GiB)' is max reserved, which bounds the peak of the live tensors from above."""
    from llmsizing.layout_fits import published_layout_fits, published_measured_memory

    fits = published_layout_fits().set_index("run")
    meas = published_measured_memory().set_index("run")
    for run in ("Llama 3.1 8B, 8 GPUs FSDP + torch.compile (torchtitan)",
                "Llama 3.1 8B, 128 GPUs FSDP + compile + Float8 (torchtitan)"):
        assert fits.loc[run, "fits_today"]
        assert meas.loc[run, "model_gib"] <= meas.loc[run, "measured_gib"]


def test_the_step_model_refuses_it_where_tp_does_not_divide_the_kv_heads():
    from llmsizing.comm import communication
    from llmsizing.parallel import Parallel

    with pytest.raises(ValueError, match="tp=16"):
        communication("llama-3-8b", Parallel(tp=16, dp=4), batch=1, seq=4096, gpu="H100 SXM",
                      recompute="op-sac")


def test_a_step_with_it_costs_between_none_and_full():
    """The step model reruns more than nothing (wk, wo, w3 and the pointwise kernels) and less than full
    recomputation (which reruns every matmul and the attention core too)."""
    from llmsizing.layouts import step_time
    from llmsizing.parallel import Parallel

    par = Parallel(dp=8, zero=3)
    t = {rc: step_time("llama-3-8b", "H100 SXM", par, batch=2, seq=8192, recompute=rc).compute_s
         for rc in ("none", "op-sac", "full")}
    assert t["none"] < t["op-sac"] < t["full"]


# ---- "op-sac-sdpa-rerun": SDPA's output not on the save list (torchtitan before b39377f9 on B200, where
# torchtitan/models/attention.py l.209-211 at 6fc499f6 puts cuDNN attention first and _save_list at 6fc499f6,
# torchtitan/models/llama3/infra/parallelize.py l.234-243, names only the flash and efficient kernels)

def test_without_sdpa_the_layer_keeps_no_attention_output_by_hand():
    tokens = 2 * 8192
    kept = 2 * tokens * (4096 + 4096 + 1024 + 14336 + 4096)       # input, wq, wv, w1, w2; no SDPA, no LSE
    assert kept == 905_969_664
    assert op_sac_layer_bytes("llama-3-8b", batch=2, seq=8192, recompute="op-sac-sdpa-rerun") == kept
    a = activation_memory("llama-3-8b", batch=2, seq=8192, recompute="op-sac-sdpa-rerun")
    assert a.per_layer_bytes == kept


def test_without_sdpa_the_total_drops_by_31_layers_of_attention_output():
    # every layer keeps SDPA's output (2 x 16384 x 4096 B) and fp32 LSE (4 x 16384 x 32 B) fewer; the one
    # layer rebuilt in the backward holds them either way (as kept tensors, or as its rerun's own)
    per = 2 * 16384 * 4096 + 4 * 16384 * 32
    assert per == 136_314_880
    kw = dict(batch=2, seq=8192)
    got = (activation_memory("llama-3-8b", recompute="op-sac", **kw).total_bytes
           - activation_memory("llama-3-8b", recompute="op-sac-sdpa-rerun", **kw).total_bytes)
    assert got == (L - 1) * per


def test_without_sdpa_attention_forward_reruns_by_hand():
    # QK^T and attn @ V: 2 matmuls of s x d x s per head, 2 FLOPs per multiply-add, per token: 2 x 2 s (a d);
    # causal masks half of it (the library's causal convention is checked against this below by relation)
    s = 8192
    per_layer = 2 * 2 * s * HEADS * D
    assert per_layer == 134_217_728
    got = (training_flops_per_token("llama-3-8b", seq=s, recompute="op-sac-sdpa-rerun")
           - training_flops_per_token("llama-3-8b", seq=s, recompute="op-sac"))
    assert got == pytest.approx(L * per_layer, rel=1e-12)
    kw = dict(seq=s, causal=True)
    assert (stage_attention_flops_per_token("llama-3-8b", recompute="op-sac-sdpa-rerun", **kw)
            == stage_attention_flops_per_token("llama-3-8b", recompute="selective", **kw))


def test_the_b200_rows_rerun_sdpa_and_the_others_keep_it():
    import pandas as pd

    from llmsizing.time_cost import published_runs

    runs = published_runs()
    tt = runs[runs["recompute"].astype(str).str.startswith("op-sac")]
    b200 = tt["gpu"].eq("B200")
    assert b200.sum() == 4 and (tt.loc[b200, "recompute"] == "op-sac-sdpa-rerun").all()
    assert (tt.loc[~b200, "recompute"] == "op-sac").all() and pd.notna(tt["source"]).all()


def test_sdpa_saved_is_read_from_the_table_and_refuses_other_modes_by_name():
    from llmsizing.op_sac import sdpa_saved

    assert sdpa_saved("op-sac") is True and sdpa_saved("op-sac-sdpa-rerun") is False
    with pytest.raises(ValueError, match="recompute"):
        sdpa_saved("selective")
    with pytest.raises(ValueError, match="recompute"):
        op_sac_layer_bytes("llama-3-8b", batch=1, seq=8192, recompute="full")
