"""FSDP2's collectives per step against the library's ZeRO-3 call count (data/fsdp_unit_calls.csv, written by
``tools/measure_memory.py fsdp-units`` from tools/measure/fsdp_units.py; torch 2.13 ``fully_shard``, gloo on
CPU, a 1-4 layer HF LlamaForCausalLM in fp32). No torch needed. torch's default
(``reshard_after_forward=None``, the root kept) is priced by ``Parallel(reshard_after_forward=None)`` since
session 36, and checked here row for row with True and False.

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
    # torch's default gathers one unit fewer in the backward than "reshard all" (priced by None, below);
    # torchtitan one forward gather and scatter more
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


# ---- torch's default priced (session 36): Parallel(reshard_after_forward=None), the root kept

#: The library's ZeRO-3 collectives of one pass as the CSV's (phase, kind).
_PHASE_KIND = {"ZeRO-3 weight all-gather (forward)": ("forward", "all-gather"),
               "ZeRO-3 weight all-gather (backward)": ("backward", "all-gather"),
               "ZeRO-3 gradient reduce-scatter": ("backward", "reduce-scatter")}


def _measured_model(layers):
    """The measured HF Llama (the module docstring's config: untied, RMSNorm, SwiGLU) as a library Model."""
    from llmsizing import Model

    return Model("fsdp-units", layers=layers, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn_hidden=128,
                 vocab=512, tied_embeddings=False)


@pytest.mark.parametrize("wrapping, reshard", [("layers+root", None), ("layers+root, reshard all", True),
                                               ("layers+root, reshard none", False)])
def test_library_prices_each_measured_setting_exactly(df, wrapping, reshard):
    """Every measured row of the three plain wrappings against communication() on the same model, fp32,
    grad_accum 1: calls and bytes per pass (calls x message) equal for each (phase, kind), none extra. By
    hand for torch's default: forward gather and reduce-scatter L x 147,968 + 262,400 bytes in L + 1 calls,
    backward gather L x 147,968 in L calls (the root's 262,400 bytes kept)."""
    for (world, layers), part in df[df["wrapping"] == wrapping].groupby(["world_size", "layers"]):
        measured = {(ph, k): (int(g["calls"].sum()), int((g["calls"] * g["message_bytes"]).sum()))
                    for (ph, k), g in part.groupby(["phase", "kind"])}
        c = communication(_measured_model(int(layers)), Parallel(dp=int(world), zero=3,
                                                                 reshard_after_forward=reshard),
                          batch=1, seq=32, gpu="H100 SXM", precision="fp32")
        got = {_PHASE_KIND[x.collective]: (x.calls, round(x.calls * x.message_bytes))
               for x in c.collectives if x.group == "dp"}
        assert got == measured, (wrapping, world, layers)
        if reshard is None:
            assert got["backward", "all-gather"] == (layers, layers * LAYER_BYTES)
            assert got["forward", "all-gather"] == (layers + 1, layers * LAYER_BYTES + ROOT_BYTES)


def test_fsdp_root_params_by_hand():
    from llmsizing.zero_traffic import fsdp_root_params

    assert fsdp_root_params(_measured_model(3)) * 4 == ROOT_BYTES
    # Llama-3-8B (Meta's config: vocabulary 128,256, hidden 4,096, untied): embedding + LM head + final norm
    root = 2 * 128_256 * 4_096 + 4_096
    assert fsdp_root_params("llama-3-8b") == root == 1_050_677_248
    # tensor parallelism splits the embedding and the head along the vocabulary, not the norm
    assert fsdp_root_params("llama-3-8b", tp=8) == 2 * 128_256 * 4_096 / 8 + 4_096
    # a tied model's root holds the embedding once (GPT-2: 50,257 x 768 + learned positions 1,024 x 768 + the
    # final LayerNorm's gain and bias)
    assert fsdp_root_params("gpt2") == 50_257 * 768 + 1_024 * 768 + 2 * 768


def test_llama3_8b_default_backward_gather_by_hand():
    """Llama-3-8B, bf16, dp 8, one micro-batch: a block holds q, o 4,096^2 each, k, v 1,024 x 4,096 each,
    gate, up, down 14,336 x 4,096 each and two 4,096 norms: 218,112,000 parameters; 32 of them and the root
    (1,050,677,248) make 8,030,261,248. Resharding everything gathers 2 x 8,030,261,248 = 16,060,522,496
    bytes in the backward in 33 calls; torch's default 32 x 2 x 218,112,000 = 13,959,168,000 in 32, one call
    and the root's 2,101,354,496 bytes (13.08%) fewer."""
    block = 2 * 4_096**2 + 2 * 1_024 * 4_096 + 3 * 14_336 * 4_096 + 2 * 4_096
    assert block == 218_112_000
    back = {}
    for reshard in (True, None):
        c = communication("llama-3-8b", Parallel(dp=8, zero=3, reshard_after_forward=reshard), batch=1,
                          seq=4096, gpu="H100 SXM")
        back[reshard] = [(x.calls, x.calls * x.message_bytes) for x in c.collectives
                         if x.collective == "ZeRO-3 weight all-gather (backward)"][0]
        fwd = [x for x in c.collectives if x.collective == "ZeRO-3 weight all-gather (forward)"][0]
        assert fwd.calls * fwd.message_bytes == pytest.approx(16_060_522_496, rel=1e-12)   # unchanged
    assert back[True][0] == 33 and back[True][1] == pytest.approx(16_060_522_496, rel=1e-12)
    assert back[None][0] == 32 and back[None][1] == pytest.approx(13_959_168_000, rel=1e-12)
    saved = back[True][1] - back[None][1]
    assert saved == pytest.approx(2_101_354_496, rel=1e-12)
    assert saved / back[True][1] == pytest.approx(0.1308, abs=5e-5)


def test_llama3_8b_default_holds_the_root_by_hand():
    """ZeRO-3's gathered bytes, bf16 weights and gradients, Llama-3-8B at tp 1: resharding everything, the
    largest unit (the 525,336,576-parameter head) whole with its gradient, 4 x 525,336,576; torch's default
    (tests/test_fsdp_root_held.py measures what it holds), the root's weights held (2 x 1,050,677,248) and the
    larger of a block's backward (its weights and gradient, 4 x 218,112,000, with the final norm's and head's
    gradients, 2 x 525,340,672: 1,923,129,344) and the embedding's (the root's whole gradient,
    2,101,354,496): 4,202,708,992."""
    from llmsizing.memory import zero3_gathered_bytes

    head = 128_256 * 4_096
    assert zero3_gathered_bytes("llama-3-8b", parallel=Parallel(dp=8, zero=3)) == 4 * head
    held = zero3_gathered_bytes("llama-3-8b", parallel=Parallel(dp=8, zero=3, reshard_after_forward=None))
    block_backward = 4 * 218_112_000 + 2 * (head + 4_096)
    assert block_backward == 1_923_129_344
    assert held == 2 * 1_050_677_248 + max(block_backward, 2 * 1_050_677_248) == 4_202_708_992
    # under a pipeline no root is counted (FSDP_ROOT_UNITS): the default prices as resharding everything
    pipe = {r: Parallel(dp=4, pp=2, zero=3, reshard_after_forward=r) for r in (True, None)}
    assert (zero3_gathered_bytes("llama-3-8b", parallel=pipe[None])
            == zero3_gathered_bytes("llama-3-8b", parallel=pipe[True]))
    c = {r: communication("llama-3-8b", p, batch=1, seq=4096, gpu="H100 SXM", grad_accum=4)
         for r, p in pipe.items()}
    assert [(x.collective, x.calls, x.message_bytes) for x in c[None].collectives] == \
        [(x.collective, x.calls, x.message_bytes) for x in c[True].collectives]


def test_none_only_where_it_is_torchs_default():
    from llmsizing.zero_traffic import dp_collectives

    for zero in (0, 1, 2):
        with pytest.raises(ValueError, match="reshard_after_forward=None .*zero=3"):
            Parallel(dp=8, zero=zero, reshard_after_forward=None)
    for bad in (0, 1, "true", "None"):
        with pytest.raises(TypeError, match="reshard_after_forward"):
            Parallel(dp=8, zero=3, reshard_after_forward=bad)
    with pytest.raises(ValueError, match="chunk_run' needs zero=3 with reshard_after_forward=False"):
        Parallel(dp=8, pp=2, zero=3, reshard_after_forward=None, grad_reduce="chunk_run")
    assert Parallel(dp=8, zero=3, reshard_after_forward=None).reshard_after_forward is None
    assert Parallel(dp=8, zero=1).reshard_after_forward is True          # the default unchanged
    # the low-level schedule needs the root's size, within the GPU's parameters
    with pytest.raises(ValueError, match="root_params"):
        dp_collectives(3, 1e9, 2.0, 2.0, 1, None, layers=4)
    with pytest.raises(ValueError, match="root_params"):
        dp_collectives(3, 1e9, 2.0, 2.0, 1, None, layers=4, root_params=2e9)


def test_fsdp_unit_prices_reader(df, tmp_path):
    """dist_compare.fsdp_unit_prices (chapter 9's check) lines every measured run up: 3 wrappings x 2 world
    sizes x 4 layer counts, 3 (phase, kind) each but "reshard none"'s 2, all equal; it refuses a row whose
    model it cannot rebuild."""
    from llmsizing.dist_compare import fsdp_unit_prices

    got = fsdp_unit_prices()
    assert len(got) == 2 * 4 * (3 + 3 + 2)
    assert (got["measured_calls"] == got["predicted_calls"]).all()
    assert (got["measured_bytes"] == got["predicted_bytes"]).all()
    default = got[(got["wrapping"] == "layers+root") & (got["phase"] == "backward")
                  & (got["kind"] == "all-gather")]
    assert (default["predicted_bytes"] == default["layers"] * LAYER_BYTES).all()
    bad = df.copy()
    bad["n_params"] += 1
    bad.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match="n_params|parameters"):
        fsdp_unit_prices(tmp_path / "bad.csv")
