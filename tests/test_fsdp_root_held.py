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
           "backward: embedding", "backward: embedding gradient accumulated", "after the backward"]


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
    computing = MOMENTS[1:4] + MOMENTS[5:9]
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
    # the gradients not yet reduce-scattered: none in the forward; the final norm's and the LM head's from the
    # backward's start (the root's reduce-scatter waits for the backward's end), the whole root's at the end
    head_grads = 4 * (512 * 64 + 64)
    for setting in ("None", "True", "False"):
        part = df[df["reshard_after_forward"] == setting].set_index(["layers", "moment"])
        part = part["unsharded_grad_bytes"]
        for layers in (1, 2, 3, 4):
            assert [part[layers, m] for m in MOMENTS] == [0] * 5 + [head_grads] * 3 + [ROOT_BYTES, 0], setting


def test_library_holds_what_torchs_default_holds(df):
    """zero3_gathered_bytes with None, fp32 weights and gradients, 4 layers: the root's weights, and the
    larger of a block's backward (its weights and gradient with the final norm's and LM head's gradients,
    32,832 parameters) and the embedding's (the root's weights and whole gradient): 262,400 + 147,968 + 4 x
    (32,832 + 36,992) = 689,664 against 524,800. Measured: at a block's backward the gathered weights (root
    + block) and the gradients not yet reduced (the head's and the norm's, 131,328 bytes); the block's own
    147,968 bytes of gradient, made by its backward, by hand."""
    model = Model("fsdp-units", layers=4, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn_hidden=128,
                  vocab=512, tied_embeddings=False)
    at = df[(df["reshard_after_forward"] == "None") & (df["layers"] == 4)].set_index("moment")
    block = at.loc["backward: first block"]
    assert block["unsharded_grad_bytes"] == 4 * (512 * 64 + 64)         # the head's and the final norm's
    end = at.loc["backward: embedding gradient accumulated"]
    assert (end["gathered_bytes"], end["unsharded_grad_bytes"]) == (ROOT_BYTES, ROOT_BYTES)
    default = Parallel(dp=2, zero=3, reshard_after_forward=None)
    got = zero3_gathered_bytes(model, precision="fp32", parallel=default)
    measured = max(block["gathered_bytes"] + block["unsharded_grad_bytes"] + LAYER_BYTES,
                   end["gathered_bytes"] + end["unsharded_grad_bytes"])
    assert got == measured == 689_664
    # with True torch's fully_shard holds the same whenever the model computes (above); the library's True
    # counts one unit at a time (DeepSpeed's estimator, torchtitan's embedding and head as units):
    # for this wrapping 393,728 bytes short, stated in zero3_gathered_bytes
    whole = zero3_gathered_bytes(model, precision="fp32", parallel=Parallel(dp=2, zero=3))
    assert whole == 2 * LAYER_BYTES and got - whole == 393_728
