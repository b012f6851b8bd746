"""Chapter 11's plans and jobs in sentences: every number its prose quotes, keyed by name (issue 38).

:func:`pareto_front_prose` reads the planner's cost-against-days front for Llama-3-70B (and why its fastest
plan beats the interleaved pipeline on as many GPUs); :func:`jobs_by_gpu_prose` reads one job priced on five
GPU types; :func:`interruptions_prose` reads the published interruption logs' and the Llama 3.1 model card's
figures from the data. Each returns a :class:`~llmsizing.prose.ChapterText`: the table the chapter prints
(``report``) and the texts its prose quotes (``values``, glued as ``ch11_<name>``). The prose's readings ("one
sequence per replica", "more calls, less wait", "the A100 dearest per job among NVIDIA's") are checked against
the numbers, and :class:`ProseOutOfDate` names the one that no longer holds. Nothing here computes a new
quantity: the sentences only format and compare what the library's functions return.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import pandas as pd

from .catalog import get_gpu
from .cost import FRONT_PLAN, compare_gpus
from .fewest_gpus import min_gpus
from .hardware import generation_name, kernel_efficiency_row
from .job import Job
from .layouts import step_time
from .model_catalog import get_model
from .planner import recompute_kwargs
from .prose import ChapterText, ProseOutOfDate, number_word
from .prose import prose_check as _prose_check
from .time_cost import published_runs, training_time

__all__ = ["ProseOutOfDate", "pareto_front_prose", "jobs_by_gpu_prose", "interruptions_prose",
           "seed_cost_tables_prose", "seed_options_prose", "JOB_GPUS", "JOB", "FRONT_PLAN", "CARD_RUN"]

#: The GPU types chapter 11 prices one job on, and the key each text carries.
JOB_GPUS = {"H100 SXM": "h100", "B200": "b200", "A100 80GB": "a100", "H200": "h200", "MI300X": "mi300x"}

#: The model and sequence length of the plans :func:`pareto_front_prose` reads (the chapter's
#: ``plan(**FRONT_PLAN)``, :data:`llmsizing.cost.FRONT_PLAN`).
FRONT_MODEL, FRONT_SEQ = FRONT_PLAN["model"], FRONT_PLAN["seq"]

#: The one job chapter 11 prices on each GPU type of :data:`JOB_GPUS` (``cost_by_gpu(**JOB, gpus=...)`` and
#: its figure): the front's model and sequence length, 100B tokens.
JOB = MappingProxyType({"model": FRONT_MODEL, "tokens": 1e11, "seq": FRONT_SEQ})


def _says(holds, what: str) -> None:
    _prose_check(holds, what, "chapter 11's prose")


def _layout(r) -> str:
    return f"TP{r['tp']} PP{r['pp']} DP{r['dp']}"


def _plan_step(r, model=FRONT_MODEL):
    """A plan row's step (its layout, chunks and pipeline split: chapter 12), as the planner timed it."""
    par = Job.from_plan_row(r, model, seq=FRONT_SEQ).parallel
    return step_time(model, get_gpu(r["gpu"]), par, batch=int(r["micro_batch"]), seq=FRONT_SEQ,
                     grad_accum=int(r["grad_accum"]), **recompute_kwargs(r))


def pareto_front_prose(plans) -> ChapterText:
    """The front of ``plans`` (:func:`~llmsizing.planner.plan` of Llama-3-70B on H100s, 8,192-token sequences,
    a global batch of 512): the table the chapter prints and its texts. Raises :class:`ProseOutOfDate` where a
    reading fails: the cheapest plan one sequence per replica at the batch's cap, the fastest without a
    pipeline, the best interleaved pipeline on as many GPUs within 5% of it, behind because it issues more
    gradient calls yet waits less for them than its extra compute and bubble cost, that compute the LM
    head's."""
    front = plans[plans["pareto"]].sort_values("n_gpus")
    show = front[["n_gpus", "tp", "pp", "virtual_stages", "dp", "zero", "grad_accum", "mfu", "days",
                  "cost_usd"]].copy().rename(columns={"virtual_stages": "vp"})
    show["mfu"] = show["mfu"].map("{:.0%}".format)
    show["days"] = show["days"].map("{:,.1f}".format)
    show["cost_usd"] = show["cost_usd"].map("${:,.0f}".format)
    cheapest, fastest = front.iloc[0], front.iloc[-1]
    t = {"front_cheap_n": f"{cheapest['n_gpus']:,}",
         "front_cheap_cost": f"${cheapest['cost_usd'] / 1e6:.2f} million",
         "front_cheap_days": f"{cheapest['days']:,.0f}", "front_fast_n": f"{fastest['n_gpus']:,}",
         "front_fast_cost": f"${fastest['cost_usd'] / 1e6:.2f} million",
         "front_fast_days": f"{fastest['days']:,.1f}", "front_fast_mfu": f"{fastest['mfu']:.0%}"}
    for key, r in (("cheap", cheapest), ("fast", fastest)):
        t[f"front_{key}_range"] = (f"${r['cost_usd_low'] / 1e6:.2f} to {r['cost_usd_high'] / 1e6:.2f} "
                                   "million; "
                                   f"{r['days_low']:,.1f} to {r['days_high']:,.1f} days")
    t["front_cheap_layout"] = _layout(cheapest)
    _says(cheapest["dp"] == 512 and cheapest["grad_accum"] == 1,
          "the cheapest plan runs one sequence per replica, the batch's cap")
    t["front_premium"] = f"{fastest['cost_usd'] / cheapest['cost_usd'] - 1:.0%}"
    _says(fastest["pp"] == 1 and fastest["dp"] == 512 and fastest["grad_accum"] == 1,
          "the fastest plan is tensor parallelism over each node and one sequence per replica")
    t["front_fast_layout"] = _layout(fastest)
    same = plans[(plans["n_gpus"] == fastest["n_gpus"]) & (plans["virtual_stages"] > 1)]
    same = same.sort_values("days").iloc[0]
    _says(1 < same["days"] / fastest["days"] < 1.05,
          "the best interleaved pipeline on as many GPUs comes close to the fastest plan")
    t.update(front_vp_layout=_layout(same), front_fast_vp=f"{same['virtual_stages']}",
             front_fast_m=f"{same['grad_accum']}",
             front_vp_slower=f"{same['days'] / fastest['days'] - 1:.1%}")
    # why the pipeline is behind: the two plans' steps, as the planner timed them
    st_one, st_vp = _plan_step(fastest), _plan_step(same)
    _says(all(abs(st.step_s / r["step_time_s"] - 1) < 1e-6 for st, r in ((st_one, fastest), (st_vp, same))),
          "these are the planner's own steps")
    dp_calls = {k: sum(c.calls for c in st.communication.collectives
                       if c.group == "dp" and c.slot == "gradients")
                for k, st in (("one", st_one), ("vp", st_vp))}
    extra_s = st_vp.compute_s - st_one.compute_s + st_vp.bubble_s               # more compute, and the bubble
    saved_s = st_one.exposed_by_group_s["dp"] - st_vp.exposed_by_group_s["dp"]  # less gradient traffic waited
    _says(dp_calls["vp"] > dp_calls["one"] and 0 < saved_s < extra_s,
          "the interleaved pipeline makes more gradient calls and waits less, not enough to pay its extra")
    # the extra compute is the vocabulary's: the last stage runs the LM head and the loss for each micro-batch
    small = replace(get_model(FRONT_MODEL), vocab=1024)
    _says(abs(_plan_step(same, small).compute_s - _plan_step(fastest, small).compute_s)
          < 0.05 * (st_vp.compute_s - st_one.compute_s), "the pipeline's extra compute is the vocabulary's")
    t.update(front_vp_calls=f"{dp_calls['vp']}", front_one_calls=f"{dp_calls['one']}",
             front_vp_dp_ms=f"{st_vp.exposed_by_group_s['dp'] * 1e3:,.0f} ms",
             front_one_dp_ms=f"{st_one.exposed_by_group_s['dp'] * 1e3:,.0f} ms",
             front_vp_comp_ms=f"{(st_vp.compute_s - st_one.compute_s) * 1e3:,.0f} ms",
             front_vp_bubble_ms=f"{st_vp.bubble_s * 1e3:,.0f} ms")
    return ChapterText(t, show.to_string(index=False))


def _job_table(jobs) -> str:
    view = jobs[["gpu", "price_usd_per_gpu_hour", "min_gpus", "days_on_min_gpus", "gpu_hours",
                 "cost_usd"]].copy()
    view["price_usd_per_gpu_hour"] = view["price_usd_per_gpu_hour"].map("${:.2f}".format)
    view["days_on_min_gpus"] = view["days_on_min_gpus"].map("{:,.0f}".format)
    view["gpu_hours"] = view["gpu_hours"].map("{:,.0f}".format)
    view["cost_usd"] = view["cost_usd"].map("${:,.0f}".format)
    return view.to_string(index=False)


def jobs_by_gpu_prose(jobs, reference) -> ChapterText:
    """One job (:data:`JOB`: Llama-3-70B, 100B tokens of 8,192) on each GPU type of :data:`JOB_GPUS`: the
    table the chapter prints and its texts. ``jobs``: :func:`~llmsizing.time_cost.cost_by_gpu` of that job on
    those types; ``reference``: :func:`~llmsizing.time_cost.training_time` of the chapter's first job (1T
    tokens on 1,024 H100s), whose MFU the job without recomputation shares. Raises :class:`ProseOutOfDate`
    where a reading of the prose fails (the MFU borrowed from the H100, full recomputation's cost, the fewest
    H100s without it, the H200's smaller job, the borrowed ranges, which GPU is cheapest or dearest per hour
    and per job, each price's provider, torchao's one table on three GPUs)."""
    by = jobs.set_index("gpu")
    t = {}
    for g, key in JOB_GPUS.items():
        t[f"job_{key}"] = f"${by.loc[g, 'cost_usd'] / 1e3:,.0f}k"
        t[f"jobprice_{key}"] = f"${by.loc[g, 'price_usd_per_gpu_hour']:.2f}"
        t[f"jobrange_{key}"] = (f"${by.loc[g, 'cost_usd_low'] / 1e3:,.0f}k to "
                                f"${by.loc[g, 'cost_usd_high'] / 1e3:,.0f}k")

    def timed(g, **kw):
        return training_time(**JOB, gpu=g, n_gpus=int(by.loc[g, "min_gpus"]), **kw)

    # cost_by_gpu times each job as the fewest-GPU layout runs it: every layer recomputed (recompute="full")
    run = {g: timed(g, recompute="full") for g in ("H100 SXM", "B200", "MI300X")}
    mfu_of = {g: r.mfu for g, r in run.items()}
    _says(all(abs(run[g].cost_usd - by.loc[g, "cost_usd"]) < 1e-6 * by.loc[g, "cost_usd"] for g in run),
          "cost_by_gpu times each job with every layer recomputed")
    _says(mfu_of["B200"] == mfu_of["MI300X"] == mfu_of["H100 SXM"],
          "the B200 and the MI300X borrow the H100's MFU")
    t["mfu_h100"] = f"{mfu_of['H100 SXM']:.1%}"
    plain = timed("H100 SXM")
    _says(plain.mfu > mfu_of["H100 SXM"] and abs(plain.mfu - reference.mfu) < 1e-9,
          "full recomputation costs MFU, so 100B tokens cost more than a tenth of the 1T-token job")
    t.update(mfu_h100_norecompute=f"{plain.mfu:.1%}",
             recompute_factor=f"{mfu_of['H100 SXM'] / plain.mfu:.2f}",
             job_h100_norecompute=f"${plain.cost_usd / 1e3:,.0f}k")
    # a few more H100s hold the step without recomputation, and the job costs that tenth: the fewest GPUs are
    # not the cheapest (the GPU-hours do not depend on the GPU count at one MFU)
    n_keep = min_gpus(JOB["model"], get_gpu("H100 SXM"), batch=1, seq=JOB["seq"]).gpus
    keep = training_time(**JOB, gpu="H100 SXM", n_gpus=n_keep)
    _says(n_keep > int(by.loc["H100 SXM", "min_gpus"]) and abs(keep.cost_usd / plain.cost_usd - 1) < 1e-9,
          "a few more H100s hold the step without recomputation, at the tenth of the 1T-token job's cost")
    t["min_h100_norecompute"] = f"{n_keep}"
    n_h200, n_h100 = int(by.loc["H200", "min_gpus"]), int(by.loc["H100 SXM", "min_gpus"])
    _says(n_h200 < n_h100, "the H200's memory buys a smaller job, fewer GPUs in all")
    t.update(min_h200=f"{n_h200}", min_h100=f"{n_h100}")
    t.update(_borrowed_range_texts(by, {g: timed(g).range_note for g in ("H100 SXM", "B200", "MI300X")}))
    _says_which_is_cheapest(by)
    t["mi300x_price_month"] = pd.Timestamp(get_gpu("MI300X").price_as_of).strftime("%B %Y")
    t.update(_torchao_texts(by))
    return ChapterText(t, _job_table(jobs))


def _borrowed_range_texts(by, notes) -> dict:
    """What the library says of a borrowed range (the B200's and the MI300X's, where torchao's one BF16 run on
    each, held out, sits below its estimate), and each generation's 80% range as factors of the cost."""
    gen = {g: generation_name(kernel_efficiency_row(g).generation) for g in ("B200", "MI300X")}
    _says(notes["H100 SXM"] and "no calibrated range" not in notes["H100 SXM"]
          and notes["B200"].startswith("no calibrated range applies"),
          "the H100 has a calibrated range, the B200 not")
    _says(all(notes[g].startswith(f"no calibrated range applies: no {gen[g]} 16-bit run calibrates it; the 1 "
                                  f"published {gen[g]} 16-bit run (1 source) sits at 0.") for g in gen),
          "the B200's and the MI300X's one published run each sits below its estimate")
    band = " (the band shown is"                 # what the prose quotes: each note up to the borrowed band
    low, high = by["cost_usd_low"] / by["cost_usd"], by["cost_usd_high"] / by["cost_usd"]
    hop = ["H100 SXM", "H200", "B200", "MI300X"]
    _says(low[hop].max() - low[hop].min() < 1e-9 and high[hop].max() - high[hop].min() < 1e-9
          and high["A100 80GB"] / low["A100 80GB"] < high["H100 SXM"] / low["H100 SXM"],
          "a borrowed range is Hopper's, the widest of any generation")
    return {"note_b200": notes["B200"].split(band)[0], "note_mi300x": notes["MI300X"].split(band)[0],
            "job_factors": f"{low['H100 SXM']:.2f} to {high['H100 SXM']:.2f}",
            "job_factors_a100": f"{low['A100 80GB']:.2f} to {high['A100 80GB']:.2f}"}


def _says_which_is_cheapest(by) -> None:
    """The prose's ranking of the five GPUs per hour and per job, and the provider it names for each price."""
    price, cost = by["price_usd_per_gpu_hour"], by["cost_usd"]
    nvidia = by.drop("MI300X")
    _says(nvidia["price_usd_per_gpu_hour"].idxmin() == "A100 80GB"
          and nvidia["cost_usd"].idxmax() == "A100 80GB",
          "the A100 is the cheapest NVIDIA GPU per hour and the dearest per job")
    _says(price.idxmin() == "MI300X" == cost.idxmin(), "the MI300X is cheapest per hour and per job")
    _says(price.idxmax() == "B200" and cost["B200"] < cost["H100 SXM"] < cost["H200"],
          "the B200 is dearest per hour and cheaper than the H100 per job, the H200 dearer than the H100")
    src_of = {g: get_gpu(g).price_source for g in by.index}
    _says(all(src_of[g].startswith("Lambda") for g in ("A100 80GB", "H100 SXM", "B200"))
          and src_of["H200"].startswith("RunPod") and src_of["MI300X"].startswith("Vultr")
          and "third-party survey" in src_of["MI300X"],
          "the prices are Lambda's, RunPod's for the H200, Vultr's (as a survey reports it) for the MI300X")


def _torchao_texts(by) -> dict:
    """The one table in the data that ran one team's script on three GPUs (torchao's README, Llama 3 8B on 8
    GPUs, BF16, held out): its tokens/s per GPU as the speed-up over the H100, at the catalogue's prices."""
    pr = published_runs()
    ao = pr[pr["source"].str.startswith("pytorch/ao") & (pr["dtype"] == "bf16")].set_index("gpu")
    _says(sorted(ao.index) == ["B200", "H100 SXM", "MI300X"] and set(ao["model"]) == {"llama-3-8b"}
          and set(ao["n_gpus"]) == {8}, "torchao ran Llama 3 8B on eight B200s, H100s and MI300Xs")
    tps = ao["tokens_per_s_per_gpu"]
    same = {g: compare_gpus("H100 SXM", g, speedup=tps[g] / tps["H100 SXM"]).cost_ratio
            for g in ("B200", "MI300X")}
    _says(same["B200"] > 1 > same["MI300X"] > by.loc["MI300X", "cost_usd"] / by.loc["H100 SXM", "cost_usd"],
          "at torchao's speeds the B200 costs more than the H100, the MI300X less, more than the table says")
    t = {}
    for g, key in (("B200", "b200"), ("MI300X", "mi300x")):
        t[f"ao_{key}"] = f"{same[g]:.2f}"
        t[f"tab_{key}"] = f"{by.loc[g, 'cost_usd'] / by.loc['H100 SXM', 'cost_usd']:.2f}"
    return t


#: The Llama 3.1 model card's row of ``data/published_runs.csv`` that chapter 11 sets its goodput run against.
CARD_RUN = "Llama 3.1 405B pre-training"


def interruptions_prose(logs, causes) -> ChapterText:
    """The published figures chapter 11's section on interruptions quotes, read from the data that holds them
    rather than typed: Llama 3's 54-day snapshot (all its interruptions, the unexpected ones, the planned
    rest, its GPUs and days), OPT-175B's GPUs, the research clusters' job size and mean time to failure
    (``logs``: :func:`~llmsizing.reliability.interruption_logs`), and the Llama 3.1 model card's H100-hours
    for the 405B model (``data/published_runs.csv``; ``data["card_gpu_hours"]`` for the cell's comparison).
    Raises :class:`ProseOutOfDate` where the prose's reading fails: Table 5's causes (``causes``:
    :func:`~llmsizing.reliability.interruption_causes`) must count the log's unexpected interruptions, OPT's
    count must be a lower bound and the clusters' a mean time to failure."""
    cal = logs[logs["role"] == "calibration"]
    _says(len(cal) == 1, "one log, Llama 3's snapshot, calibrates the rate")
    llama = cal.iloc[0]
    n_all, n_unexpected = int(llama["interruptions"]), int(llama["unexpected"])
    _says(0 < n_unexpected < n_all, "some of Llama 3's interruptions were planned, most unexpected")
    _says(int(causes["interruptions"].sum()) == n_unexpected,
          "Table 5's causes count the snapshot's unexpected interruptions")
    opt = logs[logs["run"].str.startswith("OPT-175B")].iloc[0]
    _says(opt["count_is"] == "lower bound", "OPT-175B's count is a lower bound")
    rsc = logs[logs["count_is"] == "mean time to failure"]
    _says(len(rsc) == 1 and int(rsc.iloc[0]["unexpected"]) == 1,
          "the research clusters' row is one failure per mean time to failure")
    rsc = rsc.iloc[0]
    runs = published_runs().set_index("run")
    card = float(runs.loc[CARD_RUN, "gpu_hours"])
    _says(runs.loc[CARD_RUN, "model"] == "llama-3.1-405b" and runs.loc[CARD_RUN, "gpu"] == "H100 SXM",
          "the model card's hours are the 405B model's, on H100s")
    t = {}
    t["int_all"] = f"{n_all}"
    t["int_unexpected"] = f"{n_unexpected}"
    t["int_planned"] = f"{n_all - n_unexpected}"
    t["int_days"] = f"{float(llama['days']):g}"
    t["int_gpus"] = f"{int(llama['n_gpus']):,}"
    t["int_opt_gpus"] = f"{int(opt['n_gpus']):,}"
    t["int_rsc_gpus"] = f"{int(rsc['n_gpus']):,}"
    t["int_rsc_mttf"] = f"{float(rsc['days']) * 24:.1f}"
    t["card_mgpuh"] = f"{card / 1e6:.2f}M"
    return ChapterText(t, data={"card_gpu_hours": card})


def _audit_table(audit) -> str:
    cols = {"model": "model", "gpus": "GPUs", "tokens_per_s": "seed TPS", "days": "seed days",
            "days_from_own_tps": "days from TPS", "total_cost_usd": "seed cost",
            "cost_from_own_tps": "cost from TPS", "library_days": "library days",
            "library_cost_usd": "library cost"}
    out = audit[list(cols)].rename(columns=cols).copy()
    for c in ("seed TPS", "seed days", "days from TPS", "library days"):
        out[c] = out[c].map("{:,.0f}".format)
    for c in ("seed cost", "cost from TPS", "library cost"):
        out[c] = out[c].map("${:,.0f}".format)
    return out.to_string(index=False)


def seed_cost_tables_prose(audit) -> ChapterText:
    """Seed 000's three cost tables, audited (``audit``: :func:`~llmsizing.cost.audit_cost_table`): the table
    chapter 11 prints and every figure its audit quotes, the seed's own (its price, throughputs, days and
    totals, from ``data/seed000_cost_tables.csv``) and the library's. Raises :class:`ProseOutOfDate` where a
    reading fails: the cost-per-day column is GPUs x price x 24 to within 1% and each total its days times it;
    the two 4-GPU rows share their days and total; the 70B rows follow from their own throughput (within 2%)
    where the small tables fall short of theirs; Llama 2 13B's totals lie inside the library's range and
    Mistral 7B's above it."""
    a = audit.set_index(["model", "gpus"])
    m1, m13, b8 = a.loc[("mistral-7b", 1)], a.loc[("llama-2-13b", 1)], a.loc[("llama-2-70b", 8)]
    price = set(audit["price_usd_per_gpu_hour"])
    _says(len(price) == 1, "the three tables use one price")
    dev = (audit["cost_per_day_usd"] / audit["cost_per_day_from_price"] - 1).abs().max()
    _says(0 < dev < 0.01 and (audit["days"] * audit["cost_per_day_usd"] == audit["total_cost_usd"]).all(),
          "the cost-per-day column is GPUs x price x 24, rounded, and each total is days x cost per day")
    four = audit[audit["gpus"] == 4]
    _says(len(four) == 2 and four["days"].nunique() == four["total_cost_usd"].nunique() == 1
          and four["tokens_per_s"].nunique() == 2, "the two 4xH100 rows share days and total, not throughput")
    big = audit[audit["model"] == "llama-2-70b"]
    small = audit[audit["model"] != "llama-2-70b"]
    short = 1 - small["days"] / small["days_from_own_tps"]
    _says((abs(big["days"] / big["days_from_own_tps"] - 1) < 0.02).all() and (short > 0.1).all(),
          "the 70B rows follow from their throughput; the small tables' days are short of theirs")
    seed_70 = big["total_cost_usd"]
    seed_m = audit[audit["model"] == "mistral-7b"]["total_cost_usd"]
    seed_13 = audit[audit["model"] == "llama-2-13b"]["total_cost_usd"]
    in13 = m13["library_cost_usd_low"] <= seed_13.min() and seed_13.max() <= m13["library_cost_usd_high"]
    _says(in13 and seed_m.min() > m1["library_cost_usd_high"],
          "Llama 2 13B's totals lie inside the library's range, Mistral 7B's above it")
    t = {}
    t["a_price"] = f"${price.pop():.2f}"
    t["a_m1_tps"] = f"{m1['tokens_per_s']:,.0f}"
    t["a_m1_said_days"] = f"{m1['days']:.0f}"
    t["a_m1_said_cost"] = f"${m1['total_cost_usd']:,.0f}"
    t["a_13_tps"] = f"{m13['tokens_per_s']:,.0f}"
    t["a_13_said_days"] = f"{m13['days']:.0f}"
    t["a_4x_days"] = f"{four['days'].iloc[0]:.0f}"
    t["a_4x_cost"] = f"${four['total_cost_usd'].iloc[0]:,.0f}"
    t["a_70_tps8"] = f"{b8['tokens_per_s']:,.0f}"
    t["a_70_said_tps_gpu"] = f"{b8['tokens_per_s'] / b8.name[1]:,.0f}"   # the table's throughput per H100
    t["a_m1_days"] = f"{m1['days_from_own_tps']:.0f}"
    t["a_m1_cost"] = f"${m1['cost_from_own_tps']:,.0f}"
    t["a_perday"] = f"${m1['cost_per_day_from_price']:.2f}"
    t["a_perday_dev"] = f"{dev:.1%}"
    t["a_13_days"] = f"{m13['days_from_own_tps']:.0f}"
    t["a_70_days"] = f"{b8['days_from_own_tps']:.0f}"
    t["a_m_lib"] = f"${m1['library_cost_usd']:,.0f}"
    t["a_m_lib_range"] = f"${m1['library_cost_usd_low']:,.0f} to ${m1['library_cost_usd_high']:,.0f}"
    t["a_13_lib"] = f"${m13['library_cost_usd']:,.0f}"
    t["a_13_lib_range"] = f"${m13['library_cost_usd_low']:,.0f} to ${m13['library_cost_usd_high']:,.0f}"
    t["a_70_lib"] = f"${b8['library_cost_usd'] / 1e3:,.0f}k"
    t["a_70_lib_range"] = (f"${b8['library_cost_usd_low'] / 1e3:,.0f}k to "
                           f"${b8['library_cost_usd_high'] / 1e3:,.0f}k")
    t["a_70_lib_days8"] = f"{b8['library_days']:,.0f}"
    t["a_70_tps"] = f"{b8['library_tokens_per_s'] / b8.name[1]:,.0f}"
    t["a_70_seed_range"] = f"${seed_70.min() / 1e3:,.0f}k to ${seed_70.max() / 1e3:,.0f}k"
    t["a_70_x"] = f"{b8['library_cost_usd'] / seed_70.max():.1f}"
    t["a_70_seed_rise"] = f"{seed_70.max() / seed_70.min() - 1:.0%}"
    t["a_short"] = f"{short.min():.0%} to {short.max():.0%}"
    t["a_m_seed_range"] = f"${seed_m.min():,.0f} to ${seed_m.max():,.0f}"
    t["a_13_seed_range"] = f"${seed_13.min():,.0f} to ${seed_13.max():,.0f}"
    t["a_13_verdict"] = "inside"
    return ChapterText(t, _audit_table(audit))


def seed_options_prose(options=None, tables=None) -> ChapterText:
    """Seed 000's worked "Options" for Llama 2 70B on 1T tokens (``options``:
    :func:`~llmsizing.cost.audit_seed_options`; ``tables``: :func:`~llmsizing.cost.seed_cost_tables`, for the
    price of the FAQ's runs) and the FAQ's "8 GPUs for 50 days is cheaper than 1 GPU for 400 days": the seed's
    hours, prices and costs the prose quotes, from ``data/seed000_options.csv``, and what they come to. Checks
    the readings: Options 1 and 2 cost one GPU's bill (the seed's cost is its hours times its price, within
    0.1%); Option 3's cost is the bill of a whole number of GPUs (within 1%), not 64; each Option's hours
    follow from its own throughput (within 1%); Option 2's configuration is a row of the seed's table, whose
    total is its eight GPUs' bill (within 1%); the FAQ's two runs are the same GPU-days."""
    from .cost import SEED_FAQ_RUNS, audit_seed_options, gpu_days_cost_usd, seed_cost_tables

    o = (audit_seed_options() if options is None else options).set_index("option")
    o1, o2, o3 = o.loc[1], o.loc[2], o.loc[3]
    _says((abs(o["hours_from_own_tps"] / o["hours"] - 1) < 0.01).all(),
          "each Option's hours follow from its own throughput")
    _says(abs(o1["gpus_billed"] - 1) < 1e-3 and abs(o2["gpus_billed"] - 1) < 1e-3
          and o1["gpus"] == o2["gpus"] == 8, "Options 1 and 2 cost one GPU's bill, not eight")
    n3 = round(o3["gpus_billed"])
    _says(abs(o3["gpus_billed"] / n3 - 1) < 0.01 and n3 != o3["gpus"],
          "Option 3 bills a whole number of GPUs, not its own")
    _says(abs(o2["table_cost_usd"] / o2["all_gpus_cost_usd"] - 1) < 0.01,
          "the table's row for Option 2's configuration is its eight GPUs' bill")
    t = {}
    for k, r in (("1", o1), ("2", o2), ("3", o3)):
        t[f"option{k}_gpus"] = f"{r['gpus']:,.0f}"
        t[f"option{k}_hours"] = f"{r['hours']:,.0f}"
        t[f"option{k}_price"] = f"${r['price_usd_per_gpu_hour']:.2f}"
        t[f"option{k}_said"] = f"${r['cost_usd']:,.0f}"
        t[f"option{k}_fixed"] = f"${r['all_gpus_cost_usd']:,.0f}"
    t["option1_gpus_word"] = number_word(int(o1["gpus"]))     # "and eight cost ..."
    t["option2_table"] = f"${o2['table_cost_usd']:,.0f}"
    t["option2_x"] = f"{o2['table_cost_usd'] / o2['cost_usd']:.1f}"
    t["option3_x"] = f"{o3['all_gpus_cost_usd'] / o3['cost_usd']:.1f}"
    t["option3_n"] = f"{n3:.0f}"                              # the GPU count its cost implies
    price = set((seed_cost_tables() if tables is None else tables)["price_usd_per_gpu_hour"])
    _says(len(price) == 1, "the seed's tables use one price")
    p = price.pop()
    (g1, d1), (g2, d2) = SEED_FAQ_RUNS
    _says(g1 * d1 == g2 * d2, "the FAQ's two runs are the same GPU-days")
    t["faq_same"] = f"${gpu_days_cost_usd(g1, d1, p):,.0f}"
    return ChapterText(t, "")
