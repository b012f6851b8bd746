"""What :func:`~llmsizing.planner.plan` searches and what it returns, apart from the search itself (split out
of :mod:`llmsizing.planner`, which re-exports every name): the columns of its frame, the bounds of one search
(global batch, layouts, plans), the context-parallel degrees it tries by default, and a row's recomputation as
the library's functions take it and as tables print it, and the recomputations it tries in order (Part III,
"How many GPUs do you need?").
"""

from __future__ import annotations

from ._validate import check_choice, check_int, check_sequence
from .parallel import CP_COMMS, OP_SAC_MODES, RECOMPUTE, RECOMPUTE_MODES

#: The order in which ``plan()`` tries the recomputations it is given (``recomputes``), lightest first: for
#: each layout and micro-batch it keeps the first that fits. torchtitan's op-level selective checkpointing
#: (:data:`~llmsizing.parallel.OP_SAC_MODES`, :mod:`llmsizing.op_sac`) sits between Megatron-LM's selective
#: and full recomputation: it reruns three of a Llama layer's seven matmuls and every pointwise op (the
#: ``"op-sac-sdpa-rerun"`` variant the attention forward too), not the whole forward. By FLOPs that is the
#: order at 8K tokens (Llama-3-8B: selective below op SAC, ``tests/test_plan_op_sac.py``); at long
#: context selective recomputation's attention rerun grows with the sequence and can cost more than op SAC,
#: but with flash attention it keeps about as much as no recomputation, so it rarely fits where ``"none"``
#: does not. Searched only when asked for: the default ``recomputes`` is
#: :data:`~llmsizing.parallel.RECOMPUTE`.
SEARCH_ORDER = RECOMPUTE[:-1] + OP_SAC_MODES + RECOMPUTE[-1:]

#: Columns of ``plan()``'s DataFrame, in order. ``virtual_stages``: the interleaved model chunks per
#: pipeline stage (1: plain 1F1B; issue 34). With ``deadline_days`` a last column, ``meets_deadline``, and
#: with ``budget_usd`` one after it, ``within_budget`` (``"yes"``: within it at the slow end of the 80% range,
#: ``cost_usd_high``; ``"likely"``: by the point cost only; ``DEADLINE_RULES``). No limit, no column.
PLAN_COLUMNS = ("gpu", "n_gpus", "dp", "tp", "cp", "pp", "virtual_stages", "zero", "sp", "micro_batch",
                "grad_accum",
                "recompute",
                "recompute_layers", "memory_per_gpu_bytes", "capacity_bytes", "step_time_s", "mfu", "days",
                "days_low", "days_high", "gpu_hours", "cost_usd", "cost_usd_low", "cost_usd_high", "pareto",
                "price_kind")

#: Columns of ``plan()``'s DataFrame for a mixture of experts: :data:`PLAN_COLUMNS` with the expert-parallel
#: degree ``ep`` after ``pp`` (a dense model's frame keeps :data:`PLAN_COLUMNS`, unchanged).
MOE_PLAN_COLUMNS = (PLAN_COLUMNS[:PLAN_COLUMNS.index("pp") + 1] + ("ep",)
                    + PLAN_COLUMNS[PLAN_COLUMNS.index("pp") + 1:])


#: The largest global batch ``plan()`` searches, in sequences: 2**16 = 65,536 (Llama 3 405B trained with
#: 2,048 sequences of 8,192 tokens; GPT-3 with 1,536 of 2,048). A global batch given in tokens by mistake is
#: refused (saying so) instead of searched: every divisor of it is a data-parallel degree to price.
MAX_GLOBAL_BATCH = 2**16


def check_global_batch(global_batch) -> int:
    """``global_batch`` as an ``int`` in [1, :data:`MAX_GLOBAL_BATCH`] (sequences), or an error naming it."""
    gb = check_int("global_batch", global_batch)
    if gb > MAX_GLOBAL_BATCH:
        raise ValueError(f"global_batch is counted in sequences and must be <= {MAX_GLOBAL_BATCH:,}, got "
                         f"{gb:,}: a batch in tokens? divide it by seq (Llama 3 405B: 16M tokens = 2,048 "
                         "sequences of 8,192)")
    return gb


#: The most layouts (tp x pp x ZeRO stage, times the recomputations) ``plan()`` weighs in memory in one call,
#: and the most plans that fit it prices: bounds that keep a call under about a second on the book's 2-core
#: machine. The book's searches weigh at most about 300 layouts (Llama 3.1 405B). Pricing is vectorised
#: (:func:`~llmsizing.plan_pricing._price`, tens of microseconds a plan), so the plan bound is set by what the
#: largest real search needs, not by the step-time model's speed. :data:`MAX_PLANS` counts the plans without
#: interleaving or ZeRO-2/3 under a pipeline, and twice as many are priced in all (issue 34: the interleaved
#: ones, which ``plan()`` lists only where they can win): Llama 3.1 405B over the whole GPU catalogue prices
#: about 21,300 plans at 8K tokens (13,200 plain) and about 41,600 at 128K (25,600; context parallelism
#: multiplies the layouts). ``shard_under_pipeline=True`` doubles both bounds (its ZeRO-2/3 pipelines: 43,600
#: and 90,400 plans). A model whose layer count has many divisors (pp), or a global batch with hundreds of
#: divisors (dp: 55,440 has 120, and 33,000 plans of Llama 2 7B without interleaving fit on two GPU types), is
#: refused with what to narrow instead of searched for seconds.
MAX_LAYOUTS = 600
MAX_PLANS = 30_000

#: :data:`MAX_PLANS` for a mixture of experts: the expert-parallel degrees multiply the plans that fit (four
#: for Mixtral-8x7B's eight experts, nine for DeepSeek-V3's 256), and pricing stays vectorised: Mixtral-8x7B
#: over the whole catalogue at a global batch of 512 sequences prices about 43,500 plans
#: (benchmarks/bench_planner.py).
MAX_MOE_PLANS = 60_000


#: The context-parallel degrees ``plan()`` tries by default (``cp_degrees=None``), each only where the
#: sequence is at least :data:`CP_MIN_SEQ` tokens, splits into ``2 cp`` chunks, and leaves every rank at least
#: :data:`CP_MIN_TOKENS_PER_RANK` tokens. Published long-context runs use 2 to 16 (Llama 3 405B at 128K: 16).
CP_DEGREES = (1, 2, 4, 8, 16, 32)

#: Below this sequence length ``plan()`` does not try context parallelism unless asked (``cp_degrees``): at
#: 8K tokens the activations of one sequence are a small part of a GPU, tensor and pipeline parallelism
#: already cut them, and Llama 3 405B trained its 8K stage with ``cp = 1`` (Dubey et al. 2024, Table 4).
#: Searching it there would only add layouts that trade data-parallel ranks for ring traffic.
CP_MIN_SEQ = 16_384

#: The fewest tokens of each sequence a context-parallel rank keeps in the default search: 4,096, two chunks
#: of 2,048, so that each ring step's attention block is large enough to hide the next hop (Llama 3's 128K
#: stage keeps 8,192 per rank).
CP_MIN_TOKENS_PER_RANK = 4096


def default_cp_degrees(seq: int) -> tuple[int, ...]:
    """The context-parallel degrees ``plan()`` searches by default for sequences of ``seq`` tokens (see
    :data:`CP_DEGREES`): ``(1,)`` below :data:`CP_MIN_SEQ`, ``(1, 2, 4, 8, 16, 32)`` at 128K."""
    seq = check_int("seq", seq)
    if seq < CP_MIN_SEQ:
        return (1,)
    return tuple(c for c in CP_DEGREES
                 if c == 1 or (seq % (2 * c) == 0 and seq // c >= CP_MIN_TOKENS_PER_RANK))


def check_cp_search(cp_degrees, cp_comm: str, seq: int) -> tuple[tuple[int, ...], str]:
    """``plan(cp_degrees=, cp_comm=)`` (and :func:`~llmsizing.fewest_gpus.min_gpus`', the same search's)
    checked for sequences of ``seq`` tokens, as ``(cps, cp_comm)``: ``cps`` :func:`default_cp_degrees` for
    ``None``, else the given degrees sorted without repeats, each above 1 dividing ``seq`` into ``2 cp``
    chunks (a ``ValueError`` naming ``cp_degrees``); ``cp_comm`` one of the K/V exchanges searched, the ring
    ``"p2p"`` or ``"all_gather"`` (:data:`~llmsizing.parallel.CP_COMMS`; Ulysses' ``"a2a"``, limited by the
    heads, is not searched)."""
    cp_comm, seq = check_choice("cp_comm", cp_comm, CP_COMMS[:2]), check_int("seq", seq)
    if cp_degrees is None:
        return default_cp_degrees(seq), cp_comm
    cps = tuple(sorted({check_int("cp_degrees[i]", c) for c in
                        check_sequence("cp_degrees", cp_degrees, example="(1, 2, 4, 8)")}))
    for c in cps:
        if c > 1 and seq % (2 * c):
            raise ValueError(f"cp_degrees holds {c}, but seq={seq:,} is not a multiple of 2 x {c}: "
                             "context parallelism gives each rank two chunks of seq / (2 cp) tokens")
    return cps, cp_comm


def cp_search_kwargs(cp_degrees=None, cp_comm: str = "p2p", seq=None) -> dict:
    """``cp_degrees`` and ``cp_comm`` checked as :func:`check_cp_search` checks them (for sequences of
    ``seq`` tokens), as the keywords of :func:`~llmsizing.fewest_gpus.min_gpus` and ``plan()`` that a caller
    passes on: only those not at their defaults (``{}`` for ``None`` and ``"p2p"``: an old call's keywords,
    and the keys of the answers kept for it, unchanged), ``cp_degrees`` as a sorted tuple."""
    if cp_degrees is None and type(cp_comm) is str and cp_comm == "p2p":
        return {}
    cps, comm = check_cp_search(cp_degrees, cp_comm, seq)
    return {**({} if cp_degrees is None else {"cp_degrees": cps}),
            **({} if comm == "p2p" else {"cp_comm": comm})}


def recompute_kwargs(row) -> dict:
    """``recompute=`` and ``recompute_layers=`` of one row of a ``plan()`` frame (a ``Series`` or an
    ``itertuples()`` row), to give :func:`~llmsizing.memory.training_memory`,
    :func:`~llmsizing.layouts.step_time` or :func:`~llmsizing.time_cost.training_time` the plan's
    recomputation: ``recompute_layers`` is ``None`` for ``"none"``, ``"selective"`` and a frame without the
    column (issue 23)."""
    import pandas as pd

    n = getattr(row, "recompute_layers", None)
    return {"recompute": row.recompute, "recompute_layers": None if n is None or pd.isna(n) else int(n)}


def recompute_label(row, long: bool = False) -> str:
    """A plan row's recomputation as tables print it: ``"none"``, ``"selective"``, ``"full"``, or with the
    layers per stage full recomputation reruns ``"full (5)"`` (``long``: ``"full (5 layers per stage)"``; with
    interleaving, ``virtual_stages > 1``, the count is per model chunk: ``"full (1 layers per chunk)"``)."""
    n = recompute_kwargs(row)["recompute_layers"]
    where = "chunk" if getattr(row, "virtual_stages", 1) > 1 else "stage"
    return row.recompute if n is None else f"full ({n}{f' layers per {where}' if long else ''})"


def check_recomputes(model, recomputes, *, cps: tuple, precision: str, attention: str, stack: str) -> list:
    """``plan(recomputes=)`` checked (each one of :data:`~llmsizing.parallel.RECOMPUTE_MODES`) and put in
    :data:`SEARCH_ORDER`. torchtitan's op SAC (:data:`~llmsizing.parallel.OP_SAC_MODES`) is priced on one
    layout whose ``tp`` divides the KV heads, with or without sequence or context parallelism
    (:func:`~llmsizing.op_sac.check_op_sac`; before issue 34's sac32 on one GPU's data shard only). What no
    layout of the search could price it on is refused here, naming ``recomputes``: a model or recipe op SAC
    does not model (a mixture of experts, biased or fused projections, an autocast or FP8 recipe, eager
    attention, the Hugging Face stack)."""
    from .op_sac import check_op_sac
    from .precision import RECIPES

    rcs = [check_choice("recomputes[i]", r, RECOMPUTE_MODES) for r in
           check_sequence("recomputes", recomputes, example='("none", "full")')]
    for r in (r for r in OP_SAC_MODES if r in rcs):
        recipe = RECIPES[precision]
        try:
            check_op_sac(model, recompute=r, attention=attention, stack=stack, autocast=recipe.autocast,
                         fp8=recipe.fp8, dropout=False)
        except ValueError as e:
            raise ValueError(f"recomputes holds {r!r}, which no layout of this search can price: {e}"
                             ) from None
    return [r for r in SEARCH_ORDER if r in rcs]                   # lightest first
