"""The cost of a finished training job (Part III, chapter 11 "Cost").

Everything here is the arithmetic of :func:`~llmsizing.time_cost.training_time` rearranged to answer money
questions; no new physics:

* **job cost = GPU-hours x price per GPU-hour**, and the GPU-hours are the run's model FLOPs over one GPU's
  delivered FLOP/s (dense peak x MFU). The GPU count cancels: more GPUs cost the same *until the MFU falls*
  (:func:`cost_vs_gpus` shows where it falls, from :func:`~llmsizing.layouts.step_time`).
* **comparing GPU types**: the job on GPU B costs ``(price_B / price_A) / speedup`` times the job on GPU A,
  where ``speedup`` is how much faster B finishes the same job (:func:`compare_gpus`). B is cheaper per job
  exactly when its speed-up beats its price ratio.
* **price and MFU**: the cost is proportional to the price and inversely proportional to the MFU
  (:func:`cost_sensitivity`).
* **reserved capacity**: a discount ``d`` on the hourly price, paid for every reserved hour whether it is used
  or not, gives an effective price per *used* GPU-hour of ``price x (1 - d) / utilisation``
  (:func:`effective_price_usd_per_gpu_hour`); it beats on-demand only above a utilisation of ``1 - d``.
  The book has no sourced reserved prices, so the discount is a parameter, never a catalogue figure.
* **a plan's winner**: how far the cheapest GPU type of a :func:`~llmsizing.planner.plan` table leads the
  next one, the price and kernel efficiency at which they tie (:func:`gpu_lead`), and its cheapest run
  repriced at another kernel efficiency (:func:`plan_at_kernel_efficiency`); the days saved and the dollars
  added by each step along its time-vs-cost front (:func:`front_steps`). Chapter 12.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType

from ._validate import check_choice, check_fraction, check_int, check_number, check_sequence
from .catalog import get_gpu, gpu_price, price_kind_of, resolve_model, resolve_prices
from .flops import RECOMPUTE, training_flops_per_token
from .hardware import dense_tflops
from .hardware import kernel_efficiency as kernel_efficiency_of
from .job import Job
from .layouts import step_time
from .mfu import layout_range_factors, plan_range_factors, time_range_ends
from .model import Model
from .parallel import Parallel
from .time_cost import training_time

SEED_COST_TABLES_CSV = Path(__file__).resolve().parents[2] / "data" / "seed000_cost_tables.csv"

HOURS_PER_DAY = 24
SECONDS_PER_DAY = 86400

#: The smallest price or speed-up :func:`compare_gpus` divides by: one millionth (of a dollar per GPU-hour; of
#: the other GPU's speed). Below it a ratio means nothing (and, far enough below, is no longer finite).
MIN_RATIO_TERM = 1e-6

#: Chapter 11's plan, ``plan(**FRONT_PLAN)`` (its time-vs-cost front and exercise 3; chapter 12's interleaving
#: dropdown reads it again): Llama-3-70B, 1T tokens of 8,192 on up to 16,384 H100s at a global batch of 512.
FRONT_PLAN = MappingProxyType({"model": "llama-3-70b", "tokens": 1e12, "gpus": ("H100 SXM",), "seq": 8192,
                               "global_batch": 512, "max_gpus": 16384})


# =========================================================================== on-demand vs reserved
def effective_price_usd_per_gpu_hour(price_usd_per_gpu_hour: float, *, discount: float = 0.0,
                                     utilisation: float = 1.0) -> float:
    """What one *used* GPU-hour costs when capacity is bought at ``price x (1 - discount)`` per hour and only
    a share ``utilisation`` (0 < u <= 1) of the paid hours runs the job:
    ``price x (1 - discount) / utilisation``.

    On-demand is ``discount=0, utilisation=1`` (you pay only while you run). A reservation trades a discount
    for paying idle hours too. No reserved price is assumed anywhere in the book: the discount is the reader's
    (chapter 11)."""
    price = check_number("price_usd_per_gpu_hour", price_usd_per_gpu_hour)
    discount = check_number("discount", discount, maximum=1.0)
    utilisation = check_fraction("utilisation", utilisation)
    return price * (1.0 - discount) / utilisation


def reserved_breakeven_utilisation(discount: float) -> float:
    """The utilisation above which a reservation at ``discount`` off the on-demand price is cheaper per used
    GPU-hour than on-demand: ``1 - discount`` (from ``p (1 - d) / u = p``). Chapter 11."""
    discount = check_number("discount", discount, maximum=1.0)
    return 1.0 - discount


# =========================================================================== GPU types: cost per job
@dataclass(frozen=True)
class GpuComparison:
    """One job on ``gpu_b`` against the same job on ``gpu_a`` (:func:`compare_gpus`).

    ``speedup`` is how many times faster B finishes the job per GPU (B's delivered FLOP/s over A's);
    ``cost_ratio`` is B's job cost over A's, ``price_ratio / speedup``; ``breakeven_speedup`` equals
    ``price_ratio``: the speed-up B needs to cost the same per job. ``price_kind_a``/``price_kind_b`` say what
    each price is (:func:`~llmsizing.catalog.price_kind_of`: an ``"estimate"`` is not a list price)."""

    gpu_a: str
    gpu_b: str
    price_a_usd_per_gpu_hour: float
    price_b_usd_per_gpu_hour: float
    peak_ratio: float
    speedup: float
    price_ratio: float
    cost_ratio: float
    breakeven_speedup: float
    price_kind_a: str = "list"
    price_kind_b: str = "list"

    def breakeven_mfu(self, mfu_a: float) -> float:
        """The MFU B must reach for the job to cost the same as on A at ``mfu_a``:
        ``mfu_a x price_ratio / peak_ratio`` (B is cheaper above it). An MFU above 1 is no answer: then B
        cannot cost as little as A at ``mfu_a``, and ``ValueError`` says so."""
        mfu_a = check_fraction("mfu_a", mfu_a)
        mfu_b = mfu_a * self.price_ratio / self.peak_ratio
        if not mfu_b <= 1:
            raise ValueError(f"at mfu_a={mfu_a:g} the {self.gpu_b} would need an MFU of {mfu_b:.3g} > 1 to "
                             f"cost as little per job as the {self.gpu_a}: it cannot, at these prices")
        return mfu_b


def compare_gpus(gpu_a, gpu_b, *, speedup: float | None = None, prices: dict | None = None,
                 dtype: str = "bf16") -> GpuComparison:
    """Cost per finished job on ``gpu_b`` relative to ``gpu_a``: ``(price_b / price_a) / speedup``.

    ``speedup`` (B's throughput per GPU over A's on the job) defaults to the ratio of their dense ``dtype``
    peaks, i.e. the same MFU on both; pass a measured or claimed speed-up instead (for example a benchmark's
    "2.2x"). ``prices`` maps GPU names to USD per GPU-hour (default: the catalogue's on-demand prices, dated
    in ``data/gpu_prices.csv``). A job costs less on B exactly when ``speedup > price_b / price_a``
    (chapter 11)."""
    a, b = get_gpu(gpu_a), get_gpu(gpu_b)
    prices = resolve_prices(prices, [a, b])
    pa = prices[a.name] if a.name in prices else gpu_price(a, name="prices")
    pb = prices[b.name] if b.name in prices else gpu_price(b, name="prices")
    for g, p in ((a, pa), (b, pb)):
        check_number(f"the price of the {g.name} (prices)", p, minimum=MIN_RATIO_TERM)
    peak_ratio = dense_tflops(b, dtype) / dense_tflops(a, dtype)
    s = peak_ratio if speedup is None else check_number("speedup", speedup, minimum=MIN_RATIO_TERM)
    price_ratio = pb / pa
    return GpuComparison(a.name, b.name, pa, pb, peak_ratio, s, price_ratio, price_ratio / s, price_ratio,
                         price_kind_of(a, pa), price_kind_of(b, pb))


# =========================================================================== a plan's cheapest GPU's lead
_LEAD_COLUMNS = ("gpu", "cost_usd", "gpu_hours")


def _cheapest_by_gpu(frame):
    """Each GPU type's cheapest row of a :func:`~llmsizing.planner.plan` table, cheapest type first."""
    columns = getattr(frame, "columns", ())
    missing = [c for c in _LEAD_COLUMNS if c not in columns]
    if missing:
        raise TypeError("frame must be a table of llmsizing.planner.plan(...); it lacks "
                        f"{', '.join(missing)}")
    if len(frame) == 0:
        raise ValueError("frame: the plan table is empty (no plan fits), so no GPU type leads")
    rows = frame.loc[frame.groupby("gpu", sort=False)["cost_usd"].idxmin()]
    return rows.sort_values("cost_usd", kind="stable").set_index("gpu", drop=False)


@dataclass(frozen=True)
class GpuLead:
    """How firm the cheapest GPU type's lead is in a plan table (:func:`gpu_lead`). ``lead`` is the runner-up
    type's cheapest run's cost over the winner's; a run's cost is its GPU-hours times the price, so the two
    tie at ``breakeven_price_usd_per_gpu_hour = price x lead``; and, for a step that is all compute, at
    ``breakeven_kernel_efficiency = kernel_efficiency / lead`` (an upper bound on the efficiency at which they
    tie where some kernels are memory-bound: :func:`plan_at_kernel_efficiency` reprices the step there)."""

    gpu: str
    runner_up: str
    cost_usd: float
    runner_up_cost_usd: float
    lead: float
    price_usd_per_gpu_hour: float
    breakeven_price_usd_per_gpu_hour: float
    kernel_efficiency: float
    breakeven_kernel_efficiency: float


def gpu_lead(frame, *, kernel_efficiency: float | None = None) -> GpuLead:
    """The lead of ``frame``'s (a :func:`~llmsizing.planner.plan` table's) cheapest GPU type over the next
    cheapest type: each type's cheapest run, the ratio of their costs, and the winner's price per GPU-hour and
    kernel efficiency at which the two would cost the same. The price is the one the plan charged (its row's
    ``cost_usd / gpu_hours``); ``kernel_efficiency`` defaults to the winner's BF16 one
    (:func:`~llmsizing.hardware.kernel_efficiency`, what ``plan()`` uses when given none). Chapter 12, "How
    firm is the winner's lead?": Llama-3-70B's cheapest run on B200s against the H200's."""
    best = _cheapest_by_gpu(frame)
    if len(best) < 2:
        raise ValueError(f"frame: only the {best.index[0]} has a plan, so there is no runner-up to lead")
    win, run = best.iloc[0], best.iloc[1]
    hours = check_number("the winner's gpu_hours (frame)", win["gpu_hours"], allow_equal=False)
    cost = check_number("the winner's cost_usd (frame)", win["cost_usd"], allow_equal=False)
    eff = (kernel_efficiency_of(win["gpu"]) if kernel_efficiency is None
           else check_fraction("kernel_efficiency", kernel_efficiency))
    lead = float(run["cost_usd"]) / cost
    price = cost / hours
    return GpuLead(str(win["gpu"]), str(run["gpu"]), cost, float(run["cost_usd"]), lead, price, price * lead,
                   eff, eff / lead)


@dataclass(frozen=True)
class RescaledPlan:
    """A plan table's cheapest run on one GPU type with its step repriced at another kernel efficiency
    (:func:`plan_at_kernel_efficiency`). ``step_scale`` is the new step over the plan's; a run of a fixed
    number of steps scales its days and cost by it, and the stated 80% range moves with the prediction
    (:func:`~llmsizing.mfu.time_range_ends`). ``cheaper_gpus``: the other GPU types whose cheapest run in the
    table costs less than the repriced one, cheapest first."""

    gpu: str
    kernel_efficiency: float
    step_s: float
    step_scale: float
    mfu: float
    days: float
    days_low: float
    days_high: float
    cost_usd: float
    cost_usd_low: float
    cost_usd_high: float
    cheaper_gpus: tuple[str, ...]


def plan_at_kernel_efficiency(frame, model: Model | str, *, seq: int, kernel_efficiency: float,
                              gpu: str | None = None, **job_options) -> RescaledPlan:
    """``frame``'s (a :func:`~llmsizing.planner.plan` table's) cheapest run on ``gpu`` (default: the cheapest
    type) with its step repriced at ``kernel_efficiency``: the row's own job
    (:meth:`~llmsizing.job.Job.from_plan_row` with ``model``, ``seq`` and the plan's other options in
    ``job_options``) through :func:`~llmsizing.layouts.step_time`. Memory-bound kernels do not slow down with
    the efficiency, so the step grows less than the efficiency falls. Chapter 12: the B200's cheapest plan at
    the break-even efficiency (:func:`gpu_lead`) and at the efficiency torchao's B200 BF16 run implies."""
    best = _cheapest_by_gpu(frame)
    gpu = str(best.index[0]) if gpu is None else check_choice("gpu", gpu, tuple(best.index))
    eff = check_fraction("kernel_efficiency", kernel_efficiency)
    row = best.loc[gpu]
    st = step_time(Job.from_plan_row(row, model, seq=seq, **job_options), kernel_efficiency=eff)
    scale = st.step_s / float(row["step_time_s"])
    factors = plan_range_factors(frame, gpu)
    days, cost = float(row["days"]) * scale, float(row["cost_usd"]) * scale
    (d_lo, d_hi), (c_lo, c_hi) = time_range_ends(days, factors), time_range_ends(cost, factors)
    cheaper = tuple(str(g) for g in best.index if g != gpu and best.loc[g, "cost_usd"] < cost)
    return RescaledPlan(gpu, eff, st.step_s, scale, st.mfu, days, d_lo, d_hi, cost, c_lo, c_hi, cheaper)


@dataclass(frozen=True)
class FrontStep:
    """One step along a plan table's time-vs-cost front (:func:`front_steps`): from the plan on
    ``n_gpus_from`` GPUs to the next faster, dearer one on ``n_gpus_to``. ``days_saved_low``/``_high`` are the
    days saved at the ends of the GPU's stated 80% range (a difference of two times on one range:
    :func:`~llmsizing.mfu.time_range_ends`); ``cost_ratio`` is the faster plan's cost over the slower's."""

    gpu: str
    n_gpus_from: int
    n_gpus_to: int
    days_saved: float
    days_saved_low: float
    days_saved_high: float
    cost_added_usd: float
    cost_ratio: float


def front_steps(frame) -> tuple[FrontStep, ...]:
    """The steps along ``frame``'s (a :func:`~llmsizing.planner.plan` table's) time-vs-cost front (its
    ``pareto`` rows), cheapest plan first: the days each next plan saves, with their range, and the dollars it
    adds. A front of one plan has no step. The range of a difference holds only on one range, so a front that
    mixes GPU types is refused (``ValueError``). Chapter 12: along Llama-3-70B's B200 front each doubling of
    the GPUs saves fewer days and adds more dollars."""
    columns = getattr(frame, "columns", ())
    missing = [c for c in ("gpu", "n_gpus", "days", "cost_usd", "pareto") if c not in columns]
    if missing:
        raise TypeError("frame must be a table of llmsizing.planner.plan(...); it lacks "
                        f"{', '.join(missing)}")
    front = frame[frame["pareto"].astype(bool)].sort_values(["cost_usd", "days"], ascending=[True, False],
                                                            kind="stable")
    gpus = list(dict.fromkeys(front["gpu"]))
    if len(gpus) > 1:
        raise ValueError(f"frame: its front mixes GPU types ({', '.join(map(str, gpus))}), and the days "
                         "saved between two ranges have no stated range; take one type's plans first")
    if len(front) < 2:
        return ()
    factors = plan_range_factors(frame, gpus[0])
    steps = []
    for a, b in zip(front.itertuples(), front.iloc[1:].itertuples()):
        saved = float(a.days - b.days)
        low, high = time_range_ends(saved, factors)
        steps.append(FrontStep(str(a.gpu), int(a.n_gpus), int(b.n_gpus), saved, low, high,
                               float(b.cost_usd - a.cost_usd), float(b.cost_usd / a.cost_usd)))
    return tuple(steps)


# =========================================================================== price x MFU
def cost_sensitivity(model: Model | str, *, tokens: float, gpu, seq: int, prices, mfus):
    """The job cost in USD for every ``price`` (USD per GPU-hour) x ``mfu`` pair, as a DataFrame with one row
    per MFU and one column per price (:func:`~llmsizing.time_cost.training_time` at each MFU exactly; the GPU
    count does not matter). Cost is proportional to the price and to ``1 / mfu``. Chapter 11. A mixture of
    experts is priced on its active parameters' FLOPs, as :func:`~llmsizing.time_cost.training_time` prices
    it."""
    import pandas as pd

    model = resolve_model(model, moe=True)
    ps = [check_number("prices[i]", p) for p in check_sequence("prices", prices, example="(2.0, 3.0)")]
    ms = [check_fraction("mfus[i]", m) for m in check_sequence("mfus", mfus, example="(0.3, 0.4, 0.5)")]
    hours = {m: training_time(model, tokens=tokens, gpu=gpu, n_gpus=1, seq=seq, mfu=m).gpu_hours for m in ms}
    df = pd.DataFrame([[hours[m] * p for p in ps] for m in ms], index=pd.Index(ms, name="mfu"),
                      columns=pd.Index(ps, name="price_usd_per_gpu_hour"))
    return df


# =========================================================================== more GPUs, same job
def cost_vs_gpus(model: Model | str, *, tokens: float, gpu, seq: int, global_batch: int, tp: int = 8,
                 pp: int = 1, zero: int = 1, micro_batch: int = 1, dps=None,
                 kernel_efficiency: float | None = None, overlap: float | None = None,
                 recompute: str = "none", price_usd_per_gpu_hour: float | None = None,
                 compute_efficiency: float | None = None, ep: int = 1):
    """Days, GPU-hours and cost of one job as the data-parallel degree grows at a fixed ``global_batch``
    (sequences), for the layout ``tp`` x ``pp`` (sequence parallelism on when ``tp > 1``) with ZeRO stage
    ``zero`` (off at ``dp = 1``, where there is nothing to shard over), micro-batch ``micro_batch`` and
    ``grad_accum = global_batch / (micro_batch x dp)``.

    Each row is one :func:`~llmsizing.layouts.step_time` (compute at ``kernel_efficiency`` of the dense peak,
    default the calibrated one, ``compute_efficiency=`` its old name; the pipeline bubble; communication
    hidden group by group, or a share ``overlap`` of it): as ``dp`` grows, each GPU's compute per
    step shrinks while the bubble (a fixed number of micro-batch slots) and the gradient all-reduce do not, so
    the MFU falls and the same job costs more. ``dp`` stops at ``global_batch / micro_batch``: the global
    batch caps data parallelism. ``dps`` defaults to the powers of two that divide it. Memory is not checked
    here (the planner does that). Days and cost carry the 80% range of an MFU predicted from a layout
    (:func:`~llmsizing.mfu.layout_range_factors`), as the planner's do: each row is a step-model prediction,
    not an MFU predicted from a run's inputs; ``price_kind`` says what the price is (an ``"estimate"`` is not
    a list price). Chapter 11.

    A mixture of experts may split its routed experts over ``ep`` GPUs (a divisor of its experts; default 1):
    each ``dp`` is then a multiple of what ``ep`` needs (:func:`llmsizing.moe_layouts.dp_unit`), the step
    includes the all-to-all with the model's node limit (:func:`llmsizing.moe_layouts.route_max_nodes`, as the
    planner's) and the MFU counts the active parameters' FLOPs (chapter 18)."""
    import pandas as pd

    from .layouts import step_time
    from .moe_layouts import dp_unit

    model = resolve_model(model, moe=True)
    ep = check_int("ep", ep)
    if ep > 1 and not model.is_moe:
        raise ValueError(f"ep={ep} splits routed experts, but {model.name!r} is dense (experts=0): give ep=1")
    if model.is_moe and model.experts % ep:
        raise ValueError(f"ep={ep} must divide the {model.experts} routed experts of {model.name!r}")
    unit = dp_unit(tp, 1, ep)
    g = get_gpu(gpu)
    tokens = check_number("tokens", tokens, allow_equal=False)
    seq = check_int("seq", seq)
    gb = check_int("global_batch", global_batch, maximum=1 << 24)
    b = check_int("micro_batch", micro_batch)
    tp, pp = check_int("tp", tp), check_int("pp", pp)
    zero = check_int("zero", zero, minimum=0, maximum=3)
    from ._validate import renamed

    eff = renamed("kernel_efficiency", kernel_efficiency, "compute_efficiency", compute_efficiency)
    eff = None if eff is None else check_fraction("kernel_efficiency", eff)
    check_choice("recompute", recompute, RECOMPUTE)
    if gb % b:
        raise ValueError(f"micro_batch={b} must divide global_batch={gb}")
    top = gb // b
    if dps is None:
        dps = [d for d in (2 ** k for k in range(25)) if d <= top and top % d == 0 and d % unit == 0]
    else:
        dps = sorted({check_int("dps[i]", d) for d in check_sequence("dps", dps, example="(1, 8, 64)")})
        bad = [d for d in dps if top % d]
        if bad:
            raise ValueError(f"dps must divide global_batch / micro_batch = {top:,} (the global batch caps "
                             f"data parallelism); {bad[0]:,} does not")
        if [d for d in dps if d % unit]:
            raise ValueError(f"dps must be multiples of {unit} with ep={ep} and tp={tp} (ep divides tp x dp)")
    if not dps:
        raise ValueError(f"no data-parallel degree up to global_batch / micro_batch = {top:,} is a multiple "
                         f"of {unit}, which ep={ep} needs: raise global_batch or lower ep")
    price = gpu_price(g, price_usd_per_gpu_hour)
    per_step_flops = training_flops_per_token(model, seq=seq) * gb * seq
    steps = tokens / (gb * seq)
    peak = dense_tflops(g) * 1e12
    low, high = layout_range_factors(g, moe=model.is_moe)
    rows = []
    for d in dps:
        par = Parallel(tp=tp, pp=pp, dp=d, zero=zero if d > 1 else 0, sp=tp > 1,
                       **({"ep": ep} if ep > 1 else {}))
        st = step_time(model, g, par, batch=b, seq=seq, grad_accum=top // d, kernel_efficiency=eff,
                       overlap=overlap, recompute=recompute,
                       **({"max_nodes": "model"} if model.is_moe else {}))
        days = steps * st.step_s / SECONDS_PER_DAY
        hours = days * HOURS_PER_DAY * par.gpus
        rows.append({"dp": d, "n_gpus": par.gpus, "grad_accum": top // d, "compute_s": st.compute_s,
                     "bubble_s": st.bubble_s, "exposed_comm_s": st.exposed_comm_s, "step_s": st.step_s,
                     "mfu": per_step_flops / (st.step_s * par.gpus * peak), "days": days,
                     "days_low": days / high, "days_high": days / low,
                     "gpu_hours": hours, "cost_usd": hours * price,
                     "cost_usd_low": hours * price / high, "cost_usd_high": hours * price / low,
                     "price_kind": price_kind_of(g, price)})
    return pd.DataFrame(rows)


# =========================================================================== auditing a cost table
@cache
def _seed_tables():
    import pandas as pd

    return pd.read_csv(SEED_COST_TABLES_CSV)


def seed_cost_tables():
    """Seed 000's "Cost Analysis by Model Size" tables as published (``data/seed000_cost_tables.csv``): one
    row per configuration with its GPUs, claimed tokens/s, days, cost per day and total cost."""
    return _seed_tables().copy()


#: The slowest throughput a cost table may claim, tokens/s for all its GPUs: 0.001. A run days long is
#: ``tokens / tokens_per_s``: below it the days stop meaning anything (and, far enough below, are infinite).
MIN_TOKENS_PER_S = 1e-3


def _whole_gpus(value, where: str) -> int:
    """A table's GPU count as an ``int``: an integer (NumPy's too) or a float column's whole number (``8.0``);
    ``7.9``, ``True``, ``"8"``, NaN and ``None`` are refused, naming ``gpus`` and the row, never truncated."""
    import numpy as np

    if isinstance(value, (float, np.floating)) and not isinstance(value, bool) and float(value).is_integer():
        value = int(value)                       # a whole number in a float column (pandas' NaN-able ints)
    elif isinstance(value, (float, np.floating)):
        raise ValueError(f"gpus ({where}) must be a whole number of GPUs, got {value!r}")
    return check_int(f"gpus ({where})", value)


def audit_cost_table(table=None, *, gpu="H100 SXM", seq: int = 4096, mfu: float | None = None):
    """Recompute a cost table's own arithmetic and the library's estimate, row by row.

    ``table`` has the columns of :func:`seed_cost_tables` (its default): ``model``, ``tokens``, ``gpus``,
    ``tokens_per_s`` (the table's claimed throughput of all its GPUs), ``days``, ``cost_per_day_usd``,
    ``total_cost_usd``, ``price_usd_per_gpu_hour``. Added columns:

    * ``days_from_own_tps`` = tokens / tokens_per_s / 86,400, what the table's throughput implies;
    * ``cost_per_day_from_price`` = GPUs x price x 24 and ``cost_from_own_tps`` = both multiplied;
    * ``library_days``, ``library_cost_usd`` (with ``_low``/``_high``): :func:`training_time` on the same
      number of ``gpu`` (seed 000 priced RunPod H100 SXMs) at the same price, with ``mfu`` (default: the
      calibrated band), sequences of ``seq`` tokens;
    * ``gpu_hours_own`` and ``gpu_hours_library``: GPUs x hours, the number the bill really follows.

    Chapter 11."""
    import pandas as pd

    df = seed_cost_tables() if table is None else pd.DataFrame(table).copy()
    need = ("model", "tokens", "gpus", "tokens_per_s", "days", "cost_per_day_usd", "total_cost_usd",
            "price_usd_per_gpu_hour")
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise ValueError(f"table is missing columns {missing}; it needs {list(need)}")
    g = get_gpu(gpu)
    seq = check_int("seq", seq)
    mfu = None if mfu is None else check_fraction("mfu", mfu)
    out = []
    for i, r in enumerate(df.itertuples(index=False)):
        where = f"row {i} of table"
        tokens = check_number(f"tokens ({where})", r.tokens, allow_equal=False)
        tps = check_number(f"tokens_per_s ({where})", r.tokens_per_s, minimum=MIN_TOKENS_PER_S)
        gpus = _whole_gpus(r.gpus, where)
        price = check_number(f"price_usd_per_gpu_hour ({where})", r.price_usd_per_gpu_hour)
        own_days = tokens / tps / SECONDS_PER_DAY
        per_day = gpus * price * HOURS_PER_DAY
        try:
            t = training_time(r.model, tokens=tokens, gpu=g, n_gpus=gpus, seq=seq, mfu=mfu,
                              price_usd_per_gpu_hour=price)
        except (TypeError, ValueError) as e:      # (the model column, mostly): say which row
            raise type(e)(f"{where}: {e}") from None
        out.append({"days_from_own_tps": own_days, "cost_per_day_from_price": per_day,
                    "cost_from_own_tps": own_days * per_day, "gpu_hours_own": own_days * HOURS_PER_DAY * gpus,
                    "library_tokens_per_s": t.tokens_per_s_per_gpu * gpus, "library_days": t.days,
                    "library_days_low": t.days_low, "library_days_high": t.days_high,
                    "gpu_hours_library": t.gpu_hours, "library_cost_usd": t.cost_usd,
                    "library_cost_usd_low": t.cost_usd_low, "library_cost_usd_high": t.cost_usd_high})
    return pd.concat([df.reset_index(drop=True), pd.DataFrame(out)], axis=1)


# =========================================================================== seed 000's worked options
SEED_OPTIONS_CSV = SEED_COST_TABLES_CSV.parent / "seed000_options.csv"

#: Seed 000's FAQ (line 269), "8 GPUs for 50 days is cheaper than 1 GPU for 400 days": its claim in
#: ``data/seed_claims.csv``, whose ``run_gpus`` and ``run_days`` give ``SEED_FAQ_RUNS``, the (GPUs, days)
#: pairs ``((8, 50), (1, 400))``.
_SEED_CLAIMS_CSV = SEED_COST_TABLES_CSV.parent / "seed_claims.csv"
SEED_FAQ_CLAIM = "000-faq-8x50-cheaper"


@cache
def _seed_faq_runs() -> tuple[tuple[int, int], ...]:
    """``SEED_FAQ_RUNS``: the (GPUs, days) of each run of :data:`SEED_FAQ_CLAIM`, read from its row's
    ``run_gpus`` and ``run_days`` (one day count per GPU count, in the same order)."""
    import csv

    with open(_SEED_CLAIMS_CSV, newline="") as fh:
        row = next((r for r in csv.DictReader(fh) if r["id"] == SEED_FAQ_CLAIM), None)
    if row is None:
        raise ValueError(f"{_SEED_CLAIMS_CSV.name} has no row {SEED_FAQ_CLAIM!r} (seed 000's FAQ runs)")
    gpus, days = row["run_gpus"].split(";"), row["run_days"].split(";")
    if len(gpus) != len(days) or not all(gpus + days):
        raise ValueError(f"{_SEED_CLAIMS_CSV.name}: {SEED_FAQ_CLAIM} needs one run_days per run_gpus, "
                         f"got run_gpus={row['run_gpus']!r}, run_days={row['run_days']!r}")
    return tuple((int(g), int(d)) for g, d in zip(gpus, days))


def __getattr__(name: str):
    if name == "SEED_FAQ_RUNS":                  # read from data/seed_claims.csv on first use
        return _seed_faq_runs()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def audit_seed_options():
    """Seed 000's worked example "Training Llama 2 70B" (``data/seed000_options.csv``: Options 1 to 3, each
    with the seed's GPUs, throughput per GPU, efficiency, seconds, hours, days, price and cost), its
    arithmetic redone: ``hours_from_own_tps`` = tokens / (GPUs x tokens/s per GPU x efficiency) / 3,600;
    ``one_gpu_cost_usd`` = hours x price (one GPU's bill); ``all_gpus_cost_usd`` = that times the GPUs, the
    bill of the configuration; ``gpus_billed`` = the seed's cost over one GPU's bill (the GPUs it paid for);
    ``table_cost_usd``: the total of the "Cost Analysis by Model Size" row with the same model, tokens and
    GPUs where one is on the same GPU (H100), else NaN. Chapter 11 (its audit of the seed's costs)."""
    import pandas as pd

    df = pd.read_csv(SEED_OPTIONS_CSV)
    tables = seed_cost_tables()
    one = df["hours"] * df["price_usd_per_gpu_hour"]
    tokens_per_s = df["gpus"] * df["tokens_per_s_per_gpu"] * df["efficiency"]
    df["hours_from_own_tps"] = df["tokens"] / tokens_per_s / (SECONDS_PER_DAY / HOURS_PER_DAY)
    df["one_gpu_cost_usd"] = one
    df["all_gpus_cost_usd"] = one * df["gpus"]
    df["gpus_billed"] = df["cost_usd"] / one
    same = [tables[(tables["model"] == r.model) & (tables["tokens"] == r.tokens) & (tables["gpus"] == r.gpus)]
            if r.gpu == "H100" else tables.iloc[:0] for r in df.itertuples()]
    df["table_cost_usd"] = [s["total_cost_usd"].iloc[0] if len(s) == 1 else float("nan") for s in same]
    return df


def gpu_days_cost_usd(gpus: int, days: float, price_usd_per_gpu_hour: float) -> float:
    """The bill of ``gpus`` GPUs rented for ``days`` days at ``price_usd_per_gpu_hour``: GPUs x days x 24 x
    price (seed 000's FAQ compares 8 GPUs for 50 days with 1 for 400: the same 400 GPU-days, one bill)."""
    gpus = check_int("gpus", gpus)
    days = check_number("days", days)
    price = check_number("price_usd_per_gpu_hour", price_usd_per_gpu_hour)
    return gpus * days * HOURS_PER_DAY * price
