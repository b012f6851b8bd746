"""The time terms only a mixture of experts has (issue 35; llmsizing.moe_time), each checked against a published
figure or arithmetic written out here, not against the code's own output."""

import math

import re

import pytest

from llmsizing import moe_time
from llmsizing.catalog import get_model
from llmsizing.comm import stage_compute_times_s, step_compute_time_s
from llmsizing.flops import training_flops_per_token
from llmsizing.kernels import layer_gemms
from llmsizing.layouts import step_time
from llmsizing.moe import ep_all_to_all, mtp_flops_per_token
from llmsizing.network import get_node
from llmsizing.parallel import Parallel, chunk_layers, layers_per_stage

V3 = Parallel(pp=16, dp=128, ep=64, zero=1)


def test_mtp_is_3_8_percent_of_deepseek_v3s_flops_by_hand():
    """DeepSeek-V3's config.json (hidden 7,168, 128 heads, MLA ranks 1,536 / 512, rope 64, nope 128, v 128,
    8 + 1 shared experts of 2,048, 256 routed, dense width 18,432, vocabulary 129,280, 3 dense layers of 61)
    and one MTP module (Sec. 2.2): a MoE block, its 2h x h projection and a second pass through the head."""
    h, a, v = 7168, 128, 129280
    attn = (h * 1536 + 1536 + 1536 * a * 192 + h * (512 + 64) + 512 + 512 * a * (128 + 128)
            + a * 128 * h)
    norms = 2 * h
    core = 2 * 4096 * a * (192 + 128)                 # QK^T and AV over 4,096 keys, whole matrix
    experts = 9 * 3 * h * 2048
    router = h * 256
    moe = 2 * (attn + norms + experts + router) + core
    dense = 2 * (attn + norms + 3 * h * 18432) + core
    head = 2 * h * v
    main = 3 * (3 * dense + 58 * moe + head)
    mtp = 3 * (moe + 2 * 2 * h * h + head)
    lib = mtp_flops_per_token(get_model("deepseek-v3"), seq=4096)
    assert lib == pytest.approx(mtp, rel=0.01)
    assert lib / training_flops_per_token("deepseek-v3", seq=4096) == pytest.approx(mtp / main, rel=0.01)
    assert mtp / main == pytest.approx(0.038, abs=0.001)          # what issue 35 reads off the report


def test_sms_kept_for_communication_slow_the_compute_by_132_over_112():
    kw = dict(batch=1, seq=4096, gpu="H800", grad_accum=8, dtype="fp8")
    base = step_compute_time_s("deepseek-v3", V3, **kw)
    kept = step_compute_time_s("deepseek-v3", V3, comm_sms=20, **kw)       # DeepSeek-V3 Sec. 3.2.2
    assert kept / base == pytest.approx(132 / 112, rel=1e-12)
    with pytest.raises(ValueError, match="comm_sms"):
        moe_time.comm_sm_share("H800", 132)
    with pytest.raises(ValueError, match="SM count"):
        moe_time.comm_sm_share("L4", 10)


def test_sm_counts_are_data_with_a_source_for_every_catalogued_gpu_they_name():
    """The SM counts come from data/gpu_sms.csv (a source and an ISO as-of date per row), never a table in the
    code, and name only GPUs the catalogue knows (its variants included: Meta's H100 runs at 20 kept SMs)."""
    import csv

    from llmsizing.catalog import DATA_DIR, list_gpu_variants, list_gpus

    with open(DATA_DIR / "gpu_sms.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    known = set(list_gpus()) | set(list_gpu_variants())
    for r in rows:
        assert r["gpu"] in known and r["source"].strip() and re.fullmatch(r"\d{4}-\d{2}-\d{2}", r["as_of"]), r
    assert moe_time.GPU_SMS == {r["gpu"]: int(r["sms"]) for r in rows}
    assert moe_time.GPU_SMS["H100 SXM"] == 132 and moe_time.GPU_SMS["A100 80GB"] == 108   # the whitepapers
    assert moe_time.comm_sm_share("H100 HBM2e (Meta)", 20) == pytest.approx(20 / 132)


def test_pipeline_bubbles_from_the_dualpipe_table():
    # deepseek-ai/DualPipe README with F = 1, B = 2, W = 1, F&B = F + B; over m (F + B) of compute
    pp, m = 16, 120
    assert moe_time.schedule_bubble("1f1b", pp, m) == pytest.approx((pp - 1) * 3 / (3 * m))
    assert moe_time.schedule_bubble("zb1p", pp, m) == pytest.approx((pp - 1) * (1 + 2 - 2) / (3 * m))
    assert moe_time.schedule_bubble("dualpipe", pp, m) == pytest.approx((pp / 2 - 1) * (3 + 2 - 3) / (3 * m))
    assert moe_time.schedule_bubble("1f1b", 8, 32, 4) == pytest.approx(7 / 128)
    with pytest.raises(ValueError, match="even pp"):
        moe_time.schedule_bubble("dualpipe", 5, 20)
    with pytest.raises(ValueError, match="schedule"):
        moe_time.schedule_bubble("gpipe", 4, 8)


@pytest.mark.parametrize("pp, m, ok", [(16, 32, True), (16, 30, False), (16, 33, False), (4, 8, True),
                                       (4, 6, False), (2, 4, True)])
def test_dualpipe_needs_twice_pp_micro_batches_and_an_even_count(pp, m, ok):
    """deepseek-ai/DualPipe, dualpipe.py's step: ``assert num_ranks % 2 == 0`` and ``assert num_chunks > 0 and
    num_chunks % 2 == 0 and num_chunks >= num_ranks * 2``: (16, 30) has too few chunks, (16, 33) an odd count
    (lows27b: step_time(schedule="dualpipe") priced both)."""
    if ok:
        assert moe_time.schedule_bubble("dualpipe", pp, m) == pytest.approx((pp / 2 - 1) * 2 / (3 * m))
    else:
        with pytest.raises(ValueError, match="micro-batches >= 2 pp"):
            moe_time.schedule_bubble("dualpipe", pp, m)


def test_dualpipe_ranks_do_the_mean_of_their_two_stages():
    kw = dict(batch=1, seq=4096, gpu="H800", grad_accum=32, dtype="fp8", mtp_depth=1)
    one = step_compute_time_s("deepseek-v3", V3, schedule="1f1b", **kw)
    two = step_compute_time_s("deepseek-v3", V3, schedule="dualpipe", **kw)
    # the library's even split of 61 layers over 16: 13 stages of 4 then 3 of 3; the last holds the head and the
    # MTP module, so 1F1B waits for it while DualPipe's rank 0 shares it with the first stage
    assert layers_per_stage(61, V3) == (4,) * 13 + (3,) * 3
    assert two < one


def test_routing_bytes_by_hand():
    # DeepSeek-V3, BF16 tokens: 3 k h b + 2 h b + 8 E + 8 k per forward, a step is three forwards
    fwd = 3 * 8 * 7168 * 2 + 2 * 7168 * 2 + 8 * 256 + 8 * 8
    assert moe_time.routing_bytes_per_token(get_model("deepseek-v3")) == 3 * fwd
    assert moe_time.routing_bytes_per_token(get_model("deepseek-v3"), recompute="full") == 4 * fwd
    # a Qwen3-30B-A3B layer's routing kernels over 8,192 tokens on an H100's 3.35 TB/s
    q = get_model("qwen3-30b-a3b")
    b = 3 * (3 * 8 * 2048 * 2 + 2 * 2048 * 2 + 8 * 128 + 8 * 8)
    t = moe_time.moe_extra_seconds(1, 8192, route_bytes=b, hbm_bytes_per_s=3.35e12, skew=1.0, expert_flops=1.0,
                                   gemm_rate=1.0)
    assert t == pytest.approx(8192 * b / 3.35e12)
    assert moe_time.routing_bytes_per_token(q) == b


def test_expert_gemm_rows():
    # Qwen3-30B-A3B: 4,096 tokens a GPU, top-8 of 128 experts, ep 8: 4,096 x 8 x 8 / 128 = 2,048 rows
    assert moe_time.expert_rows(4096, 8, 128, 8) == 2048
    gemms = layer_gemms("qwen3-30b-a3b", tokens=4096, ep=8)
    assert gemms[2] == (2048, 2 * 768, 2048) and gemms[3] == (2048, 2048, 768)


#: Wang et al. 2024 (arXiv:2408.15664) as read in its OpenReview text (session 21): Table 2's MaxVio_global,
#: sigmoid gate, 1B and 3B, and App. C Table 6's, softmax gate, 1B.
AUX_V = (0.72 + 0.52 + 0.937) / 3
FREE_V = (0.04 + 0.04 + 0.027) / 3


def test_the_skew_rows_are_the_papers_tables():
    # each row's figure as Table 2 / Table 6 print it, and the note names the stored copy it was read in
    t = moe_time.load_skew_table()
    got = {(r.routing, r.model_size, r.gate): r.max_vio for r in t.itertuples()}
    assert got == {("aux-loss", "1B", "sigmoid"): 0.72, ("aux-loss", "3B", "sigmoid"): 0.52,
                   ("aux-loss-free", "1B", "sigmoid"): 0.04, ("aux-loss-free", "3B", "sigmoid"): 0.04,
                   ("aux-loss", "1B", "softmax"): 0.937, ("aux-loss-free", "1B", "softmax"): 0.027}
    assert (t["experts"] == 64).all() and (t["top_k"] == 6).all() and (t["metric"] == "MaxVio_global").all()
    assert t["note"].str.contains("djwar42/arr-coc-0-1").all()
    assert not t["note"].str.contains("as recalled").any()
    assert t["source"].str.len().gt(0).all() and t["as_of"].str.len().eq(10).all()


def test_load_skew_from_the_published_violations():
    # the mean of each routing's rows (AUX_V, FREE_V above), shrunk by sqrt(ep / E)
    assert moe_time.routing_of(get_model("deepseek-v3")) == "aux-loss-free"
    assert moe_time.load_skew(get_model("deepseek-v3"), 64) == pytest.approx(1 + FREE_V * math.sqrt(64 / 256))
    assert moe_time.load_skew(get_model("qwen3-30b-a3b"), 8) == pytest.approx(1 + AUX_V * math.sqrt(8 / 128))
    assert moe_time.load_skew(get_model("qwen3-30b-a3b"), 1) == 1.0
    assert moe_time.load_skew(get_model("qwen3-30b-a3b"), 128, routing="aux-loss-free") \
        == pytest.approx(1 + FREE_V)
    with pytest.raises(ValueError, match="routing"):
        moe_time.load_skew(get_model("qwen3-30b-a3b"), 8, routing="capacity")


def test_the_backward_combine_is_fp8_in_deepseeks_recipe():
    # Sec. 3.3.3: the activation gradient before the down-projection is quantised too; the combines stay BF16
    m = get_model("deepseek-v3")
    rows = ep_all_to_all(m, V3, batch=1, seq=4096, gpu=__import__("llmsizing").catalog.get_gpu("H800"),
                         node=get_node(None, gpu="H800"), grad_accum=1, precision="fp8-deepseek", recompute="none")
    by = {r.collective: r.message_bytes for r in rows}
    fp8 = 4096 * 8 * 7168 * (1 + 4 / 128) * 63 / 64
    assert by["EP all-to-all dispatch (forward)"] == pytest.approx(fp8)
    assert by["EP all-to-all combine (backward)"] == pytest.approx(fp8)
    assert by["EP all-to-all combine (forward)"] == pytest.approx(4096 * 8 * 7168 * 2 * 63 / 64)
    assert by["EP all-to-all dispatch (backward)"] == pytest.approx(4096 * 8 * 7168 * 2 * 63 / 64)


def test_uneven_virtual_chunks_as_megatron_layouts_take_them():
    # Qwen3-235B-A22B, 94 layers, PP 8, VP 4: 12 x 6 + 11 x 2 layers, chunks of 3 or 3, 3, 3, 2
    par = Parallel(pp=8, dp=4, ep=4, virtual_stages=4)
    assert layers_per_stage(94, par) == (12,) * 6 + (11,) * 2
    assert chunk_layers(11, 4) == (3, 3, 3, 2)
    st = step_time("qwen3-235b-a22b", "H100 SXM", par, batch=1, seq=4096, grad_accum=32)
    # the bubble: each other stage's compute once, a chunk of it (v = 4) a micro-batch (m = 32): (sum - max)
    # / (4 x 32) (session 39), below the slowest stage's 7 / (4 x 32) of the compute
    stages = stage_compute_times_s("qwen3-235b-a22b", par, batch=1, seq=4096, gpu="H100 SXM", grad_accum=32)
    assert st.compute_s == max(stages)
    assert st.bubble_s == pytest.approx((sum(stages) - max(stages)) / (4 * 32))
    assert st.bubble_s < st.compute_s * 7 / (4 * 32)


def test_bad_inputs_name_the_parameter():
    with pytest.raises(ValueError, match="load_skew"):
        step_compute_time_s("qwen3-30b-a3b", Parallel(dp=8, ep=8), batch=1, seq=4096, gpu="H100 SXM",
                            load_skew=0.5)
    with pytest.raises(ValueError, match="mtp_depth"):
        step_time("deepseek-v3", "H800", V3, batch=1, seq=4096, grad_accum=32, mtp_depth=-1)
    with pytest.raises(ValueError, match="schedule"):
        step_time("deepseek-v3", "H800", V3, batch=1, seq=4096, grad_accum=32, schedule="1F1B ")


def test_one_moe_path_training_time_step_time_and_plan():
    """Issue 35: the same MoE layout gives the same step through training_time (on the layout's own step),
    step_time and a plan row (tests/test_job.py re-checks whole searches of Mixtral and DeepSeek-V3 too)."""
    import llmsizing as L
    from llmsizing.job import Job

    par = Parallel(dp=16, ep=8, zero=1)
    st = step_time("qwen3-30b-a3b", "H100 SXM", par, batch=1, seq=4096, grad_accum=16)
    t = L.training_time("qwen3-30b-a3b", tokens=1e12, gpu="H100 SXM", seq=4096, parallel=par, global_batch=256)
    assert t.days == pytest.approx(1e12 / st.tokens * st.step_s / 86400, rel=0.01)
    df = L.plan("qwen3-30b-a3b", tokens=1e12, gpus=("H100 SXM",), seq=4096, global_batch=256, max_gpus=64,
                ep_degrees=(8,), micro_batches=(1,), recomputes=("full",), zero_stages=(1,))
    for _, row in df.head(3).iterrows():
        job = Job.from_plan_row(row, "qwen3-30b-a3b", seq=4096)
        assert step_time(job).step_s == pytest.approx(row["step_time_s"], rel=0.01)
        assert L.training_time(job, tokens=1e12).days == pytest.approx(row["days"], rel=0.01)


def test_capacity_factor_caps_the_skew_by_hand():
    """Token dropping at Switch Transformer's capacity factor C (arXiv:2101.03961 Sec. 2.2): no expert takes
    more than C x its mean share, so no rank does more than C x its mean. Mixtral (aux-loss routing, 8 experts)
    at ep = 8: 1 + 0.726 x sqrt(8 / 8) = 1.726 dropless; C = 1.25 caps it at 1.25; C = 2 leaves 1.726; C = 1 is
    a balanced step; DeepSeek-V3 (loss-free) at ep = 64: 1 + 0.036 x sqrt(64 / 256) = 1.018, under C = 1.25."""
    mix, ds3 = get_model("mixtral-8x7b"), get_model("deepseek-v3")
    assert moe_time.load_skew(mix, 8) == pytest.approx(1 + AUX_V)
    assert moe_time.load_skew(mix, 8, capacity_factor=1.25) == 1.25
    assert moe_time.load_skew(mix, 8, capacity_factor=2.0) == pytest.approx(1 + AUX_V)
    assert moe_time.load_skew(mix, 8, capacity_factor=1.0) == 1.0
    assert moe_time.load_skew(ds3, 64, capacity_factor=1.25) == pytest.approx(1 + FREE_V / 2)
    with pytest.raises(ValueError, match="capacity_factor"):
        moe_time.load_skew(mix, 8, capacity_factor=0)
    # the step: the extra routed work is (skew - 1) x the routed experts' FLOPs, so capping it shortens the step
    par = Parallel(tp=1, dp=8, ep=8, zero=1)
    free = step_time(mix, "H100 SXM", par, batch=1, seq=4096, grad_accum=8)
    capped = step_time(mix, "H100 SXM", par, batch=1, seq=4096, grad_accum=8,
                         load_skew=moe_time.load_skew(mix, 8, capacity_factor=1.25))
    assert capped.step_s < free.step_s


def test_attention_experts_routing_bytes_by_hand():
    """JetMoE-8B (moe_runs.JETMOE_8B; jetmoe38): its MLP experts' routing, h = 2,048, E = 8, k = 2, bf16:
    3 x 2 x 2048 x 2 + 2 x 2048 x 2 + 64 + 16 = 24,576 + 8,192 + 80 = 32,848 bytes forward; its attention
    experts' the same 32,848 plus the query experts' outputs scattered back and the attention output gathered
    (q = 32 heads x 128 = 4,096 numbers, 2 x 4,096 x 2 bytes each way: 32,768): 65,616; every layer holds
    both, so 98,464 bytes forward a MoE layer, x 3 for a step."""
    from llmsizing.moe_runs import JETMOE_8B

    assert moe_time.routing_bytes_per_token(JETMOE_8B) == 3 * (32_848 + 65_616)
    with pytest.warns(DeprecationWarning):
        from llmsizing.moe_runs import JETMOE_8B_STANDIN
    assert moe_time.routing_bytes_per_token(JETMOE_8B_STANDIN) == 3 * 32_848


def test_attention_experts_saved_activations_by_hand():
    """What a JetMoE-8B layer's attention saves beyond dense attention of the same heads (act_terms; bf16,
    one 4,096-token sequence, tp 1): per token the 2 routed copies of the input (2 x 2,048 x 2 = 8,192
    bytes), the gathered attention output (4,096 x 2 = 8,192), the 2 output experts' outputs before the
    weighted sum (8,192) and the router (9 x 8 + 4 x 2 = 80): 24,656 bytes a token."""
    from llmsizing.act_terms import dense_layer_terms
    from llmsizing.moe_runs import JETMOE_8B

    with pytest.warns(DeprecationWarning):
        from llmsizing.moe_runs import JETMOE_8B_STANDIN
    moa = dense_layer_terms(JETMOE_8B, batch=1, seq=4096)
    dense = dense_layer_terms(JETMOE_8B_STANDIN, batch=1, seq=4096)
    assert moa["attention_projections"] - dense["attention_projections"] == 4096 * 24_656
    assert moa["attention_core"] == dense["attention_core"]
