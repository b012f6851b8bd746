"""The library's split of a training step against ``torch.distributed`` (chapter 9, "Measure the split
yourself").

``tools/measure_memory.py dist`` runs a small real ``LlamaForCausalLM`` (fp32, AdamW, gloo on the CPU) under
DistributedDataParallel, ZeroRedundancyOptimizer (ZeRO-1), FSDP2 ``fully_shard`` (ZeRO-3, and with
``reshard_after_forward=False`` the ZeRO-2-like variant) and DTensor tensor/sequence parallelism, and writes

* ``data/dist_measurements.csv``: each rank's parameter, gradient and AdamW bytes after the step;
* ``data/dist_collectives.csv``: every collective of one step on each rank, by phase (forward, backward,
  optimizer), kind, op, dtype and full-buffer size (``message_bytes``), with its number of ``calls``.

This module reads both and lines them up with :func:`~llmsizing.comm.communication` and
:func:`~llmsizing.gpu_states.model_states`. No torch is needed. Bytes per GPU of a measured collective use the
same ring costs as the library (:func:`~llmsizing.comm.ring_bytes`; NCCL's ring algorithms): gloo's own
algorithms differ, so what is measured is the *calls and buffers* a framework issues, and the per-GPU bytes
are what those calls would cost on a ring. A broadcast of ``S`` bytes is charged ``(n - 1) / n x S`` per GPU:
a pipelined ring broadcast sends ``S`` over each of ``n - 1`` links, and ZeroRedundancyOptimizer's roots
rotate over the ranks, so the average GPU sends that much.

The time of one collective (the chapter's widget): :func:`collective_time_sweeps` gathers the gloo timings of
``data/gloo_collective_times.csv`` and the published nccl-tests logs of ``data/nccl_tests/``;
:func:`collective_time_fit` fits one sweep with :func:`~llmsizing.alpha_beta.fit_two_regimes`;
:func:`collective_time_at` prices a size with one of its lines next to the nearest measured size, with the gap
and its cause, and :func:`collective_time_line` gives a line's times at many sizes.
"""

from __future__ import annotations

import dataclasses
import functools
import math

from ._validate import check_choice, check_int, check_number
from .catalog import resolve_model
from .comm import communication, ring_bytes
from .measurements import DATA_DIR
from .memory import model_states
from .model import Model
from .parallel import Parallel
from .units import fmt_size

#: The committed collectives of one step, per rank (tools/measure_memory.py dist).
DIST_COLLECTIVES_CSV = DATA_DIR / "dist_collectives.csv"
#: The committed per-rank model states (tools/measure_memory.py dist).
DIST_STATES_CSV = DATA_DIR / "dist_measurements.csv"
#: FSDP2's collectives per step by wrapping and layer count (tools/measure_memory.py fsdp-units).
FSDP_UNIT_CALLS_CSV = DATA_DIR / "fsdp_unit_calls.csv"

#: Each measured layout as the library's :class:`~llmsizing.parallel.Parallel` over ``n`` ranks, and what it
#: is.
LAYOUTS = {
    "ddp": ("DistributedDataParallel", lambda n: Parallel(dp=n, zero=0)),
    "zero1": ("ZeroRedundancyOptimizer (ZeRO-1)", lambda n: Parallel(dp=n, zero=1)),
    "fsdp2-no-reshard": ("FSDP2, reshard_after_forward=False (ZeRO-2-like traffic)",
                         lambda n: Parallel(dp=n, zero=3, reshard_after_forward=False)),
    "fsdp2": ("FSDP2 fully_shard (ZeRO-3)", lambda n: Parallel(dp=n, zero=3)),
    "tp": ("DTensor tensor parallelism", lambda n: Parallel(tp=n)),
    "sp": ("DTensor tensor + sequence parallelism", lambda n: Parallel(tp=n, sp=True)),
}
KINDS = ("all-reduce", "reduce-scatter", "all-gather", "broadcast")


def load_collectives(path=None):
    """The committed collectives as a DataFrame: one row per (layout, world_size, rank, phase, kind, op,
    dtype, message_bytes) with its ``calls``."""
    import pandas as pd

    return pd.read_csv(path or DIST_COLLECTIVES_CSV)


def fsdp_unit_relation(path=None):
    """FSDP2's calls per step as ``layers + k``, from ``data/fsdp_unit_calls.csv`` (torch's ``fully_shard``
    on a 1-4 layer HF Llama, 2 and 4 gloo ranks): one row per wrapping, phase and kind with its ``k``
    (``calls - layers``, the units besides the blocks'). Raises ValueError if a wrapping's ``k`` differs
    between layer counts or world sizes, so that one ``k`` stands for the sweep. Chapter 9."""
    import pandas as pd

    df = pd.read_csv(FSDP_UNIT_CALLS_CSV if path is None else path)
    per = df.groupby(["wrapping", "phase", "kind", "world_size", "layers"], as_index=False)["calls"].sum()
    per["k"] = per["calls"] - per["layers"]
    rows = []
    for (wrapping, phase, kind), part in per.groupby(["wrapping", "phase", "kind"], sort=False):
        ks = sorted(set(part["k"]))
        if len(ks) != 1:
            raise ValueError(f"{wrapping} {phase} {kind}: calls - layers is not one k over the sweep: {ks}")
        rows.append({"wrapping": wrapping, "phase": phase, "kind": kind, "k": int(ks[0])})
    return pd.DataFrame(rows)


#: The plain wrappings of ``data/fsdp_unit_calls.csv`` (``fully_shard`` on each layer, then the root) and the
#: ``reshard_after_forward`` that prices each: torch's default (None, the root kept), True and False on every
#: unit.
FSDP_UNIT_RESHARD = {"layers+root": None, "layers+root, reshard all": True,
                     "layers+root, reshard none": False}
#: The library's ZeRO-3 collectives as the CSV's ``(phase, kind)``.
_ZERO3_PHASE_KIND = {"ZeRO-3 weight all-gather (forward)": ("forward", "all-gather"),
                     "ZeRO-3 weight all-gather (backward)": ("backward", "all-gather"),
                     "ZeRO-3 gradient reduce-scatter": ("backward", "reduce-scatter")}


def fsdp_unit_prices(path=None):
    """Each run of ``data/fsdp_unit_calls.csv``'s plain wrappings (:data:`FSDP_UNIT_RESHARD`) against
    :func:`~llmsizing.comm.communication` on the same model (``Parallel(dp=world, zero=3,
    reshard_after_forward=...)``, fp32, one micro-batch): one row per wrapping, world size, layers, phase and
    kind with the measured and predicted ``calls`` and ``bytes`` of one step (calls x message). The model is
    the CSV's LlamaConfig, untied; raises ValueError where its parameters are not the row's ``n_params``.
    Chapter 9."""
    import pandas as pd

    df = pd.read_csv(FSDP_UNIT_CALLS_CSV if path is None else path)
    df = df[df["wrapping"].isin(list(FSDP_UNIT_RESHARD))]
    df = df.assign(bytes=df["calls"] * df["message_bytes"])
    rows = []
    for (wrapping, world, layers), part in df.groupby(["wrapping", "world_size", "layers"], sort=False):
        r = part.iloc[0]
        model = Model("fsdp-units", layers=int(layers), hidden=int(r["hidden"]), heads=int(r["heads"]),
                      kv_heads=int(r["kv_heads"]), ffn_hidden=int(r["ffn"]), vocab=int(r["vocab"]),
                      tied_embeddings=False)
        if model.n_params != int(r["n_params"]):
            raise ValueError(f"{wrapping}, {layers} layers: the model built has {model.n_params:,} "
                             f"parameters, the row {int(r['n_params']):,}")
        par = Parallel(dp=int(world), zero=3, reshard_after_forward=FSDP_UNIT_RESHARD[wrapping])
        c = communication(model, par, batch=int(r["batch"]), seq=int(r["seq"]), gpu="H100 SXM",
                          precision="fp32")
        pred = {_ZERO3_PHASE_KIND[x.collective]: (x.calls, x.calls * x.message_bytes)
                for x in c.collectives if x.group == "dp"}
        meas = part.groupby(["phase", "kind"])[["calls", "bytes"]].sum()
        for key in sorted(set(pred) | set(meas.index)):
            m_calls, m_bytes = (int(v) for v in meas.loc[key]) if key in meas.index else (0, 0)
            p_calls, p_bytes = pred.get(key, (0, 0.0))
            rows.append({"wrapping": wrapping, "world_size": int(world), "layers": int(layers),
                         "phase": key[0], "kind": key[1], "measured_calls": m_calls,
                         "predicted_calls": p_calls, "measured_bytes": m_bytes, "predicted_bytes": p_bytes})
    return pd.DataFrame(rows)


def load_dist_states(path=None):
    """The committed per-rank model states as a DataFrame."""
    import pandas as pd

    return pd.read_csv(path or DIST_STATES_CSV)


def dist_model(row) -> Model:
    """The :class:`~llmsizing.model.Model` a row of either CSV was measured on (a LlamaForCausalLM config)."""
    return Model("dist-llama", layers=int(row["layers"]), hidden=int(row["hidden"]), heads=int(row["heads"]),
                 kv_heads=int(row["kv_heads"]), head_dim=int(row["head_dim"]), ffn_hidden=int(row["ffn"]),
                 vocab=int(row["vocab"]), tied_embeddings=str(row["tied_embeddings"]) == "True")


def torch_zero1_time_ratio(n: int) -> float:
    """PyTorch's ZeRO-1 (``ZeroRedundancyOptimizer`` on DDP: an all-reduce of the whole gradient, then a
    broadcast of each updated parameter from its owner) over the library's ZeRO-1 (a reduce-scatter and an
    all-gather, Rajbhandari et al. 2020, Sec. 7.2), in time over ``n`` ranks at one bus bandwidth: each
    collective of ``S`` bytes takes nccl-tests' bus factor x ``S`` / busbw
    (:func:`~llmsizing.alpha_beta.bus_factor`; a ring broadcast's factor is 1 whatever ``n``), so the ratio is
    ``(2 (n-1)/n + 1) / (2 (n-1)/n)``: 2 on 2 ranks, tending to the bytes' 1.5 on many. Chapter 9, ZeRO-1's
    gap and exercise 1."""
    from .alpha_beta import bus_factor

    n = check_int("n", n, minimum=2)
    return ((bus_factor("all_reduce", n) + bus_factor("broadcast", n))
            / (bus_factor("reduce_scatter", n) + bus_factor("all_gather", n)))


def collective_bytes_per_gpu(kind: str, message_bytes: float, n: int) -> float:
    """Bytes one GPU sends for one collective of a ``message_bytes`` buffer over ``n`` ranks, at ring cost:
    :func:`~llmsizing.comm.ring_bytes` for all-reduce, reduce-scatter and all-gather, ``(n - 1) / n x S`` for
    a broadcast (pipelined over a ring, roots rotating over the ranks). Chapter 9."""
    kind = check_choice("kind", kind, KINDS)
    s = check_number("message_bytes", message_bytes)
    n = check_int("n", n)
    if kind == "broadcast":
        return (n - 1) / n * s
    return ring_bytes(kind, s, n)


def fsdp2_unit_bytes(model: Model | str, n: int, *, dtype_bytes: float = 4.0) -> list[float]:
    """Bytes of the buffer FSDP2 all-gathers (and reduce-scatters) for each unit of a Llama-style model
    wrapped as in the measurement (each decoder layer a unit, the root holding the embedding, final norm and
    LM head), over ``n`` ranks, ``dtype_bytes`` per element. FSDP2 shards every parameter along dimension 0 in
    chunks of ``ceil(d0 / n)`` rows and pads the last rank's shard, so each parameter costs
    ``ceil(d0 / n) x n`` rows (torch ``_fsdp_param.py``, ``FSDPParam._init_sharded_param``).
    ``[root, layer, layer, ...]``. Chapter 9."""
    model = resolve_model(model)
    n = check_int("n", n)
    b = check_number("dtype_bytes", dtype_bytes, allow_equal=False)
    h, d, f = model.hidden, model.head_dim, model.ffn_hidden

    def padded(rows: int, cols: int = 1) -> int:
        return math.ceil(rows / n) * n * cols

    layer = (padded(model.heads * d, h) + 2 * padded(model.kv_heads * d, h) + padded(h, model.heads * d)
             + (2 * padded(f, h) + padded(h, f) if model.gated_mlp else padded(f, h) + padded(h, f))
             + 2 * padded(h))
    root = padded(model.vocab, h) + padded(h) + (0 if model.tied_embeddings else padded(model.vocab, h))
    return [b * root] + [b * layer] * model.layers


def measured_collectives(df=None):
    """Per run (layout, world size) and kind: calls, total message bytes and ring bytes per GPU of the
    measured step, for the rank that sends the most (all ranks issue the same collectives in these runs)."""
    import pandas as pd

    df = load_collectives() if df is None else df
    df = df.assign(total_message_bytes=df["message_bytes"] * df["calls"])
    df["bytes_per_gpu"] = [c * collective_bytes_per_gpu(k, m, n) for k, m, n, c in
                           zip(df["kind"], df["message_bytes"], df["world_size"], df["calls"])]
    per_rank = df.groupby(["layout", "world_size", "rank", "kind"], as_index=False)[
        ["calls", "total_message_bytes", "bytes_per_gpu"]].sum()
    out = per_rank.sort_values("bytes_per_gpu").groupby(["layout", "world_size", "kind"],
                                                        as_index=False).last()
    return pd.DataFrame(out.drop(columns="rank"))


def predicted_collectives(layout: str, world: int, model: Model, *, batch: int, seq: int):
    """The library's collectives for a measured run: :func:`~llmsizing.comm.communication` in fp32 (the
    measurement's dtype), as a DataFrame of kind, calls, message bytes and ring bytes per GPU. The GPU only
    sets the link's speed, which the bytes do not depend on."""
    import pandas as pd

    layout = check_choice("layout", layout, LAYOUTS)
    par = LAYOUTS[layout][1](check_int("world", world))
    comm = communication(model, par, batch=batch, seq=seq, gpu="H100 SXM", precision="fp32")
    rows = []
    for c in comm.collectives:
        kind = next(k for k in KINDS if k in c.collective)
        rows.append({"kind": kind, "collective": c.collective, "calls": c.calls,
                     "total_message_bytes": c.calls * c.message_bytes, "bytes_per_gpu": c.bytes_per_gpu})
    return pd.DataFrame(rows, columns=["kind", "collective", "calls", "total_message_bytes", "bytes_per_gpu"])


def compare_collectives(df=None):
    """One row per measured run: measured and predicted calls, message bytes and ring bytes per GPU for the
    whole step, and ``ratio`` = measured / predicted bytes per GPU. Chapter 9 explains every ratio that is not
    1 (ZeroRedundancyOptimizer's all-reduce + broadcast, FSDP2's padding on 3 ranks, DTensor's extra
    calls)."""
    import pandas as pd

    df = load_collectives() if df is None else df
    meas = measured_collectives(df)
    first = df.iloc[0]
    model = dist_model(first)
    rows = []
    for (layout, world), part in meas.groupby(["layout", "world_size"], sort=False):
        pred = predicted_collectives(layout, int(world), model, batch=int(first["batch"]),
                                     seq=int(first["seq"]))
        rows.append({"layout": layout, "world_size": int(world), "framework": LAYOUTS[layout][0],
                     "measured_calls": int(part["calls"].sum()), "predicted_calls": int(pred["calls"].sum()),
                     "measured_message_bytes": float(part["total_message_bytes"].sum()),
                     "predicted_message_bytes": float(pred["total_message_bytes"].sum()),
                     "measured_bytes_per_gpu": float(part["bytes_per_gpu"].sum()),
                     "predicted_bytes_per_gpu": float(pred["bytes_per_gpu"].sum())})
    out = pd.DataFrame(rows)
    out["ratio"] = out["measured_bytes_per_gpu"] / out["predicted_bytes_per_gpu"]
    order = {k: i for i, k in enumerate(LAYOUTS)}
    return out.sort_values(["layout", "world_size"], key=lambda c: c.map(order) if c.name == "layout" else c,
                           ignore_index=True)


def compare_states(df=None):
    """Each rank's measured parameter, gradient and AdamW bytes against
    :func:`~llmsizing.gpu_states.model_states` (fp32, AdamW, the layout's ZeRO stage), with ``*_error`` =
    measured - predicted in bytes. The TP rows have weights only. ZeRO-1's optimizer error is
    ZeroRedundancyOptimizer's whole-parameter partition. FSDP2 without resharding after the forward is the
    library's ``zero=3, reshard_after_forward=False`` (one gather in the forward and one reduce-scatter per
    unit, ZeRO-2's traffic); its states, read after the step, are ZeRO-3's sharded ones."""
    import pandas as pd

    df = load_dist_states() if df is None else df
    model = dist_model(df.iloc[0])
    rows = []
    for _, r in df.iterrows():
        par = LAYOUTS[r["layout"]][1](int(r["world_size"]))
        if par.zero == 3 and not par.reshard_after_forward:
            # read after the step, when FSDP has resharded: ZeRO-3's states at rest (model_states without
            # resharding counts the weights held gathered from the forward to the backward, a peak)
            par = dataclasses.replace(par, reshard_after_forward=True)
        ms = model_states(model, precision="fp32", optimizer="adamw", parallel=par)
        row = {"layout": r["layout"], "world_size": int(r["world_size"]), "rank": int(r["rank"]),
               "param_bytes": float(r["param_bytes"]), "predicted_param_bytes": ms.weights_bytes}
        for what, pred in (("grad_bytes", ms.gradients_bytes), ("optimizer_state_bytes", ms.optimizer_bytes)):
            if pd.isna(r[what]) or r["layout"] in ("tp", "sp"):
                row[what], row["predicted_" + what] = float("nan"), float("nan")
            else:
                row[what], row["predicted_" + what] = float(r[what]), pred
        rows.append(row)
    out = pd.DataFrame(rows)
    for what in ("param_bytes", "grad_bytes", "optimizer_state_bytes"):
        out[what.replace("_bytes", "_error_bytes")] = out[what] - out["predicted_" + what]
    return out


# =========================================================================== context parallelism (chapter 17)
def compare_cp(df=None):
    """The gloo measurement of context parallelism (``tools/measure_memory.py cp``,
    :func:`~llmsizing.measurements.cp_measurements`) next to the library, one row per variant, ``cp`` and
    sequence length (rank 0; every rank of a load-balanced run measures the same): the bytes one rank saves
    for the backward against :func:`~llmsizing.activations.activation_memory` with ``cp`` (``stack="hf"``,
    fp32, flash-style attention: the measured attention keeps no score matrix), and the attention's bytes sent
    per rank in the forward and the backward, and the gradient all-reduce, against
    :func:`~llmsizing.comm.communication`'s ``cp`` group and its all-reduce over ``dp x cp``. The measured
    all-gather variant is charged at ring cost, as the library charges it. Shown in chapter 17."""
    import pandas as pd

    from .activations import activation_memory
    from .measurements import cp_measurements

    df = cp_measurements() if df is None else df
    rows = []
    for r in df[df["rank"] == 0].itertuples():
        model = Model(name="cp-measured", layers=int(r.layers), hidden=int(r.hidden), heads=int(r.heads),
                      kv_heads=int(r.kv_heads), head_dim=int(r.head_dim), ffn_hidden=int(r.ffn),
                      vocab=int(r.vocab), gated_mlp=True, tied_embeddings=False)
        par = Parallel(cp=int(r.cp), cp_comm="p2p" if r.variant == "ring" else "all_gather")
        saved = activation_memory(model, batch=int(r.batch), seq=int(r.seq), dtype="fp32", stack="hf",
                                  attention="flash", cp=int(r.cp)).total_bytes
        by = {}
        if r.cp > 1:
            comm = communication(model, par, batch=int(r.batch), seq=int(r.seq), gpu="H100 SXM",
                                 precision="fp32")
            for c in comm.collectives:
                key = "grad" if c.group == "dp" else ("forward" if "forward" in c.collective else "backward")
                by[key] = by.get(key, 0.0) + c.bytes_per_gpu
        rows.append({"variant": r.variant, "cp": int(r.cp), "seq": int(r.seq),
                     "saved_measured_bytes": float(r.saved_total_bytes), "saved_library_bytes": saved,
                     "saved_ratio": saved / r.saved_total_bytes,
                     "forward_sent_measured_bytes": float(r.forward_send_bytes),
                     "forward_sent_library_bytes": by.get("forward", 0.0),
                     "backward_sent_measured_bytes": float(r.backward_send_bytes),
                     "backward_sent_library_bytes": by.get("backward", 0.0),
                     "grad_sync_measured_bytes": float(r.grad_sync_send_bytes),
                     "grad_sync_library_bytes": by.get("grad", 0.0)})
    return pd.DataFrame(rows).set_index(["variant", "cp", "seq"])


# =========================================================================== expert parallelism (chapter 18)
def compare_all_to_all(df=None, *, phase: str = "forward", exchange: str = "dispatch"):
    """The gloo measurement of an expert-parallel MoE layer's all-to-all (``tools/measure_memory.py a2a``,
    :func:`~llmsizing.measurements.load_moe_all_to_all`) next to the library's uniform-routing bytes,
    :func:`llmsizing.moe.all_to_all_bytes` (``T x k x hidden x bytes x (ep - 1) / ep`` per rank; GShard's and
    Megatron-LM's accounting), one row per routing, dtype, ``ep`` and tokens per rank, for one ``phase``
    (``"forward"`` or ``"backward"``) and ``exchange`` (``"dispatch"`` or ``"combine"``).

    Columns: ``ranks``; ``library_bytes``; the measured ``sent_mean_bytes``, ``sent_max_bytes`` and
    ``recv_max_bytes`` over the ranks; ``ratio_mean`` (mean sent / library) and ``ratio_busiest`` (the largest
    sent or received bytes of any rank / library: the rank that sets the all-to-all's time); and ``sigma``,
    the binomial relative standard deviation ``sqrt(p (1 - p) / (T k)) / p`` with ``p = (ep - 1) / ep`` that a
    uniformly random router's remote share would show by chance. The library assumes uniform routing and
    models no load imbalance: a skewed router's busiest rank departs from it by more than a few ``sigma``.
    Stand-ins: a random router at Hugging Face's initialisation (the ``skewed`` rows route artificially skewed
    tokens), one ``MixtralSparseMoeBlock`` layer, gloo over loopback TCP on one CPU machine. Shown in chapter
    18."""
    import pandas as pd

    from .measurements import MOE_EXCHANGES, load_moe_all_to_all
    from .moe import all_to_all_bytes

    phase = check_choice("phase", phase, ("forward", "backward"))
    exchange = check_choice("exchange", exchange, MOE_EXCHANGES)
    df = load_moe_all_to_all() if df is None else df
    keys = ["routing", "dtype", "ep", "tokens_per_rank"]
    rows = []
    for key, sub in df[df["phase"] == phase].groupby(keys, sort=False):
        r0 = sub.iloc[0]
        tokens, k, ep = int(r0["tokens_per_rank"]), int(r0["top_k"]), int(r0["ep"])
        lib = all_to_all_bytes(tokens, k, int(r0["hidden"]), float(r0["bytes_per_element"]), ep)
        sent, recv = sub[f"{exchange}_sent_bytes"], sub[f"{exchange}_recv_bytes"]
        p = (ep - 1) / ep
        rows.append({**dict(zip(keys, key)), "ranks": len(sub), "library_bytes": lib,
                     "sent_mean_bytes": float(sent.mean()), "sent_max_bytes": int(sent.max()),
                     "recv_max_bytes": int(recv.max()), "ratio_mean": float(sent.mean()) / lib,
                     "ratio_busiest": max(int(sent.max()), int(recv.max())) / lib,
                     "sigma": math.sqrt(p * (1 - p) / (tokens * k)) / p})
    return pd.DataFrame(rows).set_index(keys)


# =========================================================================== a collective's time (chapter 9)
#: The name of the gloo sweep on this book's CPU (``data/gloo_collective_times.csv``) among
#: :func:`collective_time_sweeps`; the saved nccl-tests logs are named by their file's stem.
GLOO_SWEEP = "gloo, this CPU"
#: The lines :func:`collective_time_at` can price a call with (:class:`~llmsizing.alpha_beta.TwoRegimes`):
#: one line through every size, the model's line (the small messages' alpha, the large ones' bandwidth:
#: training's ``links.csv``) and the cheaper of the two regimes' lines at each size (serving's
#: ``protocols=True``).
TIME_LINES = ("one line", "model line", "cheaper of two")
#: Each of :data:`TIME_LINES` in words, as chapter 9's figure names it (:func:`collective_time_at`'s
#: ``line_words``).
TIME_LINE_WORDS = {"one line": "through every size",
                   "model line": "alpha from the small messages, bandwidth from the large",
                   "cheaper of two": "the cheaper line at this size"}


@functools.cache
def _time_sweeps():
    import pandas as pd

    from .alpha_beta import parse_nccl_tests, published_log, published_logs

    gloo = pd.read_csv(DATA_DIR / "gloo_collective_times.csv")
    parts = [pd.DataFrame({"sweep": GLOO_SWEEP, "collective": gloo["collective"], "n_ranks": gloo["n_ranks"],
                           "size_bytes": gloo["size_bytes"], "time_s": gloo["time_s_median"],
                           "fastest_s": gloo["time_s_min"], "repeats": gloo["repeats"]})]
    for name in published_logs():
        t = parse_nccl_tests(published_log(name))
        t = t[t["size_bytes"] > 0]
        parts.append(pd.DataFrame({"sweep": name.removesuffix(".txt"), "collective": t["collective"],
                                   "n_ranks": t["n_ranks"], "size_bytes": t["size_bytes"],
                                   "time_s": t["time_us"] * 1e-6, "fastest_s": float("nan"), "repeats": 0}))
    return pd.concat(parts, ignore_index=True).astype({"n_ranks": int, "size_bytes": int, "repeats": int})


def collective_time_sweeps():
    """Every timed collective chapter 9 fits, one row per (sweep, collective, ranks, size): the gloo sweep on
    this book's 2-CPU machine (:data:`GLOO_SWEEP`, ``data/gloo_collective_times.csv``: the median of its
    repeats as ``time_s``, the fastest as ``fastest_s``) and each published nccl-tests log of
    ``data/nccl_tests/`` (out-of-place times, sizes as nccl-tests counts them, rows of size 0 left out; no
    repeats are recorded: ``fastest_s`` is NaN). A copy: the parsed logs are kept once per process."""
    return _time_sweeps().copy()


def _measured_with(sweep: str, collective: str | None = None) -> str:
    df = _time_sweeps()
    sub = df[df["sweep"] == sweep]
    if collective is not None:
        sub = sub[sub["collective"] == collective]
    pairs = sub.groupby("collective", sort=True)["n_ranks"].unique()
    return "; ".join(f"{c} on {', '.join(str(n) for n in sorted(ns))} ranks" for c, ns in pairs.items())


def collective_time_fit(sweep: str, collective: str, n_ranks: int):
    """The :class:`~llmsizing.alpha_beta.TwoRegimes` fit (:func:`~llmsizing.alpha_beta.fit_two_regimes`) of
    one measured sweep of :func:`collective_time_sweeps`: ``sweep`` is :data:`GLOO_SWEEP` or a saved log's
    stem. A collective or a rank count the sweep did not time raises a ValueError naming it and what was
    timed. Kept once per process (the fit's lines are frozen). Chapter 9 (the chapter's table is
    :func:`~llmsizing.alpha_beta.gloo_fits`; nccl-tests' formulas, its ``doc/PERFORMANCE.md``)."""
    df = _time_sweeps()
    sweep = check_choice("sweep", sweep, tuple(df["sweep"].unique()))
    if not isinstance(collective, str):
        raise TypeError(f"collective must be a string, got {type(collective).__name__}")
    n_ranks = check_int("n_ranks", n_ranks, minimum=2)
    sub = df[(df["sweep"] == sweep) & (df["collective"] == collective)]
    if sub.empty:
        raise ValueError(f"collective={collective!r} was not timed in the sweep {sweep!r}: it timed "
                         f"{_measured_with(sweep)}")
    sub = sub[sub["n_ranks"] == n_ranks]
    if sub.empty:
        raise ValueError(f"n_ranks={n_ranks} was not timed in the sweep {sweep!r} for {collective}: it timed "
                         f"{_measured_with(sweep, collective)}")
    return _kept_fit(sweep, collective, n_ranks)


@functools.cache
def _kept_fit(sweep: str, collective: str, n_ranks: int):
    from .alpha_beta import fit_two_regimes

    df = _time_sweeps()
    sub = df[(df["sweep"] == sweep) & (df["collective"] == collective) & (df["n_ranks"] == n_ranks)]
    sub = sub.sort_values("size_bytes", kind="stable")
    return fit_two_regimes(sub["size_bytes"].tolist(), sub["time_s"].tolist(), collective=collective,
                           n=n_ranks)


def _line_at(fit, line: str, size_bytes: float) -> float:
    if line == "one line":
        return fit.single.predict(size_bytes)
    if line == "model line":
        return fit.combined.predict(size_bytes)
    return fit.predict_protocols(size_bytes)


def collective_time_line(sweep: str, collective: str, n_ranks: int, sizes_bytes, line: str = "one line"):
    """The time in seconds of one call at each of ``sizes_bytes`` (a list or array of sizes > 0), priced by
    ``line`` (one of :data:`TIME_LINES`) fitted on ``sweep`` (:func:`collective_time_fit`), as a NumPy
    array. Chapter 9's widget draws it."""
    import numpy as np

    line = check_choice("line", line, TIME_LINES)
    fit = collective_time_fit(sweep, collective, n_ranks)
    sizes = [check_number(f"sizes_bytes[{i}]", v, allow_equal=False) for i, v in enumerate(sizes_bytes)]
    return np.array([_line_at(fit, line, v) for v in sizes], dtype=float)


def collective_time_at(sweep: str, collective: str, n_ranks: int, size_bytes: float,
                       line: str = "one line") -> dict:
    """One collective of ``size_bytes`` (as nccl-tests counts it) over ``n_ranks``, priced by one of
    :data:`TIME_LINES` fitted on ``sweep`` (:func:`collective_time_fit`), next to the sweep's nearest measured
    size (nearest on a log scale; the smaller on a tie). Returns a dict:

    * ``line_words``: the line in words (:data:`TIME_LINE_WORDS`); ``predicted_s``: the line at
      ``size_bytes``; ``inside``: whether ``size_bytes`` lies within the sizes timed (outside, the line is
      extrapolated);
    * the nearest row: ``row_size_bytes``, ``measured_s`` (``fastest_s`` and ``repeats`` for gloo), the
      line there, ``row_predicted_s``, and ``gap`` = ``row_predicted_s / measured_s - 1``;
    * ``errors``: every line's relative error at that row (the single line, the small- and large-message
      lines, the model line, the cheaper of two), the fit's ``split_bytes`` and ``alpha_s`` / ``busbw_gbps``
      of the chosen line (for the cheaper of two, those of the line that is cheaper at ``size_bytes``);
    * ``cause``: the gap's cause in words, read from those numbers (which regime the row falls in and how far
      that regime's own line is; for gloo, how far the fastest repeat was from the median).

    Chapter 9's widget."""
    line = check_choice("line", line, TIME_LINES)
    fit = collective_time_fit(sweep, collective, n_ranks)
    size_bytes = check_number("size_bytes", size_bytes, allow_equal=False)
    df = _time_sweeps()
    sub = df[(df["sweep"] == sweep) & (df["collective"] == collective) & (df["n_ranks"] == n_ranks)]
    sizes = sub["size_bytes"].to_numpy(dtype=float)
    far = [abs(math.log(s / size_bytes)) for s in sizes]
    row = sub.iloc[min(range(len(sizes)), key=lambda i: (round(far[i], 9), sizes[i]))]
    s_row, t_row = float(row["size_bytes"]), float(row["time_s"])
    predicted = {"one line": fit.single.predict(s_row), "small-message line": fit.small.predict(s_row),
                 "large-message line": fit.large.predict(s_row), "model line": fit.combined.predict(s_row),
                 "cheaper of two": fit.predict_protocols(s_row)}
    errors = {k: v / t_row - 1.0 for k, v in predicted.items()}
    if line == "one line":
        shown = fit.single
    elif line == "model line":
        shown = fit.combined
    else:
        shown = fit.small if fit.small.predict(size_bytes) <= fit.large.predict(size_bytes) else fit.large
    side = "small" if s_row < fit.split_bytes else "large"
    own = errors[f"{side}-message line"]
    gap = errors[line]
    split = fmt_size(fit.split_bytes)
    if line == "one line":
        cause = (f"one straight line through all {len(sizes)} sizes; the sweep bends at {split} (the best "
                 f"split into two lines), and on this row's side the {side}-message line alone is off by "
                 f"{own:+.0%}")
    elif line == "model line":
        cause = (f"the model line takes alpha from the sizes below {split} and the bandwidth from those "
                 f"above; this row is on the {side} side, where the {side}-message line alone is off by "
                 f"{own:+.0%}")
        if side == "small" and abs(gap) > abs(own):
            cause += ": the rest is the large messages' bandwidth, which a call of this size does not reach"
    else:
        cause = (f"the cheaper of the small-message line ({errors['small-message line']:+.0%} here) and the "
                 f"large-message line ({errors['large-message line']:+.0%}), split at {split}")
    out = {"sweep": sweep, "collective": collective, "n_ranks": n_ranks, "size_bytes": size_bytes,
           "line": line, "line_words": TIME_LINE_WORDS[line], "predicted_s": _line_at(fit, line, size_bytes),
           "inside": bool(sizes.min() <= size_bytes <= sizes.max()),
           "min_size_bytes": int(sizes.min()), "max_size_bytes": int(sizes.max()), "rows": len(sizes),
           "row_size_bytes": int(s_row), "measured_s": t_row, "row_predicted_s": predicted[line], "gap": gap,
           "errors": errors, "split_bytes": int(fit.split_bytes), "alpha_s": shown.alpha_s,
           "busbw_gbps": shown.busbw_gbps, "fastest_s": float(row["fastest_s"]),
           "repeats": int(row["repeats"])}
    if out["repeats"]:
        spread = out["fastest_s"] / t_row - 1.0
        cause += (f"; the row is the median of {out['repeats']} repeats, and the fastest was {spread:+.0%} "
                  f"from it" + (" (more than the gap: noise covers it)" if abs(spread) > abs(gap) else ""))
    out["cause"] = cause
    return out
