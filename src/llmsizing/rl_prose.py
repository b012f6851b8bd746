"""Chapter 19's RL post-training runs in sentences: the default run's step and phases, and the published
steps checked against the parts' ranges (issue 38).

:func:`default_run_prose` prices the chapter's default run (Llama 3 8B GRPO on 16 H100s, NeMo RL v0.4's row)
with :func:`~llmsizing.rl.rl_run`, colocated with the trainer's states offloaded, kept, and on NeMo RL's
published layout, and reads the response-length assumption against a published step
(:func:`~llmsizing.rl_trainer.response_length_check`); :func:`published_check_prose` sets every checked row of
``data/rl_published.csv`` beside its predicted step (:func:`~llmsizing.rl.published_rl`,
:func:`~llmsizing.rl.rl_checked`, :func:`~llmsizing.rl.rl_loso`); :func:`r1_zero_prose` DeepSeek-R1-Zero's
round of generation against the time its published hours imply. Each returns a
:class:`~llmsizing.prose.ChapterText` (the texts the chapter quotes, keyed by name and glued as
``ch19_<name>``, and what its cell prints) with the results later cells use (``data``), and checks each
statement the chapter makes about them:
:class:`~llmsizing.prose.ProseOutOfDate` names one that no longer holds. Nothing here computes a new quantity:
it formats and compares what those functions return.
"""

from __future__ import annotations

from types import MappingProxyType

from .catalog import DATA_DIR, resolve_model
from .flops import forward_flops_per_token, training_flops_per_token
from .hardware import decode_compute_bound_batch
from .intervals import coverage_note, nested_min_units
from .moe_runs import moe_published_runs
from .prose import ChapterText, number_word, prose_check
from .rl import (ENGINE_MEMORY_UTILIZATION, MAX_NUM_SEQS, PUBLISHED_CSV, RL_COVERAGES,
                 VERL_ROLLOUT_GPU_MEMORY_UTILIZATION, engine_room, host_link_gbps, published_rl, rl_checked,
                 rl_interval, rl_loso, rl_run, row_host_trip, row_run)
from .rl_trainer import response_length_check
from .units import GiB

__all__ = ["DEFAULT_RUN", "L8_ROW", "R1_ZERO", "R1_HOURS", "R1_STEPS", "R1_MINI", "R1_CAPS", "R1_CAP_STEP",
           "R1_MEAN", "MILES_TRAIN_TOKENS_PER_S", "MILES_ACTIVE_PARAMS", "default_run_prose",
           "miles_throughput", "published_check_prose", "r1_recipe", "r1_zero_prose"]

#: The chapter's default run: NeMo RL v0.4's Llama 3.1 8B on-policy row (16 H100s, 128 prompts x 16
#: samples, its mean and longest response; the prompt assumed), 1,000 steps.
DEFAULT_RUN = MappingProxyType(dict(gpu="H100 SXM", n_gpus=16, prompts_per_step=128, samples_per_prompt=16,
                                    prompt=128, response=(932, 3968), steps=1000))
#: That row of ``data/rl_published.csv``.
L8_ROW = "Llama 3.1 8B on-policy, 16 H100"
_MODEL = "llama-3-8b"
#: DeepSeek-R1-Zero's RL run (Nature, Methods; the SI's 64 eight-GPU H800 nodes): 512 prompts x 16 samples a
#: round of generation, the prompt assumed, generation at tensor parallelism 32.
R1_ZERO = MappingProxyType(dict(gpu="H800", n_gpus=512, prompts_per_step=512, samples_per_prompt=16,
                                prompt=512, gen_tp=32))
#: Its 198 hours, 10,400 policy steps, 16 of them per round (Nature, Methods: the paper's "rollout").
R1_HOURS, R1_STEPS, R1_MINI = 198, 10_400, 16
#: Its response caps, 32,768 tokens until policy step 8,200 and 65,536 after (Nature, Methods), and the mean
#: response the chapter's reading guesses (the paper gives none).
R1_CAPS, R1_CAP_STEP, R1_MEAN = (32_768, 65_536), 8_200, 4_000
#: The Miles run's training throughput on its 8 MI300X (LMSYS blog, 17 March 2026: "~15-16k tokens/s"; the
#: middle of that) and its model's active parameters (Qwen3-30B-A3B's model card: 3.3B activated).
MILES_TRAIN_TOKENS_PER_S, MILES_ACTIVE_PARAMS = 15_500, 3.3e9


def _says(holds, what: str) -> None:
    prose_check(holds, what, "chapter 19")


def default_run_prose() -> ChapterText:
    """The default run (:data:`DEFAULT_RUN`): its step, phases and moves, the engine's room, the trainer's
    states kept instead of offloaded, the run on NeMo RL's published layout, and the (mean, longest)
    response-length assumption against a published step.

    Its ``data`` holds ``base`` (the default run), ``keep`` (states kept) and
    ``layout`` (on the published layout). Raises :class:`~llmsizing.prose.ProseOutOfDate` where the chapter's
    reading fails: the default trainer priced without a layout, verl's rollout share still leaving more room
    than the engine runs, keeping the states saving only the two host trips, the published step above the FSDP
    range, what moves the step on the layout, and the longest response waited for."""
    import pandas as pd

    run = dict(DEFAULT_RUN)
    out = {}
    base = rl_run(_MODEL, **run)
    report = base.to_frame().round(2).to_string()
    out["rollouts"] = f"{base.rollouts:,}"
    out["pool"] = f"{run['n_gpus']} {run['gpu'].split()[0]}s"   # "16 H100s", the pool NeMo RL's row ran on
    out["step"] = f"{base.step_s:,.0f}"
    out["step_low"] = f"{base.step_s_low:,.0f}"
    out["step_high"] = f"{base.step_s_high:,.0f}"
    _says(base.train_layout is None, "the default trainer is FSDP, priced end to end (no layout)")
    out["train_area"] = base.train_range_area   # the range its trainer's phases carry
    out["gen"] = f"{base.phases['generation']:,.0f}"
    out["gen_share"] = f"{base.generation_share:.0%}"
    # "Why generation dominates": at a mean response's mean context (the prompt and half the response) the
    # KV cache each sequence reads keeps a decode step memory-bound at any batch (chapter 15's roofline)
    dec_ctx = int(base.prompt + base.response_mean // 2)
    _says(decode_compute_bound_batch(_MODEL, run["gpu"], context=dec_ctx) is None,
          "at the default run's mean context no batch makes a decode step compute-bound")
    out["dec_ctx"] = f"{dec_ctx:,}"
    out["update"] = f"{base.phases['update']:,.0f}"
    out["logp"] = f"{base.phases['log_probs']:,.1f}"
    out["sync"] = f"{base.phases['weight_sync']:,.1f}"
    for k, v in base.moves.items():
        out[f"move_{k}"] = f"{v:,.2f}"
    out["n_moves"] = number_word(len(base.moves))   # the moves listed
    out["batch"] = f"{base.engine_batch}"
    out["room"] = f"{base.engine_max_batch}"
    out["max_seqs"] = f"{MAX_NUM_SEQS:,}"   # verl's rollout.yaml max_num_seqs, rl_run's default
    # the engine's share of the GPU's memory: vLLM's default; verl's rollout default would leave less room
    _says(engine_room(_MODEL, run["gpu"], tp=base.gen_tp, prompt=base.prompt, mean=base.response_mean)
          == base.engine_max_batch, "rl_run's room is the engine's at vLLM's default share")
    verl_room = engine_room(_MODEL, run["gpu"], tp=base.gen_tp, prompt=base.prompt, mean=base.response_mean,
                            gpu_memory_utilization=VERL_ROLLOUT_GPU_MEMORY_UTILIZATION)
    _says(base.engine_batch < verl_room < base.engine_max_batch,
          "verl's rollout share leaves less room, still more than the engine runs")
    out["engine_share"] = f"{ENGINE_MEMORY_UTILIZATION:.1f}"
    out["verl_share"] = f"{VERL_ROLLOUT_GPU_MEMORY_UTILIZATION:.1f}"
    out["verl_room"] = f"{verl_room}"
    out["gh"] = f"{base.gpu_hours:,.0f}"
    out["gh_low"] = f"{base.gpu_hours_low:,.0f}"
    out["gh_high"] = f"{base.gpu_hours_high:,.0f}"
    out["days"] = f"{base.days:.1f}"
    keep = rl_run(_MODEL, **run, offload=False)   # colocated, the trainer's states kept beside the engine
    _says(keep.engine_batch == base.engine_batch < keep.engine_max_batch < base.engine_max_batch,
          "keeping the states leaves the engine less room, still more than it runs")
    out["keep_states"] = f"{keep.state_bytes_per_gpu / GiB:.1f}"
    out["keep_peak"] = f"{keep.train_bytes_per_gpu / GiB:.1f}"
    out["keep_room"] = f"{keep.engine_max_batch}"
    # keeping them saves only the two trips (the trainer's states, the reference's weights)
    trips = base.moves["trainer_offload"] + base.moves["reference_offload"]
    _says(abs(keep.step_s - (base.step_s - trips)) < 1e-6, "keeping the states saves only the two host trips")
    out["keep_trips"] = f"{trips:,.2f}"
    out["keep_ref"] = f"{keep.reference_bytes_per_gpu / GiB:.2f}"
    out["host_gbps"] = f"{host_link_gbps(run['gpu']):.1f}"   # Gen5 x16: 32 GT/s x 16 x 128/130 / 8
    out["host_gbps_a100"] = f"{host_link_gbps('A100 80GB'):.1f}"   # Gen4 x16
    l8 = pd.read_csv(PUBLISHED_CSV).set_index("run").loc[L8_ROW]   # NeMo RL v0.4's row for this very run
    default_pub = l8["step_s"]
    # the row publishes the sequences' mean and cap; the prompt is assumed; the run takes the row's lengths
    _says((run["prompt"], run["response"], run["n_gpus"])
          == (l8["prompt_tokens"], (l8["response_mean"], l8["response_max"]), l8["n_gpus"]),
          "the default run takes NeMo RL's row's lengths and pool")
    checked = pd.read_csv(PUBLISHED_CSV).query("checked == 'yes'")
    _says((checked["prompt_tokens"] == l8["prompt_tokens"]).all(), "every checked row takes the same prompt")
    out["l8_seq_mean"] = f"{l8['prompt_tokens'] + l8['response_mean']:,.0f}"
    out["l8_seq_cap"] = f"{l8['prompt_tokens'] + l8['response_max']:,.0f}"
    out["l8_prompt"] = f"{l8['prompt_tokens']:,.0f}"
    out["mean"] = f"{run['response'][0]:,}"   # the default run's mean response
    out["cap"] = f"{run['response'][1]:,}"    # and its cap, the longest taken as reaching it
    out["default_pub"] = f"{default_pub:.1f}"
    lay = rl_run(_MODEL, **run, train_layout=(1, 1, 1, 1))   # NeMo RL's published [TP, CP, EP, PP]
    out["lay_step"] = f"{lay.step_s:,.0f}"
    out["lay_low"] = f"{lay.step_s_low:,.0f}"
    out["lay_high"] = f"{lay.step_s_high:,.0f}"
    out["lay_area"] = lay.train_range_area   # on a layout: the layout's range
    # what moves the step on the layout: the host trips, the update on the layout's step, the forward passes
    d_trips = sum(lay.moves[k] - base.moves[k] for k in ("trainer_offload", "reference_offload"))
    d_upd = lay.phases["update"] - base.phases["update"]
    d_fwd = lay.phases["log_probs"] - base.phases["log_probs"]
    _says(abs(lay.step_s - base.step_s - (d_trips + d_upd + 2 * d_fwd)) < 1e-6,
          "on the layout only the host trips, the update and the forward passes move the step")
    # the forward passes' sign is glued (it follows the end-to-end MFU that prices the FSDP default's update)
    _says(d_trips > 0 and d_upd > 0, "on the layout the host trips and the update take longer")
    out["lay_d_trips"] = f"{d_trips:,.1f}"
    out["lay_d_upd"] = f"{d_upd:,.1f}"
    out["lay_d_fwd"] = f"{abs(d_fwd):,.1f} s {'less' if d_fwd < 0 else 'more'}"
    _says(default_pub > base.step_s_high, "the published step lies above the range on FSDP")
    m = resolve_model(_MODEL)
    row_f = training_flops_per_token(m, seq=base.prompt + base.response_max)
    # without a layout a forward pass is priced at its FLOPs share of an update that does not recompute (a
    # third); at a recomputing update's share (a quarter) the two passes would take this much less
    rc = forward_flops_per_token(m, seq=base.attention_seq) / training_flops_per_token(
        m, seq=base.attention_seq, recompute="full")
    _says(abs(base.phases["log_probs"] / base.phases["update"] - 1 / 3) < 0.01 and 0.24 < rc < 0.26,
          "a forward pass is a third of an update that does not recompute, a quarter of one that does")
    out["logp_rc"] = f"{2 * (base.phases['log_probs'] - rc * base.phases['update']):,.1f}"
    own_f = training_flops_per_token(m, seq=base.attention_seq)
    out["att"] = f"{base.attention_seq:,}"       # packed rollouts attend as one of this many
    out["row"] = f"{base.prompt + base.response_max:,}"
    out["packed_attn"] = f"{row_f / own_f - 1:.0%}"
    lc = response_length_check().iloc[0]   # the (mean, longest) assumption, against a published step
    _says(lc["waits_for_cap"] and lc["inside"], "the step waits for the longest response, and is inside")
    out["len_rollouts"] = f"{lc['rollouts']:,}"
    for key in ("response_mean", "response_cap", "at_cap", "maxent_tokens", "low_tokens", "high_tokens",
                "clipped_tokens"):
        out[f"len_{key.replace('response_', '').replace('_tokens', '')}"] = f"{lc[key]:,.0f}"
    out["len_clip"] = f"{lc['clip_ratio']:.1%}"
    out["len_gap"] = f"{lc['clipped_tokens'] / lc['maxent_tokens'] - 1:.0%}"
    return ChapterText(out, report, {"base": base, "keep": keep, "layout": lay})


def miles_throughput(row=None) -> dict[str, float]:
    """The Miles run's stated training throughput (:data:`MILES_TRAIN_TOKENS_PER_S`) read two ways: the tokens
    a rollout carries (throughput x the published training seconds / rollouts a step), the mean response that
    leaves after the prompt, and the training MFU it implies: ``mfu``, the library's model FLOPs
    (:func:`~llmsizing.mfu_published.implied_mfu`: an hour of that throughput on the row's GPUs, the row's
    model from the catalogue, its attention at a rollout's length), and ``mfu_6n``, the ``6 N`` reading alone
    (6 x :data:`MILES_ACTIVE_PARAMS` x throughput / (GPUs x dense BF16 peak)), which leaves out the attention
    at ~5,800 tokens. ``row``: the run's row of ``data/rl_published.csv`` (default: the Miles row).
    Chapter 19."""
    import pandas as pd

    from .hardware import dense_tflops
    from .mfu_published import implied_mfu

    if row is None:
        row = pd.read_csv(PUBLISHED_CSV).query("framework == 'Miles (slime)'").iloc[0]
    tokens = MILES_TRAIN_TOKENS_PER_S * row["published_update_s"] / row["rollouts_per_step"]
    peak_flops = row["n_gpus"] * dense_tflops(row["gpu"]) * 1e12   # the node's dense BF16 peak
    mfu = implied_mfu(row["model"], gpu=row["gpu"], seq=int(round(tokens)),
                      tokens=MILES_TRAIN_TOKENS_PER_S * 3600.0, gpu_hours=float(row["n_gpus"]))
    return {"tokens_per_rollout": tokens, "response_mean": tokens - row["prompt_tokens"], "mfu": mfu,
            "mfu_6n": 6 * MILES_ACTIVE_PARAMS * MILES_TRAIN_TOKENS_PER_S / peak_flops}


def published_check_prose(default: dict) -> ChapterText:
    """Every checked row of ``data/rl_published.csv`` against its predicted step and the parts' range, NeMo
    RL's performance pages (a check only) apart from the rows a fit may read; why no RL range can be
    measured; the Llama row's host trips on its published layout; verl's DeepSeek-V3 row.

    ``default``: :func:`default_run_prose`'s ``data``. Its ``data`` holds
    ``published`` (:func:`~llmsizing.rl.published_rl`) and ``checked`` (its checked rows). Raises
    :class:`~llmsizing.prose.ProseOutOfDate` where the chapter's reading fails: no RL range from so few
    sources, no held-out factor bringing a row inside, most rows above the range, the Llama row the default
    run on its data-parallel layout, verl's DeepSeek-V3 row above the range."""
    import pandas as pd

    base, lay = default["base"], default["layout"]
    pub = published_rl()
    chk = pub[pub["checked"] == "yes"]
    cols = ["run", "step_s", "predicted_step_s", "low", "high", "ratio", "inside", "calibrate"]  # no: a check
    lines = [chk[cols].round(2).to_string(index=False)]
    loso, ck = rl_loso(pub), rl_checked(pub, near=0.03)   # near: "just above", within 3% over the slow end
    out = {"n_rows": f"{ck.n_rows}", "inside": f"{ck.inside}", "ratio_med": f"{ck.ratio_median:.2f}",
           "ratio_min": f"{ck.ratio_min:.2f}", "ratio_max": f"{ck.ratio_max:.2f}"}
    # the comparison: NeMo RL's performance-summary rows (calibrate = no) are a check, never a fit (issue 35)
    group = chk["calibrate"].map({"no": "NeMo RL pages (a check only)", "yes": "may be fitted"})
    lines.append(chk.assign(group=group).groupby("group").agg(
        rows=("ratio", "size"), inside=("inside", "sum"),
        median_ratio=("ratio", "median")).round(2).to_string())
    out["nemo_inside"] = f"{ck.check_inside}"
    out["nemo_med"] = f"{ck.check_median:.2f}"
    out["nemo_above"] = f"{ck.check_above}"
    out["nemo_below"] = f"{ck.check_below}"
    out["fit_inside"] = f"{ck.fit_inside} of {ck.fit_rows}"
    # no RL range: the rows a fit may read come from too few sources, and rl_interval says so
    n_fit = loso["source_key"].nunique()
    try:
        rl_interval(published=pub)
        measured = True
    except ValueError as e:
        measured = f"from {n_fit} sources" not in str(e)
    _says(not measured, f"no RL range can be measured from {n_fit} sources")
    out["fit_sources"] = f"{n_fit}"
    out["need_80"] = f"{nested_min_units(0.8)}"   # nested: each fold leaves one source out
    out["need_60"] = f"{nested_min_units(0.6)}"
    out["need_low"] = f"{nested_min_units(RL_COVERAGES[-1])}"
    out["cov_low"] = f"{RL_COVERAGES[-1]:.0%}"
    _says(not loso["inside_corrected"].any(), "a factor fitted on one of the two sources holds neither")
    _says((chk["step_s"] > chk["high"]).sum() > len(chk) / 2, "most published steps lie above the range")
    out["near"] = f"{ck.near:.0%}"
    out["near_sentence"] = ck.near_sentence()   # each row named with its release
    # the Llama row's host trip on its published layout, and FSDP's (the default run: same model and pool)
    l8_row = next(chk[chk["run"] == L8_ROW].itertuples())
    l8_run, ht = row_run(l8_row), row_host_trip(l8_row)
    _says(l8_run.train_layout == (1, 1, 1, 1), "the Llama row's layout is data parallel only")
    _says(abs(l8_run.step_s - lay.step_s) < 1e-9, "the Llama row is the default run on its layout")
    out["l8_came"] = ("lies inside the parts' range" if l8_row.inside else
                      f"lies {l8_row.step_s / l8_row.high - 1:.1%} above its slow end")
    out["l8_bpp"] = f"{ht.bytes_per_param:.2f}"
    out["l8_states"] = f"{ht.state_bytes_per_gpu / GiB:.1f}"
    out["l8_fsdp"] = f"{base.state_bytes_per_gpu / GiB:.1f}"
    out["l8_trip"] = f"{ht.trainer_offload_s:.2f}"
    out["l8_trip_fsdp"] = f"{base.moves['trainer_offload']:.2f}"
    # ZeRO's 12 optimizer bytes over the ranks; Megatron-Core's table 16, NeMo RL's offload 8: 4 / dp either
    # way
    out["l8_trip_err"] = f"{ht.optimizer_count_s:.2f}"
    out["l8_either"] = ("stays inside" if all(ht.inside_counted) else "stays outside"   # (both ends move)
                        if not any(ht.inside_counted) else "is inside on one count and outside on the other")
    # the reference model's weights: whole on every GPU on this layout, as the policy's are
    out["l8_ref_trip"] = f"{ht.reference_offload_s:.2f}"
    out["l8_ref_trip_fsdp"] = f"{base.moves['reference_offload']:.2f}"
    # NeMo RL's swap copies three times the weights where rl_run prices two: one copy more, one way
    out["l8_third_v"] = (("and the row would " + ("stay inside" if l8_row.inside else "come inside"))
                         if ht.inside_third else "and the row would still lie above the range"
                         if l8_row.step_s > l8_row.high + ht.third_copy_s
                         else "and the row would fall below the range")
    out["l8_ref_third"] = f"{ht.third_copy_s:.2f}"
    v = chk[chk["run"] == "DeepSeek V3 GRPO, 96 H20 (verl)"].iloc[0]
    _says(not v["inside"] and v["step_s"] > v["high"], "verl's DeepSeek-V3 row lies above the parts' range")
    out["verl_ratio"] = f"{v['ratio']:.2f}"
    out["verl_pred"] = f"{v['predicted_step_s']:,.0f}"
    out["verl_low"] = f"{v['low']:,.0f}"
    out["verl_high"] = f"{v['high']:,.0f}"
    out["verl_gh"] = f"{v['step_s'] * 96 * 1000 / 3600:,.0f}"
    out["verl_gh_low"] = f"{v['low'] * 96 * 1000 / 3600:,.0f}"
    out["verl_gh_high"] = f"{v['high'] * 96 * 1000 / 3600:,.0f}"
    out["miles_ratio"] = f"{chk[chk['framework'] == 'Miles (slime)'].iloc[0]['ratio']:.2f}"
    out["verl_gen_pred"] = f"{v['predicted_generation_s']:,.0f}"
    out["verl_gen_pub"] = f"{v['published_generation_s']:,.0f}"
    # what each part's range measured out of source (data/intervals.csv, data/serving_intervals.csv); the
    # serving range's nested held-out check, as chapter 15 states it
    sv = pd.read_csv(DATA_DIR / "serving_intervals.csv").set_index("group").loc["overall-nested"]
    out["serve_cov"] = (f"{sv['coverage_nominal']:.0%} range; out of source it held "
                        f"{sv['coverage_out_of_sample']:.0%} of {sv['n_rows']} published speeds "
                        f"({sv['n_sources']} sources), {sv['width_out_of_sample']:.2f}x wide at the median")
    out["train_cov"] = coverage_note(base.train_range_area, "all", "training runs")
    out["lay_cov"] = coverage_note(lay.train_range_area, "all", "training runs")
    gap = (v["published_generation_s"] - v["predicted_generation_s"]) / (v["step_s"] - v["predicted_step_s"])
    out["verl_gen_gap"] = f"{gap:.0%}"
    dense = chk[chk["model"] == _MODEL]
    out["dense_ratio"] = f"{dense['ratio'].min():.2f} to {dense['ratio'].max():.2f}"
    dsv3 = chk[chk["run"].str.startswith("DeepSeek V3 on-policy, 256 H100")].sort_values("source")
    out["dsv3_releases"] = " / ".join(f"{x:,.0f}" for x in dsv3["step_s"])
    return ChapterText(out, "\n".join(lines), {"published": pub, "checked": chk})


def r1_recipe() -> dict[str, str]:
    """DeepSeek-R1-Zero's recipe as chapter 19 quotes it (:data:`R1_ZERO`, :data:`R1_HOURS`, :data:`R1_STEPS`,
    :data:`R1_MINI`, :data:`R1_CAPS`, :data:`R1_CAP_STEP`, :data:`R1_MEAN`; Nature, Methods and SI), its
    texts keyed by name: the GPUs and hours and their GPU-hours, the samples per question, the questions and
    responses of a policy step, the responses of a round and its questions, the policy steps, the caps and the
    step the second begins, the steps after it, the assumed prompt, the guessed mean and the engines' tensor
    parallelism; and for the chapter's opening the GPUs as the SI counts them, nodes of the catalogue's H800
    node (``r1z_nodes``, ``r1z_node_gpus``), and the GPU-hours' share of DeepSeek-V3's pre-training
    (``r1z_v3_share``, chapter 18's published run). Raises :class:`~llmsizing.prose.ProseOutOfDate` unless
    that share is a few per cent (2% to 6%), as the opening says."""
    from .network import get_node

    z = R1_ZERO
    rollouts = z["prompts_per_step"] * z["samples_per_prompt"]
    policy = rollouts // R1_MINI
    per_node = get_node(gpu=z["gpu"]).gpus_per_node
    _says(z["n_gpus"] % per_node == 0, "R1-Zero ran on whole eight-GPU nodes")
    v3_gh = float(moe_published_runs().query("model == 'deepseek-v3'").iloc[0]["gpu_hours"])
    share = z["n_gpus"] * R1_HOURS / v3_gh
    _says(0.02 < share < 0.06, "R1-Zero took a few per cent of DeepSeek-V3's pre-training")
    return {"r1z_nodes": f"{z['n_gpus'] // per_node}", "r1z_node_gpus": number_word(per_node),
            "r1z_v3_share": f"{share:.1%}",
            "r1z_gpus": f"{z['n_gpus']:,}", "r1z_hours": f"{R1_HOURS:,}",
            "r1z_gh": f"{z['n_gpus'] * R1_HOURS:,}", "r1z_samples": f"{z['samples_per_prompt']}",
            "r1z_questions": f"{policy // z['samples_per_prompt']}", "r1z_policy": f"{policy:,}",
            "r1z_rollouts": f"{rollouts:,}", "r1z_prompts": f"{z['prompts_per_step']:,}",
            "r1z_mini": f"{R1_MINI}", "r1z_steps": f"{R1_STEPS:,}", "r1z_cap": f"{R1_CAPS[0]:,}",
            "r1z_cap2": f"{R1_CAPS[1]:,}", "r1z_cap_step": f"{R1_CAP_STEP:,}",
            "r1z_last": f"{R1_STEPS - R1_CAP_STEP:,}", "r1z_prompt": f"{z['prompt']:,}",
            "r1z_mean": f"{R1_MEAN:,}", "r1z_mean2": f"{2 * R1_MEAN:,}", "r1z_mean_half": f"{R1_MEAN // 2:,}",
            "r1z_tp": f"{z['gen_tp']}"}


def r1_zero_prose() -> ChapterText:
    """DeepSeek-R1-Zero's round of generation and training (the paper's "rollout" of 8,192 responses,
    :data:`R1_ZERO`, 512 H800s) priced at a mean response of 4,000 and 8,000 tokens with the 32,768-token cap,
    against the round's time its 198 hours and 10,400 policy steps imply;
    the tail's share, a shorter mean, the engine's draining batch, and the two published generation phases.

    Its ``data`` holds ``r1`` (the run at a 4,000-token mean). Raises
    :class:`~llmsizing.prose.ProseOutOfDate` where the chapter's reading fails: the tail alone longer than the
    published round even at the fast end, the mean alone between the two fits, a shorter mean slower with a
    full batch but faster draining, and the draining batch further from both published generation phases."""
    import pandas as pd

    run, steps = dict(R1_ZERO), R1_STEPS // R1_MINI
    cap, half = R1_CAPS[0], R1_MEAN // 2   # the first cap; a shorter mean
    pub_rollout_s = R1_HOURS * 3600 / steps
    rows = {}
    for mean in (R1_MEAN, 2 * R1_MEAN):
        r = rl_run("deepseek-v3", **run, response=(mean, cap), steps=steps)
        rows[mean] = {"in flight": r.engine_batch, "decode steps": f"{r.decode_steps:,.0f}",
                      "generation s": f"{r.phases['generation']:,.0f}", "round s": f"{r.step_s:,.0f}",
                      "range": f"{r.step_s_low:,.0f}-{r.step_s_high:,.0f}",
                      "x published": f"{r.step_s / pub_rollout_s:.1f}"}
    report = pd.DataFrame(rows).T.rename_axis("mean response").to_string()
    r1 = rl_run("deepseek-v3", **run, response=(R1_MEAN, cap), steps=steps)
    r8 = rl_run("deepseek-v3", **run, response=(2 * R1_MEAN, cap), steps=steps)
    gen, gen_fast = r1.phases["generation"], r1.phases_low["generation"]
    _says(gen_fast > pub_rollout_s and r1.decode_steps == r1.response_max,
          "the longest response alone takes longer than the published round")
    fit, fit_fast = pub_rollout_s / gen * r1.decode_steps, pub_rollout_s / gen_fast * r1.decode_steps
    out = {"r1_rollouts": f"{r1.rollouts:,}", "r1_pub_step": f"{R1_HOURS * 3600 / R1_STEPS:.1f}",
           "r1_pub_rollout": f"{pub_rollout_s:,.0f}", "r1_step": f"{r1.step_s:,.0f}",
           "r1_step_low": f"{r1.step_s_low:,.0f}", "r1_step_high": f"{r1.step_s_high:,.0f}",
           "r1_x": f"{r1.step_s / pub_rollout_s:.1f}", "r1_gen": f"{gen:,.0f}",
           "r1_gen_low": f"{gen_fast:,.0f}",
           "r1_share": f"{r1.generation_share:.0%}", "r1_batch": f"{r1.engine_max_batch}",
           "r1_engines": f"{r1.engines}", "r1_per_engine": f"{-(-r1.rollouts // r1.engines):,}",
           "r1_batch8": f"{r8.engine_max_batch}", "r1_fit": f"{fit:,.0f}", "r1_fit_fast": f"{fit_fast:,.0f}",
           "r1_hours": f"{r1.step_s * R1_STEPS / R1_MINI / 3600:,.0f}"}
    # no tail at all (the longest = the mean): the decode steps the mean alone sets, n x mean / b
    r0 = rl_run("deepseek-v3", **run, response=(R1_MEAN, R1_MEAN), steps=1)
    _says(r0.engine_batch == r1.engine_batch and fit < r0.decode_steps < fit_fast,
          "the mean alone sets decode steps between the two fits")
    _says(r0.phases["generation"] > pub_rollout_s > r0.phases_low["generation"],
          "without a tail the published round lies inside the generation's range")
    out["r1_floor"] = f"{r0.decode_steps:,.0f}"
    out["r1_floor_s"] = f"{r0.phases['generation']:,.0f}"
    out["r1_train_gib"] = f"{r1.train_bytes_per_gpu / GiB:,.0f}"
    out["r1_train_seq"] = f"{(r1.prompt + cap) / 1000:.0f}K"   # the memory check's longest sequence
    # a shorter mean at the same cap: the full batch's charge, and the engine's draining batch (rl_generation)
    r2 = rl_run("deepseek-v3", **run, response=(half, cap), steps=steps)
    drained = {m: rl_run("deepseek-v3", **run, response=(m, cap), steps=1, drain=True).phases["generation"]
               for m in (half, R1_MEAN)}
    _says(r2.step_s > r1.step_s and r2.engine_batch > r1.engine_batch and drained[half] < drained[R1_MEAN],
          "a shorter mean takes longer with a full batch, less with the batch draining")
    out["r1_2k_step"] = f"{r2.step_s:,.0f}"
    out["r1_2k_in"] = f"{r2.engine_batch}"
    out["r1_in"] = f"{r1.engine_batch}"
    out["r1_drain_2k"] = f"{drained[half]:,.0f}"
    out["r1_drain_4k"] = f"{drained[R1_MEAN]:,.0f}"
    pub = pd.read_csv(PUBLISHED_CSV)
    pub = pub[(pub["checked"] == "yes") & pub["published_generation_s"].notna()]
    _says(list(pub["framework"]) == ["Miles (slime)", "verl"], "Miles and verl publish the generation phase")
    for key, r in zip(("miles", "verl"), pub.itertuples()):
        full_g, drain_g = row_run(r).phases["generation"], row_run(r, drain=True).phases["generation"]
        _says(drain_g < full_g < r.published_generation_s,
              "the draining batch is further from both published generation phases")
        out[f"gen_{key}_pub"] = f"{r.published_generation_s:,.0f}"
        out[f"gen_{key}_full"] = f"{full_g:,.0f}"
        out[f"gen_{key}_drain"] = f"{drain_g:,.0f}"
    return ChapterText(out, report, {"r1": r1})
