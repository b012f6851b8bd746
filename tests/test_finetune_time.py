"""Fine-tuning time and cost, and LoRA/QLoRA over several GPUs (llmsizing.finetune_time): FLOPs, bytes and
seconds recomputed by hand from the models' shapes and the GPUs' datasheet figures."""

import _kernels_by_hand as KH
import pytest

from llmsizing.finetune import finetune_memory
from llmsizing.finetune_time import (adapter_checkpoint_bytes, dequant_bytes, finetune_communication,
                                     finetune_flops_per_token, finetune_memory_per_gpu, finetune_time,
                                     gathered_unit_bytes, max_batch_per_gpu, max_seq)
from llmsizing.finetune_strategies import strategy_table

# Llama-3-8B: 32 layers, h 4096, 32 heads of 128, 8 KV heads (1024 wide), FFN 14336, vocab 128256, untied
L8, H8, KV8, F8, V = 32, 4096, 1024, 14336, 128256
BLOCK8 = 2 * H8 * H8 + 2 * H8 * KV8 + 3 * H8 * F8              # q, o; k, v; gate, up, down
# the weights of the forward's 2 FLOPs each: blocks and LM head, and (the library's 6N convention,
# flops.forward_flops_per_token: every parameter but the embedding lookup) the 2 L + 1 norm vectors
M8 = L8 * BLOCK8 + V * H8 + (2 * L8 + 1) * H8
P8_R16 = L8 * 16 * (2 * (H8 + H8) + 2 * (H8 + KV8) + 2 * (H8 + F8) + (F8 + H8))   # all-linear adapters
NF4 = (4 + 8 / 64 + 32 / (64 * 256)) / 8                         # QLoRA, Sec. 3: 4.127 bits


def _attention(seq, layers=L8, heads=32, head_dim=128):
    return 4 * seq * heads * head_dim * layers                     # QK^T and attn @ V, full matrix


def test_lora_flops_by_hand():
    seq = 2048
    fwd = 2 * M8 + _attention(seq)
    full = finetune_flops_per_token("llama-3-8b", method="full", seq=seq)
    lora = finetune_flops_per_token("llama-3-8b", method="lora", seq=seq, rank=16)
    assert full.model_flops == pytest.approx(3 * fwd)
    # forward 2M + attention, backward: activations' gradients 2M + 2 x attention, no weights' 2M; adapters 6P
    assert lora.model_flops == pytest.approx(4 * M8 + 3 * _attention(seq) + 6 * P8_R16)
    assert lora.weight_gradients_saved == pytest.approx(2 * M8)
    assert 0.66 < lora.ratio_to_full < 0.72                      # about two thirds at 2K tokens


def test_qlora_has_loras_arithmetic():
    a = finetune_flops_per_token("llama-3-8b", method="lora", seq=1024, recompute="full")
    b = finetune_flops_per_token("llama-3-8b", method="qlora", seq=1024, recompute="full")
    assert (a.model_flops, a.hardware_flops) == (b.model_flops, b.hardware_flops) and a.method != b.method


def test_full_recompute_reruns_the_layers_and_the_adapters():
    seq = 4096
    none = finetune_flops_per_token("llama-3-8b", method="lora", seq=seq)
    full = finetune_flops_per_token("llama-3-8b", method="lora", seq=seq, recompute="full")
    layers_forward = 2 * (M8 - V * H8 - H8) + _attention(seq)      # no LM head nor final norm: outside the checkpoints
    assert full.hardware_flops - none.hardware_flops == pytest.approx(layers_forward + 2 * P8_R16)
    assert full.model_flops == none.model_flops


def test_dequant_bytes_by_hand():
    l70, h, kv, f = 80, 8192, 1024, 28672
    block = 2 * h * h + 2 * h * kv + 3 * h * f
    assert dequant_bytes("llama-3-70b") == pytest.approx(l70 * block * (NF4 + 2))


def test_adapter_checkpoint_is_params_times_bytes():
    assert P8_R16 == 41_943_040
    assert adapter_checkpoint_bytes("llama-3-8b", rank=16) == P8_R16 * 4 == 160 * 2**20
    assert adapter_checkpoint_bytes("llama-3-8b", rank=16, dtype="bf16") == 80 * 2**20


def test_one_gpu_lora_time_by_hand():
    tokens, seq, batch, eff, price = 1e8, 2048, 4, 0.5, 2.0
    t = finetune_time("llama-3-8b", gpu="H100 SXM", method="lora", tokens=tokens, seq=seq, batch=batch,
                      kernel_efficiency=eff, price_usd_per_gpu_hour=price, layer_overhead_s=0)
    per_token = 4 * M8 + 3 * _attention(seq) + 6 * P8_R16
    seconds = tokens * per_token / (989.4e12 * eff)
    assert t.seconds == pytest.approx(seconds)
    assert t.step_s == pytest.approx(batch * seq * per_token / (989.4e12 * eff))
    assert t.cost_usd == pytest.approx(seconds / 3600 * price)
    assert t.mfu == pytest.approx(eff)                            # no recomputation, nothing else: MFU = efficiency
    assert t.steps == -(-int(tokens) // (batch * seq))
    two = finetune_time("llama-3-8b", gpu="H100 SXM", method="lora", tokens=tokens, seq=seq, batch=batch,
                        kernel_efficiency=eff, price_usd_per_gpu_hour=price, epochs=2, layer_overhead_s=0)
    assert two.cost_usd == pytest.approx(2 * t.cost_usd)
    # the launches of a PEFT step (32 layers x 1 micro-batch x 3 ms = 96 ms) overlap the GPU's work: this step's
    # arithmetic (8,192 tokens x ~33 GFLOP at half of 989.4 TFLOP/s: ~0.55 s) hides them: it is unchanged
    slow = finetune_time("llama-3-8b", gpu="H100 SXM", method="lora", tokens=tokens, seq=seq, batch=batch,
                         kernel_efficiency=eff, price_usd_per_gpu_hour=price, layer_overhead_s=0.003)
    assert t.step_s > 0.5
    assert slow.overhead_s == pytest.approx(32 * 0.003)
    assert slow.step_s == pytest.approx(t.step_s)


def test_a_short_step_is_the_launch_floor_a_long_one_its_arithmetic():
    # ft34: launches are asynchronous, so a micro-batch takes max(launches, GPU work), not their sum. By hand,
    # Llama-3-8B LoRA on one H100 at a flat 50% of 989.4 TFLOP/s, 3 ms of launches per layer (32 layers):
    # 64 tokens x ~30 GFLOP = ~4 ms of arithmetic < 96 ms -> the step is the floor, 4 x 96 ms for 4 micro-batches;
    # 8 x 8,192 tokens -> seconds of arithmetic > 96 ms -> the step is the arithmetic alone
    kw = dict(gpu="H100 SXM", method="lora", tokens=1e8, kernel_efficiency=0.5, layer_overhead_s=0.003)
    for seq, batch, m in ((64, 1, 4), (8192, 8, 2)):
        per_token = 4 * M8 + 3 * _attention(seq) + 6 * P8_R16
        arithmetic = m * batch * seq * per_token / (989.4e12 * 0.5)
        floor = m * 32 * 0.003
        t = finetune_time("llama-3-8b", seq=seq, batch=batch, grad_accum=m, **kw)
        assert t.compute_s == pytest.approx(arithmetic)
        assert t.step_s == pytest.approx(max(arithmetic, floor))
        assert t.step_s < arithmetic + floor                  # never the sum
    tiny = finetune_time("llama-3-8b", seq=64, grad_accum=4, **kw)
    assert tiny.step_s == pytest.approx(4 * 32 * 0.003)       # the launch floor, whatever the arithmetic
    assert tiny.compute_s < 0.1 * tiny.step_s
    # QLoRA's dequantisation is GPU work: it sits under the same floor (3 passes of a 8B base at 1% of HBM: larger)
    q = finetune_time("llama-3-8b", seq=64, grad_accum=4, recompute="full", dequant_bandwidth_fraction=0.01,
                      **{**kw, "method": "qlora"})
    assert q.dequant_s == pytest.approx(4 * 3 * dequant_bytes("llama-3-8b") / (3350e9 * 0.01))
    assert q.step_s == pytest.approx(max(q.compute_s + q.dequant_s, 4 * 32 * 0.003))
    assert q.step_s == pytest.approx(q.compute_s + q.dequant_s)


def test_full_recomputation_launches_a_third_pass_by_hand():
    # ft43: a PEFT step launches a layer's kernels once per pass over it: forward and backward, and the forward
    # full recomputation reruns. layer_overhead_s prices the two passes of a step without recomputation, so
    # Llama-3-8B (32 layers), 4 micro-batches of 64 tokens, 3 ms: 4 x 32 x 3 ms = 384 ms without recomputation
    # or with selective (it reruns the attention core, not the layer), 4 x 32 x 3 ms x 3 / 2 = 576 ms with full
    kw = dict(gpu="H100 SXM", method="lora", tokens=1e8, seq=64, grad_accum=4, kernel_efficiency=0.5,
              layer_overhead_s=0.003)
    for recompute, floor in (("none", 0.384), ("selective", 0.384), ("full", 0.576)):
        t = finetune_time("llama-3-8b", recompute=recompute, **kw)
        assert t.overhead_s == pytest.approx(floor, rel=1e-12), recompute
        assert t.step_s == pytest.approx(floor, rel=1e-12)            # launch-bound: 64 tokens of arithmetic
    # QLoRA's launches are counted alike (its dequantisation's own passes are dequant_passes: 2 and 3 too)
    q = finetune_time("llama-3-8b", recompute="full", **{**kw, "method": "qlora"})
    assert q.overhead_s == pytest.approx(0.576, rel=1e-12)


def test_default_prices_the_step_as_the_step_model_does_by_hand():
    # issue 34, round 4: without a kernel_efficiency the step is priced as a training step is
    # (kernels.compute_seconds): the Linear layers at peak x the calibrated kernel efficiency x the GEMM
    # efficiency of the micro-batch's shape, the attention core as causal kernels compute it (half the score
    # matrix) at the attention kernels' rate. Llama-3-8B LoRA, one H100, 2 x 4,096 tokens, no recomputation.
    from llmsizing.hardware import kernel_efficiency
    from llmsizing.kernels import attention_efficiency, gemm_efficiency

    seq, batch = 4096, 2
    t = finetune_time("llama-3-8b", gpu="H100 SXM", method="lora", tokens=1e8, seq=seq, batch=batch,
                      layer_overhead_s=0)
    m = batch * seq
    # one layer's forward GEMMs (m, n, k): q,k,v fused 4096 -> 4096 + 2 x 1024; o; gate+up; down
    gemms = ((m, H8 + 2 * KV8, H8), (m, H8, H8), (m, 2 * F8, H8), (m, H8, F8))
    shape_eff = sum(a * b * c for a, b, c in gemms) / sum(a * b * c / gemm_efficiency("H100 SXM", a, b, c)
                                                          for a, b, c in gemms)
    linear_per_token = 4 * M8 + 6 * P8_R16                        # everything but the attention core
    causal = 3 * _attention(seq) / 2                              # fwd + 2 bwd; a query sees s / 2 keys
    seconds = (m * linear_per_token / (989.4e12 * kernel_efficiency("H100 SXM") * shape_eff)
               + m * causal / (989.4e12 * attention_efficiency("H100 SXM", head_dim=128, seq=seq))
               # the memory-bound kernels (llmsizing.pointwise, tests/_kernels_by_hand.py) at 3.35 TB/s
               + m * (32 * KH.pointwise_layer_bytes(*KH.LLAMA3_8B)
                      + sum(KH.pointwise_end_bytes(4096, 128256))) / KH.H100_HBM)
    assert t.step_s == pytest.approx(seconds, rel=1e-9)
    # and the efficiency it reports is the one rate that would give that time for every hardware FLOP
    per_token = linear_per_token + 3 * _attention(seq)
    assert t.kernel_efficiency == pytest.approx(m * per_token / (989.4e12 * seconds), rel=1e-9)


def test_qlora_dequantisation_time_by_hand():
    kw = dict(gpu="H100 SXM", tokens=1e7, seq=2048, kernel_efficiency=0.5, recompute="full", grad_accum=2,
              dequant_bandwidth_fraction=0.8)
    q = finetune_time("llama-3-70b", method="qlora", **kw)
    lo = finetune_time("llama-3-70b", method="lora", **kw)
    # three passes (forward, backward, the recomputed forward) per micro-batch, two micro-batches, 80% of HBM
    assert q.dequant_s == pytest.approx(2 * 3 * dequant_bytes("llama-3-70b") / (3350e9 * 0.8))
    assert q.compute_s == pytest.approx(lo.compute_s)
    assert q.days > lo.days
    # twice the micro-batch halves the dequantisation's share of the step
    big = finetune_time("llama-3-70b", method="qlora", **{**kw, "grad_accum": 1}, batch=2)
    assert big.dequant_s == pytest.approx(q.dequant_s / 2)


def test_ddp_sends_the_adapters_gradients_only():
    c = finetune_communication("llama-3-8b", "H100 SXM", n_gpus=8, strategy="ddp", rank=16)
    assert c.bytes_sent_per_step == pytest.approx(2 * 7 / 8 * 4 * P8_R16)       # ring all-reduce of fp32
    assert c.gather_forward_s == 0 and not c.reduce_per_micro_batch
    # the 2N gradient a full fine-tune would all-reduce in bf16 is 2 x 8.03e9 bytes: ~96x more
    assert 2 * 8_030_261_248 / (4 * P8_R16) > 90


def test_fsdp_gathers_the_base_twice_per_micro_batch():
    from llmsizing.inference import weights_bytes

    n, m = 4, 3
    c = finetune_communication("llama-3-8b", "H100 SXM", n_gpus=n, strategy="fsdp", method="qlora",
                               rank=16, grad_accum=m)
    gathered = weights_bytes("llama-3-8b", "nf4") + 4 * P8_R16
    expected = m * ((n - 1) / n * 2 * gathered + (n - 1) / n * 4 * P8_R16)
    assert c.bytes_sent_per_step == pytest.approx(expected)


def test_one_gpu_has_no_communication():
    t = finetune_time("llama-3-8b", gpu="H100 SXM", tokens=1e6, seq=1024, n_gpus=1, strategy="fsdp")
    assert t.comm_s == 0 and t.exposed_comm_s == 0


def test_more_gpus_buy_time_not_gpu_hours_when_communication_hides():
    kw = dict(gpu="H100 SXM", method="lora", tokens=1e8, seq=2048, batch=4, kernel_efficiency=0.5)
    one = finetune_time("llama-3-8b", **kw)
    eight = finetune_time("llama-3-8b", **kw, n_gpus=8)
    assert eight.exposed_comm_s == 0 < eight.comm_s
    assert eight.days == pytest.approx(one.days / 8)
    assert eight.gpu_hours == pytest.approx(one.gpu_hours)


def test_slow_links_expose_fsdp_gathers():
    kw = dict(gpu="RTX 4090", method="qlora", tokens=1e6, seq=512, recompute="full", n_gpus=2, strategy="fsdp")
    t = finetune_time("llama-3-70b", **kw)
    assert t.exposed_comm_s > 0                                   # 37 GB gathered twice over PCIe per micro-batch


def test_fsdp_memory_shards_the_states_and_gathers_one_unit():
    n = 4
    kw = dict(method="qlora", batch=1, seq=2048, recompute="full")
    one = finetune_memory("llama-3-70b", kbit_prep=False, **kw)     # FSDP-QLoRA: no k-bit preparation
    four = finetune_memory_per_gpu("llama-3-70b", n_gpus=n, strategy="fsdp", **kw)
    unit = 128256 * 8192 * 2                                      # the bf16 embedding outweighs an nf4 block
    assert gathered_unit_bytes("llama-3-70b", "qlora") == unit
    states = one.base_weights_bytes + one.adapter_bytes + one.optimizer_bytes
    assert four.peak_bytes == pytest.approx(one.peak_bytes - states * (n - 1) / n + unit)
    ddp = finetune_memory_per_gpu("llama-3-70b", n_gpus=n, strategy="ddp", **kw)
    assert ddp.total_bytes == pytest.approx(finetune_memory("llama-3-70b", **kw).total_bytes)   # prepared
    # ZeRO-3's default recipe is FSDP's (TRL skips the k-bit preparation for sharded QLoRA): the same step
    zero3 = finetune_memory_per_gpu("llama-3-70b", n_gpus=n, strategy="zero3", **kw)
    assert zero3.total_bytes == pytest.approx(four.total_bytes)
    assert zero3.single.base_weights_bytes == one.base_weights_bytes


# Llama-3-70B's config.json: hidden 8192, 80 layers, vocabulary 128,256, untied head; 70,553,706,496 weights
_L3_70B_EMBED_HEAD = 2 * 128256 * 8192                  # 2,101,346,304
_L3_70B_NORMS = (2 * 80 + 1) * 8192                     # two RMSNorms per block and the final one: 1,318,912
_L3_70B_BLOCKS = 70_553_706_496 - _L3_70B_EMBED_HEAD - _L3_70B_NORMS      # 68,451,041,280 matrix weights
_NF4_BYTES = (4 + 8 / 64 + 32 / (64 * 256)) / 8         # QLoRA paper Sec. 3: 4.127 bits, double quantisation


def test_fsdp_qlora_memory_and_traffic_assume_one_recipe():
    """reader25c M8: FSDP-QLoRA's memory sharded the base with PEFT's fp32 casts while its gathers moved the
    16-bit embeddings. Answer.AI's fsdp_qlora/train.py calls get_peft_model without
    prepare_model_for_kbit_training, so both now count the unprepared base, by hand:
    68,451,041,280 x 0.51587 B + 2 B x (2,101,346,304 + 1,318,912) = 39.517 GB (43.722 GB prepared)."""
    from llmsizing.finetune import frozen_base_bytes
    from llmsizing.finetune_sharded import default_kbit_prep

    bare = _L3_70B_BLOCKS * _NF4_BYTES + 2 * (_L3_70B_EMBED_HEAD + _L3_70B_NORMS)
    prepared = bare + 2 * (_L3_70B_EMBED_HEAD + _L3_70B_NORMS)          # fp32: 2 more bytes each
    assert bare == pytest.approx(39.517e9, rel=1e-4) and prepared == pytest.approx(43.722e9, rel=1e-4)
    assert not default_kbit_prep("qlora", "fsdp") and default_kbit_prep("qlora", "ddp")
    assert not default_kbit_prep("qlora", "zero3") and not default_kbit_prep("lora", "ddp")   # review25a M1
    kw = dict(method="qlora", batch=1, seq=2048, recompute="full")
    fsdp = finetune_memory_per_gpu("llama-3-70b", n_gpus=8, strategy="fsdp", **kw)
    assert fsdp.single.base_weights_bytes == pytest.approx(bare, rel=1e-9)
    assert frozen_base_bytes("llama-3-70b", "qlora", kbit_prep=False) == pytest.approx(bare, rel=1e-9)
    ddp = finetune_memory_per_gpu("llama-3-70b", n_gpus=8, strategy="ddp", **kw)
    assert ddp.single.base_weights_bytes == pytest.approx(prepared, rel=1e-9)
    # the gathers move the same base: per micro-batch twice (n - 1)/n of (base + fp32 adapter grads), + a
    # reduce-scatter of those gradients
    n, grads = 8, 4 * 207_093_760                                      # rank-16 adapters of Llama-3-70B
    c = finetune_communication("llama-3-70b", "H100 SXM", n_gpus=n, strategy="fsdp", method="qlora", rank=16)
    assert c.bytes_sent_per_step == pytest.approx((n - 1) / n * (2 * (bare + grads) + grads), rel=1e-9)
    prep = finetune_communication("llama-3-70b", "H100 SXM", n_gpus=n, strategy="fsdp", method="qlora",
                                  rank=16, kbit_prep=True)
    assert prep.bytes_sent_per_step - c.bytes_sent_per_step == pytest.approx(
        (n - 1) / n * 2 * (prepared - bare), rel=1e-9)


def test_lora_bf16_unit_is_a_block_when_the_block_is_larger():
    # Llama-3-70B in bf16: a block (855.6M weights, 1.7 GB) is smaller than the 2.1 GB embedding;
    # Llama-2-70B's vocabulary is 32000: 0.52 GB, so the block is the unit
    h, kv, f = 8192, 1024, 28672
    block = 2 * h * h + 2 * h * kv + 3 * h * f
    assert gathered_unit_bytes("llama-2-70b", "lora") == block * 2


def test_full_finetune_goes_to_zero3():
    from llmsizing.parallel import Parallel

    got = finetune_memory_per_gpu("llama-2-7b", n_gpus=2, strategy="zero3", method="full", batch=1, seq=2048,
                                  recompute="full")
    want = finetune_memory("llama-2-7b", method="full", batch=1, seq=2048, recompute="full",
                           parallel=Parallel(dp=2, zero=3))
    assert got.total_bytes == want.total_bytes


def test_max_seq_is_the_edge():
    kw = dict(method="qlora", recompute="full")
    s = max_seq("llama-3-8b", "A10", **kw)
    assert s > 0 and s % 256 == 0
    room = 0.9 * 23028 * 2**20
    assert finetune_memory("llama-3-8b", batch=1, seq=s, **kw).total_bytes <= room
    assert finetune_memory("llama-3-8b", batch=1, seq=s + 256, **kw).total_bytes > room


def test_max_batch_per_gpu_matches_max_batch_on_one_gpu_and_grows_with_fsdp():
    from llmsizing.finetune import max_batch

    kw = dict(method="qlora", seq=2048, recompute="full")
    assert max_batch_per_gpu("llama-3-70b", "A100 80GB", **kw) == max_batch("llama-3-70b", "A100 80GB", **kw)
    assert max_batch_per_gpu("llama-3-70b", "A100 80GB", n_gpus=4, strategy="fsdp", **kw) > \
        max_batch("llama-3-70b", "A100 80GB", **kw)


def test_strategy_table_says_ddp_lora_70b_does_not_fit():
    df = strategy_table("llama-3-70b", "H100 SXM", n_gpus=8, method="lora", seq=2048, tokens=1e7)
    assert not df.loc["ddp", "fits"] and df.loc["fsdp", "fits"] and df.loc["zero3", "fits"]
    assert df.loc["fsdp", "sent_per_step_bytes"] > 100 * df.loc["ddp", "sent_per_step_bytes"]


def test_strategy_table_states_the_fine_tuning_range_of_its_hours_gpu_hours_and_dollars():
    """Issue 34 (audit34 item 8): each recipe's hours come with the stated fine-tuning range, read here from
    data/finetune_model.csv (a QLoRA step's since session 43: range_low/high_quantised), and the GPU-hours and
    dollars are those hours on 8 GPUs at the catalogue's H100 price. Full fine-tuning, which the published rows
    do not bound, has no range."""
    import pandas as pd

    from llmsizing.catalog import DATA_DIR, get_gpu, gpu_price

    fit = pd.read_csv(DATA_DIR / "finetune_model.csv").set_index("constant")["value"]
    lo, hi = float(fit["range_low_quantised"]), float(fit["range_high_quantised"])
    df = strategy_table("llama-3-70b", "H100 SXM", n_gpus=8, method="qlora", seq=2048, tokens=1e7)
    price = gpu_price(get_gpu("H100 SXM"))
    for s, r in df.iterrows():
        assert (r["hours_low"], r["hours_high"]) == pytest.approx((r["hours"] * lo, r["hours"] * hi)), s
        assert r["hours"] == pytest.approx(24 * r["days"]) and r["gpu_hours"] == pytest.approx(8 * r["hours"])
        assert (r["gpu_hours_low"], r["gpu_hours_high"]) == pytest.approx((8 * r["hours_low"], 8 * r["hours_high"]))
        assert (r["cost_usd_low"], r["cost_usd_high"]) == pytest.approx(
            (price * r["gpu_hours_low"], price * r["gpu_hours_high"]))
    full = strategy_table("llama-3-8b", "H100 SXM", n_gpus=8, method="full", seq=2048, tokens=1e7)
    assert full[["hours_low", "gpu_hours_high", "cost_usd_low"]].isna().all().all()


def test_strategy_table_still_imports_from_finetune_time_with_a_warning():
    import llmsizing.finetune_time as ft

    with pytest.warns(DeprecationWarning, match="finetune_strategies"):
        assert ft.strategy_table is strategy_table


@pytest.mark.parametrize("kw, name", [
    (dict(method="prefix"), "method"), (dict(strategy="deepspeed"), "strategy"), (dict(n_gpus=0), "n_gpus"),
    (dict(epochs=0), "epochs"), (dict(tokens=-1), "tokens"), (dict(kernel_efficiency=1.5), "kernel_efficiency"),
    (dict(dequant_bandwidth_fraction=0), "dequant_bandwidth_fraction"), (dict(seq=0), "seq"),
    (dict(recompute="some"), "recompute")])
def test_errors_name_the_parameter(kw, name):
    base = dict(gpu="H100 SXM", tokens=1e6, seq=1024)
    with pytest.raises((ValueError, TypeError), match=name):
        finetune_time("llama-3-8b", **{**base, **kw})


def test_full_method_has_no_lora_communication():
    with pytest.raises(ValueError, match="method"):
        finetune_communication("llama-3-8b", "H100 SXM", n_gpus=2, method="full")


def test_hours_come_with_the_stated_range(capsys):
    """A LoRA or QLoRA run's hours carry chapter 16's stated range: the 80% bounds of published / predicted
    step times in data/finetune_model.csv (read here by hand; tests/test_intervals.py checks them against the
    leave-one-source-out check); full fine-tuning, which those rows do not bound, has none. The CLI prints
    it."""
    import csv
    from pathlib import Path

    from llmsizing import cli
    from llmsizing.finetune_time import finetune_time

    with open(Path(__file__).resolve().parents[1] / "data" / "finetune_model.csv", newline="") as fh:
        consts = {r["constant"]: float(r["value"]) for r in csv.DictReader(fh)}
    lo, hi = consts["range_low_quantised"], consts["range_high_quantised"]     # a QLoRA step's (session 43)
    t = finetune_time("llama-3-70b", gpu="H100 SXM", method="qlora", tokens=1e8, seq=2048, recompute="full")
    assert t.hours_range == pytest.approx((t.hours * lo, t.hours * hi))
    assert t.to_dict()["hours_high"] == pytest.approx(t.hours * hi)
    full = finetune_time("llama-3-8b", gpu="H100 SXM", method="full", tokens=1e8, seq=2048, n_gpus=8,
                         strategy="fsdp", recompute="full")
    assert full.hours_range is None and full.to_dict()["hours_low"] is None
    assert cli.main(["finetune", "llama-3-70b", "--method", "qlora", "--gpu", "H100 SXM"]) == 0
    assert f"stated range {t.hours * lo:,.1f}-{t.hours * hi:,.1f} hours (the quantised step's range" in \
        capsys.readouterr().out


def test_frozen_base_refuses_the_recipes_finetune_memory_refuses():
    """review25a M2: recast_embeddings undoes part of the k-bit preparation, so without it there is nothing
    to undo; frozen_base_bytes gave 35.31e9 against 39.52e9 bare (2 B an embedding weight taken from zero)."""
    from llmsizing.finetune import frozen_base_bytes

    for kw in (dict(method="qlora", kbit_prep=False, recast_embeddings=True),
               dict(method="lora", recast_embeddings=True)):
        with pytest.raises(ValueError, match="recast_embeddings.*kbit_prep"):
            frozen_base_bytes("llama-3-70b", **kw)
        with pytest.raises(ValueError, match="recast_embeddings.*kbit_prep"):
            finetune_memory("llama-3-70b", batch=1, seq=512, **kw)
    with pytest.raises(ValueError, match="kbit_prep"):
        frozen_base_bytes("llama-3-70b", "lora", kbit_prep=True)
    bare = _L3_70B_BLOCKS * _NF4_BYTES + 2 * (_L3_70B_EMBED_HEAD + _L3_70B_NORMS)
    # qlora.py's recipe: prepared, then embedding and head back to 16 bits: only the norms stay fp32
    assert frozen_base_bytes("llama-3-70b", "qlora", recast_embeddings=True) == pytest.approx(
        bare + 2 * _L3_70B_NORMS, rel=1e-9)


def test_answer_ai_rows_record_their_script_s_recipe():
    """review25a M1: Answer.AI's train.py calls get_peft_model without prepare_model_for_kbit_training under
    every --sharding_strategy (its "ddp" rows too), and torchtune's QLoRA has no PEFT: their QLoRA rows say
    kbit_prep "no"; the rest are blank (the strategy's recipe). Priced the row's way, a DDP row's step does
    not move (DDP gathers no base), and an FSDP row is the strategy's default."""
    from llmsizing import finetune_time as ftm

    df = ftm.published_frame()
    q = df[df.method == "qlora"]
    assert set(df.kbit_prep) <= {"", "yes", "no"} and (df[df.method != "qlora"].kbit_prep == "").all()
    mine = q.framework.str.startswith("Answer.AI") | q.framework.str.startswith("torchtune")
    assert (q[mine].kbit_prep == "no").all() and (q[~mine].kbit_prep == "").all()
    for r in q[mine].itertuples():
        kw = dict(gpu=r.gpu, method="qlora", tokens=1e6, seq=int(r.seq), batch=int(r.batch), n_gpus=int(r.n_gpus),
                  strategy=r.strategy, rank=int(r.rank), recompute=r.recompute)
        assert ftm._predict(r, whole=True).step_s == pytest.approx(
            ftm._predict(r._replace(kbit_prep=""), whole=True).step_s, rel=1e-12)
        assert finetune_time(r.model, kbit_prep=False, **kw).step_s == pytest.approx(
            finetune_time(r.model, **kw).step_s, rel=1e-12)


def test_attention_seconds_by_hand():
    """The attention core of one micro-batch as finetune_time prices it. Causal kernels compute half the score
    matrix: per token and layer 2 s h FLOPs in the forward (QK^T and AV, 4 s h for the full matrix, halved),
    twice that in the backward and once more in a recomputed forward: 8 s h L per token with full
    recomputation, 6 s h L without. Llama-2-7B (h = 4,096, L = 32) at 32,768 tokens: 8 x 32,768 x 4,096 x 32 =
    3.436e10 FLOPs per token, at the attention kernels' rate (kernels.rates, the rate the step model uses)."""
    from llmsizing import get_gpu, get_model
    from llmsizing.finetune_time import attention_seconds
    from llmsizing.hardware import kernel_efficiency
    from llmsizing.kernels import rates

    s, h, layers = 32_768, 4_096, 32
    rate = rates(get_model("llama-2-7b"), get_gpu("A100 40GB"), tp=1, cp=1, batch=1, seq=s, dtype="bf16",
                 kernel_efficiency=kernel_efficiency(get_gpu("A100 40GB"), "bf16"))[1]
    full = attention_seconds("llama-2-7b", "A100 40GB", seq=s, recompute="full")
    assert full == pytest.approx(8 * s * h * layers * s / rate, rel=1e-12)
    assert attention_seconds("llama-2-7b", "A100 40GB", seq=s) == pytest.approx(full * 6 / 8, rel=1e-12)
    # a part of the micro-batch's compute, and it grows with the context faster than the rest does
    t = finetune_time("llama-2-7b", gpu="A100 40GB", method="qlora", batch=1, seq=s, tokens=1e6, recompute="full")
    assert 0 < full < t.compute_s / t.grad_accum
    short = attention_seconds("llama-2-7b", "A100 40GB", seq=2048, recompute="full")
    t2 = finetune_time("llama-2-7b", gpu="A100 40GB", method="qlora", batch=1, seq=2048, tokens=1e6,
                       recompute="full")
    assert short / (t2.compute_s / t2.grad_accum) < full / (t.compute_s / t.grad_accum)
    for bad in (dict(seq=0), dict(seq=2048, batch=0), dict(seq=2048, recompute="some")):
        with pytest.raises(ValueError, match=next(iter(k for k in ("recompute", "batch", "seq") if k in bad))):
            attention_seconds("llama-2-7b", "A100 40GB", **bad)
