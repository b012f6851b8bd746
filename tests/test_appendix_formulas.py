"""The formula summary (book/90_formula_summary.ipynb) agrees with the library (issue 26).

Each test quotes one formula exactly as the appendix writes it (the test fails if the page no longer says so),
evaluates it with its own few lines of arithmetic from the model's config numbers (layers, hidden, heads, ...),
and compares the result with the library function the page names, for a few models. Nothing here calls the
library to get the expected value: only the config numbers and the GPU's reported capacity come from it.
"""

import json
import math
from pathlib import Path

import pytest

from llmsizing import GiB, get_gpu, get_model, model_states, training_flops_per_token
from llmsizing.activations import activation_memory
from llmsizing.inference import inference_memory, kv_cache_bytes_per_token
from llmsizing.memory import min_gpus_for_bytes

PAGE = Path(__file__).resolve().parents[1] / "book" / "90_formula_summary.ipynb"
MODELS = ["gpt2", "llama-2-7b", "llama-3-8b", "mistral-7b", "llama-3-70b"]


@pytest.fixture(scope="module")
def page():
    nb = json.loads(PAGE.read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def cfg(name):
    m = get_model(name)
    return dict(V=m.vocab, h=m.hidden, L=m.layers, a=m.heads, g=m.kv_heads, d=m.head_dim, f=m.ffn_hidden,
                tau=1 if m.tied_embeddings else 0, gated=m.gated_mlp, layernorm=m.norm == "layernorm",
                bias=m.bias, qkv_bias=m.qkv_bias, positions=m.max_seq if m.learned_pos else 0,
                w=m.sliding_window, window_layers=m.window_layers)


# ---------------------------------------------------------------- chapter 1
def test_parameters(page):
    assert (r"$N = (2-\tau)Vh + s_\text{pos} h + L\,[2hd(a+g) + n_\text{mat}\,hf + 2\nu h + N_\text{bias}]"
            r" + \nu h$" in page)
    assert r"$d(a+2g) + 2h + (n_\text{mat}-1)f$ with biases on every linear layer" in page
    assert r"$d(a+2g)$ with biases on $q$, $k$, $v$ only, else 0" in page
    for name in MODELS + ["qwen2-7b"]:          # qwen2-7b: biases on q, k and v only
        c = cfg(name)
        V, h, L, a, g, d, f = (c[k] for k in "VhLagdf")
        m = 3 if c["gated"] else 2
        nu = 2 if c["layernorm"] else 1
        beta = (a + 2 * g) * d + 2 * h + (m - 1) * f if c["bias"] else (a + 2 * g) * d if c["qkv_bias"] else 0
        lam_s = c["positions"]          # lambda * s_max: the learned position table, 0 without one
        block = 2 * h * d * (a + g) + m * h * f + 2 * nu * h + beta
        n = (2 - c["tau"]) * V * h + lam_s * h + L * block + nu * h
        assert n == get_model(name).n_params, name


def test_gpt2_final_norm_is_2h(page):
    """The issue's case: GPT-2's final LayerNorm is a gain and a bias, 2h, as chapter 1 counts it."""
    assert "so the final norm is $h$ or $2h$, as chapter 1 counts it" in page
    m = get_model("gpt2")
    assert m.param_breakdown()["norms"] == (4 * m.layers + 2) * m.hidden


# ---------------------------------------------------------------- chapter 2
def test_fewest_gpus_for_the_states(page):
    assert r"$\lceil \text{bytes} / (\text{usable} \times \text{capacity}) \rceil$" in page
    assert "usable = 0.9 in every part" in page
    for name in ("llama-3-8b", "llama-3-70b", "llama-2-70b"):
        n = get_model(name).n_params
        states = (2 + 2 + 4 + 2 * 4) * n          # bf16-mixed AdamW: B_weights + B_grads + B_master + k B_state
        assert states == model_states(name).total_bytes
        for gpu in ("H100 SXM", "A100 80GB", "B200"):
            cap = get_gpu(gpu).memory_bytes
            assert min_gpus_for_bytes(states, gpu) == math.ceil(states / (0.9 * cap)), (name, gpu)
    # the example: Llama-3-70B's 16 bytes per parameter on H100s, one answer in Parts I and II
    assert math.ceil(16 * get_model("llama-3-70b").n_params / (0.9 * get_gpu("H100 SXM").memory_bytes)) == 15


# ---------------------------------------------------------------- chapter 3
def test_kv_cache_and_serving_memory(page):
    assert r"$b \cdot \min(s, w) \cdot 2 L g d\, B_\text{kv}$" in page
    assert "weights $+$ KV cache $+$ 1 GiB $+$ 8% of both" in page
    for name in ("llama-2-7b", "llama-3-8b", "llama-3-70b"):
        c = cfg(name)
        b, s = 4, 4096
        kv = b * s * 2 * c["L"] * c["g"] * c["d"] * 2
        assert kv == b * s * kv_cache_bytes_per_token(name)
        weights = 2 * get_model(name).n_params
        r = inference_memory(name, batch=b, context=s)
        assert r.total_bytes == pytest.approx(weights + kv + GiB + 0.08 * (weights + kv), rel=1e-12)


# ---------------------------------------------------------------- chapter 4
def test_korthikanti_layer(page):
    r"""$sbh(34 + 5as/h)$ for a GPT layer (16-bit, dropout with 1-byte masks, eager attention, f = 4h), plus the
    fp32 LayerNorm statistics the library adds (2 norms x 8 bytes per token)."""
    assert "$sbh(34 + 5as/h)$" in page
    m = get_model("gpt2")
    h, a = m.hidden, m.heads
    for s, b in ((512, 1), (1024, 4)):
        hand = s * b * h * (34 + 5 * a * s / h) + 16 * s * b
        got = activation_memory(m, batch=b, seq=s, attention="eager", dropout=True).per_layer_bytes
        assert got == pytest.approx(hand, rel=1e-12)


def test_training_flops(page):
    assert r"$6N_\text{mm} + 12 L s\,a d$" in page
    for name in MODELS:
        c = cfg(name)
        n_mm = get_model(name).n_params - (0 if c["tau"] else c["V"] * c["h"]) - c["positions"] * c["h"]
        assert c["window_layers"] is None          # (every layer windowed, or none)
        for s in (2048, 8192):
            keys = s if c["w"] is None else min(s, c["w"])     # "each token attends to at most w keys"
            hand = 6 * n_mm + 12 * c["L"] * keys * c["a"] * c["d"]
            assert training_flops_per_token(name, seq=s) == pytest.approx(hand, rel=1e-12), (name, s)
    # the example: Llama-3-8B at 8K is 7.21 N with the lookup left out (7.60 N with it in)
    m = get_model("llama-3-8b")
    assert training_flops_per_token(m, seq=8192) / m.n_params == pytest.approx(7.21, abs=0.005)


def test_masked_sdpa(page):
    assert r"$+\,2B_x\,sb(a-g)d + B_x\,bs^2$" in page
    c = cfg("llama-3-8b")
    s, b = 8192, 1
    hand = 2 * 2 * s * b * (c["a"] - c["g"]) * c["d"] + 2 * b * s * s
    kw = dict(batch=b, seq=s, stack="hf")
    extra = (activation_memory("llama-3-8b", attention_mask=True, **kw).total_bytes
             - activation_memory("llama-3-8b", **kw).total_bytes)
    assert extra == c["L"] * hand


# ---------------------------------------------------------------- chapter 2: optimizer buffers (issue 38)
def test_muon_and_8bit_adamw(page):
    """Muon: one fp32 buffer on the blocks' matrices, AdamW's two on the rest; with bf16-mixed (2 + 2 + 4 bytes
    besides the optimizer) that is 8 + 4 (2N - N_mat) / N. 8-bit AdamW: 2 (1 + 4/256) bytes for its moments."""
    assert r"$8 + 4\,\frac{2N - N_\text{mat}}{N}$" in page and r"$N_\text{mat} = L\,[2hd(a+g) + n_\text{mat}\,hf]$" in page
    assert r"$2\,(1 + 4/256)$" in page
    for name in MODELS:
        c = cfg(name)
        h, L, a, g, d, f = (c[k] for k in "hLagdf")
        m = 3 if c["gated"] else 2
        n = get_model(name).n_params
        n_mat = L * (2 * h * d * (a + g) + m * h * f)
        assert model_states(name, optimizer="muon").bytes_per_param == pytest.approx(8 + 4 * (2 * n - n_mat) / n,
                                                                                     rel=1e-12), name
        assert model_states(name, optimizer="adamw-8bit").bytes_per_param == pytest.approx(8 + 2 * (1 + 4 / 256),
                                                                                           rel=1e-12), name


# ---------------------------------------------------------------- session 18's entries, read again (read90)
def test_hierarchical_wire_count(page):
    r"""Across $n_\text{node}$ nodes with $n_\text{local}$ GPUs in each, the network carries the ring count
    over the nodes, $2(n_\text{node}-1)/n_\text{node}$ of $S$ per node for an all-reduce; a flat ring,
    $2(n-1)/n$."""
    from llmsizing.network import ring_bytes, wire_factor

    assert r"each node sends $2\frac{n_\text{node}-1}{n_\text{node}}S$" in page
    assert r"$2\frac{n_\text{local}-1}{n_\text{local}}S$" in page
    for n, local in ((16, 8), (32, 8), (64, 8), (16, 4)):
        nodes = n // local
        assert wire_factor("all-reduce", n, local) == pytest.approx(2 * (nodes - 1) / nodes, rel=1e-12)
        assert wire_factor("all-gather", n, local) == pytest.approx((nodes - 1) / nodes, rel=1e-12)
        assert wire_factor("all-reduce", n) == pytest.approx(2 * (n - 1) / n, rel=1e-12)
    assert wire_factor("all-reduce", 16, 8) == 1.0              # two nodes: each byte once over the network
    assert ring_bytes("all-reduce", 1e9, 16) == pytest.approx(1.875e9, rel=1e-12)
    assert wire_factor("all-reduce", 8, 8) == 0.0               # nothing leaves the node


def test_interleaved_bubble_and_pipelined_zero3_reduces(page):
    """(p-1)/(v m) for the interleaved schedule; ZeRO-3 under a pipeline reduce-scatters a chunk's gradients
    once per run of its backwards: Megatron-LM's interleaved order runs each chunk's backward for p
    micro-batches in a row, so m/p runs; plain 1F1B one run."""
    from llmsizing.parallel import pipeline_bubble
    from llmsizing.pipeline_schedule import PIPELINED_FSDP, grad_reduce_runs, pipelined_zero_fields

    assert r"interleaved with $v$ virtual stages $(p-1)/(v\,m)$" in page
    assert "so $m/p$ times per step under the interleaved schedule" in page
    for p, m, v in ((4, 8, 2), (8, 16, 4), (16, 32, 2)):
        assert pipeline_bubble(p, m, v) == pytest.approx((p - 1) / (v * m), rel=1e-12)
        assert grad_reduce_runs(p, m, v) == m // p
        assert grad_reduce_runs(p, m, 1) == 1
    assert PIPELINED_FSDP["reshard_after_forward"] is False       # "gathers its weights once ... keeps them"
    assert pipelined_zero_fields(3, 4) == PIPELINED_FSDP and pipelined_zero_fields(3, 1) == {}


def test_qlora_dequantisation(page):
    r"""$n_\text{deq} L N_\text{block} (B_\text{nf4} + 2) / (\phi_\text{deq} \text{BW}_\text{mem})$ per
    micro-batch: Llama-2-7B's block matrices are 4 h^2 (attention) + 3 h f (gated MLP) per layer, nf4 with
    double quantisation 4 + 8/64 + 32/(64*256) bits."""
    from llmsizing.finetune_time import DEQUANT_BANDWIDTH_FRACTION, finetune_time

    assert (r"$n_\text{deq}\,L\,N_\text{block}(B_\text{nf4} + 2) / (\phi_\text{deq}\,\text{BW}_\text{mem})$"
            in page)
    c = cfg("llama-2-7b")
    h, f, L = c["h"], c["f"], c["L"]
    n_block = L * (4 * h * h + 3 * h * f)
    b_nf4 = (4 + 8 / 64 + 32 / (64 * 256)) / 8
    gpu = get_gpu("A100 40GB")
    for recompute, passes in (("none", 2), ("full", 3)):
        hand = passes * n_block * (b_nf4 + 2) / (gpu.memory_bandwidth_gbps * 1e9 * DEQUANT_BANDWIDTH_FRACTION)
        got = finetune_time("llama-2-7b", gpu=gpu, tokens=1e6, method="qlora", seq=512, batch=1, grad_accum=4,
                            recompute=recompute)
        assert got.dequant_s == pytest.approx(4 * hand, rel=1e-9), recompute
    assert 4 * hand > 0.1                           # a few hundred ms a micro-batch: not a rounding error


def test_finetune_step_takes_the_larger_of_work_and_launches(page):
    r"""step $= m\,\max(t_\text{compute} + t_\text{deq},\ L\,(n_\text{pass}/2)\,t_\text{layer})$ + exposed
    communication; $n_\text{pass}$ 2, 3 with full recomputation (ft43)."""
    from llmsizing.finetune_time import LAYER_OVERHEAD_S, finetune_time

    assert (r"step $=$ $m\,\max(t_\text{compute} + t_\text{deq},\ L\,(n_\text{pass}/2)\,t_\text{layer})$ + "
            r"exposed communication" in page)
    for seq in (128, 4096):
        for recompute, n_pass in (("none", 2), ("full", 3)):
            r = finetune_time("llama-3-8b", gpu="H100 SXM", tokens=1e6, method="lora", seq=seq, grad_accum=8,
                              recompute=recompute)
            L = get_model("llama-3-8b").layers
            hand = max(r.compute_s + r.dequant_s, 8 * L * n_pass / 2 * LAYER_OVERHEAD_S) + r.exposed_comm_s
            assert r.step_s == pytest.approx(hand, rel=1e-12), (seq, recompute)


def test_speculative_itl_pays_the_step_overhead(page):
    r"""ITL $= (k_\text{draft} (t_\text{draft} + t_0) + t_\text{verify} + t_0)$ / tokens, tokens
    $(1 - \rho^{k+1})/(1 - \rho)$ with $k = k_\text{draft}$; at $t_0 = 0$, memory-bound, Leviathan et al.'s Theorem 3.8 with kappa the
    draft step over the target's."""
    from llmsizing.serve import ATTENTION_BU_DEFAULT, MBU_DEFAULT
    from llmsizing.speculative import speculative_decoding

    assert (r"ITL = $(k_\text{draft}\,(t_\text{draft} + t_0) + t_\text{verify} + t_0)$ / tokens" in page
            and r"$(1 - \rho^{k_\text{draft}+1}) / ((1 - \rho)(k_\text{draft} \kappa + 1))$" in page)
    for k, rho in ((4, 0.8), (2, 0.6), (6, 0.9)):
        tokens = (1 - rho ** (k + 1)) / (1 - rho)
        # SGLang's fitted overhead (vLLM's, the default, fits to 0 since serve43: the formula needs a t0 > 0)
        s = speculative_decoding("llama-3-70b", "llama-3-8b", "H100 SXM", k=k, acceptance=rho,
                                 engine="SGLang")
        assert s.step_overhead_s > 0
        hand = (k * (s.draft_step_s + s.step_overhead_s) + s.verify_step_s + s.step_overhead_s) / tokens
        assert s.itl_s == pytest.approx(hand, rel=1e-12)
        assert s.speedup == pytest.approx((s.target_step_s + s.step_overhead_s) / hand, rel=1e-12)
        z = speculative_decoding("llama-3-70b", "llama-3-8b", "H100 SXM", k=k, acceptance=rho,
                                 step_overhead_s=0)
        assert z.verify_bound == "memory"
        kappa = z.draft_step_s / z.target_step_s
        # the verify step reads what a plain step reads plus the k more embedding rows per sequence it
        # gathers (k x 8,192 x 2 B at the MBU) and the k more KV rows its last position attends to (k x
        # 327,680 B at the attention share; spec34), against some 140 GB: Theorem 3.8 to within 3e-5
        v = z.verify_step_s / z.target_step_s
        more = k * (8_192 * 2 / MBU_DEFAULT + 327_680 / ATTENTION_BU_DEFAULT) / 3.35e12
        assert v - 1 == pytest.approx(more / z.target_step_s, rel=1e-9)
        assert z.speedup == pytest.approx(tokens / (k * kappa + v), rel=1e-12)
        assert z.speedup == pytest.approx(tokens / (k * kappa + 1), rel=3e-5)
        assert s.speedup < z.speedup                              # "t_0 ... lowers it"


def test_replicas_for_a_load(page):
    r"""Little's law: $\lambda = U/(R + t_\text{think})$ and $\max(\lceil \lambda R / b \rceil, \lceil \lambda
    t_\text{cycle} / b \rceil)$ replicas, R a request's TTFT plus output x ITL, t_cycle a batch's prefill and
    decode steps back to back."""
    from llmsizing.serve import replicas_for

    assert r"$\max(\lceil \lambda R / b \rceil,\ \lceil \lambda\, t_\text{cycle} / b \rceil)$" in page
    for users, think in ((200, 0.0), (1000, 10.0), (50, 5.0)):
        p = replicas_for("llama-3-8b", "H100 SXM", users=users, think_s=think)
        s = p.serving
        r = s.ttft_s + 256 * s.itl_s                       # the default 256 output tokens
        cycle = s.batch_prefill_s + 256 * s.decode_step_s
        lam = users / (r + think)
        in_flight, completed = lam * r / s.batch, lam * cycle / s.batch
        assert p.replicas == max(1, math.ceil(in_flight - 1e-9), math.ceil(completed - 1e-9)), users


def test_tensor_parallel_collectives(page):
    """Per layer and micro-batch: 2 all-reduces of b s h forward and 2 backward; with SP 2 all-gathers and 2
    reduce-scatters forward, 4 all-gathers (2 conjugates, 2 re-gathers) and 2 reduce-scatters backward; full
    recomputation repeats the forward's."""
    from llmsizing import Parallel
    from llmsizing.comm import communication

    assert "two more all-gathers per layer" in page
    m = get_model("llama-3-8b")
    b, s, mb = 2, 4096, 3
    act = 2 * b * s * m.hidden
    for sp, rc, want in ((False, "none", {"all-reduce": 4}), (False, "full", {"all-reduce": 6}),
                         (True, "none", {"all-gather": 6, "reduce-scatter": 4}),
                         (True, "full", {"all-gather": 8, "reduce-scatter": 6})):
        c = communication(m, Parallel(tp=8, sp=sp), gpu="H100 SXM", batch=b, seq=s, grad_accum=mb,
                          recompute=rc)
        tp = [x for x in c.collectives if x.group == "tp"]
        assert {x.collective.split(" (")[0].split()[-1] for x in tp} == set(want), [x.collective for x in tp]
        for kind, per_layer in want.items():
            rows = [x for x in tp if kind in x.collective]
            assert sum(x.calls for x in rows) == per_layer * m.layers * mb, (sp, rc, kind)
            assert all(x.message_bytes == act for x in rows)


# ---------------------------------------------------------------- nota38 (issue 38): the page's own gaps
def test_loss_backward_is_split_over_tensor_parallelism(page):
    """The loss backward adds 8 bytes per logit (the fp32 gradient of the logits and its companions, measured in
    chapter 5), b s V logits, split over the t GPUs of the vocabulary-parallel head; the page once wrote 8bsV."""
    from llmsizing.memory import training_memory
    from llmsizing.parallel import Parallel

    assert "loss backward $+8bsV/t$" in page
    m = get_model("llama-3-8b")
    for tp in (1, 2, 8):
        r = training_memory(m, batch=2, seq=2048, parallel=Parallel(tp=tp))
        by_hand = 8 * 2 * 2048 * m.vocab / tp
        assert r.phase_parts["loss backward"]["temporaries"] == pytest.approx(by_hand, rel=1e-12), tp


def test_collective_time_alpha_beta(page):
    """t = steps(n) alpha + bus(n) S / BW: a ring all-reduce over 8 GPUs takes 14 steps and sends 1.75 S per
    GPU; an all-gather 7 steps and 0.875 S (nccl-tests' doc/PERFORMANCE.md)."""
    from llmsizing.alpha_beta import bus_factor, predict_time, steps

    assert r"$t_\text{coll} = \text{steps}(n)\,\alpha + \text{bus}(n)\,S/\text{BW}$" in page
    alpha, s, bw = 10e-6, 1e9, 100.0                       # 10 us, 1 GB, 100 GB/s
    assert (steps("all_reduce", 8), bus_factor("all_reduce", 8)) == (14, 1.75)
    assert (steps("all_gather", 8), bus_factor("all_gather", 8)) == (7, 0.875)
    t = predict_time(s, alpha_s=alpha, busbw_gbps=bw, collective="all_reduce", n=8)
    assert t == pytest.approx(14 * 10e-6 + 1.75 * 1e9 / 100e9, rel=1e-12)


def test_goodput_units_and_daly_complete_model(page):
    r"""$t_\text{MTBI} = t_\text{day}/(\lambda n)$ in seconds: Llama 3's 419 unexpected interruptions in 54 days on
    16,384 GPUs give one every 54 x 86,400 / 419 = 11,135 s on 16,384 GPUs. Daly's complete model by hand:
    t_MTBI = 1000 s, t_c = 100 s, t_w = 10 s, no restart: 100 / (1000 (e^0.11 - 1)) = 0.86001."""
    from llmsizing.reliability import Goodput, goodput

    assert r"$t_\text{MTBI} = t_\text{day}/(\lambda n)$ on average ($t_\text{day}$ = 86,400 s)" in page
    assert (r"$t_\text{c} / \big(t_\text{MTBI}\, e^{t_\text{r}/t_\text{MTBI}} "
            r"(e^{(t_\text{c} + t_\text{w})/t_\text{MTBI}} - 1)\big)$") in page
    g = goodput("llama-3.1-405b", n_gpus=16384, restart_min=10, storage_gb_per_s=2000)
    assert g.mtbf_s == pytest.approx(54 * 86400 / 419, rel=1e-9)
    assert goodput("llama-3.1-405b", n_gpus=131072, restart_min=10, storage_gb_per_s=2000).mtbf_s == \
        pytest.approx(54 * 86400 / 419 / 8, rel=1e-9)
    hand = Goodput(goodput=0.0, n_gpus=1, mtbf_s=1000.0, write_s=10.0, interval_s=100.0, restart_s=0.0,
                   checkpoint_bytes=0.0)
    assert hand.goodput_exponential == pytest.approx(100 / (1000 * (math.exp(0.11) - 1)), rel=1e-12)
    assert hand.goodput_exponential == pytest.approx(0.86001, abs=1e-5)
    restart = Goodput(goodput=0.0, n_gpus=1, mtbf_s=1000.0, write_s=10.0, interval_s=100.0, restart_s=100.0,
                      checkpoint_bytes=0.0)
    assert restart.goodput_exponential == pytest.approx(100 / (1000 * math.exp(0.1) * (math.exp(0.11) - 1)),
                                                        rel=1e-12)


def test_data_parallel_traffic_counts_micro_batches(page):
    """read27c H1, M1: ZeRO-2 reduce-scatters after every micro-batch (it keeps only its gradient slice), ZeRO-1
    and DDP once per step, ZeRO-3 gathers twice and reduce-scatters once per micro-batch. By hand for Llama-3-8B
    (V 128,256, h 4,096, L 32, 32 + 8 heads of 128, f 14,336, untied): N = 2 V h + L (2 h d (a + g) + 3 h f + 2 h)
    + h = 8,030,261,248; over 8 GPUs a ring moves (7/8) x 2N bytes per GPU for each reduce-scatter or
    all-gather of the 16-bit gradients or weights, twice that for an all-reduce."""
    from llmsizing import Parallel
    from llmsizing.comm import communication

    assert "ZeRO-2 the same, but a reduce-scatter after every micro-batch" in page
    assert r"1.5 $\times$ DDP's bytes at one micro-batch a step, $1.5\,m$ $\times$ at $m$" in page
    assert "which the library models: DeepSpeed's ZeRO-1/2 all-reduce the gradients by default" in page
    n = 2 * 128256 * 4096 + 32 * (2 * 4096 * 128 * (32 + 8) + 3 * 4096 * 14336 + 2 * 4096) + 4096
    assert n == 8_030_261_248 == get_model("llama-3-8b").n_params
    one = 7 / 8 * 2 * n                        # one reduce-scatter or all-gather of 2N bytes over 8 GPUs
    expected = {0: lambda m: 2 * one, 1: lambda m: 2 * one, 2: lambda m: (m + 1) * one, 3: lambda m: 3 * m * one}
    total = {}
    for zero, per_step in expected.items():
        for m in (1, 4):
            c = communication("llama-3-8b", Parallel(dp=8, zero=zero), batch=1, seq=4096, gpu="H100 SXM",
                              grad_accum=m)
            total[zero, m] = sum(x.bytes_per_gpu for x in c.collectives)
            assert total[zero, m] == pytest.approx(per_step(m), rel=1e-9), (zero, m)
    # ZeRO-3 over DDP: 1.5 at one micro-batch a step, 1.5 m at m
    assert total[3, 1] / total[0, 1] == pytest.approx(1.5) and total[3, 4] / total[0, 4] == pytest.approx(6.0)


def test_chapter_14_verdict_band(page):
    """read27c: the verdict rule's entry. By hand at the band factor 1.25: a claim of 1.0 against a library value
    of 0.85 is r = 1/0.85 = 1.18, inside [0.8, 1.25], so it holds; against 0.75, r = 1.33, off by 1.3x (too
    high); a lower bound of 1.0 holds against 0.81 (>= 1.0 / 1.25 = 0.8) and not against 0.79."""
    from llmsizing.audit_verdict import BAND, verdict

    assert r"holds if $1/\beta_\text{band} \le r_\text{claim} \le \beta_\text{band}$" in page
    assert "a lower bound holds if the library's value is at least the claim over $\\beta_\\text{band}$" in page
    assert BAND == 1.25
    assert verdict(1.0, 0.85) == "holds"
    assert verdict(1.0, 0.75).startswith("off by 1.3") and verdict(1.0, 0.75).endswith("(too high)")
    assert verdict(1.0, 0.81, bound="at least") == "holds"
    assert verdict(1.0, 0.79, bound="at least").startswith("off by")
    assert verdict(1.0, 1.26, bound="at most").startswith("off by")        # a capacity: at most 1.25 x the claim


def test_typed_constants_the_library_holds(page):
    """read27c: numbers the page types inside its formulas, held to the library's constants by hand: MXFP4
    (32 x 4 + 8) / 32 = 4.25 and NVFP4 (16 x 4 + 8) / 16 = 4.5 bits; slime's 512 MiB buckets; offload's
    16 B/param (fp32 master 4 + Adam's two moments 8 + fp32 gradient 4) and 18 with the 16-bit weights; the FP8
    copies per Linear weight, 1 + 1 (copy and transpose) with Transformer Engine and 1 + 4 / 128^2 with
    DeepSeek-V3's 128 x 128 blocks, so the second over the first is (1 + 4/128^2) / 2."""
    from llmsizing import Parallel
    from llmsizing.gpu_states import recipe_tensor_table
    from llmsizing.precision import MXFP4_BITS, NVFP4_BITS
    from llmsizing.rl_trainer import SLIME_SYNC_BUCKET_BYTES

    assert r"MXFP4 $(32 \cdot 4 + 8)/32 = 4.25$" in page and r"NVFP4 $(16 \cdot 4 + 8)/16 = 4.5$" in page
    assert (MXFP4_BITS, NVFP4_BITS) == ((32 * 4 + 8) / 32, (16 * 4 + 8) / 16) == (4.25, 4.5)
    assert r"\left\lceil \dfrac{2N}{512\ \text{MiB}} \right\rceil" in page
    assert SLIME_SYNC_BUCKET_BYTES == 512 * 2**20
    assert "16 B/param over $n_\\text{dp}$ (ZeRO-Offload); with the weights too, 18 B/param" in page
    n = get_model("llama-3-8b").n_params
    for offload, per_param in (("optimizer", 4 + 8 + 4), ("optimizer+params", 4 + 8 + 4 + 2)):
        host = model_states("llama-3-8b", parallel=Parallel(dp=8, zero=3, offload=offload)).host_bytes
        assert host == pytest.approx(per_param * n / 8, rel=1e-12), offload
    assert r"$2 + 4 + 4 + 8 + 2 = 20$ B with Transformer Engine" in page
    assert r"$2 + 4 + 4 + 4 + (1 + 4/128^2)$ B with DeepSeek-V3's recipe" in page
    t = recipe_tensor_table("llama-3-8b")
    assert t.loc["FP8 weight copies", "fp8-deepseek"] / t.loc["FP8 weight copies", "fp8-mixed"] == \
        pytest.approx((1 + 4 / 128**2) / 2, rel=1e-9)
    assert t.loc["optimizer states", "fp8-deepseek"] == 4.0 and t.loc["optimizer states", "fp8-mixed"] == 8.0


def test_expert_data_parallel_group(page):
    """read27c M6: the expert-data-parallel group is t n_cp n_dp / n_ep GPUs (n_cp n_dp / n_ep with the experts
    tensor-parallel), n_dp / n_ep only at t = n_cp = 1: by hand, t = 2, n_dp = 4, n_ep = 4 gives 2 (1 with
    expert_tp); t = 2, n_cp = 2, n_dp = 2, n_ep = 8 gives 1; t = 1, n_dp = 8, n_ep = 4 gives 2."""
    from llmsizing import Parallel

    assert r"$t\,n_\text{cp}\,n_\text{dp}/n_\text{ep}$ of them ($n_\text{dp}/n_\text{ep}$ at $t = n_\text{cp} = 1$" in page
    assert Parallel(tp=2, dp=4, ep=4, sp=True).edp == 2
    assert Parallel(tp=2, dp=4, ep=4, sp=True, expert_tp=True).edp == 1
    assert Parallel(tp=2, cp=2, dp=2, ep=8, sp=True).edp == 1
    assert Parallel(tp=1, dp=8, ep=4).edp == 2
    with pytest.raises(ValueError, match="ep=4 must divide"):
        Parallel(tp=1, dp=6, ep=4)                                     # n_ep divides t n_cp n_dp


def test_tokens_per_gpu_of_the_mfu_fit(page):
    """read27c M7: chapter 10's fit reads the global batch's tokens over all n GPUs, m b s n_dp / n, which is
    m b s / (t p n_cp), not m b s, once a layout has tensor, pipeline or context parallelism. By hand, Llama 3
    405B's 16K-GPU layout (t 8, p 16, n_cp 1, n_dp 128, 16M tokens a step): 16,777,216 / 16,384 = 1,024 tokens,
    where one data-parallel replica's m b s is 16,777,216 / 128 = 131,072."""
    from llmsizing.mfu_inputs import inputs_of

    assert r"$m\,b\,s\,n_\text{dp}/n = m\,b\,s/(t\,p\,n_\text{cp})$" in page
    _, per_gpu = inputs_of(None, 16_777_216, 16_384)
    assert per_gpu == 1024 == 16_777_216 / 128 / (8 * 16 * 1)


def test_the_self_check_names_every_library_entry(page):
    """read28j: the page's last cell says it checks that every function and constant named after "Library:"
    exists, but its list was typed by hand and had fallen 17 names behind the page. Every ``module.name`` the
    page gives after "Library:" must be in that list; a bare name must be a field or property of
    ``serve.serving``'s result (the page names ``max_batch``, ``kv_batch`` and ``waves`` so) or of the
    top-level package."""
    import dataclasses
    import re

    import llmsizing
    from llmsizing.serve_result import Serving

    nb = json.loads(PAGE.read_text())
    check = "".join(nb["cells"][-1]["source"])
    assert "every function and constant this page names" in check
    listed = set(re.findall(r"'([\w.]+)'", check))
    named = set()
    for entry in re.findall(r"Library: (.*?)(?:\n|$)", page):
        named |= set(re.findall(r"`([\w.]+)`", entry))
    assert len(named) > 150                                      # the page's entries were all read
    fields = {f.name for f in dataclasses.fields(Serving)}
    fields |= {n for n in vars(Serving) if isinstance(vars(Serving)[n], property)}   # waves, cycle_s (queue29)
    missing = {n for n in named - listed if "." in n or not (hasattr(llmsizing, n) or n in fields)}
    assert not missing, sorted(missing)


def test_decode_step_fp8_compute_share(page):
    """The serving entry says FP8 compute runs at a share of the fitted (16-bit) MFU on its own peak, the
    training calibration's FP8 kernel efficiency over its BF16 one. By hand from data/kernel_efficiency.csv's
    Hopper rows, 0.521 / 0.683 = 0.763; a compute-bound FP8 prefill (Llama 3 8B, 8 prompts of 8,192 tokens on
    an H100) then takes 0.683 / 0.521 = 1.31 times as long as at a share of 1."""
    import csv

    from llmsizing.catalog import DATA_DIR
    from llmsizing.serve import serving

    assert "FP8 (and FP4) compute runs at {eval}`app_fp8_share` of it on its own peak" in page
    assert "`hardware.dtype_kernel_share`" in page
    with open(DATA_DIR / "kernel_efficiency.csv", newline="") as f:
        rows = {(r["generation"], r["dtype"]): float(r["kernel_efficiency"]) for r in csv.DictReader(f)}
    share = rows["hopper", "fp8"] / rows["hopper", "bf16"]
    assert share == pytest.approx(0.763, abs=5e-4)
    kw = dict(prompt=8192, output=16, batch=8, weights="fp8", compute="fp8")
    fp8 = serving("llama-3-8b", "H100 SXM", **kw)
    full = serving("llama-3-8b", "H100 SXM", compute_share=1.0, **kw)
    assert fp8.compute_share == pytest.approx(share, rel=1e-12)
    assert fp8.ttft_s / full.ttft_s == pytest.approx(1 / share, rel=2e-3)
