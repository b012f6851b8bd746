"""Published MoE training runs against the library (llmsizing.moe_runs, data/moe_published_runs.csv)."""

from pathlib import Path

import pytest

from llmsizing import moe_runs
from llmsizing.catalog import get_model


@pytest.fixture(scope="module")
def runs():
    return moe_runs.moe_published_runs().set_index("run", drop=False)


@pytest.fixture(scope="module")
def check():
    return moe_runs.moe_run_check()


def test_rows_are_sourced_dated_and_say_their_role(runs):
    for _, r in runs.iterrows():
        assert r["source"].strip() and r["note"].strip()
        assert len(r["as_of"]) == 10 and r["as_of"][4] == "-"
        assert r["role"] == "check"                                    # nothing fitted on them (issue 35)
        assert r["layout_published"] in ("yes", "partly", "no")
        assert int(r["pp"]) * int(r["dp"]) == int(r["n_gpus"])          # no tensor parallelism in any of them
        assert int(r["dp"]) % int(r["ep"]) == 0                        # experts split inside data parallelism
        assert r["recompute"] in ("none", "selective", "full")


def test_layouts_from_the_reports_text(runs):
    # JetMoE (arXiv:2404.07413) Sec. 4.1: pipeline, not expert, parallelism; Sec. 4.2: 4M-token batches of
    # 4,096-token sequences = 1,024 sequences; transformers' JetMoE page: 3-way pipeline on 96 H100s
    jet = runs.loc["JetMoE-8B pre-training"]
    assert (jet["ep"], jet["pp"], jet["n_gpus"]) == (1, 3, 96)
    assert jet["global_batch"] == 4 * 2 ** 20 // 4096 and jet["global_batch_published"] == "yes"
    # its steady state, about 100B tokens a day on 96 GPUs, is 1.25T / 100B x 96 x 24 = 28,800 GPU-hours
    assert abs(1.25e12 / 100e9 * 96 * 24 / jet["gpu_hours"] - 1) < 0.05
    # GRIN (arXiv:2409.12136) Sec. 3.2, Phi-3.5-MoE's architecture: no expert parallelism, activation
    # checkpointing, pipeline and data parallelism (pp 16 inferred: the row's note)
    phi = runs.loc["Phi-3.5-MoE pre-training"]
    assert phi["ep"] == 1 and phi["recompute"] == "full" and phi["pp"] > 1
    assert phi["layout_published"] == "partly"
    # Granite 3.0 report Sec. 4.3: the MoE models use data parallelism only (no model parallelism), ZeRO-1, on
    # "128 and 256 GPUs"; Sec. 4.2: 4M-token batches; Table 1: 4,096-token sequences
    for name, gpus in (("Granite 3.0 1B-A400M pre-training", 128),
                       ("Granite 3.0 3B-A800M pre-training", 256)):
        g = runs.loc[name]
        assert (g["pp"], g["ep"], g["zero"], g["n_gpus"], g["dp"]) == (1, 1, 1, gpus, gpus)
        assert g["global_batch"] == 4 * 2 ** 20 // 4096 and g["seq"] == 4096
        assert g["layout_published"] == "yes"
    # OLMoE (arXiv:2409.02060) App. B: ZeRO via PyTorch FSDP (FULL_SHARD in the repository's configs),
    # 256 H100s, batches of 1,024 sequences of 4,096
    olm = runs.loc["OLMoE-1B-7B pre-training"]
    assert (olm["pp"], olm["ep"], olm["zero"], olm["n_gpus"], olm["global_batch"], olm["seq"]) \
        == (1, 1, 3, 256, 1024, 4096)
    # Llama 4 Maverick: nothing published, so nothing chosen for it: Scout's assumed recipe, unchanged
    mav, scout = runs.loc["Llama 4 Maverick pre-training"], runs.loc["Llama 4 Scout pre-training"]
    for col in ("gpu", "n_gpus", "seq", "precision", "pp", "ep", "dp", "zero", "global_batch", "schedule",
                "recompute", "layout_published"):
        assert mav[col] == scout[col], col


def test_published_gpu_hours_from_the_reports_rules(runs):
    # DeepSeek-V3 Table 1: 180K H800 GPU-hours per trillion tokens x 14.8T; DeepSeek-V2 Sec. 3.2.3: 172.8K x 8.1T
    assert runs.loc["DeepSeek-V3 pre-training", "gpu_hours"] == pytest.approx(180e3 * 14.8)
    assert runs.loc["DeepSeek-V2 pre-training", "gpu_hours"] == pytest.approx(172.8e3 * 8.1)
    # JetMoE: 30,000 H100 GPU-hours (abstract); "96 H100s for 2 weeks" is 32,256, within 8%
    jet = runs.loc["JetMoE-8B pre-training"]
    assert jet["gpu_hours"] == 30000 and abs(96 * 14 * 24 / jet["gpu_hours"] - 1) < 0.08
    # Phi-3.5-MoE: 512 H100s for 23 days (its card)
    assert runs.loc["Phi-3.5-MoE pre-training", "gpu_hours"] == 512 * 23 * 24
    # Granite 3.0 report, Table 7 (its 2B and 8B dense rows are not MoE runs); 10T tokens (Table 1)
    assert runs.loc["Granite 3.0 1B-A400M pre-training", "gpu_hours"] == 71_171
    assert runs.loc["Granite 3.0 3B-A800M pre-training", "gpu_hours"] == 133_308
    assert (runs.loc[runs.index.str.startswith("Granite"), "tokens"] == 10e12).all()
    # read as pre-training: the report's compute budget for its four models, 8.35e23 FLOPs (Sec. 6), is 6 x
    # active parameters x tokens of Table 1's pre-trainings (2B: 2.5B x 12T, 8B: 8.1B x 12T, and the two MoEs)
    budget = 6 * (2.5e9 * 12e12 + 8.1e9 * 12e12 + 400e6 * 10e12 + 800e6 * 10e12)
    assert budget == pytest.approx(8.35e23, rel=1e-3)
    # OLMoE App. B: 256 H100s for about 10 days; 5.133T tokens (Sec. 2) over them is within 3% of Figure 4's
    # 23,600 tokens/s a GPU for the same MoE on 128 H100s: the whole run ran at its steady state
    olm = runs.loc["OLMoE-1B-7B pre-training"]
    assert olm["gpu_hours"] == 256 * 10 * 24 and olm["tokens"] == 5.133e12
    assert abs(olm["tokens"] / (olm["gpu_hours"] * 3600) / 23_600 - 1) < 0.03
    # Llama 4 card: 5.0M (Scout) + 2.38M (Maverick) = the cumulative 7.38M H100 GPU-hours
    assert runs.loc["Llama 4 Scout pre-training", "gpu_hours"] \
        + runs.loc["Llama 4 Maverick pre-training", "gpu_hours"] == pytest.approx(7.38e6)
    # the published batches: DeepSeek-V3 15,360 sequences over dp 128 is 120 micro-batches of one sequence
    assert runs.loc["DeepSeek-V3 pre-training", "global_batch"] / 128 == 120


def test_deepseek_v2_all_to_all_is_device_limited(runs, check):
    """arXiv:2405.04434 Sec. 2.2.2: V2's top-6 experts of a token lie on at most M = 3 devices (its config's
    n_group 8, topk_group 3), and its 8-way expert parallelism sits in one 8-GPU node: each all-to-all sends a
    4,096-token micro-batch once to each of 3 GPUs, 7/8 of it leaving: 4,096 x 3 x 5,120 x 2 bytes x 7/8."""
    from dataclasses import replace

    r = runs.loc["DeepSeek-V2 pre-training"]
    assert (r["ep"], r["seq"], r["precision"]) == (8, 4096, "bf16-mixed")
    ep = [c for c in moe_runs.run_step(r).communication.collectives if c.group == "ep"]
    assert ep and all(c.message_bytes == pytest.approx(4096 * 3 * 5120 * 2 * 7 / 8, rel=1e-12) for c in ep)
    # without the group limit every token sends its 6 copies: twice the bytes, a slower step, a lower ratio
    free = replace(get_model("deepseek-v2"), name="deepseek-v2 (no group limit, test)", expert_groups=0,
                   expert_groups_per_token=0)
    hours_free = moe_runs.predict_moe_run(r, free)["gpu_hours"]
    assert check.loc["DeepSeek-V2 pre-training", "predicted"] < hours_free


def test_deepseek_v2_drops_tokens_at_capacity_one(runs):
    """arXiv:2405.04434 Sec. 2.2.4: device-level token dropping with a capacity factor of 1.0 per device, so
    the busiest of the 8 expert-parallel GPUs does its mean routed work: a load skew of 1 where dropless
    aux-loss routing gives 1 + 0.726 x sqrt(8 / 160) = 1.162 (data/moe_load_skew.csv: mean MaxVio of 0.72,
    0.52 and 0.937). Every other row is dropless (empty)."""
    from llmsizing.layouts import step_time
    from llmsizing.moe_time import load_skew
    from llmsizing.parallel import Parallel

    r = runs.loc["DeepSeek-V2 pre-training"]
    assert float(r["capacity_factor"]) == 1.0
    assert runs.drop(index=r["run"])["capacity_factor"].isna().all()
    v2 = get_model("deepseek-v2")
    assert load_skew(v2, 8) == pytest.approx(1 + (0.72 + 0.52 + 0.937) / 3 * (8 / 160) ** 0.5, rel=1e-12)
    assert load_skew(v2, 8, capacity_factor=1.0) == 1.0
    par = Parallel(pp=16, dp=128, ep=8, zero=1, shared_expert_overlap=True)     # Sec. 3.1.3 (its own test)
    by_hand = step_time(v2, "H800", par, batch=1, seq=4096, grad_accum=72,
                        precision="bf16-mixed", schedule="zb1p", max_nodes=None, load_skew=1.0)
    assert moe_runs.run_step(r).step_s == pytest.approx(by_hand.step_s, rel=1e-12)


def test_deepseek_v2_catalogue_row_matches_the_meta_device_count():
    m = get_model("deepseek-v2")
    assert m.n_params == 235_741_434_880                 # data/hf_meta_param_counts.csv, transformers 5.23
    assert 20.5e9 < m.active_params < 22.5e9             # "21B activated" (arXiv:2405.04434, abstract)


def test_jetmoe_standin_costs_jetmoes_flops():
    """The deprecated stand-in (dense attention of JetMoE's FLOPs) still imports, with a warning."""
    with pytest.warns(DeprecationWarning, match="JETMOE_8B"):
        m = moe_runs.JETMOE_8B_STANDIN
    h, f = 2048, 5632
    # per layer and token, two attention experts: each a 2048 -> 16 x 128 query and the inverse output
    # projection, plus the shared K and V (16 heads x 128); two of eight SwiGLU experts; two RMSNorms; router
    attn = 2 * (h * 16 * 128 + 16 * 128 * h) + 2 * h * 16 * 128
    mlp = 2 * 3 * h * f + 8 * h
    per_layer = attn + mlp + 2 * h
    assert m.active_params == pytest.approx(24 * per_layer + 32000 * h + h, rel=1e-9)


def test_jetmoe_run_prices_the_exact_model():
    """The JetMoE-8B row is priced on the exact model (jetmoe38): the stand-in's active parameters plus, per
    layer, the attention router (8 x 2,048 = 16,384) and the two combine biases (2 x 2,048): 24 x 20,480 =
    491,520 more; its training FLOPs a token per MoE layer count 2 of the 8 attention experts."""
    m = moe_runs.JETMOE_8B
    row = moe_runs.moe_published_runs().set_index("run").loc["JetMoE-8B pre-training"]
    assert row["model"] == m.name == "jetmoe-8b" and moe_runs._model(row["model"]) is m
    assert (m.n_params, m.active_params) == (8_522_237_952, 2_331_445_248)
    with pytest.warns(DeprecationWarning):
        assert m.active_params - moe_runs.JETMOE_8B_STANDIN.active_params == 24 * (16_384 + 2 * 2_048)
    from llmsizing.moe import moe_layer_flops
    h, q = 2048, 16 * 128
    # forward weights of one layer a token uses: q/o of 2 experts, K/V, the attention router and bias, 2 of 8
    # SwiGLU experts, the MLP router, two norms; x 2, plus the attention core; x 3 for training (the MLP's
    # combine bias is an extra layer tensor, which moe_stage_flops adds to the last stage, as every type's)
    active = 2 * 2 * h * q + 2 * h * q + 8 * h + h + 2 * 3 * h * 5632 + 8 * h + 2 * h
    from llmsizing.flops import attention_flops_per_token
    att = attention_flops_per_token(m, seq=4096) / 24
    assert moe_layer_flops(m, seq=4096)[1] == pytest.approx(3 * (2 * active + att), rel=1e-12)


def test_phi_standin_counts_the_cards_parameters():
    m = moe_runs.PHI_35_MOE_STANDIN
    h, f = 4096, 6400
    attn = h * h * 2 + h * 1024 * 2 + (h + 2 * 1024)              # q, o; k, v (8 KV heads of 128); q/k/v biases
    layer = attn + 16 * 3 * h * f + h * 16 + 2 * 2 * h             # 16 SwiGLU experts, router, two LayerNorms
    total = 32 * layer + 2 * 32064 * h + 2 * h                       # untied embedding and head, final norm
    assert m.n_params == pytest.approx(total, rel=1e-3)
    assert abs(m.n_params / 42e9 - 1) < 0.01 and abs(m.active_params / 6.6e9 - 1) < 0.01   # the card's figures


def test_granite_and_olmoe_catalogue_rows_count_their_reports_parameters():
    # Granite 3.0 report Table 1: GQA (heads of 64, 8 KV heads), SwiGLU experts of width 512, top-8; tied
    # embeddings, vocabulary 49,155 (config.json); two RMSNorms a layer and a final one
    for name, h, layers, heads, e, total, active in (
            ("granite-3.0-1b-a400m", 1024, 24, 16, 32, 1.3e9, 400e6),
            ("granite-3.0-3b-a800m", 1536, 32, 24, 40, 3.3e9, 800e6)):
        m = get_model(name)
        attn = 2 * h * heads * 64 + 2 * h * 8 * 64
        layer = attn + e * 3 * h * 512 + e * h + 2 * h
        assert m.n_params == layers * layer + 49155 * h + h
        assert abs(m.n_params - total) <= 0.05e9                         # "1.3B", "3.3B"
        routed = layers * (attn + 8 * 3 * h * 512 + e * h + 2 * h) + h   # the "active" count, no embedding
        assert m.active_params == routed + 49155 * h
        assert abs(routed / active - 1) < 0.06                           # "400M", "800M"
    # OLMoE App. B: 16 layers of 2,048, 16 heads, 64 SwiGLU experts of 1,024, top-8, untied vocabulary of
    # 50,304; QK-norm over the whole q and k projections (transformers' OlmoeAttention)
    m, h = get_model("olmoe-1b-7b"), 2048
    layer = 4 * h * h + 2 * h + 64 * 3 * h * 1024 + 64 * h + 2 * h
    assert m.n_params == 16 * layer + 2 * 50304 * h + h
    assert abs(m.n_params - 6.9e9) <= 0.05e9                             # "6.9B"
    assert abs(m.active_params / 1.3e9 - 1) < 0.02                       # "1.3B"


def test_maverick_standin_counts_the_cards_parameters():
    m, h = moe_runs.MAVERICK_STANDIN, 5120
    attn = 2 * h * 40 * 128 + 2 * h * 8 * 128                           # q, o; k, v (8 KV heads of 128)
    moe_layer = attn + 128 * 3 * h * 8192 + 3 * h * 8192 + 128 * h + 2 * h  # routed, shared, router, norms
    dense_layer = attn + 3 * h * 16384 + 2 * h
    assert m.n_params == 24 * moe_layer + 24 * dense_layer + 2 * 202048 * h + h
    assert abs(m.n_params / 400e9 - 1) < 0.01                           # "400B (Total)"
    active = 24 * (attn + 2 * 3 * h * 8192 + 128 * h + 2 * h) + 24 * dense_layer + 2 * 202048 * h + h
    assert m.active_params == active and abs(active / 17e9 - 1) < 0.02  # "17B (Activated)"


def test_no_factor_is_fitted_any_more(runs, check):
    # a prediction is the step on the row's layout and recipe, turned into GPU-hours by hand
    for name in ("DeepSeek-V3 pre-training", "Phi-3.5-MoE pre-training"):
        r = runs.loc[name]
        st = moe_runs.run_step(r)
        steps = r["tokens"] / (r["global_batch"] * r["seq"])
        assert check.loc[name, "predicted"] == pytest.approx(steps * st.step_s * r["n_gpus"] / 3600, rel=1e-9)
    with pytest.warns(DeprecationWarning, match="fit_moe_factor"):
        f = moe_runs.fit_moe_factor()
    assert f == pytest.approx(check.loc["DeepSeek-V3 pre-training", "ratio"], rel=1e-12)
    with pytest.warns(DeprecationWarning, match="factor"):
        moe_runs.moe_run_check(factor=1.3)


def test_deepseek_v3_is_explained_within_15_percent(check):
    """Issue 35's done-when: the 2,664K H800 GPU-hours (Table 1) from what the report states (DualPipe, one MTP
    module, 20 of 132 SMs for communication, the all-to-all hidden, FP8) with nothing fitted on it."""
    v3 = check.loc["DeepSeek-V3 pre-training"]
    assert v3["published"] == 2_664_000
    assert abs(v3["ratio"] - 1) <= 0.15


def _inside_by_hand(check):
    # the range, by hand, from the stated factors of the GPU's row (test_range_is_the_layout_range_...)
    return ((check["published"] >= check["low"] * (1 - 1e-12))
            & (check["published"] <= check["high"] * (1 + 1e-12)))


def test_inside_is_the_range_by_hand(check):
    assert (_inside_by_hand(check) == check["inside"]).all()


def test_three_runs_of_other_teams_lie_inside(runs, check):
    """Issue 35's done-when, its other teams' half. Dec 2026 (the load skew re-read): Llama 4 Scout
    x1.13, Maverick x0.94 (both on an assumed layout) and OLMoE-1B-7B x1.07 (its micro-batch assumed; see its
    note) inside, of six runs from other teams; on 2026-12-04 (audit35) x1.18, x0.98 and x1.05. In sample this
    holds by construction (the stated bound is the largest residual of these runs, tests/test_moe_range.py):
    the out-of-source test below is the one that can fail."""
    inside = _inside_by_hand(check)
    other = [r for r, s in runs["source"].items() if not s.startswith("DeepSeek-AI")]
    assert len(other) >= 3 and inside[other].sum() >= 3


def _fold_inside(runs) -> dict:
    """Each run against the range stated without its own source (nested leave-one-source-out, as
    tests/test_moe_range.py works it out by hand): with 7 sources a fold's bound is the largest |log(predicted
    / published)| of the other six; a run is inside iff its own |log| is no more than that."""
    import math

    from llmsizing.intervals import source_key

    r = {run: abs(math.log(moe_runs.predict_moe_run(row)["gpu_hours"] / float(row["gpu_hours"])))
         for run, row in runs.iterrows()}
    src = {run: source_key(row["source"]) for run, row in runs.iterrows()}
    return {run: r[run] <= max(v for o, v in r.items() if src[o] != src[run]) for run in r}


def test_done_when_holds_out_of_source(runs):
    """Issue 35's done-when read out of source (audit35): DeepSeek-V2, and at least three runs of teams other
    than DeepSeek-AI, inside the range the other sources state. 2026-12-04: 8 of 9 inside; DeepSeek-V2 x1.23
    against its fold's x1.39; Phi-3.5-MoE x0.74, Llama 4 Scout x1.18 and Maverick x0.98, Granite 3.0 1B x1.34
    and 3B x1.36, OLMoE x1.05 inside; JetMoE-8B (x1.39, the largest) outside the other sources' x1.36."""
    inside = _fold_inside(runs)
    assert inside["DeepSeek-V2 pre-training"]
    other = [run for run, s in runs["source"].items() if not s.startswith("DeepSeek-AI")]
    teams = {runs.loc[run, "source"].split(",")[0] for run in other if inside[run]}
    assert sum(inside[run] for run in other) >= 3 and len(teams) >= 3


def test_deepseek_v2_lies_inside(check):
    """Issue 35's done-when, DeepSeek-V2's half. Dec 2026: x1.30 with the shared-expert overlap of its report,
    x1.21 without, x1.09 before its device-limited routing and token dropping were priced. The x1.30 lay above
    the range's top of x1.225 (a strict xfail from ep35) until issue 34 added FP8 sources to the layout range
    (fp834, Dec 2026): re-measured with them, the top was x1.43 (1 / 0.6981). strata34 (Dec 2026) took the
    five MI300X and B200 FP8 runs, priced on stand-in efficiencies, out of the bounds: the top is x1.40
    (1 / 0.7157), and V2 is still inside. ew35 (Dec 2026) priced the memory-bound kernels of every layer
    (llmsizing.pointwise) and refit: V2 x1.24, the top x1.37 (1 / 0.7273). nodes34 (Dec 2026) priced the
    published runs on the nodes their sources name and refit: V2 x1.25, the top x1.39 (1 / 0.7187). data27b
    (session 27) added torchao's held-out H100 BF16 baseline to the layout range's pytorch/ao source: the top is
    x1.38 (1 / 0.7222), and V2 at x1.24 is still inside. Nothing was widened by hand, and the overlap stays
    priced."""
    assert _inside_by_hand(check)["DeepSeek-V2 pre-training"]


def test_deepseek_v2_overlaps_its_shared_experts_as_its_report_states(runs, check):
    """arXiv:2405.04434 Sec. 3.1.3: "we overlap the computation of shared experts with the expert parallel
    all-to-all communication": the row's layout says so (Parallel.shared_expert_overlap), no other row does
    (none of their sources states it), and it makes V2's step faster, not slower."""
    r = runs.loc["DeepSeek-V2 pre-training"]
    assert r["shared_expert_overlap"] == "yes"
    assert (runs.drop(index=r["run"])["shared_expert_overlap"] == "no").all()
    st = moe_runs.run_step(r)
    assert st.communication.parallel.shared_expert_overlap
    off = r.copy()
    off["shared_expert_overlap"] = "no"
    assert moe_runs.run_step(off).step_s > st.step_s
    assert check.loc["DeepSeek-V2 pre-training", "ratio"] > 1.225     # the range's top (recorded above)


def test_the_published_runs_are_covered_as_the_stated_range_says(runs, check):
    """An 80% range misses about one run in five, so not every run need lie inside it: the runs whose layout
    is published reach the 75% bar, and the count inside over all runs is no less than the range's stated
    out-of-source coverage (data/intervals.csv, moe-layout "all") makes plausible (one-sided binomial, 5%).
    Until issue 35's MoE range (moerange33, Dec 2026) this was a strict xfail: the dense training-layout range
    held 5 of 9 (JetMoE-8B x1.52 and the Granite 3.0 MoEs x1.39 / x1.43 above it, Phi-3.5-MoE x0.75 below;
    the physics behind the misses is recorded in tests/test_moe_kernel_evidence.py). The MoE range is set on
    these very runs (its stated bound is the largest of their residuals), so this in-sample count is no test
    of it; its out-of-source coverage is tests/test_moe_range.py's."""
    import csv
    import math

    inside = _inside_by_hand(check)
    with open(Path(moe_runs.__file__).resolve().parents[2] / "data" / "intervals.csv", newline="") as fh:
        stated = next(float(r["measured_coverage"]) for r in csv.DictReader(fh)
                      if r["area"] == "moe-layout" and r["group"] == "all")
    published = runs.index[runs["layout_published"] == "yes"]
    n, k = len(inside), int(inside.sum())
    assert sum(math.comb(n, i) * stated ** i * (1 - stated) ** (n - i) for i in range(k + 1)) >= 0.05
    assert len(published) >= 2 and inside[published].mean() >= 0.75


def test_range_is_the_moe_range_of_the_intervals_file(check):
    import pandas as pd

    from llmsizing.mfu import MOE_RANGE_AREA

    t = pd.read_csv(Path(moe_runs.__file__).resolve().parents[2] / "data" / "intervals.csv")
    row = t[(t["area"] == MOE_RANGE_AREA) & (t["group"] == "all")].iloc[0]   # one pooled row (issue 35)
    for name in check.index:
        c = check.loc[name]
        assert c["low"] == pytest.approx(c["predicted"] / row["high"], rel=1e-9)
        assert c["high"] == pytest.approx(c["predicted"] / row["low"], rel=1e-9)


def test_bad_factor():
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="factor"):
        moe_runs.moe_run_check(factor=0.0)
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="factor"):
        moe_runs.moe_run_check(factor="1.3")


def test_deepseek_v3_terms_end_at_the_runs_prediction(check):
    from llmsizing.deepseek import deepseek_v3_time_terms

    t = deepseek_v3_time_terms()
    assert t["gpu_hours"].iloc[-1] == pytest.approx(check.loc["DeepSeek-V3 pre-training", "predicted"], rel=1e-9)
    # the SMs' row is the one before it x 132 / 112 on the compute and the bubble (DeepSeek-V3 Sec. 3.2.2)
    assert t["compute_s"].iloc[-1] == pytest.approx(t["compute_s"].iloc[-2] * 132 / 112, rel=1e-12)
    assert t["bubble_s"].iloc[-1] < t["bubble_s"].iloc[0]          # DualPipe's bubble, smaller than 1F1B's


def test_deepseek_v3_batch_ramp_bound():
    from llmsizing.deepseek import deepseek_v3_batch_ramp, deepseek_v3_time_terms
    from llmsizing.pipeline_schedule import pipeline_schedule

    r = deepseek_v3_batch_ramp()
    # the report's Sec. 4.2: from 3,072 sequences over the first 469B of 14.8T tokens
    assert (r["start_sequences"], r["ramp_tokens"]) == (3072, 469e9)
    assert r["ramp_share"] == pytest.approx(469 / 14800, rel=1e-12)
    # DualPipe needs 2 pp micro-batches: 2 x 16 x 128 data-parallel ranks = 4,096 one-sequence micro-batches
    assert r["min_sequences"] == 2 * 16 * 128 == 4096
    with pytest.raises(ValueError, match="2 pp"):               # 3,072 / 128 = 24 < 32: the ramp's start
        pipeline_schedule("dualpipe", pp=16, micro_batches=24)
    pipeline_schedule("dualpipe", pp=16, micro_batches=32)
    assert r["run_extra_bound"] == pytest.approx(r["ramp_share"] * r["extra_per_token"], rel=1e-12)
    # DualPipe's bubble b is the same at any micro-batch count (the report's Table 2), so at 32 micro-batches
    # instead of 120 a token pays at least b (1/32 - 1/120) more over the full batch's step per micro-batch;
    # the step's other fixed costs (exposed data-parallel traffic) add a little more
    last = deepseek_v3_time_terms().iloc[-1]
    bubble_only = last["bubble_s"] * (1 / 32 - 1 / 120) / (last["step_s"] / 120)
    assert bubble_only <= r["extra_per_token"] < 1.1 * bubble_only
    assert 0 < r["run_extra_bound"] < 0.005                     # chapter 18: under half a percent of the run


def test_run_variant_prices_another_reading_and_leaves_the_row(runs):
    """run_variant (chapter 18's open readings of a run's layout): GPU-hours are tokens / tokens per step x
    step x GPUs, so twice the tokens on the same step are twice the hours and half the published-over-
    predicted ratio; the ratio's numerator is the row's own figure (Phi-3.5-MoE's card: 512 GPUs for 23
    days); the row passed in is left as it was; a change that names no column is refused."""
    phi = runs.loc["Phi-3.5-MoE pre-training"]
    before = phi.copy()
    one, two = moe_runs.run_variant(phi), moe_runs.run_variant(phi, tokens=2 * float(phi["tokens"]))
    assert two["step_s"] == one["step_s"]
    assert two["gpu_hours"] == pytest.approx(2 * one["gpu_hours"], rel=1e-12)
    assert two["ratio"] == pytest.approx(one["ratio"] / 2, rel=1e-12)
    assert one["ratio"] * one["gpu_hours"] == pytest.approx(512 * 23 * 24, rel=1e-12)
    eight = moe_runs.run_variant(phi, pp=8, dp=int(phi["n_gpus"]) // 8, zero=1)   # the same 512 GPUs
    assert eight["step_s"] != one["step_s"] and int(phi["pp"]) != 8
    assert phi.equals(before)
    with pytest.raises(ValueError, match="'stages'"):
        moe_runs.run_variant(phi, stages=8)


def test_micro_batch_seqs_prices_olmoe_on_its_published_micro_batch(runs):
    """OLMoE ran its 1,024-sequence batch on 256 GPUs as one micro-batch of 1,024 / 256 = 4 sequences a GPU
    (its repository's configs; chapter 18), where the rows' convention is micro-batches of one sequence.
    run_step(micro_batch_seqs=4) must be step_time of batch 4 and no accumulation on the row's own layout and
    recipe; the step's tokens stay 1,024 x 4,096 = 4,194,304 whatever the split; GPU-hours are 5.133e12 /
    4,194,304 steps x step x 256 GPUs / 3,600, and published over them is 256 GPUs x 240 h = 61,440 over them;
    the default is the one-sequence convention; a split that leaves sequences over is refused."""
    from llmsizing.layouts import step_time
    from llmsizing.parallel import Parallel

    row = runs.loc["OLMoE-1B-7B pre-training"]
    assert (int(row["global_batch"]), int(row["dp"]), int(row["n_gpus"])) == (1024, 256, 256)
    one, four = moe_runs.run_step(row), moe_runs.run_step(row, micro_batch_seqs=4)
    assert one.step_s == moe_runs.run_step(row, micro_batch_seqs=1).step_s
    assert one.tokens == four.tokens == 1024 * 4096
    direct = step_time(moe_runs._model(row["model"]), row["gpu"], Parallel(dp=256, zero=int(row["zero"])),
                       batch=4, seq=4096, grad_accum=1, precision=row["precision"],
                       recompute=row["recompute"], ep_overlap=float(row["ep_overlap"]),
                       schedule=row["schedule"])
    assert four.step_s == pytest.approx(direct.step_s, rel=1e-12) and four.step_s != one.step_s
    v = moe_runs.run_variant(row, micro_batch_seqs=4)
    assert v["gpu_hours"] == pytest.approx(5.133e12 / 4194304 * four.step_s * 256 / 3600, rel=1e-12)
    assert v["ratio"] * v["gpu_hours"] == pytest.approx(256 * 240, rel=1e-12)
    assert moe_runs.predict_moe_run(row, micro_batch_seqs=4)["step_s"] == four.step_s
    for bad, err in ((3, ValueError), (8, ValueError), (0, ValueError), (2.0, TypeError)):
        with pytest.raises(err, match="micro_batch_seqs"):
            moe_runs.run_step(row, micro_batch_seqs=bad)
