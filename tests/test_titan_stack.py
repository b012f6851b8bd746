"""stack="torchtitan" (issue 38, tt47): the fused count plus what eager torchtitan keeps, against every
layout of ``data/tp_saved.csv`` (tools/measure_tp_saved.py: one torchtitan Llama block, hidden 256, 8 heads of
32, 4 KV heads, FFN 512, batch 2 x 64 tokens, bf16, split by torchtitan's plan over gloo, no recomputation;
every storage autograd saved on rank 0). The expected bytes are worked by hand from the block's code, never
from the library's output."""

import csv
from pathlib import Path

import pytest

from llmsizing.activations import activation_memory, layer_terms
from llmsizing.model import Model
from llmsizing.titan_terms import rope_table_bytes

CSV = Path(__file__).resolve().parents[1] / "data" / "tp_saved.csv"
BLOCK = Model("tiny-titan", layers=1, hidden=256, heads=8, kv_heads=4, ffn_hidden=512, vocab=2048,
              gated_mlp=True, tied_embeddings=False, norm="rmsnorm", max_seq=64)
SDPA = "ScaledDotProductFlashAttentionForCpuBackward0"


def _component(module, producer, dtype):
    """The library's component of one measured storage, read from where the block saved it."""
    if module.endswith("_norm"):
        return "norms"
    if dtype == "complex64":
        return "rope"                                  # freqs_cis: once per model
    if module == "attention.wq" or (module == "attention" and producer == SDPA):
        return "attention_projections"                 # wq's (gathered) input; SDPA's output = wo's input
    if module == "attention":
        return "attention_core"                        # Q, K, V (repeated), fp32 log-sum-exp
    assert module.startswith("feed_forward"), module
    return "mlp"


def _measured():
    out = {}
    for r in csv.DictReader(CSV.open()):
        layout = out.setdefault((int(r["tp"]), bool(int(r["sp"]))), {})
        c = _component(r["module"], r["producer"], r["saved_dtype"])
        layout[c] = layout.get(c, 0) + int(r["bytes"])
    return out


def test_tp2_with_sp_tensor_by_tensor():
    """tp = 2 with SP: 128 tokens, 64 of them on this rank's norms; 4 of the 8 heads, 2 of the 4 KV heads
    (repeated to 4), 256 of the 512 MLP columns; bf16 (2 B)."""
    norm = 4 * 64 * 256 + 4 * 64 + 2 * 64 * 256           # x.float(), fp32 rsqrt, normalised bf16
    want = {"norms": 2 * norm,
            "attention_projections": 2 * 128 * 256 + 2 * 128 * 4 * 32,    # wq's gathered input, wo's input
            "attention_core": 3 * 2 * 128 * 4 * 32 + 4 * 2 * 4 * 64,       # Q and K, V repeated; LSE
            # w1's gathered input, w1's and w3's outputs, SiLU's output, the product (w2's input)
            "mlp": 2 * 128 * 256 + 2 * 2 * 128 * 256 + 2 * 128 * 256 + 2 * 128 * 256,
            "dropout_masks": 0}
    assert want == {"norms": 197_120, "attention_projections": 98_304, "attention_core": 100_352,
                    "mlp": 327_680, "dropout_masks": 0}
    assert layer_terms(BLOCK, batch=2, seq=64, tp=2, sp=True, stack="torchtitan") == want
    rope = 8 * 64 * 32 // 2                                            # complex64, 64 x 16
    assert rope_table_bytes(BLOCK, seq=64) == rope == 8192
    measured = _measured()[2, True]
    assert measured == {**{k: v for k, v in want.items() if v}, "rope": rope}
    assert sum(want.values()) + rope == 731_648


@pytest.mark.parametrize("tp,sp", [(1, False), (2, False), (4, False), (2, True), (4, True)])
def test_every_measured_layout_is_the_stack_byte_for_byte(tp, sp):
    """Each component of each layout as measured = the stack's; by hand, the stack = Korthikanti's fused count
    (norm inputs + fp32 statistics / r, QKV and fc1 inputs / r, Q, K, V, LSE, wo's input, 3 f-wide tensors)
    + the fp32 norm copies, K and V repeated, SiLU's output and (SP) the gathered inputs' other shards."""
    measured = _measured()[tp, sp]
    got = layer_terms(BLOCK, batch=2, seq=64, tp=tp, sp=sp, stack="torchtitan")
    sb, r, a_t, g_t, f_t, d, h = 128, tp if sp else 1, 8 // tp, 4 // tp, 512 // tp, 32, 256
    fused = {"norms": 2 * (2 * sb * h + 4 * sb) // r,
             "attention_projections": 2 * sb * h // r + 2 * sb * a_t * d,
             "attention_core": 2 * sb * (a_t + 2 * g_t) * d + 4 * 2 * a_t * 64,
             "mlp": 2 * sb * h // r + 3 * 2 * sb * f_t}
    gathered = 2 * sb * h * (tp - 1) // tp if sp else 0
    extra = {"norms": 2 * 4 * sb * h // r, "attention_projections": gathered,
             "attention_core": 2 * 2 * sb * (a_t - g_t) * d, "mlp": 2 * sb * f_t + gathered}
    want = {k: fused[k] + extra[k] for k in fused}
    assert {k: v for k, v in got.items() if k != "dropout_masks"} == want == \
        {k: v for k, v in measured.items() if k != "rope"}
    assert got["dropout_masks"] == 0 and measured["rope"] == 8192
    acts = activation_memory(BLOCK, batch=2, seq=64, tp=tp, sp=sp, stack="torchtitan")
    assert acts.per_layer_bytes == sum(want.values())
    assert acts.per_layer_bytes + rope_table_bytes(BLOCK, seq=64) == sum(measured.values())


def test_the_model_level_terms_by_hand():
    """RoPE's table once per model (in the embedding), not per layer; with SP the LM head keeps its gathered
    input; the final norm keeps the eager norm's tensors (as the "hf" stack's)."""
    m2 = Model("tiny-titan-2", layers=2, hidden=256, heads=8, kv_heads=4, ffn_hidden=512, vocab=2048,
               gated_mlp=True, tied_embeddings=False, norm="rmsnorm", max_seq=64)
    kw = dict(batch=2, seq=64)
    fused = activation_memory(m2, **kw, tp=2, sp=True)
    tt = activation_memory(m2, **kw, tp=2, sp=True, stack="torchtitan")
    assert tt.embedding_bytes - fused.embedding_bytes == 8 * 64 * 16           # one table, not two
    # final norm: + the fp32 copy of its 64-token shard; LM head: + the other 64 tokens of its input
    assert tt.logits_bytes - fused.logits_bytes == 4 * 64 * 256 + 2 * 64 * 256
    assert tt.layers_bytes == 2 * tt.per_layer_bytes == 2 * 723_456
    no_sp = activation_memory(m2, **kw, stack="torchtitan")
    assert no_sp.logits_bytes - activation_memory(m2, **kw).logits_bytes == 4 * 128 * 256


def test_full_recomputation_keeps_the_input_and_rebuilds_one_torchtitan_layer():
    """With full recomputation each layer keeps its bf16 input; one layer's torchtitan working set is rebuilt
    in the backward, none of it shared with the checkpoint (the eager norm saves an fp32 copy, not it)."""
    m2 = Model("tiny-titan-2", layers=2, hidden=256, heads=8, kv_heads=4, ffn_hidden=512, vocab=2048,
               gated_mlp=True, tied_embeddings=False, norm="rmsnorm", max_seq=64)
    a = activation_memory(m2, batch=2, seq=64, recompute="full", stack="torchtitan")
    assert a.per_layer_bytes == 2 * 128 * 256
    one = sum(layer_terms(m2, batch=2, seq=64, stack="torchtitan").values())
    assert a.layers_bytes == 2 * 2 * 128 * 256 + one


def test_fused_and_hf_unchanged_by_hand():
    """The stack is new: the fused count of the tp 2 + SP block is still Korthikanti's (428,544 B, by hand in
    tests/test_tp_saved.py), and "hf" differs from "torchtitan" by the SP-gathered inputs and K and V repeated
    (Hugging Face's SDPA path without a mask passes enable_gqa and keeps them at the 2 KV heads' width)."""
    assert activation_memory(BLOCK, batch=2, seq=64, tp=2, sp=True).per_layer_bytes == 428_544
    hf = layer_terms(BLOCK, batch=2, seq=64, tp=2, sp=True, stack="hf")
    tt = layer_terms(BLOCK, batch=2, seq=64, tp=2, sp=True, stack="torchtitan")
    assert {k: tt[k] - hf[k] for k in tt} == {"norms": 0, "attention_projections": 2 * 64 * 256,
                                              "attention_core": 2 * 2 * 128 * (4 - 2) * 32,
                                              "mlp": 2 * 64 * 256, "dropout_masks": 0}


@pytest.mark.parametrize("kw,name", [
    (dict(attention="eager"), "attention"), (dict(dropout=True), "dropout"),
    (dict(recompute="selective"), "recompute"), (dict(autocast=True), "autocast"), (dict(cp=2), "cp"),
    (dict(tp=8), "tp")])
def test_refuses_what_it_does_not_describe(kw, name):
    with pytest.raises(ValueError, match=f"stack='torchtitan'.*{name}"):
        activation_memory(BLOCK, batch=2, seq=64, stack="torchtitan", **kw)


def test_refuses_other_models_fp8_and_op_sac():
    with pytest.raises(ValueError, match="stack='torchtitan'.*model 'gpt2"):
        layer_terms("gpt2", batch=1, seq=64, stack="torchtitan")
    with pytest.raises(ValueError, match="fp8"):
        layer_terms(BLOCK, batch=2, seq=64, stack="torchtitan", fp8="fp8-mixed")
    with pytest.raises(ValueError, match="stack"):
        activation_memory(BLOCK, batch=2, seq=64, stack="torchtitan", recompute="op-sac")
    with pytest.raises(ValueError, match="stack"):
        activation_memory(BLOCK, batch=2, seq=64, stack="torchtitn")
