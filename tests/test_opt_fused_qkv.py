"""OPT-175B's fused q, k, v (session 49, from issue 38's reads). metaseq, the code OPT-175B was trained with,
holds the three projections as one ``qkv_proj`` of ``h -> 3h`` (``combine_qkv_proj = True`` hard-coded in
``ModelParallelMultiheadAttention``, metaseq/model_parallel/modules/multihead_attention.py at the 2022-05-02
release, commit f2cd36798793604cf51ab8b8a2cb167c964f9667); transformers' OPT splits it into ``q_proj``,
``k_proj``, ``v_proj``. The catalogue row is the run's (``fused_qkv`` true, its source says so); the Hugging
Face reader gives transformers' layout. The flag moves no parameter, AdamW or Muon count, only what sees the
matrices: Adafactor's factored second moment and LoRA's adapted matrices. Expected values by hand from
OPT-175B's shape (Zhang et al. 2022, Table 1: 96 layers, h = 12,288, ffn 4h = 49,152)."""
import csv
from pathlib import Path

import pytest

from llmsizing.catalog import get_model
from llmsizing.finetune import lora_params
from llmsizing.model import Model
from llmsizing.states import optimizer_state_elements

DATA = Path(__file__).resolve().parents[1] / "data"
LAYERS, H = 96, 12_288


def _row():
    with open(DATA / "models.csv", newline="") as fh:
        return next(r for r in csv.DictReader(fh) if r["name"] == "opt-175b")


def test_the_row_is_fused_as_metaseq_trained_it_and_says_where_that_is_read():
    row = _row()
    assert row["fused_qkv"] == "true" and get_model("opt-175b").fused_qkv
    for words in ("metaseq", "combine_qkv_proj", "multihead_attention.py",
                  "f2cd36798793604cf51ab8b8a2cb167c964f9667"):
        assert words in row["source"], words


def test_the_hf_layout_is_unfused_with_the_same_parameters():
    """transformers' OPT config (the 175B shape) read by Model.from_hf_config: three projections."""
    cfg = {"model_type": "opt", "hidden_size": H, "num_hidden_layers": LAYERS, "num_attention_heads": 96,
           "ffn_dim": 4 * H, "vocab_size": 50272, "max_position_embeddings": 2048, "word_embed_proj_dim": H,
           "do_layer_norm_before": True, "enable_bias": True, "layer_norm_elementwise_affine": True,
           "tie_word_embeddings": True, "activation_function": "relu"}
    hf = Model.from_hf_config(cfg)
    assert not hf.fused_qkv
    assert hf.n_params == get_model("opt-175b").n_params


def test_what_the_flag_moves_adafactor_and_lora_only():
    fused = get_model("opt-175b")
    split = fused.with_(fused_qkv=False)
    assert fused.n_params == split.n_params
    for opt in ("adamw", "muon"):
        assert optimizer_state_elements(fused, opt) == optimizer_state_elements(split, opt)
    # Adafactor keeps r + c numbers per r x c matrix: one 3h x h matrix keeps 3h + h = 4h, three h x h ones
    # 3 x 2h = 6h: 2h = 24,576 more a layer, 2,359,296 over 96 layers
    assert optimizer_state_elements(split, "adafactor") - optimizer_state_elements(fused, "adafactor") == \
        LAYERS * 2 * H == 2_359_296
    # LoRA r = 8 on every linear layer: r (d_in + d_out) per matrix; fused qkv h + 3h, out h + h, fc1 h + 4h,
    # fc2 4h + h = 16h a layer (12h unfused's q, k, v take 6h, not 4h: 18h)
    assert lora_params(fused, rank=8, targets="all-linear") == LAYERS * 8 * 16 * H == 150_994_944
    assert lora_params(split, rank=8, targets="all-linear") == LAYERS * 8 * 18 * H == 169_869_312
    # q and v alone are rows of one matrix in the run's layout (refused, as PEFT adapts it whole); separate in
    # transformers': 2 x r x 2h a layer
    with pytest.raises(ValueError, match="one fused q, k, v matrix"):
        lora_params(fused, rank=8, targets=("q", "v"))
    assert lora_params(split, rank=8, targets=("q", "v")) == LAYERS * 2 * 8 * 2 * H == 37_748_736
