"""Chapter 12's search and its assumptions in words: what the planner tries, at which prices and efficiencies,
and how wide and how well measured the range it states is.

The chapter's first cell used to build these sentences inline (issue 38: notebooks stay short).
:func:`search_prose` returns a :class:`~llmsizing.prose.ChapterText`: the catalogue figures the prose quotes
(prices and their dates, kernel efficiencies, the usable memory, the search's defaults), the layout range's
factors and its leave-one-source-out measurement against the book's aim (``data/intervals.csv``), and the
interleaving dropdown's example (chapter 11's H100 pipeline at each chunk count). No new arithmetic.
"""

from __future__ import annotations

from functools import partial
from inspect import signature

from .catalog import get_gpu, get_model, prices_as_of
from .cost import FRONT_PLAN
from .hardware import kernel_efficiency
from .intervals import intervals_table
from .layouts import USABLE_FRACTION, step_time
from .mfu import layout_range_factors
from .mfu_published import published_runs
from .parallel import Parallel
from .plan_candidates import stage_chunk_options
from .plan_space import CP_MIN_SEQ
from .planner import plan
from .prose import ChapterText, prose_check
from .range_candidates import MAX_WIDTH, MIN_COVERAGE

__all__ = ["search_prose", "range_verdict"]

#: Raises :class:`~llmsizing.prose.ProseOutOfDate` when the numbers no longer bear out what the prose says
_says = partial(prose_check, chapter="chapter 12's prose")


def range_verdict(coverage: float, median_width: float) -> str:
    """Which of the book's two bars for a range (issue 34: ``MIN_COVERAGE`` inside, at a median width of at
    most ``MAX_WIDTH``) a measured range meets, for the prose."""
    c, w = coverage >= MIN_COVERAGE, median_width <= MAX_WIDTH
    return ("both hold" if c and w else "the coverage holds, the width does not" if c
            else "the width holds, the coverage does not" if w else "neither holds")


def search_prose(gpus) -> ChapterText:
    """Chapter 12's "What the planner searches" section, for the GPU types ``gpus`` the chapter plans on."""
    gpus = tuple(gpus)
    if not gpus:
        raise ValueError("gpus must name at least one GPU type")
    facts = ChapterText()
    text = facts.values
    # the share of the whole 405B run's GPU time lost against its steady state (chapter 10): failures,
    # restarts, other stages; the whole run's MFU over the steady state's is the goodput that divides the days
    mfu = published_runs().set_index("run")["implied_mfu"]
    goodput = mfu["Llama 3.1 405B pre-training"] / mfu["Llama 3.1 405B, 16,384 GPUs (TP8 PP16 DP128)"]
    text["405_loss"] = f"{1 - goodput:.0%}"
    text["as_of"] = prices_as_of(gpus)                                  # each price has its own date
    _says(all(get_gpu(g).price_kind == "list" for g in gpus), "list prices, no estimates")
    text["b200_gb"] = f"{get_gpu('B200').memory_marketed_gb:.0f} GB"
    for key, gpu in (("h100", "H100 SXM"), ("a100", "A100 80GB"), ("b200", "B200")):
        text[f"eff_{key}"] = f"{kernel_efficiency(gpu):.1%}"
    text["usable"] = f"{USABLE_FRACTION:.0%}"
    # the search's defaults the prose names: micro-batch sizes, the length from which context parallelism is
    # tried
    mbs = signature(plan).parameters["micro_batches"].default
    text["micro_batches"] = f"{', '.join(map(str, mbs[:-1]))} or {mbs[-1]}"
    text["cp_min_seq"] = f"{CP_MIN_SEQ // 1024}K"
    lo_h, hi_h = layout_range_factors("H100 SXM")
    text["low_factor"], text["high_factor"] = f"{1 / hi_h:.2f}", f"{1 / lo_h:.2f}"
    text["stated_width"] = f"{hi_h / lo_h:.2f}x"                       # the range stated from every source
    _measured_range(facts)
    _interleaving(facts)
    return facts


def _measured_range(facts: ChapterText) -> None:
    """The range of an MFU predicted from a layout, measured leaving one source out (data/intervals.csv),
    against the book's aim; with the stack named; FP8 against BF16; the stand-in runs; the end-to-end
    range."""
    text = facts.values
    iv = intervals_table().set_index(["area", "group"])
    st = iv.loc[("training-layout", "all")]
    text["nominal"] = f"{st['nominal_coverage']:.0%}"
    text["step_cov"] = f"{st['measured_coverage']:.0%}"
    text["step_width"] = f"{st['median_width']:.2f}x"
    text["aim"] = f"at least {MIN_COVERAGE:.0%} inside at a median width of at most {MAX_WIDTH:g} times"
    text["aim_verdict"] = range_verdict(st["measured_coverage"], st["median_width"])
    # naming the stack (framework=, chapter 10): each run against its family's band (the pooled one where its
    # family or cell states none); two families' bands on the H100, as factors on the days
    sk = iv.loc[("training-layout", "stack:all")]
    text["stack_cov"] = f"{sk['measured_coverage']:.0%}"
    text["stack_width"] = f"{sk['median_width']:.2f}x"
    text["stack_verdict"] = range_verdict(sk["measured_coverage"], sk["median_width"])
    for fw in ("megatron-core", "deepspeed"):
        lo, hi = layout_range_factors("H100 SXM", framework=fw)
        text[f"stack_{fw.split('-')[0]}"] = f"{1 / hi:.2f} to {1 / lo:.2f}"
    text["step_n"] = f"{int(st['n_rows'])}"
    text["step_sources"] = f"{int(st['n_sources'])}"
    fp8, bf16 = iv.loc[("training-layout", "fp8")], iv.loc[("training-layout", "bf16")]
    text["step_fp8_cov"] = f"{fp8['measured_coverage']:.0%}"
    text["step_fp8_n"] = f"{int(fp8['n_rows'])}"
    text["step_fp8_sources"] = f"{int(fp8['n_sources'])}"
    # the runs on a GPU and format no other source calibrates are counted apart (group stand-in)
    si = iv.loc[("training-layout", "stand-in")]
    text["step_standin_n"] = f"{int(si['n_rows'])}"
    si_in = round(si["measured_coverage"] * si["n_rows"])
    text["step_standin_in"] = "none" if si_in == 0 else f"{si_in:.0f}"
    text["step_bf16_cov"] = f"{bf16['measured_coverage']:.0%}"
    text["e2e_width"] = f"{iv.loc[('training-inputs', 'all'), 'median_width']:.2f}x"
    # the prose's verdicts, from the same rows: against the end-to-end range of each generation (issue 34: it
    # is per generation now), is the layout's range narrower; do the FP8 runs fare worse
    vs = {}
    for gen in ("ampere", "hopper"):
        e2e = iv.loc[("training-inputs", gen), "median_width"]
        text[f"e2e_width_{gen}"] = f"{e2e:.2f}x"
        vs[gen] = "narrower" if st["median_width"] < e2e else "wider"
    text["layout_vs"] = (f"{vs['ampere']} than the end-to-end one on both Ampere and Hopper"
                         if vs["ampere"] == vs["hopper"] else
                         f"{vs['ampere']} than the end-to-end one on Ampere and {vs['hopper']} on Hopper")
    text["fp8_join"] = "against" if fp8["measured_coverage"] < bf16["measured_coverage"] else "and"


def _interleaving(facts: ChapterText) -> None:
    """The dropdown on interleaving: each chunk reduces its gradients in a call of its own (chapter 7), so
    more chunks shrink the bubble but add calls; chapter 11's H100 pipeline (its best interleaved plan on its
    fastest plan's GPU count, read from the plan, not typed) is fastest at an intermediate count, and the
    planner, which prices every count, lists that one."""
    text = facts.values
    model, seq, (gpu,) = FRONT_PLAN["model"], FRONT_PLAN["seq"], FRONT_PLAN["gpus"]   # chapter 11's plan
    p11 = plan(**FRONT_PLAN)
    # chapter 11's pipeline: the fastest interleaved plan on as many GPUs as its fastest plan (cost_prose)
    n = p11.loc[p11["days"].idxmin(), "n_gpus"]
    r = p11[(p11["n_gpus"] == n) & (p11["virtual_stages"] > 1)].sort_values("days").iloc[0]
    tp, pp, dp, zero = (int(r[k]) for k in ("tp", "pp", "dp", "zero"))
    layers = get_model(model).layers // pp                # one stage's layers (an even split)
    _says(layers * pp == get_model(model).layers, "chapter 11's pipeline splits the layers evenly")
    vps = stage_chunk_options(layers)                       # every count of equal chunks of one stage
    ga = FRONT_PLAN["global_batch"] // dp                   # its batch over its replicas
    st = {v: step_time(model, get_gpu(gpu),
                       Parallel(tp=tp, pp=pp, dp=dp, zero=zero, sp=tp > 1, virtual_stages=v),
                       batch=1, seq=seq, grad_accum=ga) for v in vps}
    best = min(st, key=lambda v: st[v].step_s)
    most = max(vps)                                         # one layer a chunk
    _says(1 < best < most, "neither the fewest nor the most chunks is fastest")
    _says(st[most].bubble_s < st[best].bubble_s, "the most chunks: a smaller bubble")
    _says(
        st[most].exposed_by_group_s["dp"]
        > st[best].exposed_by_group_s["dp"],
        "the most chunks: a longer wait for the gradients")
    r11 = p11[(p11["tp"] == tp) & (p11["pp"] == pp) & (p11["dp"] == dp) & (p11["zero"] == zero)]
    _says(r11.loc[r11["step_time_s"].idxmin(), "virtual_stages"] == best, "the planner lists that count")
    text["vp_layout"] = f"tp={tp}, pp={pp}, dp={dp}"
    text["vp_stage_layers"] = f"{layers}"
    text["vp_most"] = f"{most}"
    text["vp_counts"] = ", ".join(map(str, vps[:-1])) + f" or {vps[-1]}"
    text["vp_best"] = f"{best}"
    text["vp_mid_faster"] = f"{st[most].step_s / st[best].step_s - 1:.1%}"
    text["vp_dp_ms"] = f"{st[best].exposed_by_group_s['dp'] * 1e3:.0f} ms"
    text["vp_dp_ms_40"] = f"{st[most].exposed_by_group_s['dp'] * 1e3:.0f} ms"
