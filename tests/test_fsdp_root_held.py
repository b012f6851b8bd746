"""When FSDP2 holds its root unit gathered (data/fsdp_root_held.csv, written by ``tools/measure_memory.py
fsdp-root`` from tools/measure/fsdp_root.py; torch 2.13 ``fully_shard`` on each decoder layer and the whole
model, gloo on CPU, a 1-4 layer HF LlamaForCausalLM in fp32, untied), against what the library holds for
``Parallel(zero=3, reshard_after_forward=None)`` (torch's default). No torch needed.

Bytes by hand from the LlamaConfig (hidden 64, 4 heads of 16, 2 KV heads, MLP width 128, vocabulary 512,
fp32), as in tests/test_fsdp_unit_calls.py: a decoder layer 36,992 parameters (147,968 bytes), the root
(embedding and LM head 512 x 64 each, the final norm 64) 65,600 parameters (262,400 bytes).
"""

import pandas as pd
import pytest

from llmsizing import Model, Parallel
from llmsizing.catalog import DATA_DIR
from llmsizing.memory import zero3_gathered_bytes

CSV = DATA_DIR / "fsdp_root_held.csv"
LAYER_BYTES = 4 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 128 * 64 + 2 * 64)
ROOT_BYTES = 4 * (2 * 512 * 64 + 64)
MOMENTS = ["before the forward", "forward: first block", "forward: last block", "forward: LM head",
           "between the forward and the backward", "backward: last block", "backward: first block",
           "after the backward"]


@pytest.fixture(scope="module")
def df():
    return pd.read_csv(CSV, dtype={"reshard_after_forward": str}, keep_default_na=False)   # "None" is a value


def _held(df, setting):
    """{moment: set of root_gathered over the layer counts} of one setting."""
    part = df[df["reshard_after_forward"] == setting]
    return {m: set(g["root_gathered"]) for m, g in part.groupby("moment")}


def test_the_sweep_is_whole(df):
    assert set(df["reshard_after_forward"]) == {"None", "True", "False"}
    assert set(df["layers"]) == {1, 2, 3, 4} and set(df["world_size"]) == {2}
    for (setting, layers), part in df.groupby(["reshard_after_forward", "layers"]):
        assert set(part["moment"]) == set(MOMENTS), (setting, layers)
        assert len(part) == len(MOMENTS)
    assert set(df["torch_version"]) == {"2.13.0+cpu"} and set(df["script"]) == {"tools/measure/fsdp_root.py"}
    assert df["source"].str.startswith("measured").all() and df["measured_on"].notna().all()
    assert (df["n_params"] * 4 == df["layers"] * LAYER_BYTES + ROOT_BYTES).all()


def test_when_the_root_is_gathered(df):
    computing = MOMENTS[1:4] + MOMENTS[5:7]
    for setting in ("None", "True", "False"):
        held = _held(df, setting)
        assert held["before the forward"] == held["after the backward"] == {False}, setting
        for m in computing:                      # gathered whenever the model computes, whatever the setting
            assert held[m] == {True}, (setting, m)
    # the settings differ only between the forward and the backward: torch's default keeps the root there
    between = {s: _held(df, s)["between the forward and the backward"] for s in ("None", "True", "False")}
    assert between == {"None": {True}, "True": {False}, "False": {True}}


def test_gathered_bytes_by_hand(df):
    for setting in ("None", "True"):
        part = df[df["reshard_after_forward"] == setting].set_index(["layers", "moment"])["gathered_bytes"]
        for layers in (1, 2, 3, 4):
            for m in ("forward: first block", "forward: last block", "backward: last block",
                      "backward: first block"):
                # the root and one block
                assert part[layers, m] == ROOT_BYTES + LAYER_BYTES, (setting, layers, m)
            assert part[layers, "forward: LM head"] == ROOT_BYTES
            held_between = ROOT_BYTES if setting == "None" else 0
            assert part[layers, "between the forward and the backward"] == held_between


def test_library_holds_what_torchs_default_holds(df):
    """zero3_gathered_bytes with None, fp32 weights and gradients: the root's weights, one block's and the
    largest unit's gradient (max(36,992, 32,768) parameters: a block) = 262,400 + 147,968 + 147,968; the
    weights are what was measured at a block (root + block), the gradient is by hand."""
    model = Model("fsdp-units", layers=4, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn_hidden=128,
                  vocab=512, tied_embeddings=False)
    measured = int(df[(df["reshard_after_forward"] == "None") & (df["layers"] == 4)
                      & (df["moment"] == "backward: first block")]["gathered_bytes"].iloc[0])
    grad = 4 * max(LAYER_BYTES // 4, 512 * 64)
    default = Parallel(dp=2, zero=3, reshard_after_forward=None)
    got = zero3_gathered_bytes(model, precision="fp32", parallel=default)
    assert got == measured + grad == ROOT_BYTES + 2 * LAYER_BYTES
    # with True torch holds the same at a block (above); the library counts only the largest unit whole,
    # with its gradient: the root's bytes short, left as it is (the book's numbers price True; root36)
    whole = zero3_gathered_bytes(model, precision="fp32", parallel=Parallel(dp=2, zero=3))
    assert whole == 2 * LAYER_BYTES and got - whole == ROOT_BYTES
