"""FSDP2's collectives per step against the library's ZeRO-3 call count (data/fsdp_unit_calls.csv, written by
``tools/measure_memory.py fsdp-units`` from tools/measure/fsdp_units.py; torch 2.13 ``fully_shard``, gloo on
CPU, a 1-4 layer HF LlamaForCausalLM in fp32). No torch needed.

The relation ``calls = layers + k`` is read off the CSV (one k per wrapping, phase and collective, the same at
every layer count and world size), and each message is checked against the unit's bytes worked out by hand
from the LlamaConfig (hidden h = 64, 4 heads of 16, 2 KV heads, MLP width 128, vocabulary 512, fp32):

* a decoder layer: q and o h x h, k and v (2 x 16) x h, gate and up 128 x h, down h x 128, two RMSNorm
  weights h: 2 x 4096 + 2 x 2048 + 3 x 8192 + 2 x 64 = 36,992 parameters, 147,968 bytes;
* the root unit: embedding and LM head 512 x 64 each and the final norm 64: 65,600 parameters, 262,400 bytes;
* torchtitan's units: the embedding alone (131,072 bytes), the final norm with the LM head (131,328 bytes).
"""

import pandas as pd
import pytest

from llmsizing import Parallel, communication
from llmsizing.catalog import DATA_DIR
from llmsizing.zero_traffic import FSDP_ROOT_UNITS, dp_calls

CSV = DATA_DIR / "fsdp_unit_calls.csv"
LAYER_BYTES = 4 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 128 * 64 + 2 * 64)
ROOT_BYTES = 4 * (2 * 512 * 64 + 64)
EMBED_BYTES, HEAD_BYTES = 4 * 512 * 64, 4 * (512 * 64 + 64)


@pytest.fixture(scope="module")
def df():
    return pd.read_csv(CSV)


def _calls(df, wrapping, phase, kind):
    """{(world, layers): calls} of one wrapping's collective (0 where none was issued)."""
    part = df[(df["wrapping"] == wrapping) & (df["phase"] == phase) & (df["kind"] == kind)]
    got = part.groupby(["world_size", "layers"])["calls"].sum().to_dict()
    return {key: got.get(key, 0) for key in set(zip(df["world_size"], df["layers"]))}


def _k(df, wrapping, phase, kind):
    """The k of ``calls = layers + k`` (None where no call is issued at all); fails unless it is one k."""
    got = _calls(df, wrapping, phase, kind)
    if not any(got.values()):
        return None
    ks = {c - layers for (_, layers), c in got.items()}
    assert len(ks) == 1, (wrapping, phase, kind, got)
    return ks.pop()


def test_the_sweep_is_whole_and_steady(df):
    assert set(df["wrapping"]) == {"layers+root", "layers+root, reshard all", "layers+root, reshard none",
                                   "torchtitan"}
    assert set(df["layers"]) == {1, 2, 3, 4} and set(df["world_size"]) == {2, 4}
    assert df["same_as_step_2"].all()                  # the counted step issued what the one before did
    assert set(df["kind"]) == {"all-gather", "reduce-scatter"} and set(df["phase"]) == {"forward", "backward"}
    assert set(df["torch_version"]) == {"2.13.0+cpu"} and set(df["script"]) == {"tools/measure/fsdp_units.py"}
    assert (df["n_params"] == df["layers"] * LAYER_BYTES // 4 + ROOT_BYTES // 4).all()


def test_each_call_is_one_unit(df):
    plain = df[df["wrapping"] != "torchtitan"]
    assert set(plain["message_bytes"]) == {LAYER_BYTES, ROOT_BYTES}
    assert set(df[df["wrapping"] == "torchtitan"]["message_bytes"]) == {LAYER_BYTES, EMBED_BYTES, HEAD_BYTES}
    # one root (or embedding, or head) call per collective and pass, the rest one per layer
    for (w, world, layers, phase, kind), part in df.groupby(["wrapping", "world_size", "layers", "phase", "kind"]):
        per_layer = part[part["message_bytes"] == LAYER_BYTES]["calls"].sum()
        assert per_layer == layers, (w, world, layers, phase, kind)


def test_layers_plus_k_by_wrapping(df):
    ag, rs = "all-gather", "reduce-scatter"
    # torch's default: the root is not resharded after the forward (fully_shard's docstring), so it is
    # gathered once; every layer is gathered again in the backward
    assert (_k(df, "layers+root", "forward", ag), _k(df, "layers+root", "backward", ag),
            _k(df, "layers+root", "backward", rs)) == (1, 0, 1)
    assert (_k(df, "layers+root, reshard all", "forward", ag), _k(df, "layers+root, reshard all", "backward", ag),
            _k(df, "layers+root, reshard all", "backward", rs)) == (1, 1, 1)
    assert (_k(df, "layers+root, reshard none", "forward", ag),
            _k(df, "layers+root, reshard none", "backward", ag),
            _k(df, "layers+root, reshard none", "backward", rs)) == (1, None, 1)
    # torchtitan: embedding and [norm, output] apart; the head kept after the forward, the embedding not
    assert (_k(df, "torchtitan", "forward", ag), _k(df, "torchtitan", "backward", ag),
            _k(df, "torchtitan", "backward", rs)) == (2, 1, 2)
    # the root's backward gather under torch's default is the one call (and the root's bytes) it skips
    root_back = df[(df["wrapping"] == "layers+root") & (df["phase"] == "backward") & (df["kind"] == ag)]
    assert ROOT_BYTES not in set(root_back["message_bytes"])


def test_library_calls_per_pass_are_the_measured_layers_plus_one(df):
    """The library prices reshard_after_forward=True as FSDP2 with every unit resharded, and False as none:
    each of its ZeRO-3 collectives is ``layers + k`` with the k measured; Llama-3-8B: 33 (not 32)."""
    k = _k(df, "layers+root, reshard all", "forward", "all-gather")
    assert FSDP_ROOT_UNITS == k == 1
    for layers in sorted(set(df["layers"])):
        assert dp_calls(3, 1e6, layers=layers) == layers + k
    assert dp_calls(3, 8e9, layers=32) == 33
    # through communication(): grad_accum 1, 32 blocks of Llama-3-8B
    for reshard, names in ((True, 3), (False, 2)):
        c = communication("llama-3-8b", Parallel(dp=8, zero=3, reshard_after_forward=reshard), batch=1,
                          seq=4096, gpu="H100 SXM")
        dp = [x for x in c.collectives if x.group == "dp"]
        assert len(dp) == names and all(x.calls == 33 for x in dp)
    # torch's default is one backward gather under the price, torchtitan one forward gather and scatter over
    assert _k(df, "layers+root", "backward", "all-gather") == k - 1
    assert _k(df, "torchtitan", "forward", "all-gather") == k + 1


def test_pipelined_stage_and_old_schedule():
    # under a pipeline a (middle) stage counts only its blocks; no layers= is the old one call per pass
    assert dp_calls(3, 1e6, layers=8, pipelined=True) == 8
    assert dp_calls(3, 1e6) == 1
    with pytest.raises((ValueError, TypeError), match="layers"):
        dp_calls(3, 1e6, layers=0)


def test_relation_reader_agrees_and_refuses_a_broken_sweep(df, tmp_path):
    from llmsizing.dist_compare import fsdp_unit_relation

    rel = fsdp_unit_relation().set_index(["wrapping", "phase", "kind"])["k"]
    for (w, phase, kind), k in rel.items():
        assert k == _k(df, w, phase, kind)
    assert len(rel) == 3 + 3 + 2 + 3                   # "reshard none" has no backward gather
    bad = df.copy()
    bad.loc[bad.index[0], "calls"] += 1
    bad.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match="one k"):
        fsdp_unit_relation(tmp_path / "bad.csv")
