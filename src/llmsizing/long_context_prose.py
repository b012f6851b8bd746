"""Chapter 17's opening numbers in sentences: the layout, the published row and the planner's settings that
the "Long context" chapter quotes before its sections compute with them (issue 38: notebooks stay short);
its first sections' tables and sentences (:func:`memory_prose`, :func:`cp_memory_prose`,
:func:`exchange_prose`, :func:`overlap_prose`, :func:`ulysses_prose`) and the hand counts they quote
(:func:`ulysses_shard_bytes`, :func:`ring_over_ulysses`, :func:`window_exchange_fewer`). The later sections:
:mod:`llmsizing.long_context_prose_plan`.

:func:`opening_prose` reads Llama 3.1 405B at 128K as Meta ran it
(:func:`~llmsizing.parallel.llama3_405b_layout`, the 128K row of ``data/published_runs.csv``), the same
degrees read as a Megatron-LM run (:func:`~llmsizing.parallel.llama3_long_context_layout`), the activation
coefficients with flash and eager attention (:func:`~llmsizing.activations.activation_coefficients`), the
all-gather's K, V buffers (:func:`~llmsizing.activations.cp_attention_buffers_bytes`) and the planner's
context-parallel settings (:mod:`llmsizing.plan_space`). It checks what the prose says about them
(:func:`~llmsizing.prose.prose_check`) and returns a :class:`~llmsizing.prose.ChapterText`: the texts the
notebook glues as ``{eval}`ch17_<name>``` (``values``) and the layouts, the row and the run that later cells
compute with (``data``). No new arithmetic: every figure is a catalogue entry, a published row or the
library's own step.
"""

from __future__ import annotations

from functools import partial

import pandas as pd

from ._validate import check_int, check_number
from .activations import activation_coefficients, cp_attention_buffers_bytes
from .catalog import get_gpu, get_model
from .layouts import step_time
from .mfu_prose import LLAMA3_BATCH_TOKENS, LLAMA3_LONG_SEQ
from .mfu_published import published_runs
from .network import get_node
from .parallel import LLAMA3_RECIPE, llama3_405b_layout, llama3_long_context_layout
from .plan_space import CP_MIN_SEQ, CP_MIN_TOKENS_PER_RANK, default_cp_degrees
from .prose import ChapterText, prose_check
from .stages import published_stages
from .units import KiB, MiB, fmt_gib

__all__ = ["opening_prose", "SHORT_SEQ", "LONG_SEQ", "LLAMA3_128K_ROW", "memory_prose", "cp_memory_prose",
           "exchange_prose", "overlap_prose", "ulysses_prose", "ulysses_shard_bytes", "ring_over_ulysses",
           "window_exchange_fewer"]

#: The chapter's short and long sequence lengths (tokens): 8K and 128K, Llama 3's two pre-training stages
SHORT_SEQ, LONG_SEQ = 8192, LLAMA3_LONG_SEQ
#: Table 4's 128K row of ``data/published_runs.csv`` (its name keeps the table's printed DP 4)
LLAMA3_128K_ROW = "Llama 3.1 405B, 16,384 GPUs, 128K context (TP8 CP16 PP16 DP4)"

_says = partial(prose_check, chapter="chapter 17's prose")


def opening_prose() -> ChapterText:
    """The numbers chapter 17 quotes before its sections compute with them, as a :class:`ChapterText`:
    ``values`` (glued as ``ch17_<name>``) and ``data``: ``meta128`` (Llama 3 405B at 128K as Meta ran it:
    TP8 CP16 PP16 DP8, FSDP), ``nvl`` (the same on GB200 NVL72 racks, cp 8), ``rack`` (a GB200 NVL72 rack's
    NVLink domain, GPUs), ``l3`` (the same degrees read as a Megatron-LM run: ZeRO-1, 4 chunks), ``row`` (the
    published 128K row), ``published`` (its implied MFU), ``m`` (its micro-batches a replica), ``run`` (the
    planner's settings for the long-context stage) and ``fwd``/``bwd`` (the all-gather's K, V buffers, bytes).

    Raises :class:`~llmsizing.prose.ProseOutOfDate` where a statement of the chapter fails: the run's batch
    and GPUs Table 4's, eager attention keeping the softmax's 16-bit output alone, the row's degrees Meta's,
    Table 4's DP 4 giving the same step as DP 8, and Mistral 7B's layers Llama 3 8B's."""
    l405, h100 = get_model("llama-3.1-405b"), get_gpu("H100 SXM")
    long = LONG_SEQ
    meta128 = llama3_405b_layout(8, cp=16)
    nvl = llama3_405b_layout(8, cp=8)
    rack = get_node(gpu="GB200").scaleup_domain_gpus
    l3 = llama3_long_context_layout()
    row = published_runs().set_index("run").loc[LLAMA3_128K_ROW]
    published = float(row["implied_mfu"])
    m = int(row["global_batch"]) // l3.dp             # 128 sequences = 16 micro-batches x 8 replicas
    stage = published_stages().query("run == 'Llama 3.1 405B' and seq == @long").iloc[0]   # Sec. 3.4.2
    run = dict(tokens=float(stage["tokens"]), gpus=("H100 SXM",), seq=long,
               global_batch=LLAMA3_BATCH_TOKENS // long, max_gpus=int(row["n_gpus"]))
    _says(run["global_batch"] == int(row["global_batch"]) == int(stage["global_batch"])
          and run["max_gpus"] == int(stage["n_gpus"]),
          "the long-context stage's batch and GPUs are Table 4's")
    linear, _ = activation_coefficients(l405, tp=8, sp=True)           # flash attention: no s^2 term
    eager = activation_coefficients(l405, attention="eager", tp=8, sp=True)
    fwd, bwd = cp_attention_buffers_bytes(l405, batch=1, seq=long, tp=l3.tp, cp=l3.cp, cp_comm=l3.cp_comm)
    _says(eager[1] == 2 * l405.heads / 8,
          "eager attention keeps, with no dropout, the softmax's 16-bit output alone (2a/t bytes)")
    _says(int(row["dp"]) == l3.dp == meta128.dp == 8, "the 128K row runs 8 data-parallel replicas")
    degrees = (meta128.tp, meta128.cp, meta128.pp, meta128.gpus)
    _says((row["tp"], row["cp"], row["pp"], row["n_gpus"]) == degrees, "the 128K row's degrees are Meta's")
    # Table 4's printed DP 4 (8,192 GPUs, as WLB-LLM's 128K job) keeps 16 micro-batches a replica: same step
    dp4, dp8 = (step_time(l405, h100, llama3_405b_layout(d, cp=16), batch=1, seq=long, grad_accum=m,
                          precision=LLAMA3_RECIPE).mfu for d in (4, 8))
    _says(abs(dp4 / dp8 - 1) < 1e-3, "Table 4 read with DP 4 gives the same step as DP 8")
    mis, l8 = get_model("mistral-7b"), get_model("llama-3-8b")      # exercise 7: the same layers, a window
    shape = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden")
    _says(all(getattr(mis, k) == getattr(l8, k) for k in shape), "Mistral 7B's layers are Llama 3 8B's")
    values = {
        "lin_kib": f"{linear / KiB:,.0f} KiB",
        "eager_cross": f"{eager[0] / eager[1]:,.0f}",
        "eager_pair": f"{eager[1]:.0f}",
        "nvl_domain": f"{rack}",
        "nvl_group": f"{nvl.tp * nvl.cp}",
        "kv_heads": f"{l405.kv_heads}",
        "heads": f"{l405.heads}",
        "gathered": f"{fwd / MiB:,.0f} MiB",                # all-gather: the whole sequence's K, V
        "chunk": f"{fwd / l3.cp / MiB:,.0f} MiB",           # ... of which one GPU's chunk
        "l3_gpus": f"{l3.gpus:,}",
        "l3_m": f"{m}",
        "l3_pub": f"{published:.1%}",
        "l3_row_dp": f"{int(row['dp'])}",                 # the row's dp column (its name keeps Table 4's 4)
        "l3_tflops": f"{row['reported_tflops_per_gpu']:.0f}",
        "row_gpus": f"{int(row['n_gpus']):,}",                # Table 4's 128K row
        "row_degrees": f"tp={meta128.tp}, cp={meta128.cp} and pp={meta128.pp}",
        "row_batch": f"{int(row['global_batch']) * long // 2**20}M",   # tokens a batch
        "dp48_mfu": f"{dp8:.1%}",
        "cp_degrees": ", ".join(map(str, default_cp_degrees(long))),
        "cp_degrees_16k": ", ".join(map(str, default_cp_degrees(CP_MIN_SEQ))),
        "cp_min_seq": f"{CP_MIN_SEQ // 1024}K",               # the planner tries cp from here
        "cp_min_tokens": f"{CP_MIN_TOKENS_PER_RANK:,}",       # ... leaving each GPU this many
        "gb": f"{run['global_batch']}",
        "run_gpus": f"{run['max_gpus']:,}",
        "run_tokens": f"{run['tokens'] / 1e9:,.0f}B",         # Llama 3 Sec. 3.4.2: ~800B tokens (stages CSV)
        "tok_cp16": f"{long // meta128.cp:,}",                # tokens of a sequence per GPU at cp=16
        "seq_long": f"{long:,}",
        "meta_cp": f"{meta128.cp}",                           # Meta's context-parallel degree
        "ex7_shape": f"{mis.layers} of them, hidden {mis.hidden:,}, {mis.heads} query and {mis.kv_heads} "
                     f"KV heads, MLP {mis.ffn_hidden:,}",
        "ex5_kv": f"{get_model('llama-2-7b').kv_heads}",      # exercise 5
        "dp4_gpus": f"{meta128.tp * meta128.cp * meta128.pp * 4:,}",   # Table 4 read with DP 4
    }
    data = {"meta128": meta128, "nvl": nvl, "rack": rack, "l3": l3, "row": row, "published": published,
            "m": m, "run": run, "fwd": fwd, "bwd": bwd}
    return ChapterText(values=values, data=data)


def ulysses_shard_bytes(model, *, seq: int, cp: int, act_bytes: float = 2) -> tuple[float, float]:
    """One GPU's shards a Ulysses all-to-all moves, bytes, ``(S_q, S_kv)``: its ``seq / cp`` tokens of Q (the
    output O is as large) and of K and V, ``act_bytes`` each (16-bit: 2), tp = 1 (Jacobs et al. 2023, Sec.
    3.1; chapter 17's "Ulysses" section). Raises ValueError for ``seq`` or ``cp`` below 1, TypeError for a
    non-integer."""
    seq, cp = check_int("seq", seq), check_int("cp", cp)
    check_number("act_bytes", act_bytes, minimum=0.0, allow_equal=False)
    local = seq // cp
    q_bytes = act_bytes * local * model.heads * model.head_dim
    return q_bytes, act_bytes * local * 2 * model.kv_heads * model.head_dim


def ring_over_ulysses(q_bytes: float, kv_bytes: float, cp: int) -> float:
    """How many times Ulysses' bytes the ring sends, by hand: ``3 cp S_kv / (2 (2 S_q + S_kv))`` (the ring
    passes K, V forward and K, V and their gradients backward, ``cp - 1`` hops; Ulysses moves Q, K, V and O
    forward, the same backward, ``(cp - 1) / cp`` of each; chapter 17's "Ulysses" section and exercise 5).
    Raises ValueError for a negative size or ``cp`` below 1."""
    cp = check_int("cp", cp)
    for name, v in (("q_bytes", q_bytes), ("kv_bytes", kv_bytes)):
        check_number(name, v, minimum=0.0, allow_equal=False)
    return 3 * cp * kv_bytes / (2 * (2 * q_bytes + kv_bytes))


def window_exchange_fewer(seq: int, cp: int, window: int) -> float:
    """How many times fewer K, V tokens a window-aware exchange moves than the all-gather: the gather brings
    a GPU the ``(cp - 1)`` other chunks of ``seq / cp`` tokens, a window-aware one the ``window`` tokens
    before each of its two chunks (chapter 17, exercise 7). Raises ValueError below 1, TypeError for a
    non-integer."""
    seq, cp, window = check_int("seq", seq), check_int("cp", cp), check_int("window", window)
    return (cp - 1) * (seq // cp) / (2 * window)


def _fits(t, gpu) -> str:
    return "yes" if t.total_bytes <= gpu.memory_bytes else "no"


def _needs(name: str, given: dict, keys) -> None:
    missing = [k for k in keys if k not in given]
    if missing:
        raise ValueError(f"{name} must hold the runs the chapter's prose quotes, {list(keys)}; "
                         f"missing {missing}")


def memory_prose(model, gpu, parallel, mem: dict | None = None) -> ChapterText:
    """Chapter 17's first table: ``model`` (Llama 3.1 405B) on Meta's 8K layout ``parallel`` at 8K and 128K
    tokens, with and without full recomputation (:func:`~llmsizing.memory.training_memory`, 16 micro-batches
    of one sequence, the most loaded GPU). ``mem``: (seq, recompute) -> the memory the chapter's cell
    computed (computed here when None). ``report``: the table; ``data["mem"]``: the same mapping. Checks that
    8K fits and 128K does not even with recomputation, that the states do not move with the sequence and
    which stage is the most loaded. Raises ValueError if ``mem`` lacks one of the four runs."""
    from .memory import training_memory
    from .parallel import uneven_stages

    short, long = SHORT_SEQ, LONG_SEQ
    keys = [(seq, rc) for seq in (short, long) for rc in ("none", "full")]
    if mem is None:
        mem = {(seq, rc): training_memory(model, batch=1, seq=seq, grad_accum=16, parallel=parallel,
                                          recompute=rc, precision=LLAMA3_RECIPE) for seq, rc in keys}
    _needs("mem", mem, keys)
    rows, fits = {}, f"fits {fmt_gib(gpu.memory_bytes)}"
    for seq in (short, long):
        for rc in ("none", "full"):
            t = mem[(seq, rc)]
            rows[(f"{seq:,}", rc)] = {"model states": fmt_gib(t.states.total_bytes),
                                      "activations": fmt_gib(t.activations_bytes),
                                      "total": fmt_gib(t.total_bytes), fits: _fits(t, gpu)}
    par = parallel
    report = (f"{model.name}, Meta's 8K layout (tp={par.tp} pp={par.pp} v={par.virtual_stages} dp={par.dp}, "
              "FSDP + SP), 16 micro-batches of one sequence, most loaded GPU:\n"
              + pd.DataFrame(rows).T.rename_axis(["seq", "recompute"]).to_string())
    _says(mem[(short, "none")].total_bytes <= gpu.memory_bytes < mem[(long, "full")].total_bytes,
          "8K fits without recomputation, 128K not even with it")
    values = {}
    for seq, rc in keys:
        t, k = mem[(seq, rc)], f"{seq // 1024}k_{rc}"
        values[f"act_{k}"] = fmt_gib(t.activations_bytes)
        values[f"tot_{k}"] = fmt_gib(t.total_bytes)
    values["states"] = fmt_gib(mem[(short, "none")].states.total_bytes)
    for rc in ("none", "full"):
        _says(mem[(short, rc)].states.total_bytes == mem[(long, rc)].states.total_bytes
              and mem[(short, rc)].stage == mem[(long, rc)].stage,
              "the states do not move with the sequence, nor does the most loaded stage")
    stages = uneven_stages(126, 16, first=7, last=7)                  # 7, 8, ..., 8, 7
    none_st, full_st = mem[(short, "none")].stage, mem[(short, "full")].stage
    _says(stages[none_st] == 8 and stages[full_st] == 7 and full_st == par.pp - 1,
          "with full recomputation another stage (the last, of 7 layers) is the most loaded")
    growth = mem[(long, "none")].activations_bytes / mem[(short, "none")].activations_bytes
    values["act_growth"] = f"{growth:.0f}"
    values["h100_gib"] = fmt_gib(gpu.memory_bytes)
    return ChapterText(values=values, report=report, data={"mem": mem})


def cp_memory_prose(model, gpu, runs: dict | None = None) -> ChapterText:
    """Chapter 17's second table: Meta's pipeline at 128K with 8 replicas, recomputation against context
    parallelism (cp 1, 4, 16; :func:`~llmsizing.memory.training_memory` and
    :func:`~llmsizing.layouts.step_time`, 16 micro-batches of one sequence). ``runs``: (cp, recompute) ->
    (layout, memory, step) as the chapter's cell computed them (computed here when None); ``data["st_cp"]``:
    (cp, recompute) -> (memory, step). Checks that cp=16 fits where cp=1 with full recomputation does not,
    and that cp=16 costs MFU, less than full recomputation does and mostly in slower kernels, not in
    traffic. Raises ValueError if ``runs`` lacks a run the prose quotes."""
    from .flops import training_flops_per_token
    from .memory import training_memory

    long = LONG_SEQ
    if runs is None:
        runs = {}
        for cp in (1, 4, 16):
            p = llama3_405b_layout(8, cp=cp)
            for rc in ("none", "full"):
                kw = dict(batch=1, seq=long, grad_accum=16, recompute=rc, precision=LLAMA3_RECIPE)
                runs[(cp, rc)] = (p, training_memory(model, parallel=p, **kw), step_time(model, gpu, p, **kw))
    _needs("runs", runs, [(1, "none"), (1, "full"), (4, "full"), (16, "none"), (16, "full")])
    rows, st_cp, values = {}, {}, {}
    for (cp, rc), (p, t, s) in runs.items():
        st_cp[(cp, rc)] = (t, s)
        rows[(cp, rc)] = {"GPUs": f"{p.gpus:,}", "tokens/GPU": f"{long // cp:,}",
                          "total": fmt_gib(t.total_bytes), "fits": _fits(t, gpu),
                          "CP exposed": f"{s.exposed.get('cp', 0.0):.2f} s", "step": f"{s.step_s:.1f} s",
                          "MFU": f"{s.mfu:.0%}"}
        values[f"cp{cp}_{rc}_tot"] = fmt_gib(t.total_bytes)
        values[f"cp{cp}_{rc}_mfu"] = f"{s.mfu:.0%}"
    report = (f"{model.name} at {long:,} tokens, tp={p.tp} pp={p.pp} v={p.virtual_stages} dp={p.dp}, "
              "FSDP over dp x cp, K and V all-gathered:\n"
              + pd.DataFrame(rows).T.rename_axis(["cp", "recompute"]).to_string())
    one, sixteen = st_cp[(1, "none")][1], st_cp[(16, "none")][1]
    _says(st_cp[(16, "none")][0].total_bytes <= gpu.memory_bytes < st_cp[(1, "full")][0].total_bytes,
          "cp=16 fits, cp=1 does not even with full recomputation")
    rc_x = (training_flops_per_token(model, seq=long, recompute="full")
            / training_flops_per_token(model, seq=long))
    _says(1 < rc_x < 1.5, "recomputation reruns the forward: more FLOPs")
    values.update({"rc_extra": f"{rc_x - 1:.0%}", "cp16_step": f"{sixteen.step_s:.1f} s",
                   "cp16_exposed": f"{sixteen.exposed['cp']:.2f} s",
                   "cp16_compute": f"{sixteen.compute_s:.1f} s",
                   "cp1_compute_16th": f"{one.compute_s / 16:.1f} s"})   # the same work on 16 times the GPUs
    _says(one.mfu > sixteen.mfu > st_cp[(1, "full")][1].mfu, "cp=16 costs MFU, less than full recomputation")
    _says(0 < sixteen.exposed["cp"] < sixteen.step_s - one.step_s / 16
          and sixteen.compute_s > one.compute_s / 16,
          "cp=16's cost is mostly slower kernels, not traffic")
    return ChapterText(values=values, report=report, data={"st_cp": st_cp})


def exchange_prose(comm, model, l3, fwd: float, bwd: float) -> ChapterText:
    """Chapter 17's K, V exchange at 128K: the buffers each rank exchanges (all-gather ``fwd``/``bwd`` bytes
    and the ring's, :func:`~llmsizing.activations.cp_attention_buffers_bytes`) and the CP rows of ``comm``
    (:func:`~llmsizing.comm.communication` of Meta's layout). ``report``: those rows. Checks that the ring
    reaches less than a DGX H100's NIC rate."""
    frame = comm.to_frame()
    cp_rows = frame[frame["group"] == "cp"]
    report = cp_rows[["group_size", "link", "calls", "message_bytes", "bytes_per_gpu", "bandwidth_gbps",
                      "time_s"]].to_string(float_format=lambda v: f"{v:,.3g}")
    ring_fwd, ring_bwd = cp_attention_buffers_bytes(model, batch=1, seq=LONG_SEQ, tp=l3.tp, cp=l3.cp,
                                                    cp_comm="p2p")
    node = get_node(gpu="H100 SXM")                 # a DGX H100: one 400 Gb/s NIC per GPU (data/nodes.csv)
    _says(cp_rows["bandwidth_gbps"].iloc[0] < node.nic_gbits / 8, "a ring reaches less than the NIC's rate")
    values = {"buf_fwd": f"{fwd / 2**20:,.0f} MiB",          # all-gather: the whole sequence's K, V
              "buf_bwd": f"{bwd / 2**20:,.0f} MiB",          # ... and their gradients
              "ring_fwd": f"{ring_fwd / 2**20:,.0f} MiB",
              "ring_bwd": f"{ring_bwd / 2**20:,.0f} MiB",
              "cp_bytes": f"{cp_rows['bytes_per_gpu'].sum() / 1e9:,.1f} GB",
              "cp_link": f"{cp_rows['bandwidth_gbps'].iloc[0]:,.0f} GB/s",
              "cp_nic_gbit": f"{node.nic_gbits:.0f} Gb/s",
              "cp_nic_nominal": f"{node.nic_gbits / 8:.0f} GB/s",
              "cp_time": f"{cp_rows['time_s'].sum():.2f} s"}
    return ChapterText(values=values, report=report)


def overlap_prose(sweep, model, *, cp: int) -> ChapterText:
    """Chapter 17's overlap of the all-gather with the compute, read from ``sweep``
    (:func:`~llmsizing.cp_sweep.cp_overlap_sweep` of Meta's layout, 4K to 512K; ``cp`` its context-parallel
    degree, which splits the sequence where the ring starts to hide), and sliding-window and
    hybrid attention's keys per token at 128K (:func:`~llmsizing.flops.attention_keys_per_token`). Checks
    that the all-gather's share of the compute peaks at or below 8K and falls from there."""
    from .flops import attention_keys_per_token

    cp = check_int("cp", cp)
    long = LONG_SEQ
    hidden_from = sweep.index[sweep["exposed_s"] <= 0.01 * sweep["cp_comm_s"]].min()
    ag_share = sweep["all_gather_s"] / sweep["compute_s"]
    falling = (ag_share[ag_share.index >= SHORT_SEQ].diff().dropna() < 0).all()
    _says(ag_share.idxmax() <= SHORT_SEQ and falling,
          "the all-gather's share of the compute falls from 8K on")
    gptoss, mistral = get_model("gpt-oss-120b"), get_model("mistral-7b")
    values = {"hidden_from": f"{hidden_from:,}", "hidden_from_rank": f"{hidden_from // cp:,}",
              "ag_share_128k": f"{sweep.loc[long, 'all_gather_s'] / sweep.loc[long, 'compute_s']:.1%}",
              "ag_peak": f"{ag_share.max():.1%}", "ag_peak_seq": f"{ag_share.idxmax() // 1024}K"}
    for key, name in (("full", model.name), ("mistral", "mistral-7b"), ("gptoss", "gpt-oss-120b")):
        values[f"sw_{key}"] = f"{attention_keys_per_token(name, seq=long, causal=True):,.0f}"
    values.update({"sw_gptoss_w": f"{gptoss.sliding_window}",
                   "sw_gptoss_split": f"{gptoss.window_layers} of its {gptoss.n_attention_layers}",
                   "sw_mistral_w": f"{mistral.sliding_window:,}",
                   "att_share_128k": f"{sweep.loc[long, 'attention_s'] / sweep.loc[long, 'compute_s']:.0%}"})
    return ChapterText(values=values)


def ulysses_prose(u_comm, u_st) -> ChapterText:
    """Chapter 17's Ulysses section: Llama 3 8B at 128K on one DGX H100 (cp=8) with the ring, the all-gather
    and Ulysses (``u_comm``/``u_st``: cp_comm -> :func:`~llmsizing.comm.communication` /
    :func:`~llmsizing.layouts.step_time`), against the hand count (:func:`ulysses_shard_bytes`,
    :func:`ring_over_ulysses`). ``report``: bytes sent, exposed and step by exchange. Checks that Ulysses
    sends the fewest bytes, the ring hides all, and Ulysses waits less than the gather."""
    l8, long, cp = get_model("llama-3-8b"), LONG_SEQ, 8
    u_sent = {k: sum(c.bytes_per_gpu for c in comm.collectives if c.group == "cp")
              for k, comm in u_comm.items()}
    s_q, s_kv = ulysses_shard_bytes(l8, seq=long, cp=cp)       # this GPU's Q (and O), its K and V
    report = pd.DataFrame({"GB sent per GPU per step": {k: f"{v / 1e9:.1f}" for k, v in u_sent.items()},
                           "exposed (ms)": {k: f"{st.exposed['cp'] * 1e3:.0f}" for k, st in u_st.items()},
                           "step (s)": {k: f"{st.step_s:.3f}" for k, st in u_st.items()}}).to_string()
    _says(u_sent["a2a"] < u_sent["p2p"] == u_sent["all_gather"] and u_st["p2p"].exposed["cp"] == 0,
          "at cp=8 Ulysses sends the fewest bytes; the ring hides all")
    _says(0 < u_st["a2a"].exposed["cp"] < u_st["all_gather"].exposed["cp"],
          "Ulysses waits less than the gather")
    values = {"u_sq": f"{s_q / 2**20:,.0f} MiB", "u_skv": f"{s_kv / 2**20:,.0f} MiB",
              "u_ratio_per_cp": f"{ring_over_ulysses(s_q, s_kv, 1):.1f}",     # per unit of cp
              "u_ratio_hand": f"{ring_over_ulysses(s_q, s_kv, cp):.1f}",
              "u_ratio": f"{u_sent['p2p'] / u_sent['a2a']:.1f}",
              "u_ring_gb": f"{u_sent['p2p'] / 1e9:.0f} GB", "u_a2a_gb": f"{u_sent['a2a'] / 1e9:.0f} GB",
              "u_a2a_ms": f"{u_st['a2a'].exposed['cp'] * 1e3:.0f} ms",
              "u_ag_ms": f"{u_st['all_gather'].exposed['cp'] * 1e3:.0f} ms",
              "u_share": f"{u_st['a2a'].exposed['cp'] / u_st['a2a'].step_s:.1%}",
              "u_l8_kv": f"{l8.kv_heads}", "u_l8_q": f"{l8.heads}", "u_l8_hd": f"{l8.head_dim}"}
    return ChapterText(values=values, report=report)
