"""Chapter 15's figures as the prose quotes them: the formatting helpers its cells share, and the two long
sections whose numbers come from several serving modules at once (issue 38: long code belongs in the library).

Each section function returns a :class:`~llmsizing.prose.ChapterText` (defined in :mod:`llmsizing.prose`,
one type for every chapter; imported here so ``serve_chapter.ChapterText`` still names it): ``values``, the
texts the chapter glues (``{eval}`` names without the chapter's prefix), and ``report``, what its cell prints.
The checks that tie a sentence to the data (which row is above the range, which figure is larger) run here and
raise :class:`~llmsizing.prose.ProseOutOfDate` (an :class:`AssertionError`) naming the claim when a refit or a
data change breaks it. Nothing here computes a new quantity: it formats and compares what the serving modules
return.

- :func:`opening`: the fitted constants, the engine's limits and the running load's plan (the first cell).
- :func:`kv_room_queue`: a closed batch over the KV room ("Batching"), the waves against the replay of vLLM's
  scheduler (``serve_replay``) and the churn counted by ``serve_churn`` (``data/serve_churn_sweep.csv``).
- ``serve_chapter_check.published_check``: "Checked against published figures" (its own module, for length).
"""

from __future__ import annotations

import csv

from .catalog import DATA_DIR, get_gpu, prices_as_of
from .hardware import dtype_kernel_share, kernel_efficiency
from .prose import ChapterText, prose_check
from .serve import ATTENTION_BU_DEFAULT, MBU_DEFAULT, MFU_DEFAULT, RANGE_HIGH, RANGE_LOW, STEP_OVERHEAD_S, \
    replicas_for, serving, serving_ends
from .serve_calibration import MAX_WIDTH, NESTED_GROUP, mfu_by_compute
from .serve_engine import DEFAULT_ENGINE, MAX_NUM_BATCHED_TOKENS, vllm_default_max_num_batched_tokens, \
    vllm_default_max_num_seqs
from .serve_fleet import OCCUPANCY_CEILING

__all__ = ["ChapterText", "stated", "fleet_cost", "on_this_fleet", "engine_versions", "kv_room_queue",
           "expert_parallel", "cost_ranking", "opening"]


def _holds(condition, claim: str) -> None:
    """:class:`~llmsizing.prose.ProseOutOfDate` naming the prose's ``claim`` when ``condition`` no longer
    holds (even under -O)."""
    prose_check(condition, claim, "chapter 15")


def stated(s, name: str, fmt: str, scale: float = 1.0, unit: str = "", suffix: str = "") -> str:
    """A figure of the Serving (or Speculative) ``s`` and its stated 80% range (``serve.serving_ends``: the
    engine speed's range carried through at the same layout), as text: "7.1 ms (5.3-8.9)", "$0.072 ($0.054-
    $0.091)". ``scale`` multiplies all three (1e3: seconds to ms)."""
    e = serving_ends(s, (name,))
    v, lo, hi = (x * scale for x in (getattr(s, name), e[name + "_low"], e[name + "_high"]))
    return f"{unit}{v:{fmt}}{suffix} ({unit}{lo:{fmt}}-{unit}{hi:{fmt}})"


def fleet_cost(p) -> str:
    """A fleet's cost per million output tokens and its range: the fleets sized again at both ends of the
    engine's stated speed (``ServingPlan.fleet_usd_per_million_output_tokens_low/_high``): "$1.23 ($1.01-
    $1.60)"."""
    c = "fleet_usd_per_million_output_tokens"
    return f"${getattr(p, c):.2f} (${getattr(p, c + '_low'):.2f}-${getattr(p, c + '_high'):.2f})"


def on_this_fleet(p, name: str, fmt: str, scale: float = 1.0, suffix: str = "") -> str:
    """A fleet figure and what users would see on the same fleet at both ends of the engine's stated speed
    (``ServingPlan.<name>_low/_high``, ``serve_fleet.on_fleet``: nothing re-sized), "49.9 ms (37.3-62.6)"."""
    v, lo, hi = (x * scale for x in (getattr(p, name), getattr(p, name + "_low"), getattr(p, name + "_high")))
    return f"{v:{fmt}}{suffix} ({lo:{fmt}}-{hi:{fmt}})"


def _version_key(v: str) -> list:
    return [int(x) if x.isdigit() else 0 for x in v.split(".")]


def engine_versions(engine: str, batching: str = "continuous") -> str:
    """The versions of ``engine``'s rows of ``data/serving_published.csv`` that the fit learns from (no
    ``known_out``) for ``batching``, oldest first: "0.6.0, 0.21.0 and 0.23.0". ValueError when it has none."""
    if not isinstance(engine, str) or not isinstance(batching, str):
        raise TypeError(f"engine and batching must be str, got {engine!r} and {batching!r}")
    with open(DATA_DIR / "serving_published.csv", newline="") as f:
        rows = [
            r
            for r in csv.DictReader(f)
            if r["engine"] == engine and r["batching"] == batching and not r["known_out"]
        ]
    vs = sorted({r["engine_version"].split(" (")[0] for r in rows}, key=_version_key)
    if not vs:
        raise ValueError(
            f"engine {engine!r} has no {batching} rows the fit learns from in serving_published.csv"
        )
    return vs[0] if len(vs) == 1 else ", ".join(vs[:-1]) + " and " + vs[-1]


def kv_room_queue() -> ChapterText:
    """Chapter 15's closed batch over the KV room (Llama-3-8B, one H100, 1,024 + 256 tokens, twice the room):
    the waves, vLLM's rules replayed (``serve_replay.waves_against_vllm``), the churn ``serve_churn`` counts,
    the late-preemption case (Llama-2-7B on an A100, 128 + 2,048 tokens, 60 requests), the sweep of
    ``data/serve_churn_sweep.csv`` and 16,384-token prompts. Value names follow the chapter's ``ch15_kv_``."""
    import pandas as pd

    from .serve_churn import StepCounts
    from .serve_engine import MAX_NUM_BATCHED_TOKENS
    from .serve_replay import waves_against_vllm

    v, out = {}, []
    h100 = get_gpu("H100 SXM")
    room1k = serving("llama-3-8b", h100, prompt=1024, output=256).kv_batch
    kv_over = serving("llama-3-8b", h100, prompt=1024, output=256, batch=2 * room1k)
    kv_once = serving("llama-3-8b", h100, prompt=1024, output=256, batch=2 * room1k, batching="static")
    out.append(
        f"batch {kv_over.batch:,} (KV room {room1k:,}, cap {kv_over.max_num_seqs:,}): "
        f"{kv_over.running_batch:,} at once ({kv_over.running_bound}), {kv_over.waves} waves; ITL "
        f"{kv_over.itl_s * 1e3:.1f} ms ({kv_once.itl_s * 1e3:.1f} ms if all ran in one step); waves "
        f"{kv_over.waves_s:.1f} s; last first token after {kv_over.last_ttft_s:.1f} s as vLLM admits (the "
        f"waves': {kv_over.waves_last_ttft_s:.1f} s)"
    )
    # what the waves leave out: vLLM's rules replayed step by step at the same step prices
    rp = waves_against_vllm("llama-3-8b", h100, prompt=1024, output=256, batch=kv_over.batch)
    late = waves_against_vllm("llama-2-7b", "A100 80GB", prompt=128, output=2048, batch=60)
    for r in (rp, late):
        out.append(
            f"{r.model} on {r.gpu}, {r.batch} requests over a room of {r.kv_batch}: waves "
            f"{r.waves.seconds:.1f} s (library {r.waves_s:.1f} s), vLLM's rules {r.vllm.seconds:.1f} s "
            f"({r.ratio:.2f}x), {r.vllm.preemptions} preemptions, {r.vllm.recomputed_tokens:,} tokens "
            "recomputed"
        )
    v["batch"] = f"{kv_over.batch:,}"
    v["waves"] = f"{kv_over.waves}"
    v["itl"] = stated(kv_over, "itl_s", ".0f", 1e3, suffix=" ms")
    v["itl_once"] = f"{kv_once.itl_s * 1e3:.0f} ms"
    v["waves_s"] = stated(kv_over, "waves_s", ".1f", suffix=" s")
    v["last_ttft"] = stated(kv_over, "last_ttft_s", ".1f", suffix=" s")
    v["waves_last"] = stated(kv_over, "waves_last_ttft_s", ".1f", suffix=" s")
    v["preempt"] = f"{rp.vllm.preemptions}"
    v["recomp"] = f"{rp.vllm.recomputed_tokens:,}"
    v["ratio"] = f"{rp.ratio:.2f}"
    v["replay_waves"] = f"{rp.waves.seconds:.1f} s"  # the ratio's base: the replay's waves
    _holds(
        abs(rp.ratio - rp.vllm.seconds / rp.waves.seconds) < 1e-9, "the ratio is the replay over its waves"
    )
    v["late_batch"] = f"{late.batch}"
    v["late_room"] = f"{late.kv_batch}"
    v["late_ratio"] = f"{late.ratio:.2f}"
    _holds(
        kv_over.running_batch == room1k < kv_over.max_num_seqs and kv_over.waves == 2,
        "the KV room, not max_num_seqs, sets the running batch, in two waves",
    )
    _holds(kv_over.running_bound == "kv" and not kv_over.fits and kv_once.waves == 1, "the KV room binds")
    _holds(
        kv_once.itl_s > kv_over.itl_s and rp.waves.preemptions == 0 < rp.vllm.preemptions,
        "one step of all would be slower; the replay preempts, the waves do not",
    )
    _holds(late.batch > late.kv_batch and late.ratio < 1 < rp.ratio, "vLLM lands on either side of the waves")
    # the churn priced (churn32): the tokens vLLM's preemptions compute twice, at a prompt token's prefill
    # price; the whole batch (cycle_s) is the cohort run that counts them, to its last token (cohort36)
    late_s = serving("llama-2-7b", "A100 80GB", prompt=128, output=2048, batch=late.batch)
    rp_mark = waves_against_vllm(
        "llama-3-8b", h100, prompt=1024, output=256, batch=kv_over.batch, watermark=0.05
    )
    churn_gap = rp.vllm.seconds / kv_over.cycle_s
    late_sum = late_s.waves_s + late_s.churn_s  # churn35's figure: the waves plus the churn
    out.append(
        f"churn priced: {kv_over.churn.recomputed_tokens:,} tokens recomputed "
        f"({kv_over.recompute_tokens_per_request:.0f} a request), "
        f"{stated(kv_over, 'churn_s', '.1f', suffix=' s')}; whole batch "
        f"{stated(kv_over, 'cycle_s', '.1f', suffix=' s')}, vLLM's rules {churn_gap:.4f}x that (the waves "
        f"plus the churn {kv_over.waves_s + kv_over.churn_s:.1f} s); the late case "
        f"{stated(late_s, 'cycle_s', '.1f', suffix=' s')} in {late_s.churn.to_last_token.steps:,.0f} steps "
        f"(replay {late.vllm.seconds:.1f} s in {late.vllm.steps:,}; the waves {late.waves.steps:,} steps, "
        f"plus the churn {late_sum:.1f} s); at a 5% watermark {rp_mark.vllm.preemptions} preemptions (not "
        f"{rp.vllm.preemptions})"
    )
    v["churn_tokens"] = f"{kv_over.churn.recomputed_tokens:,}"
    v["churn_per_req"] = f"{kv_over.recompute_tokens_per_request:.0f}"
    v["churn_s"] = stated(kv_over, "churn_s", ".1f", suffix=" s")
    v["cycle"] = stated(kv_over, "cycle_s", ".1f", suffix=" s")
    v["churn_gap"] = f"{abs(churn_gap - 1) * 100:.1f}%"
    v["mark_preempt"] = f"{rp_mark.vllm.preemptions}"
    # the last first token as vLLM admits (ttft35), against the replay and the waves' figure
    v["last_vllm"] = f"{rp.vllm.last_first_token_s:.1f} s"
    v["late_last_vllm"] = f"{late.vllm.last_first_token_s:.2f} s"
    v["late_last_ttft"] = stated(late_s, "last_ttft_s", ".2f", suffix=" s")
    v["late_waves_last"] = stated(late_s, "waves_last_ttft_s", ".0f", suffix=" s")
    last_gap = max(
        abs(r.vllm.last_first_token_s / s.last_ttft_s - 1) for r, s in ((rp, kv_over), (late, late_s))
    )
    v["last_gap"] = f"{last_gap:.2%}"
    out.append(
        f"last first token: {stated(kv_over, 'last_ttft_s', '.1f', suffix=' s')} (replay "
        f"{rp.vllm.last_first_token_s:.1f} s, waves {kv_over.waves_last_ttft_s:.1f} s); the late case "
        f"{late_s.last_ttft_s:.2f} s (replay {late.vllm.last_first_token_s:.2f} s, waves "
        f"{late_s.waves_last_ttft_s:.1f} s)"
    )
    _holds(
        rp.vllm.last_first_token_s > kv_over.waves_last_ttft_s
        and late.vllm.last_first_token_s < 2 < late_s.waves_last_ttft_s
        and last_gap < 0.01
        and late_s.last_ttft_s < 2,
        "the last first token, against the replay and waves",
    )
    _holds(
        kv_over.last_ttft_s > kv_over.waves_last_ttft_s and late_s.last_ttft_s < late_s.waves_last_ttft_s,
        "vLLM's last first token comes later than the waves' here, far earlier in the late case",
    )
    _holds(
        abs(churn_gap - 1) < 0.01 < abs(rp.ratio - 1) and abs(late.vllm.seconds / late_s.cycle_s - 1) < 0.01,
        "the counted run is within 1% of the replay",
    )
    _holds(
        abs(rp.vllm.seconds / (kv_over.waves_s + kv_over.churn_s) - 1) < 0.01
        and late_sum > 1.2 * late.vllm.seconds,
        "the waves plus the churn do nearly as well here, not in the late case",
    )
    _holds(
        late_s.churn.to_last_token.steps == late.vllm.steps < late.waves.steps
        and rp.cycle_s == kv_over.cycle_s != kv_over.waves_s + kv_over.churn_s
        and rp_mark.vllm.preemptions < rp.vllm.preemptions,
        "the late case's steps; the watermark preempts less",
    )
    # the sweep (data/serve_churn_sweep.csv, tools/churn_sweep.py): the largest gap per finished request, as a
    # share of one sequence's tokens, and the work both count, priced at Llama-3-8B's H100 steps
    sweep = pd.read_csv(DATA_DIR / "serve_churn_sweep.csv")
    gap = (
        (sweep["churn_recomputed_tokens"] - sweep["replay_recomputed_tokens"]).abs()
        / sweep["batch"]
        / (sweep["prompt"] + sweep["output"])
    )
    v["sweep_n"] = f"{len(sweep)}"
    v["sweep_room"] = f"{sweep['over_room'].min():g} to {sweep['over_room'].max():g}"
    v["sweep_gap"] = f"{gap.max():.1%}"
    terms = {
        k: serving("llama-3-8b", h100, prompt=k[0], output=k[1])
        for k in set(zip(sweep["prompt"], sweep["output"]))
    }
    counted = ("steps", "decodes", "context_tokens", "prefill_tokens")

    def work_s(row, who, upto):
        return terms[(row["prompt"], row["output"])].steps_s(
            StepCounts(*(float(row[f"{who}_{upto}_{k}"]) for k in counted))
        )

    for key, upto in (("first", "first_token"), ("whole", "last_token")):
        g = max(abs(work_s(r, "churn", upto) / work_s(r, "replay", upto) - 1) for _, r in sweep.iterrows())
        v[f"sweep_{key}_gap"] = f"{g:.2%}"
        _holds(
            g < 0.01, f"the sweep's counted work to the {upto.replace('_', ' ')} is within 1% of the replay's"
        )
    # long prompts: prefilled in chunks, admitted on the first chunk's blocks and preempted mid-prompt
    room16k = serving("llama-3-8b", h100, prompt=16384, output=1024).kv_batch
    long16k = serving("llama-3-8b", h100, prompt=16384, output=1024, batch=2 * room16k)
    out.append(
        f"16,384 + 1,024 tokens, {long16k.batch} requests over a room of {room16k}: "
        f"{long16k.churn.preemptions} preemptions, "
        f"{long16k.recompute_tokens_per_request / (16384 + 1024):.1f} sequences recomputed a request, "
        f"{stated(long16k, 'churn_s', '.0f', suffix=' s')} of recomputation; the whole batch "
        f"{stated(long16k, 'cycle_s', '.0f', suffix=' s')} against the waves' "
        f"{stated(long16k, 'waves_s', '.0f', suffix=' s')}"
    )
    v["long_seqs"] = f"{long16k.recompute_tokens_per_request / (16384 + 1024):.0f}"
    v["chunk"] = f"{MAX_NUM_BATCHED_TOKENS:,}"  # vLLM's token budget a step
    v["long_churn_s"] = stated(long16k, "churn_s", ".0f", suffix=" s")
    v["long_waves_s"] = stated(long16k, "waves_s", ".0f", suffix=" s")
    v["long_cycle"] = stated(long16k, "cycle_s", ".0f", suffix=" s")
    _holds(
        long16k.running_bound == "kv" and long16k.churn_s > long16k.waves_s,
        "long prompts churn more than their waves take",
    )
    return ChapterText(v, "\n".join(out))


def expert_parallel() -> ChapterText:
    """Chapter 15's expert parallelism: the model's all-to-all against DeepEP's published kernel latencies
    (``data/deepep_all_to_all.csv``), DeepSeek-V3's prefilling (EP32) and decoding (EP320) units of its report
    (Sec. 3.4) on H800s, its group-limited routing, and the Day-6 service's layout
    (``data/deepseek_serving.csv``). Value names follow the chapter's ``ch15_ds_``."""
    from .all_to_all import route_max_nodes
    from .catalog import get_model
    from .serve import all_to_all_s

    v, out = {}, []
    with open(DATA_DIR / "deepep_all_to_all.csv", newline="") as f:
        deepep = list(csv.DictReader(f))
    out.append("  op        EP  DeepEP us  model us  model / DeepEP")
    ratios, node = [], []
    for r in deepep:
        ep = int(r["ep"])
        msg = (int(r["tokens_per_gpu"]) * int(r["experts_per_token"]) * int(r["hidden"])
               * int(r["bytes_per_number"]))
        model_us = all_to_all_s(msg, ep, r["gpu"]) * 1e6
        ratio = model_us / float(r["latency_us"])
        (ratios if ep > 8 else node).append(ratio)
        out.append(f"  {r['op']:8s} {ep:4d}  {float(r['latency_us']):9.0f}  {model_us:8.0f}  {ratio:14.2f}")
    v["a2a_lo"], v["a2a_hi"] = f"{min(ratios):.2f}", f"{max(ratios):.2f}"
    _holds(max(ratios) < 1 and node and max(node) < min(ratios),
           "across nodes the model is a little faster than DeepEP, inside one node (EP 8) far faster")
    ds = get_model("deepseek-v3")
    kw = dict(weights="fp8", prompt=1024, output=1024)
    pre = serving(ds, "H800", tp=4, ep=32, batch=8, **kw)
    dec = serving(ds, "H800", tp=4, ep=320, batch=320 * 64, **kw)
    dec16 = serving(ds, "H800", tp=4, ep=320, batch=320 * 16, **kw)
    for name, s in (("prefill unit, EP32", pre), ("decode unit, EP320, 16 seq/GPU", dec16),
                    ("decode unit, EP320, 64 seq/GPU", dec)):
        out.append(f"{name}: {s.gpus} GPUs, {s.weights_bytes_per_gpu / 1e9:.1f} GB of fp8 weights per GPU, "
                   "room "
                   f"for {s.kv_batch:,} sequences; decode step {s.decode_step_s * 1e3:.1f} ms (memory "
                   f"{s.decode_memory_s * 1e3:.1f}, compute {s.decode_compute_s * 1e3:.1f}, communication "
                   f"{s.decode_comm_s * 1e3:.1f}; one all-to-all {s.all_to_all_s * 1e6:.0f} us); TTFT "
                   f"{s.ttft_s * 1e3:.0f} ms")
    v["w32"] = f"{pre.weights_bytes_per_gpu / 1e9:.1f} GB"
    v["w320"] = f"{dec.weights_bytes_per_gpu / 1e9:.1f} GB"
    v["ttft"] = stated(pre, "ttft_s", ".0f", 1e3, suffix=" ms")
    v["step16"] = stated(dec16, "decode_step_s", ".1f", 1e3, suffix=" ms")
    v["step64"] = stated(dec, "decode_step_s", ".1f", 1e3, suffix=" ms")
    v["comm64"] = f"{dec.decode_comm_s / dec.decode_step_s:.0%}"
    v["a2a64"] = f"{dec.all_to_all_s * 1e6:.0f} µs"
    # the decode's tokens per second per GPU, batch / step / GPUs, at the step and at both ends of its range
    steps = serving_ends(dec, ("decode_step_s",))
    ends = (f"{dec.batch / steps[f'decode_step_s_{x}'] / dec.gpus:,.0f}" for x in ("high", "low"))
    v["tps64"] = f"{dec.batch / dec.decode_step_s / dec.gpus:,.0f} (" + "-".join(ends) + ")"
    v["layers"] = f"{ds.n_moe_layers}"
    # group-limited routing (config: n_group, topk_group): the most nodes a token reaches on the decode unit
    v["groups"] = f"{ds.expert_groups_per_token} of its {ds.expert_groups}"
    v["dec_nodes"] = f"{dec.gpus // 8}"
    route, k = route_max_nodes(ds, 320, 8), ds.experts_per_token   # nodes its groups span; its experts
    route256 = route_max_nodes(ds, ds.experts, 8)    # the report's placement: one routed expert a GPU
    v["route"] = (f"a token's groups span {route} nodes as the model spreads the experts over all {dec.gpus} "
                  f"GPUs ({route256} with one expert on each of {ds.experts}), more than its {k} experts "
                  "either way, so the limit no longer binds" if min(route, route256) >= k
                  else f"a token's {k} experts reach at most {route} nodes")
    with open(DATA_DIR / "deepseek_serving.csv", newline="") as f:     # DeepSeek's Day-6 page, a row a unit
        d6 = {r["phase"]: r for r in csv.DictReader(f)}
    v["d6_user_tps"] = f"{float(d6['decode']['tokens_per_s_per_user']):g}"   # the decode unit's step target
    for ph in ("prefill", "decode"):
        v[f"d6_{ph}_pub"] = f"{float(d6[ph]['value']) / 1e3:.1f}K"
        v[f"d6_{ph}_nodes"] = f"{d6[ph]['nodes_per_unit']}"
        v[f"d6_{ph}_ep"] = f"{d6[ph]['ep']}"
    v["d6_redundant"] = f"{d6['decode']['redundant_experts']}"
    v["d6_hit"] = f"{float(d6['prefill']['prefix_hit']):.1%}"
    v["d6_ctx"] = f"{int(d6['decode']['context']):,}"
    return ChapterText(v, "\n".join(out))


def cost_ranking() -> ChapterText:
    """Chapter 15's cost per million output tokens across GPU types for Llama-3-70B in bf16 (1,024 + 256
    tokens, ITL <= 50 ms, TTFT <= 1 s; ``serve.serving_cost_by_gpu``): the cheapest and dearest GPU at a price
    that is not an estimate (estimates are drawn but never ranked, issue 38), the H100, the span, and the rank
    correlations that say what orders the bars. Value names follow the chapter's ``ch15_cost_``."""
    import numpy as np
    import pandas as pd

    from . import hardware
    from .serve import RANGE_HIGH, RANGE_LOW, serving_cost_by_gpu

    v = {}
    costs = serving_cost_by_gpu("llama-3-70b", prompt=1024, output=256, itl_s=0.05, ttft_s=1.0)
    col = "usd_per_million_output_tokens"
    ok = costs.dropna(subset=[col]).sort_values(col)
    est = ok[ok["price_kind"] == "estimate"]
    ok = ok[ok["price_kind"] != "estimate"]
    first = "; at its estimated price the {} would have come first"
    lower = len(est) and est.iloc[0][col] < ok.iloc[0][col]
    v["estimates"] = (f" The {len(est)} hatched GPUs ({', '.join(est.index)}) are priced at estimates, so "
                      "they are left out of that ranking" + (first.format(est.index[0]) if lower else "")
                      + "." if len(est) else " No GPU in the chart is priced at an estimate.")
    reported = ok.iloc[0]["price_kind"] == "reported"
    v["cheapest"] = ok.index[0] + (" (a price a survey reported)" if reported else "")

    def usd_range(r):
        return f"${r[col]:.2f} (${r[col + '_low']:.2f}-${r[col + '_high']:.2f})"

    v["cheapest_cost"] = usd_range(ok.iloc[0])
    v["cheapest_as_of"] = ok.iloc[0]["price_as_of"]
    v["dearest"] = ok.index[-1]
    span = ok[col].max() / ok[col].min()
    _holds(span > 100, "the costs span over two orders of magnitude, hence the log axis")
    v["span"] = f"{span:,.0f}"
    note = ok.iloc[-1]["note"]
    # one value for the cost and its note: an {eval} role must never render empty (Voila shows each)
    v["dearest_cost"] = usd_range(ok.iloc[-1]) + (
        f", a figure the chart replaces by its note ({note.replace(' (', ': ').rstrip(')')})" if note else "")
    v["h100"] = usd_range(costs.loc["H100 SXM"])
    v["h100_itl_slow"] = f"{costs.loc['H100 SXM', 'itl_s_high'] * 1e3:.0f} ms"
    _holds(costs.loc["H100 SXM", "itl_s_high"] > 0.05, "at the slow end the H100's ITL is over the target")
    _holds(np.allclose(ok[col + "_high"] / ok[col + "_low"], RANGE_HIGH / RANGE_LOW),
           "every cost's range is the stated speed's, no range of its own")
    with open(DATA_DIR / "serving_published.csv", newline="") as f:
        unseen = ok.index[0] not in {r["gpu"] for r in csv.DictReader(f)}
    v["cheapest_unseen"] = (
        f" No published row of this chapter's table is on the {ok.index[0]}: its figure applies bandwidth "
        "and compute shares fitted on other GPUs, and its engine's kernels may reach more or less of them."
        if unseen
        else f" The chapter's published table has rows on the {ok.index[0]}.")
    # rank correlations (Spearman) of the ranked GPUs' cost with their batch, memory, and bandwidth and peak
    # FLOP/s per dollar (the prose: the batch, not a spec per dollar)
    gpus = [get_gpu(g) for g in ok.index]
    drivers = pd.DataFrame({"batch": ok["batch"].to_numpy(), "memory": [g.memory_mib for g in gpus],
                            "bw_per_usd": [g.memory_bandwidth_gbps / g.price_usd_per_gpu_hour
                                           for g in gpus],
                            "flops_per_usd": [hardware.dense_tflops(g, "bf16") / g.price_usd_per_gpu_hour
                                              for g in gpus],
                            "cost": ok[col].to_numpy()})
    rho = drivers.corr(method="spearman")["cost"]
    for key in ("batch", "memory", "bw_per_usd", "flops_per_usd"):
        v[f"rho_{key}"] = f"{rho[key]:.2f}".replace("-", "\u2212")
    _holds(min(-rho["batch"], -rho["memory"]) > 0.8 > 0.5 > max(-rho["bw_per_usd"], -rho["flops_per_usd"]),
           "the batch and the memory order the costs, not a spec per dollar")
    few = ok[ok["batch"] <= 3]            # the GPUs whose memory the weights nearly fill: all at tp=8
    _holds(len(few) >= 2 and (few["tp"] == 8).all(), "the GPUs the weights nearly fill run at tp=8")
    v["few_gpus"] = ", ".join(few.index[:-1]) + " and " + few.index[-1]
    v["few_batch"] = f"{few['batch'].min():.0f} or {few['batch'].max():.0f}"
    return ChapterText(v, f"cheapest {ok.index[0]}, dearest {ok.index[-1]}")


def _large_tier_gib() -> str:
    """vLLM's memory threshold for its larger batch defaults, GiB (``data/vllm_batch_defaults.csv``, tier
    "large")."""
    with open(DATA_DIR / "vllm_batch_defaults.csv", newline="") as f:
        gib = {float(r["min_memory_gib"]) for r in csv.DictReader(f) if r["tier"] == "large"}
    if len(gib) != 1:
        raise ValueError(f"data/vllm_batch_defaults.csv: one memory threshold for the large tier, got {gib}")
    return f"{gib.pop():g}"


def opening(load: dict) -> ChapterText:
    """Chapter 15's opening numbers: the serving model's fitted constants and their date, the default engine's
    limits (vLLM's API server on an H100 and an A100), the prefill MFU each group of rows would fit alone, and
    the running load's plan (``load``: ``replicas_for``'s users, prompt, output, itl_s and ttft_s) with its
    80% range as measured out of sample (``data/serving_intervals.csv``). Raises
    :class:`~llmsizing.prose.ProseOutOfDate` where the prose's reading fails: the engine keeps vLLM's
    H100 chunk, and FP8 at the MFU x its kernel share agrees with the 16-bit rows within 7%."""
    h100 = get_gpu("H100 SXM")
    v = {"as_of": h100.price_as_of, "prices_as_of": prices_as_of(), "mbu": f"{MBU_DEFAULT:.3f}",
         "attn_bu": f"{ATTENTION_BU_DEFAULT:.3f}", "step_ms": f"{STEP_OVERHEAD_S * 1e3:.2f} ms",
         # a fit at its floor (vLLM's rows, since serve43): the prose says why, not "0.00 ms" bare
         "t0_zero_note": "" if STEP_OVERHEAD_S > 0 else
         ": at batch 1 those rows read the weights faster than the share every engine is given, so the fit "
         "takes the difference out of the overhead. A real step still spends time scheduling and launching; "
         "the fit folds it into that share",
         "mfu": f"{MFU_DEFAULT:.3f}", "range": f"{RANGE_LOW:.2f}-{RANGE_HIGH:.2f}", "engine": DEFAULT_ENGINE,
         "chunk": f"{vllm_default_max_num_batched_tokens(h100):,}"}              # API server, H100
    _holds(MAX_NUM_BATCHED_TOKENS == vllm_default_max_num_batched_tokens(h100),
           "the engine keeps vLLM's chunk on an H100")
    v.update(chunk_a100=f"{vllm_default_max_num_batched_tokens('A100 80GB'):,}",
             seqs=f"{vllm_default_max_num_seqs(h100):,}",
             seqs_a100=f"{vllm_default_max_num_seqs('A100 80GB'):,}",
             large_gib=f"{_large_tier_gib()} GiB",     # the memory from which vLLM gives the H100's defaults
             train_kernel=f"{kernel_efficiency('H100 SXM'):.2f}")
    _holds(0.9 * kernel_efficiency("H100 SXM") < MFU_DEFAULT < kernel_efficiency("H100 SXM"),
           "the prefill MFU is a little below an H100's training kernel share")
    mfu_alone = mfu_by_compute()     # the prefill MFU the FP8 rows, the 16-bit rows and all would fit alone
    for key, grp in (("fp8", "fp8"), ("16", "16-bit"), ("all", "all")):
        v[f"mfu_{key}"] = f"{mfu_alone.loc[grp, 'prefill_mfu']:.2f}"
        v[f"mfu_n_{key}"] = f"{mfu_alone.loc[grp, 'n_rows']}"
    v["fp8_share"] = f"{dtype_kernel_share('H100 SXM', 'fp8'):.2f}"   # data/kernel_efficiency.csv
    # what the FP8 rows fitted alone imply of FP8's own share of its peak, and that over the 16-bit rows'
    # share: the serving rows' counterpart of the training factor above
    fp8_own = mfu_alone.loc["fp8", "prefill_mfu"] * dtype_kernel_share("H100 SXM", "fp8")
    v["fp8_own"] = f"{fp8_own:.2f}"
    v["fp8_of_16"] = f"{fp8_own / mfu_alone.loc['16-bit', 'prefill_mfu']:.2f}"
    # "they bear it out": FP8 computing at the MFU x that share, the two groups fitted alone agree within 7%
    # (with one share for both formats they were 18% apart: serve_calibration.mfu_by_compute)
    _holds(abs(mfu_alone.loc["fp8", "prefill_mfu"] / mfu_alone.loc["16-bit", "prefill_mfu"] - 1) < 0.07,
           "the FP8 and 16-bit rows fitted alone agree within 7%")
    head = replicas_for("llama-3-70b", h100, **load, percentile=95)
    head_mean = replicas_for("llama-3-70b", h100, **load)
    v.update(head_gpus=f"{head.gpus}", head_range=f"{head.gpus_low}-{head.gpus_high}",
             head_occ=f"{OCCUPANCY_CEILING:.0%}", head_mean=f"{head_mean.gpus}",
             # the mean plan at both ends of the engine's stated speed (replicas_for carries the range)
             head_mean_range=f"{head_mean.gpus_low}-{head_mean.gpus_high}",
             head_layout=f"{head.replicas} replicas of tp={head.tp}")
    # the 80% range as measured on sources the fit never saw (tools/calibrate_serving.py); the coverage and
    # median width stated are the check's nested as training's is (serve_calibration.NESTED_GROUP: each source
    # judged by residuals from refits that saw neither it nor their own source; issue 34, ranges42)
    with open(DATA_DIR / "serving_intervals.csv", newline="") as f:
        iv = {r["group"]: r for r in csv.DictReader(f)}
    nested = iv[NESTED_GROUP]
    width_oos = float(nested["width_out_of_sample"])
    v.update(head_cov=f"{float(nested['coverage_out_of_sample']):.0%}", head_cov_n=f"{int(nested['n_rows'])}",
             head_width=f"{float(iv['overall']['width']):.2f}", head_width_oos=f"{width_oos:.2f}",
             head_aim_w=f"{MAX_WIDTH:g}",
             # serve_calibration's docstring: the nested width at each fixed FP8 share (a grid, not a fit)
             head_aim_verdict="within it, but narrowly: the margin rests on the share of its peak that FP8 "
             "computes at, which the model takes from chapter 10's training runs; the book's other published "
             "FP8-to-BF16 ratio, a best-case GEMM search's, gives ranges wider than the aim"
             if width_oos <= MAX_WIDTH else "so that aim is not met",
             vllm_versions=engine_versions("vLLM"))
    return ChapterText(v)
