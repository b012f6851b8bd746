"""Part II by hand: pipeline stages under 1F1B, offload, ZeRO-3's gathered unit, communication volumes and
min_gpus, each checked against arithmetic written out here (not against the library's own output)."""

from __future__ import annotations

import math

import pytest

import llmsizing as L
from llmsizing import Model, Parallel, communication, get_gpu, min_gpus, pipeline_in_flight, training_memory
from llmsizing.activations import activation_memory
from llmsizing.memory import model_states, stage_params, zero3_gathered_bytes

LLAMA = "llama-3-8b"


def test_1f1b_in_flight_by_hand():
    # PipeDream-Flush: stage i warms up with p - i - 1 forwards, then holds one more (Narayanan et al. 2021)
    assert pipeline_in_flight(4, 8) == [4, 3, 2, 1]
    assert pipeline_in_flight(4, 2) == [2, 2, 2, 1]       # fewer micro-batches than stages
    assert pipeline_in_flight(1, 16) == [1]


def test_even_split_puts_the_remainder_on_the_first_stages():
    # 126 = 16 x 7 + 14: fourteen stages of 8, two of 7 (Megatron-LM refuses this count without a layout,
    # chapter 8); 80 = 4 x 20 divides, Megatron-LM's split; with the embedding and the loss as places,
    # 126 + 2 = 128 = 16 x 8 and the ends give one place each: 7, fourteen 8s, 7 (Llama 3 405B)
    assert L.parallel.layers_per_stage(126, Parallel(pp=16)) == (8,) * 14 + (7, 7)
    assert L.parallel.layers_per_stage(80, Parallel(pp=4)) == (20, 20, 20, 20)
    both = Parallel(pp=16, account_for_embedding=True, account_for_loss=True)
    assert L.parallel.layers_per_stage(126, both) == (7,) + (8,) * 14 + (7,)


def test_interleaved_first_stage_matches_korthikanti_penalty():
    # Megatron-LM: warm-up 2(p - i - 1) + (v - 1)p chunk forwards; first stage = p (1 + (p-1)/(p v)) micro-batches
    for p, v in [(4, 2), (8, 4), (2, 2), (8, 3)]:
        first = pipeline_in_flight(p, 64, v)[0]
        assert first == pytest.approx(p * (1 + (p - 1) / (p * v)))
    # capped by the m * v chunk passes a step has
    assert pipeline_in_flight(4, 1, 2)[0] == 1.0


def test_stage_activations_first_stage_holds_pp_microbatches_of_its_layers():
    m = L.get_model(LLAMA)
    p, ga = 4, 8
    par = Parallel(pp=p)
    tm = training_memory(m, batch=1, seq=2048, grad_accum=ga, parallel=par, _all_stages=True)
    one = activation_memory(m, batch=1, seq=2048)
    per_stage_layers = m.layers // p
    first, last = tm[0], tm[-1]
    assert first.activations_bytes == pytest.approx(p * (per_stage_layers * one.per_layer_bytes
                                                         + one.embedding_bytes))
    assert last.activations_bytes == pytest.approx(per_stage_layers * one.per_layer_bytes + one.logits_bytes)
    assert first.loss_temporaries_bytes == 0 and last.loss_temporaries_bytes > 0
    # the reported result is the most loaded stage, and its stage table lists every stage
    worst = training_memory(m, batch=1, seq=2048, grad_accum=ga, parallel=par)
    assert worst.total_bytes == max(r.total_bytes for r in tm)
    assert list(worst.stage_table.index) == list(range(p))


def test_pipeline_states_follow_stage_params():
    m = L.get_model(LLAMA)
    par = Parallel(tp=2, pp=4)
    tm = training_memory(m, batch=1, seq=1024, grad_accum=8, parallel=par, _all_stages=True)
    params = stage_params(m, par)
    for r, n in zip(tm, params):
        assert r.weights_bytes == pytest.approx(2 * n)          # bf16 weights of exactly this stage's share


def test_zero_2_or_3_with_pipeline_allowed_and_reduces_every_micro_batch():
    # FSDP2 runs under pipelines (torchtitan; Llama 3), though DeepSpeed's pipeline engine refuses it: the
    # gradients are then reduce-scattered once per micro-batch, and ZeRO-3 gathers the stage's weights for
    # every micro-batch's forward and backward
    m, ga = L.get_model(LLAMA), 4
    for zero in (2, 3):
        par = Parallel(pp=2, dp=4, zero=zero)
        c = communication(m, par, batch=1, seq=1024, gpu="H100 SXM", grad_accum=ga)
        rs, = [x for x in c.collectives if "reduce-scatter" in x.collective]
        # one call per Megatron-Core bucket (ZeRO-2: 40e6 parameters, closed at the parameter that fills it,
        # walking backwards on pipeline rank 0: each of its 16 layers is fc2 58,720,256, fc1 117,440,512 and
        # 41,951,232 of norms, qkv and proj, three buckets, then the embedding: 49, where one per 40e6 of the
        # stage's parameters gave 101; tests/test_megatron_buckets.py) or per layer of the stage's 16
        # (ZeRO-3, PyTorch FSDP's per-block unit), every micro-batch (issue 34)
        calls = 3 * 16 + 1 if zero == 2 else 16
        assert rs.calls == ga * calls
        assert rs.message_bytes * calls == pytest.approx(2 * max(stage_params(m, par)))   # bf16 gradients
    z3 = communication(m, Parallel(pp=2, dp=4, zero=3), batch=1, seq=1024, gpu="H100 SXM", grad_accum=ga)
    assert sum(x.calls for x in z3.collectives if "all-gather" in x.collective) == 2 * ga * 16
    Parallel(pp=2, zero=1)                                        # Megatron's distributed optimizer: fine


@pytest.mark.parametrize("off, zero, msg", [("optimizer", 0, "zero >= 1"), ("optimizer+params", 2, "zero=3"),
                                            ("cpu", 3, "offload")])
def test_offload_needs_zero(off, zero, msg):
    with pytest.raises(ValueError, match=msg):
        Parallel(dp=4, zero=zero, offload=off)


def test_offload_moves_optimizer_and_fp32_grads_to_host():
    n = L.get_model(LLAMA).n_params
    dp = 8
    on = model_states(LLAMA, parallel=Parallel(dp=dp, zero=2, offload="optimizer"))
    # ZeRO-Offload (Ren et al. 2021): fp32 master + Adam moments + an fp32 gradient partition on the host:
    # (4 + 8 + 4) bytes per parameter of this GPU's 1/dp partition; only the bf16 weights stay on the GPU:
    # DeepSpeed's estimate_zero2_model_states_mem_needs(cpu_offload=True) counts 2 bytes per parameter there
    assert on.host_bytes == pytest.approx(16 * n / dp)
    assert on.weights_bytes == pytest.approx(2 * n) and on.optimizer_bytes == 0
    assert on.gradients_bytes == 0
    one = model_states(LLAMA, parallel=Parallel(dp=dp, zero=1, offload="optimizer"))
    assert one.gradients_bytes == pytest.approx(2 * n)     # ZeRO-1 all-reduces whole gradients on the GPU first
    inf = model_states(LLAMA, parallel=Parallel(dp=dp, zero=3, offload="optimizer+params"))
    assert inf.host_bytes == pytest.approx(18 * n / dp)   # DeepSpeed's ZeRO-3 offload_param: 18 B/param on host
    assert inf.weights_bytes == 0


def test_zero3_gathered_unit_is_the_larger_of_a_block_and_the_vocab_matrix():
    m = L.get_model(LLAMA)
    block = m.params_per_layer
    matrix = m.vocab * m.hidden
    assert zero3_gathered_bytes(m, parallel=Parallel(dp=8, zero=3)) == 4 * max(block, matrix)
    assert zero3_gathered_bytes(m, parallel=Parallel(dp=8, zero=2)) == 0


def test_ddp_and_zero_volumes_by_hand():
    m = L.get_model(LLAMA)
    n, N = m.n_params, 8
    kw = dict(batch=1, seq=4096, gpu="H100 SXM")
    ddp = communication(m, Parallel(dp=N), **kw)
    assert ddp.bytes_per_gpu == pytest.approx(2 * (N - 1) / N * 2 * n)          # bf16 gradients, ring
    z3 = communication(m, Parallel(dp=N, zero=3), **kw)
    assert z3.bytes_per_gpu == pytest.approx(1.5 * ddp.bytes_per_gpu)           # ZeRO paper Sec. 7.2.2
    # inside one node: NVLink 4, 900 GB/s bidirectional = 450 GB/s each way, at the share nccl-tests reach
    # (data/links.csv: 0.77) and 2 (N - 1) ring steps of 2.3 us
    # DDP reduces one Megatron-Core bucket of max(40e6, 1e6 x 8) = 40e6 parameters per call (issue 34),
    # closed at the first parameter that fills it (session 37): Llama 3 8B's LM head, three a layer (fc2; fc1;
    # norms, qkv and proj, 41,951,232) and the embedding, 98 calls (not ceil(200.76) = 201), each paying its
    # 14 steps
    assert ddp.collectives[0].link == "NVLink 4"
    assert ddp.collectives[0].calls == 98
    assert ddp.time_s == pytest.approx(2 * (N - 1) / N * 2 * n / (0.77 * 450e9) + 98 * 2 * (N - 1) * 2.3e-6)
    # 16 replicas fill two nodes: hierarchical (issue 34), each node sends the gradients once over its 8 NICs
    # (8 x 50 GB/s at 0.91; 2 (2 - 1) / 2 = 1 per byte) while each GPU moves 2 x 7 / 8 = 1.75 per byte over
    # NVLink (450 GB/s at 0.77) inside the node, pipelined: the slower phase, NVLink's, caps the bandwidth
    net = communication(m, Parallel(dp=16), **kw).collectives[0]
    assert net.link == "network"
    assert net.bandwidth_gbps == pytest.approx(min(8 * 50 * 0.91, 450 * 0.77 / 1.75))
    assert net.bytes_per_gpu == pytest.approx(1.0 * net.message_bytes * net.calls)


def test_tp_all_reduces_by_hand():
    m = L.get_model(LLAMA)
    b, s, ga = 2, 4096, 4
    c = communication(m, Parallel(tp=4), batch=b, seq=s, gpu="H100 SXM", grad_accum=ga)
    act = 2 * b * s * m.hidden                    # one bf16 b x s x h activation
    # Megatron: 2 all-reduces per layer forward, 2 backward, per micro-batch
    assert sum(x.calls for x in c.collectives) == 4 * m.layers * ga
    assert c.bytes_per_gpu == pytest.approx(4 * m.layers * ga * 2 * 3 / 4 * act)


def test_min_gpus_fits_and_one_fewer_replica_does_not():
    kw = dict(batch=1, seq=4096, grad_accum=8, recompute="selective")
    plan = min_gpus("llama-2-70b", "H100 SXM", **kw)
    cap = get_gpu("H100 SXM").memory_bytes
    assert plan.total_bytes <= 0.9 * cap
    # the model states alone (16 B/param for bf16-mixed AdamW) need at least this many GPUs
    assert plan.gpus >= math.ceil(16 * L.get_model("llama-2-70b").n_params / (0.9 * cap))
    p = plan.parallel
    if p.dp > 1:
        fewer = Parallel(tp=p.tp, pp=p.pp, dp=p.dp - 1, zero=p.zero, sp=p.sp, offload=p.offload)
        assert training_memory("llama-2-70b", parallel=fewer, batch=1, seq=4096, grad_accum=8,
                               recompute="selective").total_bytes > 0.9 * cap


def test_min_gpus_one_gpu_when_it_fits():
    plan = min_gpus("gpt2", "H100 SXM", batch=1, seq=1024)
    assert plan.gpus == 1 and plan.comm_s == 0


def test_min_gpus_explains_when_nothing_fits():
    tiny = Model("t", layers=2, hidden=8192, heads=64, kv_heads=64, ffn_hidden=32768, vocab=1000, max_seq=2**20)
    with pytest.raises(ValueError, match="no layout of up to max_gpus=8"):
        min_gpus(tiny, "A10", batch=64, seq=65536, max_gpus=8)
