"""Chapter 14's prose values ("Rules of thumb, checked"): every number the chapter's findings glue, as text.

The chapter's notebook calls :func:`chapter_values` on :func:`~llmsizing.audit.audit_table` and glues each
entry as ``ch14_<key>``. Two kinds of number appear side by side:

* **the seed's own figure**, a quotation, always read from ``data/seed_claims.csv`` (:func:`said`, the
  names ``ch14_said_*`` of :data:`SEED_QUOTES`) and never typed into the prose, so that a test ties each
  quotation to its data row and the row to the seed's line;
* **the library's number** beside it: the central estimate (``library_central``) and, where the audit judges
  the claim at another point of the band (the chapter's one "most favourable reading" rule), that point
  (``library``).

Where the prose states a fact about the table (a verdict, which side of the band a value lies), the statement
is checked here: a change in the data or the library that makes the prose wrong raises :class:`ProseOutOfDate`
instead of printing a sentence that no longer holds. No formula lives here: the numbers come from
:mod:`llmsizing.audit`, :mod:`llmsizing.time_cost`, :mod:`llmsizing.memory` and the catalogues.
"""

from __future__ import annotations

import re

import pandas as pd

from .audit import (BAND, DRIVER_GB_READING, GIB_READING, HOST_BYTES_PER_NODE, KINDS, OFFLOAD_COUNTED,
                    OFFLOAD_TOKENS_PER_STEP, SEED_PRICES_USD, SEQ, SEQS, not_computed_claims,
                    offload_exposed_days, readings, recompute_saving_pct, seed_days_at_throughput,
                    seed_gpu_days_usd, verdict, verdict_counts, verdict_kind, verdict_number)
from .audit_inputs import ten_b_stand_in
from .audit_quotes import (SEED_QUOTES, _holds, _Rows, _verb, fmt, said, seed_efficiencies,
                           seed_quotes)
from .audit_runs import fragile_offload_verdicts, offload_batch_flip
from .catalog import get_gpu
from .finetune_time import finetune_time
from .prose import ChapterText, ProseOutOfDate
from .memory import model_states, training_memory
from .parallel import Parallel
from .time_cost import mfu_estimate, mfu_range_factors, published_runs, training_time
from .units import GB


def _counted(n: int, kind: str) -> str:
    """'3 hold', '1 needs CPU offload', '2 are off', '1 is wrong in kind': a count of one kind of verdict."""
    one = n == 1
    verb = {"holds": "holds" if one else "hold", "needs CPU offload": "needs CPU offload" if one else
            "need CPU offload"}.get(kind, f"{'is' if one else 'are'} {kind}")
    return f"{n} {verb}"


def _method(r: _Rows) -> dict[str, str]:
    """The values of "How the audit works" and the headline: counts, the rule's settings, its worked cases."""
    row, table, g = r.row, r.table, {}
    # seed 004's 41 GB is Unsloth's, which writes GiB as "GB": the unit is an open setting (gib_source)
    q70 = row.loc["004-qlora-70b-41gb"]
    q70_gb = readings("004-qlora-70b-41gb").iloc[0]                     # the same peak in 10**9 bytes
    _holds(q70["reading"].endswith(GIB_READING) and q70["unit"] == "GiB"
           and q70_gb["reading"] + GIB_READING == q70["reading"], "the 41 GB is judged in GiB")
    g["qlora70"], g["qlora70_gb"] = f"{r.lib('004-qlora-70b-41gb')} GiB", f"{fmt(q70_gb['library'])} GB"
    g["qlora70_v"], g["qlora70_gb_v"] = r.v("004-qlora-70b-41gb"), q70_gb["verdict"]
    g["qlora70_x"] = f"{1 / q70['ratio']:.2f}"                # the library's peak over the 41 GiB
    _holds(BAND - 0.05 < 1 / q70["ratio"] <= BAND, 'the 41 GiB holds "narrowly"')
    _holds(verdict_kind(q70_gb["verdict"]) == "off", "the unit decides the 41 GB row")
    _holds(all(r.v(c) == "holds" for c in ("004-qlora-70b-41gb", "004-qlora-70b-one-gpu",
                                           "004-qlora-7-13b-l40s", "000-fit-rtx4090-mistral7b-q",
                                           "000-fit-a10-mistral7b-q", "000-fit-h100-llama2-70b-techniques")),
           "the QLoRA answers hold")
    skipped, repeats = not_computed_claims(), table[table["counted_with"] != ""]
    g["n_total"], g["n_computed"] = f"{len(table) + len(skipped)}", f"{len(table)}"
    g["n_skipped"], g["n_repeats"] = f"{len(skipped)}", f"{len(repeats)}"
    image = table[table["from_image"]]
    _holds(set(image["article"]) == {"002"} and sorted(image["id"]) == [
        "002-70b-serving", "002-rule-128k", "002-rule-batch32"], "seed 002's formula, twice, and its 168 GB")
    g["n_image"] = f"{len(image)}"
    # a GPU count that needs offload: any count from the fewest GPUs that hold the step with offload up to one
    # fewer than it needs without; central = the fewest, judged = the count nearest the claim (seed 003's 70B)
    g70, plain70 = row.loc["003-70b-h100s"], row.loc["000-intro-70b-gpus", "library_central"]
    _holds((g70["claimed_low"], g70["claimed_high"]) == (4, 8) and g70["verdict_kind"] == "needs CPU offload"
           and g70["library_central"] < g70["claimed_low"] == g70["library"], "seed 003's 70B count")
    _holds(row.loc["000-intro-70b-gpus", "reading"].startswith("fused AdamW, no offload"),
           "70B without offload")
    g["cnt_central"], g["cnt_judged"] = f"{g70['library_central']:.0f}", f"{g70['library']:.0f}"
    g["cnt_plain"], g["cnt_top"] = f"{plain70:.0f}", f"{plain70 - 1:.0f}"
    counts, head = verdict_counts(table), verdict_counts(table, headline=True)
    by_seed = verdict_counts(table, by="article", headline=True)
    g["n_head"] = f"{sum(head.values())}"
    _holds(sum(counts[k] for k in KINDS) == len(table) > sum(head.values()), "the legend counts more rows")
    for k, key in zip(KINDS, ("holds", "offload", "off", "kind")):
        g[f"n_{key}"] = f"{head[k]}"
        for seed in by_seed.index:
            g[f"s{seed}_{key}"] = f"{by_seed.loc[seed, k]}"
    for seed in by_seed.index:
        g[f"s{seed}_total"] = f"{by_seed.loc[seed, 'total']}"
        g[f"s{seed}_parts"] = ", ".join(_counted(by_seed.loc[seed, k], k) for k in KINDS
                                        if by_seed.loc[seed, k])
    # the optimizer step: fused AdamW keeps no temporaries, foreach one fp32 tensor per parameter (chapter 4)
    for impl in ("fused", "foreach"):
        step = training_memory("llama-2-70b", batch=1, seq=SEQ, recompute="full", optimizer_impl=impl)
        g[f"{impl}70"] = f"{step.total_bytes / GB:,.0f} GB"
    g["band"], g["band_factor"], g["seq"] = f"{BAND - 1:.0%}", f"{BAND:g}", f"{SEQ:,}"
    g["host_tb"] = f"{HOST_BYTES_PER_NODE / 1e12:g} TB"
    g["offload_tokens"] = f"{OFFLOAD_TOKENS_PER_STEP:,}"               # per GPU per optimizer step
    g["offload_seqs"] = f"{OFFLOAD_TOKENS_PER_STEP // SEQ}"
    g["price_h100"] = f"{SEED_PRICES_USD['H100 SXM']:.2f} USD"
    g["price_a100"] = f"{SEED_PRICES_USD['A100 80GB']:.2f} USD"
    g["seqs"] = " and ".join(f"{s:,}" for s in sorted(SEQS))
    g["seq_short"] = f"{min(SEQS):,}"
    ft = table[table["kind"] == "fine-tuning memory"]                 # one length, central = judged
    _holds((ft["library_central"] == ft["library"]).all()
           and ft["reading"].str.contains(f"{min(SEQS):,} tokens").all(), "a LoRA row has one length")
    return g


def _batch_and_cases(r: _Rows) -> dict[str, str]:
    """How far the stated offload batch carries a verdict, and the worked cases of the rule."""
    row, table, g = r.row, r.table, {}
    # the batches at which seed 000's offloaded days flip
    flip = {w: offload_batch_flip(f"000-faq-finetune-{w}") for w in ("days", "usd")}
    low = {w: offload_batch_flip(f"000-faq-finetune-{w}", larger=False) for w in ("days", "usd")}
    # the fine-tuning days: too long even counted, at this batch or larger (since rows31's refit)
    _holds(r.number("000-faq-finetune-days").endswith("(too high)") and flip == {"days": None, "usd": None}
           and all(f < OFFLOAD_TOKENS_PER_STEP for f in low.values()),
           "the fine-tune holds only at smaller batches")
    m7 = "000-cost-mistral7b-1-days"
    m7_flip = offload_batch_flip(m7)
    _holds(r.number(m7) == "holds" and m7_flip > OFFLOAD_TOKENS_PER_STEP,
           "Mistral 7B holds up to a larger batch")
    g["offload_flip_text"] = (
        f"seed 000's 100B tokens of Mistral 7B on one H100 hold, counted, below {m7_flip:,} tokens per "
        f"GPU per step ({m7_flip // SEQ} sequences); with a larger batch the "
        f"{fmt(row.loc[m7, 'claimed_low'])} days are too long even counted. Its fine-tuning days, 1B tokens "
        "of the same run, are too long even counted at the stated batch, and a larger one only shortens the "
        f"run further: the largest batch at which they hold is {low['days'] // SEQ} sequences per step "
        f"({low['days']:,} tokens; for its dollars "
        f"{low['usd'] // SEQ}), where the host adds more time per token.")
    # the offloaded verdicts that change between half and twice the stated batch
    fragile = [f"`{d['id']}` (changes at {' and '.join(str(d[k]) for k in ('below', 'above') if d[k])} "
               "sequences)" for d in fragile_offload_verdicts(2.0)]
    _holds(fragile, "some offloaded verdicts change between half and twice the batch")
    g["offload_fragile"] = ", ".join(fragile[:-1]) + " and " + fragile[-1] if len(fragile) > 1 else fragile[0]
    l13 = "000-cost-llama2-13b-8-days"         # the example of the two columns: eight H100s, 100B tokens
    g["l13_judged"], g["l13_central"] = r.lib(l13), r.central(l13)
    g["l13_claim"] = fmt(row.loc[l13, "claimed_low"])
    t13 = training_time("llama-2-13b", tokens=1e11, gpu="H100 SXM", n_gpus=8, seq=SEQ)   # the row's run
    c13 = row.loc[l13]
    _holds(abs(t13.days / c13["library_central"] - 1) < 1e-9
           and t13.days_low <= c13["claimed_low"] <= t13.days_high and c13["library"] == c13["claimed_low"]
           and r.v(l13) == "holds" and c13["library_central"] < 0.9 * c13["claimed_low"],
           "Llama 2 13B's days lie in the band, the central estimate clearly shorter")
    g["l13_band"] = f"{fmt(t13.days_low)} to {fmt(t13.days_high)}"
    # the one capacity claim above its GPU's memory that the band lets through (said in the verdict rule)
    over = table[(table["bound"] == "at most") & (table["library"] > table["claimed_low"])]
    _holds(list(over["id"]) == ["000-fit-a100-80-mistral7b"] and r.number(over["id"].iloc[0]) == "holds",
           "one capacity above its GPU's memory holds")
    g["cap_gb"] = f"{r.lib('000-fit-a100-80-mistral7b')} GB"
    # the three speed ratios of two runs, judged at their central MFUs: how many hold (issue 34 moved FP8's)
    speed = {"004-fp8-faster-h100": "FP8's speed-up", "004-l40s-fp8-vs-a100": "the L40S's",
             "004-b200-speedup": "the B200's"}
    off = [name for i, name in speed.items() if row.loc[i, "verdict_kind"] != "holds"]
    words = {0: "None", 1: "One", 2: "Two"}
    g["speed_held"] = ("The three speed ratios hold all the same." if not off else
                       f"{words[len(speed) - len(off)]} of the three speed ratios hold all the same; "
                       f"{' and '.join(off)} {'does' if len(off) == 1 else 'do'} not (below).")
    return g

def _bytes_and_rates(r: _Rows) -> dict[str, str]:
    """The findings on bytes and rates: the seeds' memory figures (bytes a parameter, a 70B model's states and
    weights) and their throughput and MFU against the calibrated band, by GPU generation."""
    row, g = r.row, {}
    _holds(said(r.table, "000-fsdp-405b-mem") == said(r.table, "000-pp-405b-mem"),
           '"not 80 GB" for both 405B layouts')
    g["rule4x"] = f"{row.loc['000-rule-4x', 'library']:.0f} bytes"
    g["adam_state"] = f"{row.loc['000-rule-adam-state', 'library']:.0f}"
    g["adam_state_v"] = r.v("000-rule-adam-state")
    g["mem_b1"] = r.ratio_x("000-mem-llama2-70b-b1")
    g["mem70_lib"] = f"{r.central('000-mem-llama2-70b-b1')} GB"
    g["opt_10b"] = f"{r.lib('002-10b-optimizer')} GB"
    g["q4_70b"] = f"{r.lib('000-q4-llama2-70b')} GB"
    g["16b"] = r.lib("004-16-bytes")
    g["70b_total"] = f"{r.lib('004-70b-total')} GB"
    g["w70"] = f"{r.central('004-70b-weights')} GB"
    # throughput and time, at the calibrated MFU band (chapter 10)
    m70 = mfu_estimate("llama-2-70b", gpu="H100 SXM", seq=SEQ)
    small = [mfu_estimate(m, gpu="H100 SXM", seq=SEQ).mfu for m in ("mistral-7b", "llama-2-13b")]
    _holds(all(u < m70.mfu < 1.5 * u for u in small), "the MFU rises a little with the model's size")
    g["mfu70"] = f"{m70.mfu:.0%}"
    g["mfu70_band"] = f"{m70.low:.0%} to {m70.high:.0%}"
    m70s = mfu_estimate("llama-2-70b", gpu="H100 SXM", seq=min(SEQS))   # the band the H100 row is judged in
    _holds(row.loc["000-tps-h100", "reading"].startswith(
        f"calibrated MFU {m70s.mfu:.0%} (band {m70s.low:.0%} to {m70s.high:.0%})"), "the H100 row's band")
    g["mfu70_top_short"] = f"{m70s.high:.0%}"
    g["flops_coef"] = r.central("000-time-formula")              # at 4,096 tokens
    g["flops_coef_judged"] = r.lib("000-time-formula")           # at 2,048 tokens
    g["flops_v"] = r.v("000-time-formula")
    for gpu in ("h100", "a100"):
        g[f"tps_{gpu}_hi"] = r.lib(f"000-tps-{gpu}")
        g[f"tps_{gpu}_c"] = r.central(f"000-tps-{gpu}")
        g[f"tps_{gpu}_x"] = f"{row.loc[f'000-tps-{gpu}', 'ratio']:.1f}"
    # the A100's band for Llama 2 70B, where the A100 rows are judged (the calibrated range)
    a70 = mfu_estimate("llama-2-70b", gpu="A100 80GB", seq=min(SEQS))
    _holds(row.loc["000-tps-a100", "reading"].startswith(
        f"calibrated MFU {a70.mfu:.0%} (band {a70.low:.0%} to {a70.high:.0%})"), "the A100 row's band")
    a_lo, a_hi = mfu_range_factors("A100 80GB")
    g["a100_mfu"] = f"{a70.mfu:.0%}"
    g["a100_band"] = f"{a70.low:.0%} to {a70.high:.0%}"
    g["a100_factors"] = f"{a_lo:.2f} and {a_hi:.2f}"
    h_lo, h_hi = mfu_range_factors("H100 SXM")                  # one range per generation (issue 34)
    g["a100_vs_h100"] = ("narrower than" if a_hi / a_lo < h_hi / h_lo - 1e-9 else
                              "wider than" if a_hi / a_lo > h_hi / h_lo + 1e-9 else "the same as")
    runs = published_runs().set_index("run")
    mpt = runs.loc["MPT 70b (llm-foundry benchmark), 64 x A100 80GB, seq 2,048"]
    _holds(mpt["recompute"] == "full" and mpt["calibration"], "MPT 70B ran with full recomputation")
    mpt_t = training_time("mpt-bench-70b", tokens=1e9, gpu="A100 80GB", n_gpus=64, seq=2048, recompute="full",
                          mfu=mpt["implied_mfu"])
    g["mpt70_mfu"] = f"{mpt['implied_mfu']:.0%}"
    g["mpt70_hfu"] = f"{mpt_t.hfu:.0%}"
    g["mpt70_vs_top"] = ("about at the band's top" if abs(mpt_t.hfu - a70.high) < 0.03 else
                              "above the band's top, among the runs an 80% band leaves out"
                              if mpt_t.hfu > a70.high else
                              f"below the band's top ({a70.high:.0%}), inside the band")
    g["tps_a10_7b"] = r.central("000-tps-a10")
    a10 = row.loc["000-tps-a10"]                    # the seed's 1,200 against the central estimate
    _holds(a10["verdict"] == "holds", "the A10's rate holds at a point of the band")
    a10_r = a10["claimed"] / a10["library_central"]
    g["a10_near"] = "close to" if max(a10_r, 1 / a10_r) <= BAND else "within the MFU band of"
    # say when the two centrals coincide, else why they are worth setting side by side
    peak_x = get_gpu("H100 SXM").bf16_dense_tflops / get_gpu("A10").bf16_dense_tflops
    g["a10_same"] = ((" By coincidence it is the H100's central estimate for Llama 2 70B"
                           if r.central("000-tps-a10") == r.central("000-tps-h100") else
                           f" An H100 gets {r.central('000-tps-h100')} for Llama 2 70B at its central MFU")
                          + f", with {peak_x:.1f} times the A10's peak: a rate per card means little "
                            "without its model.")
    return g


def _times_and_costs(r: _Rows) -> dict[str, str]:
    """The findings on times and costs: the cost tables' days and dollars (Mistral 7B with the optimizer
    offloaded, Llama 2 70B on 64 GPUs, the options' costs) and the "8 GPUs for 50 days" ratio."""
    row, g = r.row, {}
    for c, name in (("000-cost-llama2-70b-64-days", "70_64_days"), ("000-opt1-days", "opt1_days")):
        g[name] = r.lib(c)
        g[f"{name}_c"] = r.central(c)
    m7 = "000-cost-mistral7b-1-days"
    g["m7_1_central"], g["m7_1_lib"] = r.central(m7), r.lib(m7)
    # the run needs CPU offload; the slow end with the host's time hidden (the delayed update) and counted
    run = training_time("mistral-7b", tokens=1e11, gpu="H100 SXM", n_gpus=1, seq=SEQ)
    extra = offload_exposed_days("mistral-7b", 1e11, "H100 SXM", 1)
    _holds(OFFLOAD_COUNTED in row.loc[m7, "reading"], "Mistral 7B's one-H100 days are judged counted")
    _holds(abs(row.loc[m7, "library"] / (run.days_high + extra) - 1) < 1e-9,
           "the slow end plus the host's time")
    g["m7_1_hidden"] = fmt(run.days_high)
    hidden_v = verdict(row.loc[m7, "claimed_low"], run.days_high)
    g["m7_1_hidden_v"] = "would hold too" if hidden_v == "holds" else f"would be {hidden_v}"
    g["m7_1_v"] = _verb(r.number(m7))
    m7_24 = [r.number(f"000-cost-mistral7b-{n}-days") for n in (2, 4)]      # "its 2- and 4-GPU rows are each"
    _holds(m7_24[0] == m7_24[1] and verdict_kind(m7_24[0]) == "off", "Mistral 7B's 2- and 4-GPU rows miss")
    g["m7_24_v"] = m7_24[0]
    _holds(all(r.number(f"000-cost-llama2-13b-{n}-days") == "holds" for n in (1, 4, 8)),
           "Llama 2 13B's three hold")
    m7s = [r.number(f"000-cost-mistral7b-{n}-days") for n in (1, 2, 4)]
    _holds(all(v == "holds" or v.endswith("(too high)") for v in m7s) and any(v != "holds" for v in m7s),
           "Mistral 7B's rows are long, none too short")
    _holds(all(row.loc[c, "reading"].endswith(f"; {min(SEQS):,} tokens") for c in
               ("000-tps-h100", "000-cost-llama2-70b-64-days", "002-rule-batch32",
                "002-10b-layer-activations", "002-10b-activations", "002-10b-total", "000-grad-accum")),
           "these rows are judged at 2,048 tokens")
    own_tps = row.loc["000-cost-mistral7b-1-tps", "claimed_low"]         # the cost table's own throughput
    m7_tps = "000-cost-mistral7b-1-tps"
    g["m7_1_tps_c"], g["m7_1_tps_j"] = r.central(m7_tps), r.lib(m7_tps)
    _holds(r.number(m7_tps).endswith("(too low)"), "Mistral 7B's one-H100 rate is too low")
    g["m7_own_days"] = f"{seed_days_at_throughput(1e11, own_tps):.0f}"
    tps70 = sorted(float(r.ratio_x(f"000-cost-llama2-70b-{n}-tps")) for n in (8, 16, 32, 64))
    g["tps70_x"] = f"{tps70[0]:.1f} to {tps70[-1]:.1f}"
    # costs
    g["opt1_cost_x"] = f"{1 / row.loc['000-opt1-cost', 'ratio']:.0f}"
    g["opt3_cost"] = f"{r.lib('000-opt3-cost')} USD"
    g["opt3_cost_c"] = f"{r.central('000-opt3-cost')} USD"
    g["8x50_usd"] = f"{seed_gpu_days_usd(8, 50, 'H100 SXM'):,.0f} USD"
    _holds(seed_gpu_days_usd(8, 50) == seed_gpu_days_usd(1, 400), "the same 400 GPU-days")
    # the seed's example run (Mistral 7B, 100B tokens) on 8 H100s over 1, each at its central MFU
    t8, t1 = (training_time("mistral-7b", tokens=1e11, gpu="H100 SXM", n_gpus=n, seq=SEQ) for n in (8, 1))
    g["8x50_hidden"] = f"{t8.cost_usd / t1.cost_usd:.2f}"        # the host's time hidden
    _holds(OFFLOAD_COUNTED in row.loc["000-faq-8x50-cheaper", "reading"], "the 8x50 ratio is judged counted")
    g["8x50_x"] = r.lib("000-faq-8x50-cheaper")
    g["8x50_v"] = row.loc["000-faq-8x50-cheaper", "verdict_kind"]
    g["8x50_num"] = r.number("000-faq-8x50-cheaper")
    _holds(r.number("000-faq-8x50-cheaper") == "holds" and t8.cost_usd / t1.cost_usd >= 1 - 1e-12,
           "more GPUs never make the run cheaper at one MFU")
    return g


def _counts(r: _Rows) -> dict[str, str]:
    """The findings on GPU counts: the fewest GPUs for 70B and 405B, the claims wrong in kind, the per-GPU
    memory of each 405B layout and the 405B matrix's count."""
    row, table, g = r.row, r.table, {}
    g["min_70"] = f"{row.loc['000-intro-70b-gpus', 'library_central']:.0f}"
    g["min_l3_70"] = f"{row.loc['004-70b-two-nodes', 'library_central']:.0f}"
    g["min_405"] = f"{row.loc['003-405b-gpus', 'library_central']:.0f}"
    kw = dict(batch=1, seq=SEQ, recompute="full")
    host = {n: training_memory("llama-2-70b", parallel=p, **kw).host_bytes * min(n, 8) / 1e12
            for n, p in ((8, Parallel(dp=8, zero=3, offload="optimizer")),
                         (1, Parallel(dp=1, zero=3, offload="optimizer+params")))}
    g["host_70_8"] = f"{host[8]:.1f} TB"
    g["host_70_1"] = f"{host[1]:.1f} TB"
    g["405_opt_tb"] = f"{model_states('llama-3.1-405b').optimizer_bytes / 1e12:.1f} TB"
    wrong = table[table["verdict_kind"] == "wrong in kind"]["id"].tolist()
    _holds(wrong == ["000-pp-405b-days"], "one claim is wrong in kind, the 405B run on 16 H100s")
    g["wrong_ids"] = ", ".join(f"`{i}`" for i in wrong)
    g["tp_mem"] = f"{r.lib('000-tp-70b-mem')} GB"
    g["pp_mem"] = f"{r.lib('000-pp-405b-mem')} GB"
    g["fsdp_mem"] = f"{r.lib('000-fsdp-405b-mem')} GB"
    _holds(all(r.lib(c) == r.central(c) for c in ("000-tp-70b-mem", "000-pp-405b-mem", "000-fsdp-405b-mem")),
           "one figure per layout (central = judged to three figures)")
    g["tp_params"] = r.lib("000-tp-70b-params")
    matrix = table[table["id"].str.startswith("000-matrix-")]
    g["matrix_n"] = f"{len(matrix)}"
    g["matrix_plain"] = f"{(matrix['verdict_kind'] == 'holds').sum()}"
    g["matrix_offload"] = f"{(matrix['verdict_kind'] == 'needs CPU offload').sum()}"
    n405 = int(row.loc["000-matrix-405b-15t-h100", "claimed_low"])
    t405 = training_time("llama-3.1-405b", tokens=15e12, gpu="H100 SXM", n_gpus=n405, seq=SEQ)
    g["405_256_years"] = f"{t405.days_low / 365.25:.0f} to {t405.days_high / 365.25:.0f}"
    return g


def _techniques(r: _Rows) -> dict[str, str]:
    """The findings on techniques (gradient accumulation, mixed precision, checkpointing: which hold) and on
    the rules of thumb that drop a dimension (batch, context, the 10B example's activations)."""
    row, table, g = r.row, r.table, {}
    g["ga_batch"] = r.lib("000-grad-accum-batch")
    g["ga_ratio"] = f"{row.loc['000-grad-accum', 'library']:.2f}"            # no recomputation
    g["ga_ratio_full"] = f"{row.loc['000-grad-accum', 'library_central']:.2f}"
    g["ga_saving"] = f"{row.loc['000-grad-accum-savings', 'library']:.0f}%"
    _holds(row.loc["000-grad-accum-savings", "reading"] == "step peaks, seed's setting",
           "accumulation's saving is read with full recomputation")
    g["mp_ratio"] = f"{row.loc['000-mixed-precision-2x', 'library']:.2f}"   # no recomputation
    g["mp_full"] = f"{row.loc['000-mixed-precision-2x', 'library_central']:.2f}"
    g["ckpt"] = f"{row.loc['000-checkpointing-slowdown', 'library']:.2f}"
    g["ckpt_mem"] = f"{row.loc['000-checkpointing', 'library']:.0f}%"           # 2,048 tokens
    g["ckpt_mem_central"] = f"{row.loc['000-checkpointing', 'library_central']:.0f}%"
    g["ckpt_mem_v"] = r.v("000-checkpointing")
    g["ckpt_mem_b1"] = f"{recompute_saving_pct('mistral-7b', 1):.0f}%"        # one sequence, 4,096
    g["ckpt_pct"] = f"{row.loc['000-checkpointing-slowdown', 'library'] - 1:.0%}"
    _holds(all(r.v(c) == "holds" for c in ("004-b200-speedup", "004-l40s-fp8-vs-a100")),
           "the B200's and the L40S's ratios hold")
    # which of seed 000's technique claims hold (the four named) and which do not (the two named)
    tech = {"000-grad-accum": True, "000-grad-accum-savings": True, "000-mixed-precision-2x": True,
            "000-checkpointing-slowdown": True, "000-grad-accum-batch": False, "000-checkpointing": False}
    _holds(set(table.loc[table["id"].str.startswith("000-") & table["claim"].str.contains(
        "accumulat|checkpointing|Mixed precision", case=False), "id"]) == set(tech),
           "seed 000's six techniques")
    _holds(all((r.v(c) == "holds") == held for c, held in tech.items()), "which techniques hold")
    g["tech_n"] = f"{len(tech)}"
    g["tech_held"] = f"{sum(tech.values())}"
    g["ga_batch_v"] = r.v("000-grad-accum-batch")
    # rules that drop a dimension
    g["rule_b32"] = r.central("002-rule-batch32")
    b32 = row.loc["002-rule-batch32"]
    _holds(1 / BAND <= b32["claimed"] / b32["library_central"] < 1 / BAND + 0.1,
           "the central factor at batch 32 is just inside the band")
    g["rule_b32_2k"] = r.lib("002-rule-batch32")
    g["rule_128k"] = r.lib("002-rule-128k")
    g["serve70"] = f"{r.lib('002-70b-serving')} GB"
    _holds(r.lib("002-70b-serving") == r.central("002-70b-serving"), "one serving figure for Llama 2 70B")
    for c, name in (("002-10b-layer-activations", "layer_act"),):
        g[f"{name}"] = f"{row.loc[c, 'library'] / 1000:.2f} GB"
        g[f"{name}_c"] = f"{row.loc[c, 'library_central'] / 1000:.2f} GB"
        g[f"{name}_x"] = f"{1 / row.loc[c, 'ratio']:.0f}"
    g["10b_total"] = f"{r.lib('002-10b-total')} GB"
    g["10b_total_c"] = f"{r.central('002-10b-total')} GB"
    g["10b_layers"] = f"{ten_b_stand_in().layers}"
    g["10b_params"] = f"{ten_b_stand_in().n_params / 1e9:.2f}B"
    g["10b_act"] = f"{r.lib('002-10b-activations')} GB"
    g["10b_act_central"] = f"{r.central('002-10b-activations')} GB"
    for c, name in (("002-10b-activations", "act"), ("002-10b-total", "total"), ("002-10b-two-gpus", "two")):
        g[f"10b_{name}_v"] = r.v(c)
    g["10b_two"] = f"{r.lib('002-10b-two-gpus')} GB"
    g["10b_two_c"] = f"{r.central('002-10b-two-gpus')} GB"
    g["dp15"] = f"{r.lib('003-dp-under-15b')} GB"
    return g


def _finetune_and_hardware(r: _Rows) -> dict[str, str]:
    """The findings on seed 000's fine-tuning run (days, dollars, the LoRA reading, the host's time hidden)
    and on the hardware claims (a quantised 70B on one GPU, the B200's memory, bandwidth and speed-up)."""
    row, g = r.row, {}
    ft = "000-faq-finetune-days"
    g["ft_days"], g["ft_central"] = r.lib(ft), r.central(ft)
    g["ft_usd"] = f"{r.lib('000-faq-finetune-usd')} USD"
    g["ft_usd_c"] = f"{r.central('000-faq-finetune-usd')} USD"
    g["ft_num"] = _verb(r.number(ft))
    # the same run with the host's time hidden (the delayed parameter update, Ren et al. 2021): the slow end
    run = training_time("mistral-7b", tokens=1e9, gpu="H100 SXM", n_gpus=1, seq=SEQ)
    extra = offload_exposed_days("mistral-7b", 1e9, "H100 SXM", 1)
    _holds(OFFLOAD_COUNTED in row.loc[ft, "reading"], "the fine-tuning days are judged counted")
    _holds(abs(row.loc[ft, "library"] / (run.days_high + extra) - 1) < 1e-9,
           "the slow end plus the host's time")
    g["ft_hidden"] = fmt(run.days_high)
    g["ft_hidden_num"] = verdict(row.loc[ft, "claimed_low"], run.days_high)
    g["ft_extra"] = fmt(extra)            # days, as the run's own
    g["ft_v"] = row.loc[ft, "verdict_kind"]
    ways = readings(ft).set_index("reading")
    lora = ways[ways.index.str.startswith("LoRA")].iloc[0]
    _holds(lora["verdict_kind"] == "off" and lora["verdict"].endswith("(too high)"),
           "as LoRA the 3 days are long")
    g["ft_lora"] = lora["verdict"]                 # with its factor, not only its kind
    # "What holds" leaves the fine-tuning answer out: too long on every reading (the judged one is the best)
    _holds(all(verdict_number(row.loc[c, "verdict"]).endswith("(too high)")
               for c in (ft, "000-faq-finetune-usd")) and g["ft_hidden_num"].endswith("(too high)"),
           "seed 000's fine-tuning days and dollars hold on no reading")
    # LoRA is judged as every other time is: over finetune_time's stated range, at the end nearest the claim
    lt = finetune_time("mistral-7b", gpu="H100 SXM", method="lora", tokens=1e9, seq=SEQ, batch=1)
    lora_lo, lora_hi = (h / 24 for h in lt.hours_range)
    _holds(abs(lt.days / lora["library_central"] - 1) < 1e-9 and abs(lora_hi / lora["library"] - 1) < 1e-9,
           "the LoRA reading is judged at the slow end of finetune_time's range")
    g["ft_lora_days"] = fmt(lt.days)
    g["ft_lora_range"] = f"{fmt(lora_lo)} to {fmt(lora_hi)}"
    g["fit70q"] = f"{r.lib('000-fit-h100-llama2-70b-techniques')} GB"
    for c, name in (("004-qlora-70b-one-gpu", "qlora_one"), ("004-qlora-7-13b-l40s", "qlora_l40s"),
                    ("000-fit-rtx4090-mistral7b-q", "fit24")):
        _holds(r.v(c) == "holds" and r.lib(c) == r.central(c), f"{c} holds at one length")
        g[f"{name}"] = f"{r.lib(c)} GB"
    g["b200"] = r.lib("004-b200-speedup")
    b200e, h100e = (mfu_estimate("llama-3-8b", gpu=gpu, seq=min(SEQS)) for gpu in ("B200", "H100 SXM"))
    _holds(b200e.mfu == h100e.mfu and "median generation" in b200e.warnings[0],
           "the B200 gets the median generation's MFU")
    note = b200e.range_note.split(" (the band shown")[0]     # where the one held-out BF16 B200 run sits
    _holds("1 published Blackwell 16-bit run" in note and "outside" in note, "one BF16 B200 run, outside")
    g["b200_bf16"] = note.split("sits at ")[1].split(" of")[0]
    b200 = get_gpu("B200")
    g["b200_gb"] = f"{b200.memory_marketed_gb:.0f} GB"
    g["b200_gib"] = f"{b200.memory_gib:.1f} GiB"            # as chapter 6 reads it
    g["b200_gb_decimal"] = f"{b200.memory_bytes / 1e9:.0f} GB"
    m = row.loc["004-b200-memory"]          # central = the catalogue's, judged = the driver's bytes
    _holds(m["library_central"] == b200.memory_marketed_gb and m["reading"].endswith(DRIVER_GB_READING)
           and m["library"] == b200.memory_bytes / 1e9 and m["verdict"] == "holds",
           "the B200's memory: central the catalogue's, judged the driver's bytes, holds")
    _holds(f"{b200.memory_bytes / 1e9:.0f}" == fmt(m["claimed_low"]), "the seed's 192 fits the decimal count")
    g["b200_tbps"] = f"{b200.memory_bandwidth_gbps / 1000:.1f} TB/s"
    return g


def _fp8(r: _Rows) -> dict[str, str]:
    """The findings on FP8: the H100's speed-up as judged and as read at 1.5x, a step's memory under each
    recipe, and the L40S against the A100 on an MFU borrowed from Hopper."""
    row, g = r.row, {}
    fp8 = "004-fp8-faster-h100"
    g["fp8_speedup"] = f"{row.loc[fp8, 'library']:.2f}"
    g["fp8_speedup_v"] = r.v(fp8)
    g["fp8_speedup_r"] = f"{row.loc[fp8, 'ratio']:.2f}"
    g["fp8_claim"] = f"{row.loc[fp8, 'claimed_low']:g}"    # the data's reading
    h100 = get_gpu("H100 SXM")
    g["fp8_peak_x"] = f"{h100.fp8_dense_tflops / h100.bf16_dense_tflops:.1f}"
    _holds(row.loc[fp8, "bound"] == "above" and row.loc[fp8, "claimed_low"] == 1,
           "FP8's speed is a direction")
    _holds(1 < row.loc[fp8, "library"] and r.v(fp8) == "holds", "FP8 is faster")
    # a reading the audit does not take: "significantly" as at least 1.5x
    g["fp8_at15"] = verdict(1.5, row.loc[fp8, "library"], bound="at least")
    gb = {p: training_memory("llama-3-8b", batch=1, seq=SEQ, precision=p, recompute="full",
                             optimizer_impl="fused").total_bytes / GB
          for p in ("bf16-mixed-fp32-grads", "fp8-mixed", "fp8-deepseek")}
    g["fp8_gb_base"] = f"{gb['bf16-mixed-fp32-grads']:.0f} GB"
    g["fp8_gb_te"] = f"{gb['fp8-mixed']:.0f} GB"
    g["fp8_gb_ds"] = f"{gb['fp8-deepseek']:.0f} GB"
    l40s = mfu_estimate("llama-3-8b", gpu="L40S", seq=SEQ, precision="fp8-mixed")
    lx = row.loc["004-l40s-fp8-vs-a100", "library"]
    g["l40s_x"] = f"{lx:.2f}"
    g["l40s_x_range"] = f"{lx * l40s.low / l40s.mfu:.2f} to {lx * l40s.high / l40s.mfu:.2f}"
    g["l40s_v"] = r.v("004-l40s-fp8-vs-a100")
    g["l40s_note"] = l40s.range_note        # the FP8 runs' out-of-source count
    held, of = map(int, re.search(r"held (\d+) of (\d+) FP8 runs", l40s.range_note).groups())
    _holds(l40s.range_note.startswith("no calibrated range applies"), "the L40S's FP8 MFU is a stand-in")
    h100_fp8 = mfu_estimate("llama-3-8b", gpu="H100 SXM", seq=SEQ, precision="fp8-mixed")
    _holds((l40s.mfu, l40s.low, l40s.high) == (h100_fp8.mfu, h100_fp8.low, h100_fp8.high),
           "borrowed from Hopper")
    g["fp8_held"] = f"{held} of {of}"
    vram = row.loc["004-fp8-less-vram"]
    g["fp8_vram_x"] = f"{vram['library']:.2f}"
    g["fp8_vram_v"] = r.v("004-fp8-less-vram")
    g["fp8_vram_reading"] = vram["reading"]
    g["fp8_vram_central"] = f"{vram['library_central']:.2f}"
    central_v = verdict(1, vram["library_central"], bound="above")   # a direction claim
    _holds(vram["library_central"] < 1 and central_v.startswith("off"),
           "at the central reading FP8 costs memory")
    g["fp8_vram_central_v"] = central_v
    _holds(vram["bound"] == "above" and vram["claimed"] == 1, "FP8's memory is a direction")
    _holds(verdict(1, 1 / BAND + 0.01, bound="above").startswith("off"), "the band does not reach below 1")
    return g


def chapter_values(table) -> dict[str, str]:
    """Every value chapter 14 glues (key -> text; the chapter glues each as ``ch14_<key>``), from ``table`` =
    :func:`~llmsizing.audit.audit_table` at the default band: the rule's settings and counts, the seeds'
    figures (:func:`seed_quotes`) and the library's beside them. Raises :class:`ProseOutOfDate` where a
    statement of the prose no longer holds."""
    if not isinstance(table, pd.DataFrame) or not {"id", "library", "library_central"} <= set(table.columns):
        raise TypeError("table must be the DataFrame of llmsizing.audit.audit_table()")
    r = _Rows(table)
    out = {**seed_quotes(table), **seed_efficiencies()}
    for part in (_method, _batch_and_cases, _bytes_and_rates, _times_and_costs, _counts, _techniques,
                 _finetune_and_hardware, _fp8):
        out.update(part(r))
    others = verdict_counts(table, by="article", headline=True).drop(index="000")
    out["n_others"] = f"{others['total'].sum()}"
    out["n_others_holds"] = f"{others['holds'].sum()}"
    return out


# ------------------------------------------------------------------------ seed 000's efficiencies, by layout
#: Chapter 14's named layouts for seed 000's efficiency ranges (``000-efficiencies``): name -> (model, layout,
#: micro-batches per step, GPUs per node). Micro-batches of one 4,096-token sequence, selective recomputation.
EFFICIENCY_LAYOUTS = {
    "DP: Mistral-7B, 8 GPUs (1 node), ZeRO-1": ("mistral-7b", Parallel(dp=8, zero=1), 8, 8),
    "DP: Mistral-7B, 64 GPUs (8 nodes), ZeRO-1": ("mistral-7b", Parallel(dp=64, zero=1), 8, 8),
    "DP: Mistral-7B, 64 GPUs (8 nodes), ZeRO-3": ("mistral-7b", Parallel(dp=64, zero=3), 8, 8),
    "TP: Llama-2-70B, tp=8 pp=4, TP in a node": ("llama-2-70b", Parallel(tp=8, pp=4, sp=True), 16, 8),
    "TP: Llama-2-70B, tp=8 pp=4, TP across nodes of 4": ("llama-2-70b", Parallel(tp=8, pp=4, sp=True), 16, 4),
    "PP: Llama-3.1-405B, tp=8 pp=16 dp=4, m=16": ("llama-3.1-405b",
                                                  Parallel(tp=8, pp=16, dp=4, zero=1, sp=True), 16, 8),
    "PP: Llama-3.1-405B, tp=8 pp=16 dp=4, m=64": ("llama-3.1-405b",
                                                  Parallel(tp=8, pp=16, dp=4, zero=1, sp=True), 64, 8),
}


def seed_efficiency_layouts(gpu: str = "H100 SXM", seq: int = 4096) -> ChapterText:
    """Seed 000's parallel efficiencies given a layout (chapter 14, by chapter 8's ``step_time``): for each of
    :data:`EFFICIENCY_LAYOUTS`, compute over the step time with no overlap and with the communication hidden
    as far as the compute lasts. ``values``: the prose's texts (``eff_0`` ... ``eff_6`` and their
    micro-batches ``eff_m_0`` ..., the 70B TP row's parts, a 70B layer's GEMM efficiency at tp 1 and 8, the
    micro-batches for which the bubble alone leaves 50% and 70% of a 16-stage step computing); ``report``: the
    table; ``data["efficiencies"]``: the pairs."""
    from .layouts import step_time
    from .hardware import kernel_efficiency
    from .kernels import layer_gemm_efficiency
    from .model_catalog import get_model
    from .pipeline_schedule import pipeline_bubble
    from .units import fmt_gib

    g, effs, rows = {}, {}, {}
    h100, b = get_gpu(gpu), 1
    l70 = get_model("llama-3-70b")
    for t in (1, 8):                                    # a 70B layer's GEMMs narrow as tp grows (chapter 8)
        g[f"eff_k_tp{t}"] = f"{layer_gemm_efficiency(l70, h100, tp=t, tokens=b * seq):.0%}"
    for name, (model, par, m, per_node) in EFFICIENCY_LAYOUTS.items():
        kw = dict(batch=b, seq=seq, grad_accum=m, recompute="selective", gpus_per_node=per_node)
        lo, hi = (step_time(model, h100, par, overlap=o, **kw) for o in (0.0, 1.0))
        mem = training_memory(model, batch=b, seq=seq, grad_accum=m, recompute="selective", parallel=par)
        effs[name] = (lo.efficiency, hi.efficiency)
        if name.startswith("TP") and per_node == 8:
            g["eff_bubble_3"], g["eff_compute_3"] = f"{lo.bubble_s:.2f} s", f"{lo.compute_s:.2f} s"
            g["eff_tp_3"] = f"{lo.comm_by_group_s['tp']:.2f} s"
        rows[name] = {"GPUs": par.gpus, "per GPU": fmt_gib(mem.total_bytes), "bubble": f"{lo.bubble_s:.2f} s",
                      "comm.": f"{lo.comm_s:.2f} s", "compute": f"{lo.compute_s:.2f} s",
                      "efficiency": f"{lo.efficiency:.0%} to {hi.efficiency:.0%}"}
    busy = {m: 1 / (1 + pipeline_bubble(16, m)) for m in range(1, 200)}
    g["eff_m_lo"] = f"{min(m for m, v in busy.items() if v >= 0.5 - 1e-12)}"
    g["eff_m_hi"] = f"{min(m for m, v in busy.items() if v >= 0.7 - 1e-12)}"
    for i, (_, _, m, _) in enumerate(EFFICIENCY_LAYOUTS.values()):    # the layouts' micro-batches, as printed
        g[f"eff_m_{i}"] = f"{m}"
    for i, (lo, hi) in enumerate(effs.values()):
        g[f"eff_{i}"] = f"{lo:.0%}" if abs(hi - lo) < 0.005 else f"{lo:.0%}–{hi:.0%}"
    e = list(effs.values())
    _holds(e[2][0] < 0.90 and e[2][1] > 0.75, "the ZeRO-3 row overlaps the seed's FSDP 75-90%")
    _holds(e[0][0] > 0.95, "in a node ZeRO-1 beats the seed's DP range")
    _holds(e[4][0] < e[3][0], "TP across nodes falls below TP in a node")
    report = (f"{gpu} kernels at {kernel_efficiency(h100):.0%} of peak; efficiency = compute / step, from no "
              f"overlap to full overlap\n{pd.DataFrame(rows).T.to_string()}")
    return ChapterText(g, report, {"efficiencies": effs})


__all__ = ["SEED_QUOTES", "ProseOutOfDate", "chapter_values", "fmt", "said", "seed_quotes",
           "EFFICIENCY_LAYOUTS", "seed_efficiency_layouts"]
