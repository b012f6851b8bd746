"""Part V, "The models of 2026": the widget of chapter 17.

* chapter 17, :func:`long_context_widget`: move the context length and watch the planner switch layouts
  (context parallelism appears at long context).
"""

from __future__ import annotations

import functools

import ipywidgets as W
import numpy as np

from .. import charts
from .._validate import check_bool
from ..catalog import get_model, list_models
from .controls import _gpu_multiselect, _moe_options, _style
from .dashboard import Dashboard
from .speculate import Speculation, nearest, wanted_by_environment, watch

#: The context lengths the chapter 17 widget offers: 8K (Llama 3's first stage) to 256K.
LONG_CONTEXT_SEQS = (8192, 16384, 32768, 65536, 131072, 262144)

#: Tokens per global batch the widget offers (the global batch in sequences is this over the context length).
#: Llama 3 405B kept 16M tokens per step at 8K and at 128K (Dubey et al. 2024, Table 4).
LONG_CONTEXT_BATCH_TOKENS = (("4M", 2**22), ("8M", 2**23), ("16M", 2**24))

#: The token budget the widget's days and cost are for: Llama 3's long-context stage trained on about 800B
#: tokens (Dubey et al. 2024, Sec. 3.4.2).
LONG_CONTEXT_TOKENS = 8e11

#: The GPU limits the widget offers: 8 to 16,384 GPUs.
LONG_CONTEXT_MAX_GPUS = tuple(2**k for k in range(3, 15))

#: Planner searches the chapter 17 widget keeps (one per setting; issue 38).
LONG_CONTEXT_CACHED = 128
#: Settings whose answers (PNG and summary) the chapter 17 widget keeps: a move back to one of them is shown
#: without a new render and draw (issue 38).
LONG_CONTEXT_KEPT = 64


def long_context_warm_models(options) -> tuple[str, ...]:
    """The models of the drop-down ``options`` whose search at the widget's other defaults
    :func:`long_context_widget` makes when it is built (``warm=True``): the mixtures of experts (issue 35: a
    pick of one of them was a new planner search of 60-90 ms, with its render and PNG 100-125 ms a move, where
    a dense model's search takes 5-40 ms). Read from the catalogue (``is_moe``), not from the names."""
    return _moe_options(options)


def long_context_warm_settings(values: dict, most: int) -> list[tuple]:
    """The settings next to ``values`` (the controls' values) whose searches :func:`long_context_widget`
    makes when it is built (``warm=True``), as its search keys: those of :func:`long_context_ahead` that keep
    the model and the GPU types, the other context lengths (the slider a reader steps first: issue 35, part28
    measured its steps at 130-149 ms painted, a search each), the other K/V exchange and the other tokens per
    batch; not a second GPU type (a search of two)."""
    m, gpus = values["model"], tuple(values["gpus"])
    return [k for k in long_context_ahead(values, most) if k[0] == m and k[2] == gpus]


def long_context_ahead(values: dict, most: int) -> list[tuple]:
    """The settings a reader of chapter 17's widget at ``values`` (its controls' values) is likely to ask for
    next, most likely first, as the widget's search keys ``(model, seq, gpus, batch_tokens, max_gpus,
    cp_comm)``: the other context lengths (the chapter's control; the nearest on the slider first), the other
    K/V exchange, the other tokens per batch, then a second GPU type: first those next to a chosen one in the
    catalogue's order (its two neighbours on each side), then every other type not chosen, in the catalogue's
    order (spec50: a reader may add any of them; the participant's walk adds A10, the list's first row, which
    no neighbour rule predicts). Only searches at the largest GPU limit ``most`` (a lower one is a cut of it,
    no search). Their count is at most :func:`long_context_jobs`."""
    from ..catalog import list_gpus

    m, seq, gpus, bt, cp = (values[k] for k in ("model", "seq", "gpus", "batch_tokens", "cp_comm"))
    gpus = tuple(gpus)
    out = [(m, s, gpus, bt, most, cp) for s in nearest(LONG_CONTEXT_SEQS, seq)]
    out += [(m, seq, gpus, bt, most, c) for c in ("p2p", "all_gather") if c != cp]
    out += [(m, seq, gpus, b, most, cp) for _, b in LONG_CONTEXT_BATCH_TOKENS if b != bt]
    every = list_gpus()
    picked = [every.index(g) for g in gpus if g in every]
    near = [every[i + step] for step in (1, -1, 2, -2) for i in picked
            if 0 <= i + step < len(every) and every[i + step] not in gpus]
    for extra in near + [g for g in every if g not in gpus]:
        out.append((m, seq, tuple(g for g in every if g in gpus or g == extra), bt, most, cp))
    return list(dict.fromkeys(out))


def long_context_tier(options, values: dict, most: int) -> list[tuple]:
    """The lowest tier of what chapter 17's widget asks its worker (pick50): a pick of each model of the
    drop-down ``options``, in its order, at the other controls' ``values`` (the widget's build values, the
    default view: 128K, H100 SXM, 16M tokens, ring exchange), as search keys at the largest GPU limit
    ``most``. The widget hands those it has not searched (the dense models: it searches the mixtures of
    experts when built) after each move's own searches, and the worker's tables are kept until a pick takes
    them (:meth:`~.speculate.Speculation.ahead`'s ``pinned``): a reader who opens the chapter and picks a
    dense model at the default view gets a worked-out table instead of a new search in the kernel (60-140 ms
    of CPU: gpt2 137, mistral-7b 63)."""
    seq, gpus, bt, cp = (values[k] for k in ("seq", "gpus", "batch_tokens", "cp_comm"))
    return [(m, seq, tuple(gpus), bt, most, cp) for m in options]


def long_context_jobs() -> int:
    """How many searches chapter 17's widget hands its worker a move (its :class:`~.speculate.Speculation`'s
    ``jobs``, in place of :data:`~.speculate.SPECULATE_JOBS`): every setting :func:`long_context_ahead` can
    list, 28 with the catalogue's 21 GPU types (5 other context lengths, the other exchange, 2 other tokens
    per batch and 20 second GPU types). The worker runs them most likely first, and a move makes those not
    done stale (spec50: what the 20 second GPU types cost is in long_context_widget's docstring)."""
    from ..catalog import list_gpus

    return len(LONG_CONTEXT_SEQS) - 1 + 1 + len(LONG_CONTEXT_BATCH_TOKENS) - 1 + len(list_gpus()) - 1


def long_context_widget(model: str = "llama-3.1-405b", *, warm: bool = True,
                        speculate: bool | None = None) -> Dashboard:
    """Chapter 17: model x context length x GPU types x tokens per batch x GPU limit x how context parallelism
    exchanges K and V -> the planner's plans (:func:`~llmsizing.planner.plan`, which tries context parallelism
    from 16K tokens on) and its fastest plan (:func:`~llmsizing.charts.render_plan`), for
    :data:`LONG_CONTEXT_TOKENS` tokens. The plans are cached per setting (the last
    :data:`LONG_CONTEXT_CACHED` settings: a reader going back to a setting gets it without a new search). A
    setting where nothing fits shows the planner's message. A lower GPU limit than the largest, for settings
    already searched at the largest, is a cut of that search (:func:`~llmsizing.planner.plans_within`: the
    same table as a search at that limit). The answers (PNG and summary) of the last
    :data:`LONG_CONTEXT_KEPT` settings drawn are kept too: going back to one is not drawn again.

    ``warm`` (issue 35): the searches of the drop-down's mixtures of experts
    (:func:`long_context_warm_models`) at the other controls' defaults are made when the widget is built,
    before its first view: a reader's pick of one of them is then its render and PNG (~30 ms of CPU) instead
    of a new search as well (100-125 ms). The searches are the planner's own
    (:func:`~llmsizing.planner.plan`: the tables a pick would make, kept in this widget's cache and the
    planner's); they cost the building cell ~0.6-0.7 s of CPU once per kernel, and a widget built again ~80
    ms (its tables from the planner's kept searches). Memory: the ten tables and the planner's kept work for
    them, ~70 MB more at the peak. A setting where nothing fits is left to the pick, which shows the
    planner's message. ``warm=False``: built cold, as before. Then (speed29a) the searches of the settings
    one move of the context slider, the K/V exchange or the tokens per batch away from the model's
    (:func:`long_context_warm_settings`: eight at the defaults, ~0.3 s of CPU more and ~15 MB): a reader's
    first steps of the slider are then a render and a PNG (~30 ms of CPU) instead of a search as well
    (60-100 ms).

    ``speculate`` (issue 35): the searches a reader is likely to ask for next are worked out by one worker
    process at the lowest priority (:class:`~.speculate.Speculation`), started when the widget is built: after
    each move, :func:`long_context_jobs` of them (:func:`long_context_ahead`: the other context lengths, K/V
    exchange and tokens per batch, then every second GPU type, neighbours first), and behind those, as the
    lowest tier kept until taken, a pick of every drop-down model not searched at the build's settings
    (:func:`long_context_tier`). A move whose search the worker has done draws its table (the planner's own,
    the same bits); any other move searches in the kernel as before. The cost, measured 2026-12-05 at a
    reader's pace (1.5 s pauses, 2 cores): the worker 0.4-0.5 s of CPU a move, ~0.75-0.8 GB at its peak, and
    up to ~0.35 GB of hand-off files in ``/dev/shm`` (kernel, worker and files ~1.4 GB at once); no worker
    starts where less than :data:`~.speculate.SPECULATE_MIN_FREE_BYTES` is free. The hits and times are in
    benchmarks/README.md and CHANGES.md. On one server shared by a room the workers slowed every
    participant's redraws (CHANGES.md: the load test), so ``speculate=None`` (the default) speculates only
    where the env asks for it (``LLMSIZING_SPECULATE=1``, set by ``make lab``, ``app`` and ``serve-live``);
    ``True`` always, ``False`` never."""
    from collections import OrderedDict

    from ..planner import plan, plans_within

    get_model(model)
    warm = check_bool("warm", warm)
    on = wanted_by_environment() if speculate is None else check_bool("speculate", speculate)
    spec = Speculation(plan, jobs=long_context_jobs(), pinned=len(list_models())) if on else None
    most = max(LONG_CONTEXT_MAX_GPUS)
    widest: OrderedDict = OrderedDict()      # the searches at the largest GPU limit, by the other settings
    searched: OrderedDict = OrderedDict()    # the settings cached() searched or took (a hint for speculation)

    @functools.lru_cache(maxsize=LONG_CONTEXT_CACHED)
    def cached(model, seq, gpus, batch_tokens, max_gpus, cp_comm):
        key = (model, seq, gpus, batch_tokens, cp_comm)
        if max_gpus < most and key not in widest and spec is not None:
            got = spec.take((model, seq, gpus, batch_tokens, most, cp_comm))      # (the widest, worked out)
            if got is not None:
                widest[key] = got[1]
                searched[model, seq, gpus, batch_tokens, most, cp_comm] = None
        if max_gpus < most and key in widest:
            # a lower GPU limit: the plans of the widest search that it allows, no new search (issue 35;
            # planner.plans_within); where none is left, the search says why
            within = plans_within(widest[key], max_gpus)
            if len(within):
                return within
        got = spec.take((model, seq, gpus, batch_tokens, max_gpus, cp_comm)) if spec is not None else None
        if got is not None:                 # (the worker's search: plan()'s table, pickled bit for bit)
            df = got[1]
        else:
            args, kw = _plan_args(model, seq, gpus, batch_tokens, max_gpus, cp_comm)
            df = plan(*args, **kw)
        searched[model, seq, gpus, batch_tokens, max_gpus, cp_comm] = None
        while len(searched) > LONG_CONTEXT_CACHED:
            searched.popitem(last=False)
        if max_gpus == most:
            widest[key] = df
            while len(widest) > LONG_CONTEXT_CACHED:
                widest.popitem(last=False)
        return df

    def render(model, seq, gpus, batch_tokens, max_gpus, cp_comm, into=None):
        gpus = tuple(gpus)
        df = cached(model, seq, gpus, batch_tokens, max_gpus, cp_comm)
        on = df["pareto"].to_numpy(dtype=bool)       # the fastest front plan, as idxmin finds it (the first)
        fastest = df.index[np.flatnonzero(on)[np.argmin(df["days"].to_numpy()[on])]]
        return charts.render_plan(model, tokens=LONG_CONTEXT_TOKENS, gpus=gpus, seq=seq,
                                  global_batch=max(batch_tokens // seq, 1), max_gpus=max_gpus, plans=df,
                                  highlight=fastest, into=into)

    controls = {
        "model": W.Dropdown(options=list_models(), value=model, description="model", **_style()),
        "seq": W.SelectionSlider(options=list(LONG_CONTEXT_SEQS), value=131072, description="context",
                                 **_style()),
        "gpus": _gpu_multiselect(("H100 SXM",), "GPU types"),
        "batch_tokens": W.Dropdown(options=LONG_CONTEXT_BATCH_TOKENS, value=2**24, description="tokens/batch",
                                   **_style()),
        "max_gpus": W.SelectionSlider(options=list(LONG_CONTEXT_MAX_GPUS), value=most,
                                      description="max GPUs", **_style()),
        "cp_comm": W.Dropdown(options=[("ring (p2p)", "p2p"), ("all-gather", "all_gather")], value="p2p",
                              description="CP exchange", **_style()),
    }
    if warm:            # (before the first view: the first dashboard's draw freezes them, _freeze_once)
        at = {k: w.value for k, w in controls.items() if k != "model"}
        for other in long_context_warm_models(controls["model"].options):
            try:
                cached(other, at["seq"], tuple(at["gpus"]), at["batch_tokens"], at["max_gpus"], at["cp_comm"])
            except ValueError:                          # (nothing fits: the pick shows the planner's message)
                pass
        for key in long_context_warm_settings({k: w.value for k, w in controls.items()}, most):
            try:
                cached(*key)
            except ValueError:                          # (nothing fits: the move shows the planner's message)
                pass
    built = {k: w.value for k, w in controls.items()}          # (the default view: the tier's settings)
    board = Dashboard(render, controls, name="long_context_widget", keep=LONG_CONTEXT_KEPT)
    if spec is not None:
        watch(board, spec, lambda: [(k, *_plan_args(*k)) for k in long_context_ahead(board.values(), most)
                                    if k not in searched],
              lambda: [(k, *_plan_args(*k)) for k in long_context_tier(controls["model"].options, built, most)
                       if k not in searched])
    return board


def _plan_args(model, seq, gpus, batch_tokens, max_gpus, cp_comm) -> tuple:
    """The arguments of the widget's :func:`~llmsizing.planner.plan` call for a setting: ``(args, kw)``."""
    return (model,), dict(tokens=LONG_CONTEXT_TOKENS, gpus=tuple(gpus), seq=seq,
                          global_batch=max(batch_tokens // seq, 1), max_gpus=max_gpus, cp_comm=cp_comm)
