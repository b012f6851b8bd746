"""Bad input raises ValueError/TypeError naming the parameter (and, for names, suggesting the closest);
no public function returns a negative or NaN figure for valid input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import small_models
from hypothesis import given
from hypothesis import strategies as st

from llmsizing import (Model, Parallel, activation_memory, bytes_per_element, forward_flops_per_token, get_gpu,
                       get_model, inference_memory, kv_cache_bytes_per_token, model_states,
                       training_flops_per_token, training_memory, weights_bytes)

# (value, expected exception) for a parameter that must be a positive integer
BAD_POSITIVE_INTS = [
    (0, ValueError), (-1, ValueError), (-4096, ValueError),
    (1.5, TypeError), (2.0, TypeError), (True, TypeError), (False, TypeError),
    (float("nan"), TypeError), (float("inf"), TypeError), ("8", TypeError), (None, TypeError),
]

# function -> (callable taking one keyword override, the integer parameters it checks)
INT_PARAMS = {
    "activation_memory": (lambda **kw: activation_memory("gpt2", **{"batch": 1, "seq": 128, **kw}),
                          ["batch", "seq", "tp"]),
    "inference_memory": (lambda **kw: inference_memory("gpt2", **{"batch": 1, "context": 128, **kw}),
                         ["batch", "context"]),
    "training_memory": (lambda **kw: training_memory("gpt2", **{"batch": 1, "seq": 128, **kw}),
                        ["batch", "seq", "grad_accum"]),
    "training_flops_per_token": (lambda **kw: training_flops_per_token("gpt2", **{"seq": 128, **kw}), ["seq"]),
    "forward_flops_per_token": (lambda **kw: forward_flops_per_token("gpt2", **{"seq": 128, **kw}), ["seq"]),
}
INT_CASES = [(f, p, v, e) for f, (_, ps) in INT_PARAMS.items() for p in ps for v, e in BAD_POSITIVE_INTS]


@pytest.mark.parametrize("func,param,value,exc", INT_CASES,
                         ids=[f"{f}-{p}-{v!r}" for f, p, v, _ in INT_CASES])
def test_bad_integer_arguments_raise_and_name_the_parameter(func, param, value, exc):
    call = INT_PARAMS[func][0]
    with pytest.raises(exc) as e:
        call(**{param: value})
    assert param in str(e.value)


MODEL_INT_FIELDS = ["layers", "hidden", "heads", "ffn_hidden", "vocab", "max_seq", "kv_heads", "head_dim"]
MODEL_CASES = [(f, v, e) for f in MODEL_INT_FIELDS for v, e in BAD_POSITIVE_INTS if v is not None]


@pytest.mark.parametrize("field,value,exc", MODEL_CASES, ids=[f"{f}-{v!r}" for f, v, _ in MODEL_CASES])
def test_model_rejects_bad_sizes(field, value, exc):
    kw = dict(name="m", layers=2, hidden=64, heads=4, ffn_hidden=256, vocab=100)
    kw[field] = value
    with pytest.raises(exc) as e:
        Model(**kw)
    assert field in str(e.value)


def test_positive_range_is_stated():
    with pytest.raises(ValueError) as e:
        activation_memory("gpt2", batch=0, seq=128)
    assert "batch" in str(e.value) and ">= 1" in str(e.value) and "0" in str(e.value)


def test_numpy_integers_are_integers():
    a = activation_memory("gpt2", batch=np.int64(2), seq=np.int32(128))
    assert a.total_bytes == activation_memory("gpt2", batch=2, seq=128).total_bytes
    assert inference_memory("gpt2", batch=np.int64(2), context=np.int16(64)).total_bytes > 0


@pytest.mark.parametrize("field", ["gated_mlp", "tied_embeddings", "bias", "qkv_bias", "learned_pos"])
@pytest.mark.parametrize("value", [1, 0, "yes", None])
def test_model_flags_must_be_bools(field, value):
    with pytest.raises(TypeError, match=field):
        Model("m", layers=2, hidden=64, heads=4, ffn_hidden=256, vocab=100, **{field: value})


def test_model_shape_consistency():
    with pytest.raises(ValueError, match="kv_heads"):
        Model("m", layers=2, hidden=64, heads=4, kv_heads=3, ffn_hidden=256, vocab=100)
    with pytest.raises(ValueError, match="kv_heads"):
        Model("m", layers=2, hidden=64, heads=4, kv_heads=8, ffn_hidden=256, vocab=100)
    with pytest.raises(ValueError, match="divisible by heads"):
        Model("m", layers=2, hidden=65, heads=4, ffn_hidden=256, vocab=100)
    assert Model("m", layers=2, hidden=65, heads=4, head_dim=16, ffn_hidden=256, vocab=100).head_dim == 16
    with pytest.raises(TypeError, match="name"):
        Model("", layers=2, hidden=64, heads=4, ffn_hidden=256, vocab=100)
    with pytest.raises(ValueError, match="Did you mean 'rmsnorm'"):
        Model("m", layers=2, hidden=64, heads=4, ffn_hidden=256, vocab=100, norm="rms_norm")


# ----------------------------------------------------------------------------- numbers
@pytest.mark.parametrize("value,exc", [(float("nan"), ValueError), (float("inf"), ValueError),
                                       (-float("inf"), ValueError), (-1.0, ValueError), (True, TypeError),
                                       ("1e9", TypeError), (None, None)])
def test_overhead_bytes(value, exc):
    for f in (lambda v: inference_memory("gpt2", overhead_bytes=v),
              lambda v: training_memory("gpt2", batch=1, seq=64, overhead_bytes=v)):
        if exc is None:
            assert f(value).overhead_bytes > 0        # None = the default allowance
            continue
        with pytest.raises(exc, match="overhead_bytes"):
            f(value)


@pytest.mark.parametrize("value,exc", [(float("nan"), ValueError), (float("inf"), ValueError),
                                       (-0.5, ValueError), (True, TypeError), ("1", TypeError)])
def test_mask_bytes(value, exc):
    with pytest.raises(exc, match="mask_bytes"):
        activation_memory("gpt2", batch=1, seq=64, dropout=True, mask_bytes=value)


@pytest.mark.parametrize("param", ["dropout", "sp"])
@pytest.mark.parametrize("value", [1, 0, "True", None])
def test_activation_flags_must_be_bools(param, value):
    with pytest.raises(TypeError, match=param):
        activation_memory("gpt2", batch=1, seq=64, **{param: value})


def test_tp_constraints():
    with pytest.raises(ValueError, match="tp"):
        activation_memory("gpt2", batch=1, seq=64, tp=5)            # 12 heads
    with pytest.raises(ValueError, match="sp"):
        activation_memory("gpt2", batch=1, seq=64, sp=True)         # sp needs tp > 1


# ----------------------------------------------------------------------------- names, with suggestions
NAME_CASES = [
    ("precision", lambda v: model_states("gpt2", precision=v), "bf16_mixed", "bf16-mixed"),
    ("precision", lambda v: training_memory("gpt2", batch=1, seq=64, precision=v), "BF16-Mixed", "bf16-mixed"),
    ("optimizer", lambda v: model_states("gpt2", optimizer=v), "adam-w", "adamw"),
    ("optimizer", lambda v: model_states("gpt2", optimizer=v), "adafacter", "adafactor"),
    ("attention", lambda v: activation_memory("gpt2", batch=1, seq=64, attention=v), "flsh", "flash"),
    ("recompute", lambda v: activation_memory("gpt2", batch=1, seq=64, recompute=v), "selectve", "selective"),
    ("recompute", lambda v: training_flops_per_token("gpt2", seq=64, recompute=v), "ful", "full"),
    ("dtype", lambda v: activation_memory("gpt2", batch=1, seq=64, dtype=v), "bf-16", "bf16"),
    ("logits_dtype", lambda v: activation_memory("gpt2", batch=1, seq=64, logits_dtype=v), "fp23", "fp32"),
    ("weights", lambda v: inference_memory("gpt2", weights=v), "int-4", "int4"),
    ("dtype", lambda v: weights_bytes("gpt2", v), "nf-4", "nf4"),
    ("kv_cache", lambda v: inference_memory("gpt2", kv_cache=v), "fp-8", "fp8"),
    ("dtype", lambda v: kv_cache_bytes_per_token("gpt2", v), "FP16", "fp16"),
    ("dtype", bytes_per_element, "bfloat16", "bf16"),
    ("model", get_model, "llama-2-7", "llama-2-7b"),
    ("model", lambda v: model_states(v), "mistral7b", "mistral-7b"),
    ("model", lambda v: inference_memory(v), "Llama-3-8B", "llama-3-8b"),
    ("GPU", get_gpu, "H100", "H100 SXM"),
    ("GPU", get_gpu, "a100-40", "A100 40GB"),
]


@pytest.mark.parametrize("param,call,typo,suggestion", NAME_CASES, ids=[f"{c[0]}-{c[2]}" for c in NAME_CASES])
def test_unknown_names_suggest_the_closest(param, call, typo, suggestion):
    with pytest.raises(ValueError) as e:
        call(typo)
    msg = str(e.value)
    assert param in msg, msg
    assert repr(typo) in msg, msg
    assert f"Did you mean {suggestion!r}?" in msg, msg


@pytest.mark.parametrize("call", [lambda v: model_states("gpt2", precision=v),
                                  lambda v: activation_memory("gpt2", batch=1, seq=64, attention=v),
                                  lambda v: inference_memory("gpt2", weights=v)])
@pytest.mark.parametrize("value", [None, 16, b"bf16"])
def test_names_must_be_strings(call, value):
    with pytest.raises(TypeError):
        call(value)


def test_unknown_choice_lists_allowed_values():
    with pytest.raises(ValueError) as e:
        activation_memory("gpt2", batch=1, seq=64, attention="xformers")
    assert "flash" in str(e.value) and "eager" in str(e.value)


@pytest.mark.parametrize("bad", [42, None, ["gpt2"]])
def test_model_argument_type(bad):
    for f in (lambda m: model_states(m), lambda m: inference_memory(m),
              lambda m: activation_memory(m, batch=1, seq=8), lambda m: training_memory(m, batch=1, seq=8)):
        with pytest.raises(TypeError, match="model"):
            f(bad)


def test_hf_config_missing_field_takes_the_class_default_as_transformers_does():
    """Issue 36: save_pretrained writes only the keys that differ from the config class's defaults, so an
    absent key is the class default (LlamaConfig: 32 heads; GPT2Config: n_embd 768), never an error."""
    cfg = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "intermediate_size": 11008,
           "vocab_size": 32000}
    assert Model.from_hf_config(cfg) == Model.from_hf_config({**cfg, "num_attention_heads": 32})
    assert Model.from_hf_config({"model_type": "gpt2", "n_layer": 12}).hidden == 768


# ----------------------------------------------------------------------------- never negative, never NaN
names = st.sampled_from(["bf16", "fp16", "fp32"])


@given(small_models(), st.integers(1, 32), st.integers(1, 4096),
       st.sampled_from(["fp32", "bf16-mixed", "fp16-mixed", "bf16-mixed-fp32-grads", "bf16-mixed-dual-grads",
                        "bf16"]),
       st.sampled_from(["sgd", "sgd-momentum", "adam", "adamw", "adamw-8bit", "adafactor", "lion"]),
       st.sampled_from(["flash", "eager"]), st.sampled_from(["none", "selective", "full"]), st.booleans(),
       st.integers(1, 16), st.integers(0, 3))
def test_no_function_returns_negative_or_nan(m, batch, seq, precision, optimizer, attention, recompute, dropout,
                                              dp, zero):
    par = Parallel(dp=dp, zero=zero)
    values = []
    ms = model_states(m, precision=precision, optimizer=optimizer, parallel=par)
    values += [ms.weights_bytes, ms.gradients_bytes, ms.optimizer_bytes, ms.total_bytes, ms.bytes_per_param]
    tm = training_memory(m, batch=batch, seq=seq, precision=precision, optimizer=optimizer, attention=attention,
                         recompute=recompute, dropout=dropout, parallel=par)
    values += [tm.weights_bytes, tm.gradients_bytes, tm.optimizer_bytes, tm.activations_bytes, tm.overhead_bytes,
               tm.total_bytes, tm.flops_per_token]
    values += list(tm.to_frame()["bytes"])
    im = inference_memory(m, batch=batch, context=seq)
    values += [im.weights_bytes, im.kv_cache_bytes, im.overhead_bytes, im.total_bytes]
    values += [forward_flops_per_token(m, seq=seq), training_flops_per_token(m, seq=seq, recompute=recompute)]
    for v in values:
        assert math.isfinite(v) and v >= 0, values


# ----------------------------------------------------------------------------- NumPy scalars (issue: silent overflow)
def test_numpy_int32_fields_do_not_overflow():
    # Llama-2-7B's shape as np.int32: before normalisation, n_params wrapped around to -1,851,518,976
    m = Model("m", layers=np.int32(32), hidden=np.int32(4096), heads=np.int32(32), ffn_hidden=np.int32(11008),
              vocab=np.int32(32000))
    assert m.n_params == 6_738_415_616          # the published Llama-2-7B count (Touvron et al. 2023b)
    assert all(type(getattr(m, f)) is int for f in ("layers", "hidden", "heads", "ffn_hidden", "vocab",
                                                     "kv_heads", "head_dim", "max_seq"))


def test_numpy_int32_parallel_and_tokens_per_step():
    p = Parallel(tp=np.int32(2**16), pp=np.int32(2**10), dp=np.int32(2**16))   # (pp <= MAX_PP = 2**10)
    assert p.gpus == 2**16 * 2**10 * 2**16 and type(p.tp) is int        # np.int32 product: 0
    t = training_memory("llama-2-7b", batch=np.int32(2**15), seq=np.int32(2**16), grad_accum=np.int32(2**10))
    assert t.tokens_per_step == 2**15 * 2**16 * 2**10


def test_numpy_seq_in_flops_is_a_python_int():
    # np.int32(4096)**2 * heads ... raised OverflowError before
    a = training_flops_per_token("llama-2-7b", seq=np.int32(4096), recompute="selective")
    assert a == training_flops_per_token("llama-2-7b", seq=4096, recompute="selective")


@pytest.mark.parametrize("value", [np.bool_(True), np.bool_(False)])
def test_numpy_bools_are_bools(value):
    assert activation_memory("gpt2", batch=1, seq=64, dropout=value).total_bytes == \
        activation_memory("gpt2", batch=1, seq=64, dropout=bool(value)).total_bytes


@pytest.mark.parametrize("value", [2**54, 10**400])
def test_numbers_too_large_to_mean_anything_are_refused(value):
    with pytest.raises(ValueError, match="seq"):
        activation_memory("gpt2", batch=1, seq=value)
    with pytest.raises(ValueError, match="overhead_bytes"):
        training_memory("gpt2", batch=1, seq=64, overhead_bytes=value)


def test_min_gpus_with_a_vanishing_usable_fraction():
    from llmsizing.memory import min_gpus_for_bytes

    with pytest.raises(ValueError, match="usable_fraction"):
        min_gpus_for_bytes(1.0, "A10", usable_fraction=5e-324)


# ----------------------------------------------------------------------------- Hugging Face configs
LLAMA_7B = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
            "num_key_value_heads": 32, "intermediate_size": 11008, "vocab_size": 32000,
            "max_position_embeddings": 4096, "hidden_act": "silu", "tie_word_embeddings": False}


@pytest.mark.parametrize("key,value,exc", [
    ("num_attention_heads", 0, ValueError), ("num_hidden_layers", -1, ValueError), ("hidden_size", 4096.0, TypeError),
    ("num_key_value_heads", 0, ValueError), ("num_key_value_heads", 8.5, TypeError), ("head_dim", 0, ValueError),
    ("intermediate_size", "11008", TypeError), ("tie_word_embeddings", "false", TypeError),
    ("tie_word_embeddings", 0, TypeError), ("attention_bias", "false", TypeError), ("hidden_act", "swiglu", ValueError),
    ("max_position_embeddings", 0, ValueError),
])
def test_hf_config_errors_name_the_config_key(key, value, exc):
    with pytest.raises(exc) as e:
        Model.from_hf_config({**LLAMA_7B, key: value})
    assert key in str(e.value), str(e.value)


def test_hf_config_nulls_take_hugging_face_defaults():
    m = Model.from_hf_config({**LLAMA_7B, "num_key_value_heads": None, "head_dim": None})
    assert (m.kv_heads, m.head_dim, m.n_params) == (32, 128, 6_738_415_616)
    gpt2 = {"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257}
    assert Model.from_hf_config({**gpt2, "n_inner": None}).ffn_hidden == 4 * 768
    with pytest.raises(ValueError, match="n_inner"):
        Model.from_hf_config({**gpt2, "n_inner": 0})


@pytest.mark.parametrize("key", ["num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok"])
@pytest.mark.parametrize("mtype", ["llama", "mistral", "qwen2"])
def test_hf_config_refuses_mixture_of_experts(key, mtype):
    with pytest.raises(ValueError, match=key):
        Model.from_hf_config({**LLAMA_7B, "model_type": mtype, key: 8})


def test_hf_config_reads_activation_and_window():
    gpt2 = {"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257}
    assert Model.from_hf_config(gpt2).activation == "gelu_new"                # GPT2Config's default
    assert Model.from_hf_config({**gpt2, "activation_function": "gelu"}).activation == "gelu"
    assert Model.from_hf_config({**LLAMA_7B, "hidden_act": "swish"}).activation == "silu"
    mistral = {**LLAMA_7B, "model_type": "mistral", "num_key_value_heads": 8, "intermediate_size": 14336,
               "max_position_embeddings": 32768}
    assert Model.from_hf_config({**mistral, "sliding_window": 4096}).sliding_window == 4096     # v0.1
    assert Model.from_hf_config({**mistral, "sliding_window": None}).sliding_window is None     # v0.2, v0.3
    # Qwen2: the window applies only with use_sliding_window (and then to every layer only if max_window_layers=0)
    qwen = {**LLAMA_7B, "model_type": "qwen2", "sliding_window": 4096}
    assert Model.from_hf_config(qwen).sliding_window is None
    assert Model.from_hf_config({**qwen, "use_sliding_window": True, "max_window_layers": 0}).sliding_window == 4096
    with pytest.raises(ValueError, match="max_window_layers"):
        Model.from_hf_config({**qwen, "use_sliding_window": True, "max_window_layers": 28})


def test_qwen2_attention_bias_is_ignored_as_hugging_face_ignores_it():
    qwen = {**LLAMA_7B, "model_type": "qwen2"}
    base = Model.from_hf_config(qwen)
    assert Model.from_hf_config({**qwen, "attention_bias": False}) == base      # q, k, v biases all the same
    assert base.qkv_bias and not base.bias
    # 32 layers x (3 x 4096) bias entries on top of the bias-free Llama count
    assert base.n_params == 6_738_415_616 + 32 * 3 * 4096


def test_hf_config_files(tmp_path):
    import json

    with pytest.raises(FileNotFoundError, match="missing.json"):
        Model.from_hf_config(tmp_path / "missing.json")
    for text, what in (("", "empty"), ("{not json", "not valid JSON"), ("[1]", "JSON object")):
        p = tmp_path / "config.json"
        p.write_text(text)
        with pytest.raises(ValueError) as e:
            Model.from_hf_config(p)
        assert str(p) in str(e.value) and what in str(e.value)
    p.write_text(json.dumps(LLAMA_7B))
    assert Model.from_hf_config(str(tmp_path)).n_params == 6_738_415_616       # the folder save_pretrained wrote


# ----------------------------------------------------------------------------- layouts that cannot run
@pytest.mark.parametrize("call", [
    lambda p: model_states("gpt2", parallel=p),
    lambda p: training_memory("gpt2", batch=1, seq=64, parallel=p),
])
def test_layouts_that_cannot_run_are_refused_everywhere(call):
    with pytest.raises(ValueError, match="tp=5 must divide the attention heads"):
        call(Parallel(tp=5))                                         # GPT-2 has 12 heads
    with pytest.raises(ValueError, match="pp=13 must be <= layers"):
        call(Parallel(pp=13))                                        # and 12 layers


def test_kv_heads_and_tp_must_divide_one_another():
    l3 = get_model("llama-3-8b")                                     # 32 heads, 8 KV heads
    for tp in (2, 4, 8, 16, 32):                                     # vLLM replicates KV heads past 8
        activation_memory(l3, batch=1, seq=64, tp=tp)
    m = Model("m", layers=2, hidden=768, heads=12, kv_heads=6, ffn_hidden=3072, vocab=100)
    with pytest.raises(ValueError, match="KV heads"):
        activation_memory(m, batch=1, seq=64, tp=4)                  # 4 does not divide 6, nor 6 4
    with pytest.raises(ValueError, match="KV heads"):
        model_states(m, parallel=Parallel(tp=4))
    # Megatron-LM shares a KV head among tp / kv_heads ranks since 2025-12 (commit f7dfb99): the message must
    # not say it refuses tp > kv_heads; 12 = 2 x 6 runs, one KV head shared by two ranks
    with pytest.raises(ValueError, match=r"Megatron-LM, since 2025-12, shares it among tp/kv_heads ranks"):
        model_states(m, parallel=Parallel(tp=4))
    model_states(m, parallel=Parallel(tp=12))


def test_sp_needs_tp_in_parallel():
    with pytest.raises(ValueError, match="sp=True needs tp > 1"):
        Parallel(sp=True)


# ----------------------------------------------------------------------------- secondary helpers
def test_secondary_helpers_validate():
    from llmsizing.activations import korthikanti_bytes_per_layer
    from llmsizing.inference import rule_of_thumb_table
    from llmsizing.memory import bytes_per_param_table, optimizer_state_elements
    from llmsizing.units import fmt_bytes, fmt_count, fmt_gib

    with pytest.raises(ValueError, match="precisions"):
        bytes_per_param_table("gpt2", precisions=[])
    with pytest.raises(TypeError, match="optimizers"):
        bytes_per_param_table("gpt2", optimizers="adamw")            # a string, not a list of names
    assert optimizer_state_elements("gpt2", "adamw") == 2 * get_model("gpt2").n_params
    with pytest.raises(ValueError, match="tp"):
        korthikanti_bytes_per_layer(get_model("gpt2"), batch=1, seq=64, tp=0)
    with pytest.raises(ValueError, match="batch"):
        korthikanti_bytes_per_layer(get_model("gpt2"), batch=-1, seq=64)
    with pytest.raises(TypeError, match=r"cases\[0\]"):
        rule_of_thumb_table([("gpt2", 1)])
    with pytest.raises(TypeError, match="cases"):
        rule_of_thumb_table("gpt2")
    for f in (fmt_gib, fmt_bytes, fmt_count):
        with pytest.raises(ValueError):
            f(float("nan"))
        with pytest.raises(ValueError, match="digits"):
            f(1.0, -1)
    assert fmt_gib(-2**30) == "-1.0 GiB"                             # signed differences still format
    from llmsizing.units import fmt_size

    # chapter 9's sizes: whole where whole (2**20 = 1 MiB), one decimal otherwise (1,536 B = 1.5 KiB)
    assert [fmt_size(x) for x in (8, 1536, 2**20, 3 * 2**29, 8 * 2**30)] == \
        ["8 B", "1.5 KiB", "1 MiB", "1.5 GiB", "8 GiB"]
    with pytest.raises(ValueError, match="n_bytes"):
        fmt_size(float("nan"))


@pytest.mark.parametrize("factory", ["parameter_counts_widget", "model_states_widget", "inference_memory_widget",
                                     "activation_memory_widget", "max_micro_batch_widget"])
def test_widget_factories_give_the_library_error(factory):
    widgets = pytest.importorskip("llmsizing.widgets")
    with pytest.raises(ValueError, match="Did you mean 'llama-3-8b'"):
        getattr(widgets, factory)("llama-3-8")
