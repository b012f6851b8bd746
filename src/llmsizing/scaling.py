"""Compute-optimal sizing: for a training budget of ``C`` FLOPs, how many parameters ``N`` and how many tokens
``D`` (Part III, "FLOPs, MFU and training time", section "How big a model for the budget?").

Hoffmann et al. 2022 ("Chinchilla", arXiv:2203.15556) estimate the split three ways, all under ``C = 6ND``:

* **Approach 1** (minimum over training curves) and **Approach 2** (IsoFLOP profiles) fit power laws
  ``N_opt ∝ C^a``, ``D_opt ∝ C^b`` with ``a = 0.50`` (10th-90th percentile 0.488-0.502) and ``a = 0.49``
  (0.462-0.534) (their Table 2). The paper prints exponents and projected tables (Table 3, Table A3), not the
  prefactor, so the library anchors each law on one row of its own table (67B parameters) and keeps the other
  rows to check the exponent against (``tests/test_scaling.py``).
* **Approach 3** fits a parametric loss ``L(N, D) = E + A / N^α + B / D^β`` (App. D.2) and minimises it on
  ``C = 6ND`` in closed form (their Eq. 4): ``N_opt = G (C/6)^(β/(α+β))``, ``G = (αA / (βB))^(1/(α+β))``.
  With the paper's constants the exponent is 0.46: at Gopher's budget it predicts 40B parameters where
  Approaches 1 and 2 give about 67B and 61B. Besiroglu et al. 2024 (arXiv:2404.10102) refitted it on data
  read from the paper's figure and found the original fit stopped before converging; their corrected constants
  give ``a = 0.51``, about 20 tokens per parameter, in line with Approaches 1 and 2 (fit ``"besiroglu"``).

The default is Approach 1, the one the paper's Table 3 and Chinchilla itself (70B parameters, 1.4T tokens,
Sec. 4) follow. The fits' constants, with their uncertainty and sources, are in ``data/scaling_fits.csv``; the
paper's projected tables are in ``data/chinchilla_tables.csv``.

**Where this is an approximation.** ``C = 6ND`` leaves out attention's sequence-length terms: at 2,048-token
sequences the paper's own count (App. F, Table A4, :func:`six_nd_ratios`: attention included, the embedding
and output layer left out although ``N`` holds the output layer, which is why the 6.8B model's ratio is below
1) is 0.99 to 1.10 times ``6ND`` for its 73M-6.8B models, so ``6ND`` is up to 9% low there, and more at
longer sequences (the library's count, :func:`llmsizing.flops.training_flops_per_token`, includes
attention); the fits were made on models up to 16B parameters and 500B tokens of MassiveText and are
extrapolated beyond; "optimal" means the lowest pre-training loss for the FLOPs, not the cheapest model to
serve (which is why Llama 3 trained its 8B model on 15T tokens: :func:`overtrained`).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ._validate import check_choice, check_fraction, check_int, check_number

DATA = Path(__file__).resolve().parents[2] / "data"
FITS_CSV = DATA / "scaling_fits.csv"
TABLES_CSV = DATA / "chinchilla_tables.csv"
A4_CSV = DATA / "chinchilla_flops_ratio.csv"

#: Training FLOPs per parameter per token in the Chinchilla convention ``C = 6ND`` (Kaplan et al. 2020).
FLOPS_PER_PARAM_TOKEN = 6.0

#: Chinchilla itself: 70B parameters on 1.4T tokens with Gopher's budget (Hoffmann et al. 2022, Sec. 4 and
#: Table 3's Gopher row, 5.76e23 FLOPs).
CHINCHILLA_PARAMS, CHINCHILLA_TOKENS, GOPHER_FLOPS = 70e9, 1.4e12, 5.76e23

#: The largest budget accepted: 1e32 FLOPs (ten thousand times the largest run of 2026; the products stay
#: finite).
MAX_FLOPS = 1e32

#: The fits' names, as in ``data/scaling_fits.csv``.
FITS = ("approach1", "approach2", "approach3", "approach3-rounded", "besiroglu")
#: The fits with a loss function (:func:`loss`, :func:`overtrained`).
LOSS_FITS = ("approach3", "approach3-rounded", "besiroglu")


@cache
def _fits() -> dict:
    with open(FITS_CSV, newline="") as fh:
        rows = {}
        for r in csv.DictReader(fh):
            rows[r["fit"]] = {k: (v if k in ("fit", "kind", "source", "as_of", "note") else
                                  (float(v) if v else math.nan)) for k, v in r.items()}
        return rows


def scaling_fits():
    """``data/scaling_fits.csv`` as a DataFrame: each fit's exponent ``a`` of ``N_opt ∝ C^a`` (with its
    published 10th-90th percentile for Approaches 1 and 2), the anchor row of a power law, the constants of a
    parametric loss (with the standard errors Besiroglu et al. report), source and date."""
    import pandas as pd

    df = pd.DataFrame(list(_fits().values()))
    par = df["kind"] == "parametric"
    df.loc[par, "a"] = df.loc[par, "beta"] / (df.loc[par, "alpha"] + df.loc[par, "beta"])
    return df


def chinchilla_tables():
    """The projected compute-optimal rows Hoffmann et al. 2022 publish (Table 3: Approach 1; Table A3:
    Approaches 2 and 3), from ``data/chinchilla_tables.csv``, with the library's ``params`` for the same FLOPs
    and fit next to each (``predicted_params``, ``ratio``). The anchor rows of Approaches 1 and 2 agree by
    construction."""
    import pandas as pd

    df = pd.read_csv(TABLES_CSV)
    df["predicted_params"] = [compute_optimal(f, fit=a).params for f, a in zip(df["flops"], df["approach"])]
    df["ratio"] = df["predicted_params"] / df["params"]
    return df


def six_nd_ratios():
    """Hoffmann et al. 2022's Table A4 (App. F), from ``data/chinchilla_flops_ratio.csv``: for six of their
    models (73M to 6.8B parameters) the FLOPs they count per 2,048-token sequence, attention included, over
    ``6ND`` (``flop_ratio``). How far ``C = 6ND`` is from the paper's count at that length, a count that
    leaves out the embedding and the output layer: App. F's text lists them, but only the count without them
    reproduces the table (karpathy/nanoGPT ``scaling_laws.ipynb``; ``tests/test_scaling.py`` recounts it).
    Used by the appendix (``book/90_formula_summary.ipynb``, its chapter 10 entry)."""
    import pandas as pd

    return pd.read_csv(A4_CSV)


def _fit(fit: str) -> dict:
    return _fits()[check_choice("fit", fit, FITS)]


def _g_and_a(f: dict) -> tuple[float, float]:
    """``G`` and ``a`` of a parametric fit's closed-form frontier (Hoffmann et al. 2022, Eq. 4)."""
    al, be = f["alpha"], f["beta"]
    return (al * f["A"] / (be * f["B"])) ** (1 / (al + be)), be / (al + be)


def _params_at(flops: float, fit: str) -> float:
    f = _fit(fit)
    if f["kind"] == "power_law":
        return f["anchor_params"] * (flops / f["anchor_flops"]) ** f["a"]
    g, a = _g_and_a(f)
    return g * (flops / FLOPS_PER_PARAM_TOKEN) ** a


@dataclass(frozen=True)
class ComputeOptimal:
    """The compute-optimal split of a budget (:func:`compute_optimal`): ``params`` (N) and ``tokens`` (D) with
    ``6 x params x tokens = flops``, the fit used and its exponent ``a``, and the spread of the published fits
    at the same budget (``params_low``/``params_high``: the smallest and largest ``N`` of Approaches 1, 2, 3,
    Besiroglu et al.'s refit and the fit used, so that the spread always holds the answer), which is wider
    than any one fit's own interval."""

    flops: float
    params: float
    tokens: float
    fit: str
    a: float
    params_low: float
    params_high: float

    @property
    def tokens_per_param(self) -> float:
        return self.tokens / self.params

    @property
    def tokens_low(self) -> float:
        return self.flops / FLOPS_PER_PARAM_TOKEN / self.params_high

    @property
    def tokens_high(self) -> float:
        return self.flops / FLOPS_PER_PARAM_TOKEN / self.params_low


def compute_optimal(flops: float, *, fit: str = "approach1") -> ComputeOptimal:
    """The parameters and tokens that give the lowest loss for ``flops`` training FLOPs (``C = 6ND``), by one
    of Hoffmann et al. 2022's fits (:data:`FITS`; default Approach 1, the paper's Table 3). At Gopher's budget
    (5.76e23 FLOPs) Approach 1 gives 67B parameters and 1.43T tokens; the paper trained Chinchilla at 70B and
    1.4T. ``fit="besiroglu"`` is Besiroglu et al. 2024's corrected Approach 3. ``params_low``/``params_high``
    are the spread of the four published fits at the same budget, widened to the fit used where it lies
    outside them (``"approach3-rounded"``, whose rounded exponents put it below all four). Taught in chapter
    10."""
    flops = check_number("flops", flops, allow_equal=False, maximum=MAX_FLOPS)
    if flops < 1e15:
        raise ValueError(f"flops must be >= 1e15 (a budget of at least a small model's training run), got "
                         f"{flops:g}: the fits were made on 6e18 to 3e21 FLOPs and mean nothing far below")
    n = _params_at(flops, fit)
    # the spread of the published fits, and the fit used: "approach3-rounded" (the printed exponents) lies
    # below all four, and a stated spread that leaves out its own answer would not be a spread of it
    others = [_params_at(flops, k) for k in ("approach1", "approach2", "approach3", "besiroglu")] + [n]
    f = _fit(fit)
    a = f["a"] if f["kind"] == "power_law" else _g_and_a(f)[1]
    return ComputeOptimal(flops, n, flops / FLOPS_PER_PARAM_TOKEN / n, fit, a, min(others), max(others))


def loss(params: float, tokens: float, *, fit: str = "besiroglu") -> float:
    """The pre-training loss (nats per token, on Hoffmann et al.'s MassiveText) that a parametric fit predicts
    for ``params`` parameters trained on ``tokens`` tokens: ``E + A / N^α + B / D^β`` (Hoffmann et al. 2022,
    Eq. 2). A fit of Approach 3 kind only (:data:`LOSS_FITS`); only differences between losses mean anything
    outside that corpus."""
    params = check_number("params", params, minimum=1.0)
    tokens = check_number("tokens", tokens, minimum=1.0)
    f = _fit(check_choice("fit", fit, LOSS_FITS))
    return f["E"] + f["A"] / params ** f["alpha"] + f["B"] / tokens ** f["beta"]


def _optimal_loss(flops: float, f: dict) -> float:
    g, a = _g_and_a(f)
    n = g * (flops / FLOPS_PER_PARAM_TOKEN) ** a
    d = flops / FLOPS_PER_PARAM_TOKEN / n
    return f["E"] + f["A"] / n ** f["alpha"] + f["B"] / d ** f["beta"]


@dataclass(frozen=True)
class Overtraining:
    """How a model trained past its compute-optimal point departs from it (:func:`overtrained`)."""

    params: float
    tokens: float
    flops: float
    fit: str
    #: the compute-optimal split of the same FLOPs (Approach 1, the paper's ~20 tokens per parameter)
    optimal: ComputeOptimal
    #: the loss the fit predicts for this run, and the FLOPs a compute-optimal run needs to reach the same
    #: loss
    loss: float
    same_loss_flops: float
    same_loss_params: float

    @property
    def tokens_per_param(self) -> float:
        return self.tokens / self.params

    @property
    def overtraining_factor(self) -> float:
        """Tokens per parameter over the compute-optimal tokens per parameter at the same FLOPs."""
        return self.tokens_per_param / self.optimal.tokens_per_param

    @property
    def extra_compute(self) -> float:
        """This run's FLOPs over a compute-optimal run's with the same loss (>= 1): what the smaller model
        cost."""
        return self.flops / self.same_loss_flops


def overtrained(params: float, tokens: float, *, fit: str = "besiroglu") -> Overtraining:
    """A model of ``params`` parameters trained on ``tokens`` tokens against the compute-optimal frontier: its
    tokens per parameter against the optimum's at the same FLOPs (Approach 1), and, from a parametric loss
    (default Besiroglu et al.'s refit), the FLOPs a compute-optimal model would need to reach the same loss:
    ``extra_compute`` is what training a small model long costs over training the optimal one (paid back in
    cheaper serving). Far outside the fits' data (15T tokens is 30x their largest run), so an indication only.
    Taught in chapter 10 (Llama 3 8B on 15T tokens)."""
    params = check_number("params", params, minimum=1.0)
    tokens = check_number("tokens", tokens, minimum=1.0)
    f = _fit(check_choice("fit", fit, LOSS_FITS))
    flops = FLOPS_PER_PARAM_TOKEN * params * tokens
    target = loss(params, tokens, fit=fit)
    if not target > f["E"]:
        raise ValueError(f"the fit's loss for params={params:g}, tokens={tokens:g} does not exceed its "
                         "floor E")
    lo, hi = math.log(flops) - 60.0, math.log(flops)       # the optimum reaches the loss with at most C FLOPs
    for _ in range(200):                                       # bisection on log C: L_opt(C) falls with C
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _optimal_loss(math.exp(mid), f) > target else (lo, mid)
    c_same = math.exp(hi)
    g, a = _g_and_a(f)
    return Overtraining(params, tokens, flops, fit, compute_optimal(flops), target, c_same,
                        g * (c_same / FLOPS_PER_PARAM_TOKEN) ** a)


@dataclass(frozen=True)
class BudgetOptimal:
    """The largest compute-optimal model a GPU budget trains (:func:`largest_compute_optimal`)."""

    gpu: str
    n_gpus: int
    days: float
    mfu: float
    goodput: float
    mfu_from: str
    optimal: ComputeOptimal
    #: the calibrated MFU's warnings (a run outside its published runs), empty for a given MFU
    warnings: tuple = ()
    #: the calibrated MFU's 80% range (``mfu_estimate``'s ``low`` and ``high``); ``None`` (no range) for a
    #: given MFU
    mfu_low: float | None = None
    mfu_high: float | None = None

    @property
    def flops(self) -> float:
        return self.optimal.flops

    @property
    def optimal_low_mfu(self) -> ComputeOptimal:
        """The compute-optimal split, same fit, of the budget at the slow end of the MFU's range (the FLOPs
        scale with the MFU; the central split when the MFU was given)."""
        return compute_optimal(self.flops * (self.mfu_low or self.mfu) / self.mfu, fit=self.optimal.fit)

    @property
    def optimal_high_mfu(self) -> ComputeOptimal:
        """The same at the fast end of the MFU's range."""
        return compute_optimal(self.flops * (self.mfu_high or self.mfu) / self.mfu, fit=self.optimal.fit)


def largest_compute_optimal(*, gpu, n_gpus: int, days: float, seq: int, mfu: float | None = None,
                            goodput: float = 1.0, fit: str = "approach1",
                            dtype: str = "bf16") -> BudgetOptimal:
    """The inverse of :func:`compute_optimal`: the largest compute-optimal model that ``n_gpus`` GPUs of type
    ``gpu`` train in ``days`` days. The budget is ``n_gpus x dense peak x MFU x goodput x days`` (the
    arithmetic of :func:`~llmsizing.time_cost.training_time`); ``mfu`` defaults to the calibrated estimate
    (:func:`~llmsizing.time_cost.mfu_estimate` at ``seq``) for the catalogued model closest in size to the
    answer (found by iterating; the MFU varies little with size, ``data/mfu_inputs_model.csv``). ``goodput``
    (from :func:`~llmsizing.reliability.goodput`, default 1) takes out the time lost to interruptions. The MFU
    counts attention FLOPs while ``C = 6ND`` does not, so at long ``seq`` the model is slightly optimistic.
    A calibrated MFU carries its 80% range (``mfu_low``/``mfu_high``, and the split at either end:
    ``optimal_low_mfu``/``optimal_high_mfu``). Taught in chapter 10."""
    from .catalog import get_gpu, get_model, list_models
    from .time_cost import _peak_flops, mfu_estimate

    g = get_gpu(gpu)
    n_gpus = check_int("n_gpus", n_gpus)
    days = check_number("days", days, allow_equal=False)
    seq = check_int("seq", seq)
    goodput = check_fraction("goodput", goodput)
    check_choice("fit", fit, FITS)
    peak = _peak_flops(g, dtype)
    seconds = days * 86400
    if mfu is not None:
        mfu = check_fraction("mfu", mfu)
        return BudgetOptimal(g.name, n_gpus, days, mfu, goodput, "given",
                             compute_optimal(n_gpus * peak * mfu * goodput * seconds, fit=fit))
    dense = [get_model(m) for m in list_models(moe=False)]
    m_eff, name, warnings = 0.4, "", ()
    for _ in range(4):                              # the size picks the MFU, the MFU the size: converges fast
        n = compute_optimal(n_gpus * peak * m_eff * goodput * seconds, fit=fit).params
        near = min(dense, key=lambda m: abs(math.log(m.n_params / n)))
        est = mfu_estimate(near, gpu=g, seq=seq, dtype=dtype, n_gpus=n_gpus)
        m_eff, name, warnings = est.mfu, near.name, est.warnings
    return BudgetOptimal(g.name, n_gpus, days, m_eff, goodput, f"calibrated estimate for {name}",
                         compute_optimal(n_gpus * peak * m_eff * goodput * seconds, fit=fit), tuple(warnings),
                         est.low, est.high)
