"""Speculative decoding: a small draft model proposes ``k`` tokens, the target checks them in one step
(chapter 15, "Speculative decoding").

Sources: Leviathan, Kalman & Matias 2023, "Fast Inference from Transformers via Speculative Decoding" (ICML;
Sec. 3.1 and Theorem 3.8), and Chen et al. 2023, "Accelerating Large Language Model Decoding with Speculative
Sampling" (DeepMind), who derived the same scheme independently. Their modified rejection sampling keeps the
target's output distribution exactly, so the speed-up costs no quality.

One round, per sequence:

* the draft runs ``k`` decode steps and proposes ``k`` tokens;
* the target runs once over the ``k + 1`` positions (the ``k`` guesses and the token after the last one) and
  accepts a prefix of the guesses. If each guess is accepted with probability ``ρ`` (the acceptance rate),
  independently (the papers' simplifying assumption), the round yields ``(1 - ρ^(k+1)) / (1 - ρ)`` tokens on
  average (Leviathan et al., Eq. 1): between 1 (every guess rejected, the target still gives one token) and
  ``k + 1``.

The cost of a round is the target's verify step plus ``k`` draft steps. Each is the serving model's own decode
step (:func:`llmsizing.serve.serving`, one GPU, the given batch and context; spec34: one answer per step), its
weights read at ``mbu``, the KV cache at the fitted ``attention_bu``, the FLOPs at ``mfu``, the larger of
memory and compute. The verify step is that step over ``k + 1`` positions per sequence (``serving``'s
``decode_tokens``): it reads the weights and the KV cache once, like a plain decode step, plus ``k`` more
gathered rows of the input embedding and ``k`` more KV rows per sequence, and does ``k + 1`` times its FLOPs.
While the batch is small the step is memory-bound and verifying ``k + 1`` tokens costs about as much as
generating one: that is the whole trick. As the batch grows the step nears the ridge point, the extra FLOPs
stop being free, and the speed-up falls below 1 (:func:`speculative_breakeven_batch`).

Every step, draft or verify, is one engine step and pays the engine's fixed overhead ``t0`` (scheduling,
sampling, launches: :data:`llmsizing.serve.STEP_OVERHEAD_S`, fitted per engine; issue 37): a round costs
``k (draft + t0) + verify + t0`` against ``plain + t0`` per plain token. The overhead weighs on the draft's
short steps most, so it cuts the speed-up (``step_overhead_s=0`` gives the figure without it).

Left out: tensor parallelism (one GPU each, as in the roofline), the draft's own KV cache in memory, tree
attention and multi-head drafts (Medusa, EAGLE).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._validate import check_int, check_number
from .catalog import resolve_model
from .serve import (ATTENTION_BU_DEFAULT, ENGINE_STEP_OVERHEAD_S, MBU_DEFAULT, MFU_DEFAULT, STEP_OVERHEAD_S,
                    serving)

#: The largest draft length accepted: engines use 1-10 (vLLM's ``num_speculative_tokens``); beyond 64 the
#: expected yield no longer changes for any acceptance rate below 1.
MAX_DRAFT_TOKENS = 64
_ENGINES = tuple(sorted({k.split("/")[0] for k in ENGINE_STEP_OVERHEAD_S})) + tuple(ENGINE_STEP_OVERHEAD_S)
#: The largest batch :func:`speculative_breakeven_batch` searches.
MAX_BREAKEVEN_BATCH = 65536


def check_acceptance(acceptance) -> float:
    """Return the per-token acceptance rate as a float in [0, 1), or raise naming ``acceptance``. 1 is
    refused: a draft that is never wrong is the target itself, and the expected yield's formula divides by
    ``1 - ρ``."""
    a = check_number("acceptance", acceptance, maximum=1.0)
    if a >= 1.0:
        raise ValueError(f"acceptance must be in [0, 1), got {a:g}: a draft accepted every time is the "
                         "target")
    return a


def expected_tokens_per_step(acceptance: float, k: int) -> float:
    """Tokens one verify step of the target yields on average: ``(1 - ρ^(k+1)) / (1 - ρ)`` with ``ρ`` the
    per-token acceptance rate and ``k`` the draft length (Leviathan et al. 2023, Eq. 1). It is 1 at ``ρ = 0``
    and tends to ``k + 1`` as ``ρ`` nears 1. Taught in chapter 15."""
    a = check_acceptance(acceptance)
    k = check_int("k", k, maximum=MAX_DRAFT_TOKENS)
    return (1 - a ** (k + 1)) / (1 - a)


def speedup_from_cost_ratio(acceptance: float, k: int, cost_ratio: float) -> float:
    """Leviathan et al.'s improvement factor (Theorem 3.8): ``(1 - ρ^(k+1)) / ((1 - ρ)(k c + 1))`` with ``c``
    the cost of one draft step over one target step (``cost_ratio``, > 0), and the verify step priced as one
    target step. The memory-bound limit of :func:`speculative_decoding`. Taught in chapter 15."""
    c = check_number("cost_ratio", cost_ratio, allow_equal=False, maximum=1e6)
    k = check_int("k", k, maximum=MAX_DRAFT_TOKENS)
    return expected_tokens_per_step(acceptance, k) / (k * c + 1)


@dataclass(frozen=True)
class Speculative:
    """One target + draft pair decoding ``batch`` sequences at ``context`` tokens on one GPU each
    (:func:`speculative_decoding`). Times in seconds."""

    model: str
    draft: str
    gpu: str
    k: int
    acceptance: float
    batch: int
    context: int
    target_step_s: float         # one plain decode step of the target (its ITL without speculation)
    verify_step_s: float         # the target over k + 1 positions per sequence
    draft_step_s: float          # one decode step of the draft
    verify_bound: str            # "memory" or "compute": which bound sets the verify step
    tokens_per_step: float       # expected tokens per round, (1 - ρ^(k+1)) / (1 - ρ)
    step_overhead_s: float = 0.0  # the engine's fixed cost per step, paid by every draft and verify step

    @property
    def round_s(self) -> float:
        """One round: ``k`` draft steps and one verify step, each with the step overhead."""
        return self.k * (self.draft_step_s + self.step_overhead_s) + self.verify_step_s + self.step_overhead_s

    @property
    def itl_s(self) -> float:
        """Mean time between output tokens: the round over the tokens it yields."""
        return self.round_s / self.tokens_per_step

    @property
    def plain_itl_s(self) -> float:
        """Plain decoding's ITL: one target decode step plus the step overhead (no draft)."""
        return self.target_step_s + self.step_overhead_s

    @property
    def plain_tokens_per_s(self) -> float:
        """Plain decoding's output tokens per second per sequence."""
        return 1.0 / self.plain_itl_s

    @property
    def speedup(self) -> float:
        """Plain decoding's ITL (its step plus the overhead) over speculative decoding's: above 1 it pays."""
        return self.plain_itl_s / self.itl_s

    @property
    def cost_ratio(self) -> float:
        """A draft step over a plain target step: Leviathan et al.'s ``c``."""
        return self.draft_step_s / self.target_step_s

    @property
    def tokens_per_s(self) -> float:
        """Output tokens per second per sequence."""
        return 1.0 / self.itl_s

    @property
    def ranged_figures(self) -> dict:
        """:data:`RANGED_FIGURES`: the figures :func:`llmsizing.serve.serving_ends` gives a range, read from
        the result (so that ``serve`` needs no import of this module, which imports it)."""
        return RANGED_FIGURES


#: The figures of a :class:`Speculative` that carry the stated 80% range of the engine's speed
#: (:func:`llmsizing.serve.serving_ends`, issue 34), in :data:`llmsizing.serve.RANGED_FIGURES`' form: each a
#: time divided by the speed or a rate multiplied by it, on the per-token figures' pair. Why they may: every
#: step here, plain, draft or verify, is :func:`~llmsizing.serve.serving`'s own decode step (spec34: the
#: plain and draft steps equal it at every batch; the verify step is it over ``k + 1`` positions), with the
#: serving model's fitted constants and no fitted term of its own (``k`` and the acceptance rate are the
#: reader's inputs), so the engine's speed over the model divides each alike, as
#: :func:`~llmsizing.serve_search.at_speed` divides a :class:`~llmsizing.serve.Serving`'s (tested in
#: tests/test_speculative_range.py). Left out on purpose:
#: ``speedup`` and ``cost_ratio`` (two times at one speed: the speed cancels, so this range says nothing of
#: them; the engines' different overheads do move them) and ``tokens_per_step`` (the acceptance rate's,
#: an assumption no range here covers).
RANGED_FIGURES = {"target_step_s": ("itl", "time"), "verify_step_s": ("itl", "time"),
                  "draft_step_s": ("itl", "time"), "round_s": ("itl", "time"), "itl_s": ("itl", "time"),
                  "plain_itl_s": ("itl", "time"), "tokens_per_s": ("itl", "rate"),
                  "plain_tokens_per_s": ("itl", "rate")}


def _step_s(model, gpu, tokens: int = 1, **kw) -> tuple[float, str, str]:
    """One decode step on one GPU without the step overhead, as :func:`llmsizing.serve.serving` prices it
    (its ``decode_step_s`` at ``step_overhead_s=0``, the stated batch run at once): ``tokens`` positions per
    sequence. Returns the time, the bound ("memory" or "compute") and the GPU's name."""
    s = serving(model, gpu, output=1, step_overhead_s=0.0, batching="static", decode_tokens=tokens, **kw)
    bound = "memory" if s.decode_memory_s >= s.decode_compute_s else "compute"
    return s.decode_step_s, bound, s.gpu


def speculative_decoding(model, draft, gpu, *, k: int = 4, acceptance: float = 0.8, batch: int = 1,
                         context: int = 1024, weights: str = "bf16", draft_weights: str | None = None,
                         kv_cache: str = "bf16", compute: str = "bf16", mbu: float = MBU_DEFAULT,
                         mfu: float = MFU_DEFAULT, step_overhead_s: float | None = None,
                         engine: str | None = None,
                         attention_bu: float = ATTENTION_BU_DEFAULT) -> Speculative:
    """ITL and speed-up of speculative decoding with ``draft`` proposing ``k`` tokens that the target
    ``model`` accepts with probability ``acceptance`` each.

    Each step is :func:`llmsizing.serve.serving`'s decode step on one GPU at ``batch`` and ``context`` (its
    weights at ``mbu``, the KV cache at ``attention_bu``, the FLOPs at ``mfu``; the whole batch run at once):
    the plain target step, the draft step (in ``draft_weights``, default ``weights``), and the verify step,
    serving's step over ``k + 1`` positions per sequence (``decode_tokens=k + 1``: ``k + 1`` times the FLOPs,
    plus the ``k`` more input-embedding rows and KV rows per sequence). A round is
    ``k`` draft steps plus one verify step and yields
    :func:`expected_tokens_per_step` tokens. Every step pays ``step_overhead_s`` (default: ``engine``'s fitted
    overhead, vLLM's without one; 0 gives the figure before issue 37). Draft and target must share a
    vocabulary: the draft's tokens are the target's. Taught in chapter 15.
    """
    m, d = resolve_model(model), resolve_model(draft)
    if d.vocab != m.vocab:
        raise ValueError(f"draft {d.name!r} has a vocabulary of {d.vocab:,} tokens and the model {m.name!r} "
                         f"{m.vocab:,}: a draft must share the target's tokenizer")
    a = check_acceptance(acceptance)
    k = check_int("k", k, maximum=MAX_DRAFT_TOKENS)
    batch = check_int("batch", batch)
    context = check_int("context", context)
    if step_overhead_s is None:
        from ._validate import check_choice
        from .serve_engine import engine_key

        t0 = (STEP_OVERHEAD_S if engine is None else
              ENGINE_STEP_OVERHEAD_S[engine_key(check_choice("engine", engine, _ENGINES),
                                                ENGINE_STEP_OVERHEAD_S)])
    else:
        t0 = check_number("step_overhead_s", step_overhead_s, maximum=1.0)
    # serving's mean decode context is prompt + output // 2: with output=1, the prompt
    kw = dict(batch=batch, prompt=context, kv_cache=kv_cache, compute=compute, mbu=mbu, mfu=mfu,
              attention_bu=attention_bu)
    plain_s, _, gpu_name = _step_s(m, gpu, weights=weights, **kw)
    verify_s, bound, _ = _step_s(m, gpu, tokens=k + 1, weights=weights, **kw)
    draft_s, _, _ = _step_s(d, gpu, weights=weights if draft_weights is None else draft_weights, **kw)
    return Speculative(model=m.name, draft=d.name, gpu=gpu_name, k=k, acceptance=a, batch=batch,
                       context=context, target_step_s=plain_s, verify_step_s=verify_s,
                       draft_step_s=draft_s, verify_bound=bound,
                       tokens_per_step=expected_tokens_per_step(a, k), step_overhead_s=t0)


def speculative_breakeven_batch(model, draft, gpu, **kwargs) -> int | None:
    """The smallest batch at which speculative decoding stops paying (speed-up <= 1), or ``None`` if it still
    pays at :data:`MAX_BREAKEVEN_BATCH`. Doubling from 1, then bisection: the speed-up only falls as the batch
    grows (the verify step's ``k + 1`` times the FLOPs meet the ridge point sooner than a plain step's).
    Keywords go to :func:`speculative_decoding` (``batch`` excepted). Taught in chapter 15."""
    if "batch" in kwargs:
        raise TypeError("speculative_breakeven_batch searches the batch: do not pass batch")

    def pays(b: int) -> bool:
        return speculative_decoding(model, draft, gpu, batch=b, **kwargs).speedup > 1.0

    if not pays(1):
        return 1
    lo = 1
    while lo * 2 <= MAX_BREAKEVEN_BATCH and pays(lo * 2):
        lo *= 2
    hi = lo * 2
    if hi > MAX_BREAKEVEN_BATCH:
        return None
    while hi - lo > 1:            # pays(lo), not pays(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if pays(mid) else (lo, mid)
    return hi
