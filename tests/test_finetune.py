"""Fine-tuning memory (llmsizing.finetune): LoRA parameter counts by hand, QLoRA storage by the QLoRA paper's
arithmetic, the same peak semantics as training_memory, and clear errors."""

import pytest

import llmsizing as L
from llmsizing.finetune import ALL_LINEAR, ATTENTION_ONLY, finetune_memory, lora_params


def test_lora_params_llama2_7b_by_hand():
    h, f, layers = 4096, 11008, 32
    r = 16
    per_layer = 4 * r * (h + h) + 2 * r * (h + f) + r * (f + h)       # q k v o (MHA), gate up, down
    assert lora_params("llama-2-7b", rank=r) == layers * per_layer == 39_976_960
    # the classic q_proj + v_proj at r = 8: 32 layers x 2 matrices x 8 x (4096 + 4096)
    assert lora_params("llama-2-7b", rank=8, targets=("q_proj", "v_proj")) == 4_194_304


def test_lora_params_respect_gqa():
    # Llama-3-8B: k_proj and v_proj are 4096 -> 8 x 128 = 1024 wide
    h, kv, f, r = 4096, 1024, 14336, 8
    per_layer = r * (h + h) * 2 + r * (h + kv) * 2 + r * (h + f) * 2 + r * (f + h)
    assert lora_params("llama-3-8b", rank=r) == 32 * per_layer


def test_qlora_base_is_nf4_blocks_and_16bit_rest():
    m = L.get_model("llama-2-7b")
    parts = m.param_breakdown()
    block_matrices = m.layers * (4 * 4096 * 4096 + 3 * 4096 * 11008)
    rest = m.n_params - block_matrices                         # embeddings, LM head, norms: bf16
    nf4 = (4 + 8 / 64 + 32 / (64 * 256)) / 8                     # QLoRA paper, Sec. 3: 4.127 bits
    q = finetune_memory("llama-2-7b", method="qlora", batch=1, seq=512, kbit_prep=False)   # a bare PEFT model
    assert q.base_weights_bytes == pytest.approx(block_matrices * nf4 + rest * 2)
    # PEFT's k-bit preparation (the default for QLoRA) casts the 16-bit rest to fp32: 2 more bytes each
    prepared = finetune_memory("llama-2-7b", method="qlora", batch=1, seq=512)
    assert prepared.base_weights_bytes == pytest.approx(block_matrices * nf4 + rest * 4)
    assert parts["norms"] < rest
    # one 16-bit copy of the largest block matrix (gate/up/down: 4096 x 11008) is dequantised at a time
    assert q.dequantised_bytes == 2 * 4096 * 11008


def test_only_adapters_carry_gradients_and_optimizer_states():
    f = finetune_memory("llama-2-7b", method="lora", batch=1, seq=512, rank=16)
    n = 39_976_960
    assert f.trainable_params == n
    assert f.adapter_bytes == 4 * n and f.gradients_bytes == 4 * n and f.optimizer_bytes == 8 * n
    eight = finetune_memory("llama-2-7b", method="lora", batch=1, seq=512, rank=16, optimizer="adamw-8bit")
    # two int8 moments + one fp32 constant per 256 values each (bitsandbytes >= 0.44)
    assert eight.optimizer_bytes == pytest.approx(n * 2 * (1 + 4 / 256))


def test_full_is_training_memory():
    f = finetune_memory("llama-3-8b", method="full", batch=2, seq=1024, recompute="full")
    t = L.training_memory("llama-3-8b", batch=2, seq=1024, recompute="full", stack="hf")
    assert f.total_bytes == t.total_bytes and f.trainable_params == L.get_model("llama-3-8b").n_params


def test_ordering_and_seed_004_qlora_70b():
    kw = dict(batch=1, seq=2048, recompute="full")
    full, lora, qlora = (finetune_memory("llama-2-70b", method=m, **kw) for m in ("full", "lora", "qlora"))
    assert qlora.total_bytes < lora.total_bytes < full.total_bytes
    # seed 004: QLoRA brings a 70B to "about 41 GB", on one 80 GB GPU: the states are 4.127-bit weights
    assert qlora.total_bytes < 0.9 * L.get_gpu("H100 SXM").memory_bytes


def test_adapter_activations_grow_with_targets_and_dropout():
    kw = dict(method="lora", batch=2, seq=1024)
    attn = finetune_memory("llama-3-8b", targets=ATTENTION_ONLY, **kw)
    every = finetune_memory("llama-3-8b", targets=ALL_LINEAR, **kw)
    drop = finetune_memory("llama-3-8b", targets=ALL_LINEAR, lora_dropout=True, **kw)
    assert attn.activations_bytes < every.activations_bytes < drop.activations_bytes


@pytest.mark.parametrize("kw, exc, msg", [
    (dict(targets=("q", "qkv")), ValueError, "unknown LoRA target 'qkv'.*valid targets are q, k, v, o, gate"),
    (dict(targets="q"), TypeError, "targets"),
    (dict(targets=(1,)), TypeError, "targets"),
    (dict(method="dora"), ValueError, "method"),
    (dict(rank=0), ValueError, "rank"),
    (dict(alpha=-16), ValueError, "alpha"),
    (dict(batch=0), ValueError, "batch"),
    (dict(optimizer="adam8"), ValueError, "optimizer"),
    (dict(parallel=L.Parallel(dp=2)), ValueError, "parallel"),
    (dict(lora_dropout=True, mask_bytes=-1), ValueError, "mask_bytes must be >= 0"),
    (dict(mask_bytes="4"), TypeError, "mask_bytes"),
])
def test_bad_input_is_named(kw, exc, msg):
    base = dict(method="lora", batch=1, seq=512)
    with pytest.raises(exc, match=msg):
        finetune_memory("llama-3-8b", **{**base, **kw})


def test_gate_target_on_a_model_without_gated_mlp():
    with pytest.raises(ValueError, match="unknown LoRA target 'gate' for gpt2"):
        lora_params("gpt2", targets=("gate",))


# ----------------------------------------------------------------------------- against PEFT and measured steps
import pandas as pd  # noqa: E402

from llmsizing.catalog import DATA_DIR  # noqa: E402
from llmsizing.finetune import _adapter_saved_bytes, _target_shapes  # noqa: E402
from llmsizing.precision import DTYPE_BYTES  # noqa: E402

PEFT = pd.read_csv(DATA_DIR / "peft_trainable_params.csv")
STEPS = pd.read_csv(DATA_DIR / "lora_step_measurements.csv")
NF4 = pd.read_csv(DATA_DIR / "nf4_storage.csv")


def _targets(kind):
    return ATTENTION_ONLY if kind == "attention" else ALL_LINEAR


@pytest.mark.parametrize("i", range(len(PEFT)))
def test_trainable_params_equal_peft(i):
    """PEFT 0.21.2's get_nb_trainable_parameters() on models built from config on the meta device."""
    r = PEFT.iloc[i]
    assert lora_params(r.model, rank=int(r.r), targets=_targets(r.targets)) == r.trainable_params
    assert r.total_params - r.trainable_params == L.get_model(r.model).n_params


def _step_model(r):
    return L.Model(r.model, layers=int(r.layers), hidden=int(r.hidden), heads=int(r.heads),
                   kv_heads=int(r.kv_heads), ffn_hidden=int(r.ffn), vocab=int(r.vocab), gated_mlp=True,
                   tied_embeddings=bool(r.tied_embeddings), norm="rmsnorm", bias=False, learned_pos=False,
                   max_seq=4096)


MEASURED = STEPS[STEPS["mode"].isin(["fp32", "bf16"])]          # autocast-bf16 is not modelled for LoRA


@pytest.mark.parametrize("i", range(len(MEASURED)))
def test_lora_step_against_measurement(i):
    r = MEASURED.iloc[i]
    m = _step_model(r)
    kw = dict(rank=int(r.r), targets=_targets(r.targets), batch=int(r.batch), seq=int(r.seq),
              recompute=r.recompute, lora_dropout=bool(r.lora_dropout > 0), dtype=r["mode"], stack="hf")
    f = finetune_memory(m, method="lora", **kw)
    assert f.trainable_params == r.trainable_params and f.base_weights_bytes == r.base_weight_bytes
    assert f.adapter_bytes == r.adapter_bytes and f.gradients_bytes == r.grad_bytes
    assert f.optimizer_bytes == r.optimizer_state_bytes
    dropout = r.lora_dropout > 0
    if dropout:                      # measured on the CPU: PyTorch's CPU dropout keeps fp32 noise, not a mask
        f = finetune_memory(m, method="lora", mask_bytes=4, **kw)
    err = f.peak_bytes / r.peak_bytes - 1
    assert abs(err) < 0.015, err
    if r.recompute == "none":         # what only the adapters keep, to the byte
        one = dict(tokens=kw["batch"] * kw["seq"], rank=kw["rank"], act_bytes=DTYPE_BYTES[r["mode"]],
                   dropout=dropout, mask_bytes=4)
        shapes = _target_shapes(m, kw["targets"])
        first, rest = _adapter_saved_bytes(shapes, first_layer=True, **one), _adapter_saved_bytes(shapes, **one)
        assert first + (m.layers - 1) * rest == r.saved_lora_only_bytes


def test_nf4_storage_matches_bitsandbytes():
    """bitsandbytes 0.50.2 on this CPU: blocks of 64 with an absmax each, 8-bit absmax in blocks of 256 with
    double quantisation (QLoRA's 4.127 bits), plus a few hundred bytes of code books."""
    for r in NF4.itertuples():
        bpe = DTYPE_BYTES["nf4"] if r.double_quant else (4 + 32 / 64) / 8
        extra = r.total_bytes - r.n_params * bpe
        # code books (the 16-value nf4 map, 64 B; the 256-value 8-bit map of the absmax, 1 KiB) and the padding
        # of a last partial block: a fixed ~1 KiB, which the per-weight figure rightly leaves out
        assert 0 <= extra <= 1100 + 64 * bpe, (r.layer, extra)
        if r.n_params >= 10**6:
            assert r.total_bytes == pytest.approx(r.n_params * bpe, rel=1e-3)


DROPOUT = pd.read_csv(DATA_DIR / "dropout_saved.csv")


def test_dropout_keeps_a_one_byte_mask_on_a_gpu_and_fp32_noise_on_the_cpu():
    """data/dropout_saved.csv (tools/measure_memory.py dropout, run on the CPU build of torch): what PyTorch's
    dropout keeps for its backward, per element. torch.native_dropout, the op F.dropout calls on a CUDA tensor
    (PyTorch's Dropout.cpp; not measured on a GPU here: the op itself, run on the CPU), keeps a bool mask: the
    library's DROPOUT_MASK_BYTES. The CPU path keeps its noise in the input's dtype (fp32 for PEFT's adapter
    input): the 4 bytes the CPU measurements need. Neither keeps anything when the input needs no gradient,
    the first layer's rule."""
    from llmsizing.activations import DROPOUT_MASK_BYTES

    per = DROPOUT.set_index(["op", "input_dtype", "input_requires_grad"])["saved_bytes_per_element"]
    native = [op for op in per.index.levels[0] if op.startswith("torch.native_dropout")]
    cpu = [op for op in per.index.levels[0] if op.startswith("F.dropout")]
    assert len(native) == len(cpu) == 1
    for dtype in ("float32", "bfloat16"):
        assert per[(native[0], dtype, True)] == DROPOUT_MASK_BYTES == 1
        assert per[(native[0], dtype, False)] == per[(cpu[0], dtype, False)] == 0
    assert per[(cpu[0], "float32", True)] == 4 and per[(cpu[0], "bfloat16", True)] == 2


def test_first_layer_masks_only_what_follows_an_adapted_matrix():
    m = L.get_model("llama-3-8b")
    one = dict(tokens=1000, rank=16, act_bytes=2, dropout=True, mask_bytes=1)
    mlp = _target_shapes(m, ("gate", "up", "down"))
    # gate and up read the frozen residual stream of layer 0 (nothing adapted upstream): no mask; down's input
    # comes through the adapted gate and up: masked
    diff = _adapter_saved_bytes(mlp, **one) - _adapter_saved_bytes(mlp, first_layer=True, **one)
    assert diff == 1000 * (m.hidden + m.hidden)
    attn = _target_shapes(m, ("q", "o"))
    diff = _adapter_saved_bytes(attn, **one) - _adapter_saved_bytes(attn, first_layer=True, **one)
    assert diff == 1000 * m.hidden                 # q unmasked in layer 0; o follows q
    gpu = finetune_memory(m, method="lora", batch=1, seq=1024, lora_dropout=True)
    cpu = finetune_memory(m, method="lora", batch=1, seq=1024, lora_dropout=True, mask_bytes=4)
    assert gpu.activations_bytes < cpu.activations_bytes


# ----------------------------------------------------------------------------- issue 20 class 10: false refusals
#: Models without a gated MLP, built from their Hugging Face modules (``modeling_opt.py``: q_proj, k_proj, v_proj,
#: out_proj, fc1, fc2; ``modeling_bloom.py`` / ``modeling_falcon.py``: query_key_value, dense, dense_h_to_4h,
#: dense_4h_to_h; MPT: Wqkv, out_proj, up_proj, down_proj).
OPT_125M = L.Model("opt-125m", layers=12, hidden=768, heads=12, ffn_hidden=3072, vocab=50272, gated_mlp=False,
                   tied_embeddings=True, norm="layernorm", bias=True, learned_pos=True, max_seq=2048,
                   activation="relu")
BLOOM_560M = L.Model("bloom-560m", layers=24, hidden=1024, heads=16, ffn_hidden=4096, vocab=250880,
                     gated_mlp=False, tied_embeddings=True, norm="layernorm", bias=True, max_seq=2048,
                     activation="gelu", fused_qkv=True)
FALCON_7B = L.Model("falcon-7b", layers=32, hidden=4544, heads=71, kv_heads=1, ffn_hidden=18176, vocab=65024,
                    gated_mlp=False, tied_embeddings=True, norm="layernorm", max_seq=2048, activation="gelu",
                    fused_qkv=True)
MPT_7B = L.Model("mpt-7b", layers=32, hidden=4096, heads=32, ffn_hidden=16384, vocab=50432, gated_mlp=False,
                 tied_embeddings=True, norm="layernorm", max_seq=2048, activation="gelu", fused_qkv=True)
UNGATED = ["gpt2", OPT_125M, BLOOM_560M, FALCON_7B, MPT_7B]


@pytest.mark.parametrize("model", UNGATED, ids=lambda m: getattr(m, "name", m))
@pytest.mark.parametrize("method", ["full", "lora", "qlora"])
def test_models_without_a_gated_mlp_fine_tune_with_the_defaults(model, method):
    """Every call on these raised: the default targets named 'gate', and full fine-tuning checked them too."""
    f = finetune_memory(model, method=method, batch=1, seq=256)
    assert f.total_bytes > 0 and f.trainable_params > 0
    if method == "full":
        t = L.training_memory(model, batch=1, seq=256, stack="hf")
        assert f.total_bytes == t.total_bytes


def test_full_fine_tuning_does_not_read_lora_targets():
    """Every weight trains: a target the model lacks is no reason to refuse, a name no model has (a typo) is."""
    kw = dict(method="full", batch=1, seq=256)
    assert finetune_memory("gpt2", targets=("gate",), **kw) == finetune_memory("gpt2", **kw)
    with pytest.raises(ValueError, match="unknown LoRA target 'gat'"):
        finetune_memory("gpt2", targets=("gat",), **kw)
    with pytest.raises(TypeError, match="targets"):
        finetune_memory("gpt2", targets="bf16-mixed", **kw)


def test_all_linear_is_every_matrix_of_gpt2_as_peft_adapts_it():
    """PEFT's all-linear: every nn.Linear / Conv1D but the output layer. GPT-2 (modeling_gpt2.py) has per block
    c_attn = Conv1D(3 x 768, 768), attn.c_proj = Conv1D(768, 768), c_fc = Conv1D(3072, 768) and
    mlp.c_proj = Conv1D(768, 3072); LoRA adds r (d_in + d_out) to each."""
    r = 16
    per_layer = r * ((768 + 3 * 768) + (768 + 768) + (768 + 3072) + (3072 + 768))
    assert lora_params("gpt2", rank=r) == 12 * per_layer == 2_359_296
    assert lora_params(L.Model.from_hf_config({"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12,
                                               "vocab_size": 50257}), rank=r) == 12 * per_layer
    assert lora_params("gpt2", rank=r, targets=("qkv", "o", "up", "down")) == 12 * per_layer
    # attention only: c_attn and the attention's c_proj
    assert lora_params("gpt2", rank=r, targets=ATTENTION_ONLY) == 12 * r * ((768 + 3 * 768) + (768 + 768))


def test_all_linear_of_opt_and_falcon_by_hand():
    r = 8
    # OPT: q, k, v, out_proj (768 x 768 each), fc1 (3072 x 768), fc2 (768 x 3072)
    assert lora_params(OPT_125M, rank=r) == 12 * r * (4 * (768 + 768) + 2 * (768 + 3072))
    # Falcon-7B: query_key_value 4544 -> (71 + 2) x 64 = 4672, dense 4544 -> 4544, 4h MLP without a gate
    assert lora_params(FALCON_7B, rank=r) == 32 * r * ((4544 + 4672) + (4544 + 4544) + 2 * (4544 + 18176))


def test_all_linear_is_the_explicit_list_on_llama():
    every = ("q", "k", "v", "o", "gate", "up", "down")
    assert lora_params("llama-3-8b", rank=8) == lora_params("llama-3-8b", rank=8, targets=every)
    assert lora_params("llama-3-8b", rank=8, targets="ALL-LINEAR") == lora_params("llama-3-8b", rank=8)


@pytest.mark.parametrize("targets", [("q", "v"), ("q",), ("k_proj", "o")])
def test_part_of_a_fused_qkv_is_refused(targets):
    with pytest.raises(ValueError, match="fused q, k, v"):
        lora_params("gpt2", targets=targets)


def test_gate_on_an_ungated_model_is_still_refused_for_lora():
    with pytest.raises(ValueError, match="unknown LoRA target 'gate' for gpt2.*all-linear"):
        finetune_memory("gpt2", method="lora", targets=("q", "k", "v", "gate"), batch=1, seq=128)


@pytest.mark.parametrize("method", ["lora", "qlora"])
def test_lora_with_adafactor_keeps_a_factored_moment_per_adapter_matrix(method):
    """LoRA with Adafactor was refused. Adafactor's factored second moment keeps a row and a column vector per
    matrix (Shazeer & Stern 2018, Alg. 4): r + d_in for A (r x d_in), d_out + r for B (d_out x r), in fp32."""
    r, layers = 16, 32
    shapes = 4 * [(4096, 4096)] + 2 * [(11008, 4096)] + [(4096, 11008)]     # Llama-2-7B: q k v o, gate up, down
    numbers = layers * sum((r + d_in) + (d_out + r) for d_out, d_in in shapes)
    f = finetune_memory("llama-2-7b", method=method, optimizer="adafactor", rank=r, batch=1, seq=512)
    assert f.optimizer_bytes == pytest.approx(4 * numbers)
    assert f.trainable_params == 39_976_960 and f.gradients_bytes == 4 * 39_976_960
    adam = finetune_memory("llama-2-7b", method=method, rank=r, batch=1, seq=512)
    assert adam.optimizer_bytes == 8 * 39_976_960            # two fp32 moments per adapter parameter


def test_lora_with_muon_keeps_one_buffer_per_adapter_parameter():
    """LoRA's adapters are hidden matrices, so Muon keeps its one momentum buffer for each of their parameters
    (fp32 adapters: 4 bytes), half of AdamW's two moments: Llama-2-7B, rank 16, 39,976,960 adapter
    parameters."""
    f = finetune_memory("llama-2-7b", method="lora", optimizer="muon", rank=16, batch=1, seq=512)
    assert f.trainable_params == 39_976_960
    assert f.optimizer_bytes == 4 * 39_976_960
