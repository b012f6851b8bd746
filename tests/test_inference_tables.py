"""Chapter 3's cells made short calls (issue 38, book38): the library's tables and the small answers the
notebook used to work out itself (llmsizing.inference_tables; kv_room_beside_weights, max_inference_batch,
smallest_tp, KVCapacity.room_bytes/states_bytes). Expected values by hand from the models' configs."""

from __future__ import annotations

import math

import pytest

from llmsizing import Model, get_gpu, inference_memory
from llmsizing.inference import kv_room_beside_weights, max_inference_batch, state_bytes_per_sequence
from llmsizing.inference_tables import breakeven_table, hybrid_table, kv_table, seed_memory_check
from llmsizing.parallel import smallest_tp
from llmsizing.serve_engine import kv_capacity_tokens, vllm_default_max_num_seqs
from llmsizing.units import GB, GiB

#: KV bytes per token in bf16, by hand: 2 (K and V) x layers x KV heads x 128 x 2 bytes, or MLA's latent
#: and rotary key, (512 + 64) x layers x 2 bytes
KV_L2_7B = 2 * 32 * 32 * 128 * 2            # 524,288
KV_L2_13B = 2 * 40 * 40 * 128 * 2           # 819,200
KV_L3_70B = 2 * 80 * 8 * 128 * 2            # 327,680
KV_405B = 2 * 126 * 8 * 128 * 2             # 516,096
KV_DSV3 = (512 + 64) * 61 * 2               # 70,272


def test_kv_table_by_hand():
    t = kv_table(["deepseek-v3", "llama-3.1-405b", "llama-3-70b"], context=131072)
    assert list(t.index) == ["deepseek-v3", "llama-3.1-405b", "llama-3-70b"] and t.index.name == "model"
    assert list(t["numbers per token and layer"]) == [576, 2 * 8 * 128, 2 * 8 * 128]
    assert list(t["KV bytes per token (bf16)"]) == ["70,272", "516,096", "327,680"]
    # 131,072 tokens: 70,272 x 131,072 / 2^30 = 8.58; 516,096 x 131,072 / 2^30 = 63.0; 327,680 x ... = 40.0
    assert list(t["KV cache of 128K tokens (GiB)"]) == [8.6, 63.0, 40.0]
    assert (KV_DSV3, KV_405B, KV_L3_70B) == (70_272, 516_096, 327_680)


def test_breakeven_table_by_hand():
    """Llama 2 7B: 0.2 x 6,738,415,616 x 2 bytes / 524,288 bytes per token = 5,140.9 tokens."""
    row = breakeven_table(["llama-2-7b"]).loc["llama-2-7b"]
    assert row["KV = 20% of weights (tokens)"] == pytest.approx(0.2 * 6_738_415_616 * 2 / KV_L2_7B)
    assert 0 <= row["book = rule (tokens)"] < row["KV = 20% of weights (tokens)"]


def test_seed_memory_check_puts_each_claim_next_to_the_book():
    """Llama 2 13B, 32 sequences of 4,096 tokens: 32 x 4,096 x 819,200 bytes = 107.37 GB of KV cache."""
    t = seed_memory_check({"llama-2-13b": (26, 52, 13, 6.5)}, context=4096, batch=32)
    assert list(t.columns) == ["seed b=1 GB", "book b=1 GB", "seed b=32 GB", "book b=32 GB", "KV b=32 GB",
                               "seed int8 GB", "book int8 weights GB", "seed 4-bit GB",
                               "book int4 weights GB"]
    row = t.loc["llama-2-13b"]
    assert row["KV b=32 GB"] == pytest.approx(32 * 4096 * KV_L2_13B / 1e9) == pytest.approx(107.374, abs=1e-3)
    assert (row["seed b=1 GB"], row["seed 4-bit GB"]) == (26, 6.5)
    assert row["book b=1 GB"] == inference_memory("llama-2-13b", context=4096).total_bytes / GB
    with pytest.raises(TypeError, match="claims"):
        seed_memory_check({"llama-2-13b": (26, 52)})


def test_hybrid_table_counts_a_dense_model_with_no_state():
    l70 = "llama-3-70b"
    t = hybrid_table([l70], context=262144, gpu="H100 SXM", tp=4)
    row = t.loc[l70]
    # by hand, in binary units like the chapter's other KV tables: 2 x 80 layers x 8 KV heads x 128 x 2 bytes
    # = 327,680 bytes = 320 KiB a token, and 262,144 tokens x 320 KiB = 80 GiB
    assert row["KV per token (KiB)"] == 320 and row["state per sequence (MiB)"] == 0
    assert row["attention layers"] == "80 of 80"
    assert row["cache at 256K (GiB)"] == pytest.approx(80)
    assert row["KV tokens, 4 x H100 SXM"] == kv_capacity_tokens(l70, "H100 SXM", tp=4).tokens


def test_kv_capacity_room_and_states():
    """The room is usable - weights - activation peak - non-torch - CUDA graphs; a hybrid sets aside its
    state for vLLM's max_num_seqs (1,024 on an H100) sequences, its state split over the 4 GPUs."""
    nxt = Model.from_hf_config({"model_type": "qwen3_next"}, name="Qwen3-Next-80B-A3B")
    cap = kv_capacity_tokens(nxt, "H100 SXM", tp=4)
    assert cap.room_bytes == pytest.approx(cap.usable_bytes - cap.weights_bytes - cap.activation_peak_bytes
                                           - cap.non_torch_bytes - cap.cuda_graph_bytes, rel=1e-12)
    assert vllm_default_max_num_seqs("H100 SXM") == 1024
    assert cap.states_bytes == pytest.approx(1024 * state_bytes_per_sequence(nxt) / 4, rel=1e-9)
    assert cap.room_bytes - cap.states_bytes == cap.kv_bytes
    assert kv_capacity_tokens("llama-3-70b", "H100 SXM", tp=4).states_bytes == 0


def test_kv_capacity_room_is_never_negative():
    """GPT-3 175B's 350 GB of bf16 weights on one 80 GB H100 leave no room: 0, as kv_bytes and blocks say,
    not the negative difference (the fuzz test's promise: no negative figure)."""
    cap = kv_capacity_tokens("gpt3-175b", "H100 SXM", tp=1)
    assert cap.weights_bytes > cap.usable_bytes
    assert cap.room_bytes == 0 and cap.kv_bytes == 0 and cap.blocks == 0


def test_kv_room_beside_weights_by_hand():
    """Llama 2 7B on an A10: 24,146,608,128 bytes - 6,738,415,616 x 2 = 10,669,776,896 bytes free, / 524,288
    bytes per token = 20,350.98 tokens."""
    assert get_gpu("A10").memory_bytes == 24_146_608_128
    r = kv_room_beside_weights("llama-2-7b", "A10")
    assert r.free_bytes == 24_146_608_128 - 2 * 6_738_415_616 == 10_669_776_896
    assert r.tokens == pytest.approx(10_669_776_896 / KV_L2_7B) and round(r.tokens, 2) == 20_350.98
    with pytest.raises(ValueError, match="weights"):
        kv_room_beside_weights("llama-3-70b", "A10")


@pytest.mark.parametrize("model, gpu, context, weights", [("llama-3-70b", "H100 SXM", 8192, "int4-g128"),
                                                           ("llama-3-8b", "A10", 4096, "bf16"),
                                                           ("llama-3-70b", "A10", 8192, "bf16")])
def test_max_inference_batch_is_the_largest_that_fits(model, gpu, context, weights):
    """The brute force the chapter ran: the largest batch whose total fits the whole card, 0 if none."""
    cap = get_gpu(gpu).memory_bytes
    b = max_inference_batch(model, gpu, context, weights=weights)
    brute = max([n for n in range(1, 400) if inference_memory(model, batch=n, context=context,
                                                                weights=weights).total_bytes <= cap] or [0])
    assert b == brute


def test_max_inference_batch_by_hand():
    """Llama 3 70B, int4-g128, 8,192 tokens on an H100 (85,520,809,984 bytes): the room for cache is
    (85,520,809,984 - 2^30) / 1.08 - W, and each sequence caches 8,192 x 327,680 = 2,684,354,560 bytes."""
    from llmsizing.inference import weights_bytes

    room = (85_520_809_984 - GiB) / 1.08 - weights_bytes("llama-3-70b", "int4-g128")
    assert max_inference_batch("llama-3-70b", "H100 SXM", 8192, weights="int4-g128") == math.floor(
        room / (8192 * KV_L3_70B)) == 14


@pytest.mark.parametrize("fragmentation, fit", [(0.272, 9), (0.0, 16), (0.08, 14)])
def test_max_inference_batch_with_another_fragmentation_by_hand(fragmentation, fit):
    """The same case with the allowance's 8% replaced (its fixed 1 GiB kept). The weights by hand: Llama 3
    70B's blocks hold 80 x (2 x 8192^2 + 2 x 8192 x 1024 + 3 x 8192 x 28672) = 68,451,041,280 weights at
    (128 x 4 + 16 + 4) / 128 = 4.15625 bits, the other 70,553,706,496 - 68,451,041,280 = 2,102,665,216 in
    bf16: W = 35,562,455,040 + 4,205,330,432 = 39,767,785,472 bytes. The room is (85,520,809,984 - 2^30) /
    (1 + f) - W over 2,684,354,560 bytes a sequence: 9.92 at the published median of 27.2%, 16.64 with no
    fragmentation, 14.31 at 8% (the default's 14)."""
    w = 68_451_041_280 * 4.15625 / 8 + 2_102_665_216 * 2
    assert w == 39_767_785_472
    assert math.floor(((85_520_809_984 - GiB) / (1 + fragmentation) - w) / (8192 * KV_L3_70B)) == fit
    assert max_inference_batch("llama-3-70b", "H100 SXM", 8192, weights="int4-g128",
                               fragmentation=fragmentation) == fit


@pytest.mark.parametrize("bad, error", [(-0.1, ValueError), (float("nan"), ValueError), (11.0, ValueError),
                                        ("27%", TypeError), (True, TypeError)])
def test_max_inference_batch_refuses_a_bad_fragmentation(bad, error):
    with pytest.raises(error, match="fragmentation"):
        max_inference_batch("llama-3-70b", "H100 SXM", 8192, weights="int4-g128", fragmentation=bad)


@pytest.mark.parametrize("at_least, tp", [(1, 1), (3, 4), (5, 8), (9, 16), (17, 32), (33, 64)])
def test_smallest_tp_by_hand(at_least, tp):
    """Llama 3 70B: 64 query heads, 8 KV heads, MLP 28,672 wide. A degree must divide 64 (and 28,672), and
    up to 8 divide the 8 KV heads, beyond 8 be a multiple of 8: 1, 2, 4, 8, 16, 32, 64."""
    assert smallest_tp("llama-3-70b", at_least=at_least) == tp


@pytest.mark.parametrize("at_least, error", [(65, ValueError), (0, ValueError), (2.0, TypeError)])
def test_smallest_tp_refuses(at_least, error):
    with pytest.raises(error, match="at_least"):
        smallest_tp("llama-3-70b", at_least=at_least)
