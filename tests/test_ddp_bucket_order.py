"""PyTorch DDP's gradient buckets against the library's (data/ddp_bucket_order.csv, written by
``tools/measure_memory.py ddp-buckets`` from tools/measure/ddp_buckets.py: torch 2.13 DistributedDataParallel,
2 gloo ranks on CPU, chapter 9's 4-layer HF LlamaForCausalLM in fp32, untied and tied embeddings, the default
cap and explicit caps of 1, 2 and 4 MiB; every bucket seen by a communication hook). No torch needed.

What is checked, and where the expected values come from:
* the first step all-reduces every gradient in one bucket (DDP builds no size-limited buckets before it has
  seen a backward unless ``find_unused_parameters``), the second and third use the rebuilt ones;
* the rebuilt buckets, tensor for tensor and in launch order, are torch_ddp_bucket_assignment's (HF names
  mapped to the library's);
* by hand: the untied LM head, 8,192 x 256 x 4 bytes = 8 MiB, is above every cap, so it is the first bucket
  alone; with the tied model the first bucket closes at 1 MiB under the default cap (the final norm, then
  down and up of the last block: (256 + 2 x 688 x 256) x 4 = 1,410,048 bytes) but at 2 MiB under an explicit
  2 MiB cap (and gate: 2,114,560 bytes).
"""

import pandas as pd
import pytest

from llmsizing import Model
from llmsizing.catalog import DATA_DIR
from llmsizing.zero_traffic import torch_ddp_bucket_assignment, torch_ddp_buckets

CSV = DATA_DIR / "ddp_bucket_order.csv"
HF = {"input_layernorm": "attn_norm", "post_attention_layernorm": "mlp_norm", "self_attn.": "", "mlp.": ""}


def _library_name(hf: str) -> str:
    if hf in ("model.norm.weight", "model.embed_tokens.weight", "lm_head.weight"):
        return {"model.norm.weight": "final_norm.weight", "model.embed_tokens.weight": "embed_tokens.weight",
                "lm_head.weight": "lm_head.weight"}[hf]
    name = hf.removeprefix("model.")
    for a, b in HF.items():
        name = name.replace(a, b)
    return name


@pytest.fixture(scope="module")
def df():
    return pd.read_csv(CSV)


def _model(row, tied):
    return Model("dist-llama", layers=int(row["layers"]), hidden=int(row["hidden"]), heads=int(row["heads"]),
                 kv_heads=int(row["kv_heads"]), ffn_hidden=int(row["ffn"]), vocab=int(row["vocab"]),
                 gated_mlp=True, tied_embeddings=bool(tied), norm="rmsnorm", max_seq=256)


def _runs(df):
    return df.groupby(["tied_embeddings", "bucket_cap_mb"], sort=False)


def test_the_sweep(df):
    assert {(bool(t), str(c)) for (t, c), _ in _runs(df)} == {
        (False, "default"), (False, "1"), (False, "2"), (False, "4"), (True, "default"), (True, "2"), (True, "4")}
    assert set(df["torch_version"]) == {"2.13.0+cpu"} and set(df["script"]) == {"tools/measure/ddp_buckets.py"}
    for _, run in _runs(df):
        first = run[run["iteration"] == 0]
        assert len(first) == 1 and first["bucket_bytes"].iloc[0] == run[run["iteration"] == 2]["bucket_bytes"].sum()
        one, two = (run[run["iteration"] == i][["bucket_index", "params"]].reset_index(drop=True) for i in (1, 2))
        assert one.equals(two)                       # rebuilt once, after the first step
        assert (run["launch_order"] == run["bucket_index"]).all()


def test_rebuilt_buckets_are_the_library_s(df):
    for (tied, cap), run in _runs(df):
        rebuilt = run[run["iteration"] == 2].sort_values("launch_order")
        measured = [[_library_name(p) for p in ps.split(";")] for ps in rebuilt["params"]]
        m = _model(rebuilt.iloc[0], tied)
        cap_mb = None if cap == "default" else float(cap)
        assert torch_ddp_bucket_assignment(m, precision="fp32", bucket_cap_mb=cap_mb) == measured, (tied, cap)
        assert torch_ddp_buckets(m, precision="fp32", bucket_cap_mb=cap_mb) == len(measured)


def test_first_bucket_by_hand(df):
    untied = df[~df["tied_embeddings"] & (df["iteration"] == 2) & (df["launch_order"] == 0)]
    assert set(untied["params"]) == {"lm_head.weight"} and set(untied["bucket_bytes"]) == {8192 * 256 * 4}
    tied = df[df["tied_embeddings"] & (df["iteration"] == 2) & (df["launch_order"] == 0)].set_index("bucket_cap_mb")
    assert tied.loc["default", "bucket_bytes"] == (256 + 2 * 688 * 256) * 4 == 1_410_048
    assert tied.loc["2", "bucket_bytes"] == (256 + 3 * 688 * 256) * 4 == 2_114_560
    # the library's old rule (a 1 MiB first bucket under any cap) gave the tied model 4 buckets at 4 MiB
    m = _model(df.iloc[0], True)
    assert torch_ddp_buckets(m, precision="fp32", bucket_cap_mb=4) == 3


def test_llama3_8b_unchanged_and_bad_caps():
    # default cap: 1 + 32 x 5 + 1 by hand (tests/test_ch7_room_and_buckets.py); the rebuilt order is the
    # library's reversed per-layer order, so the count holds
    assert torch_ddp_buckets("llama-3-8b") == 1 + 32 * 5 + 1
    for bad in (0, -1.0, float("nan")):
        with pytest.raises((ValueError, TypeError), match="bucket_cap_mb"):
            torch_ddp_bucket_assignment("llama-3-8b", bucket_cap_mb=bad)
