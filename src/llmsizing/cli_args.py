"""The command line's argument types and output (issue 32: split out of :mod:`llmsizing.cli`): counts and
numbers with their suffixes and separators, ``--stage`` (and the check that it replaces ``--tokens`` and
``--seq``), a mixture of experts' step flags (``--mtp-depth``, ``--capacity-factor``, ``--dispatcher``) and
their readers, a
model by name or config file, and the table, JSON or CSV printer (and the tables of a step's memory and of a
run in stages). Nothing is computed here; every name that lived in :mod:`llmsizing.cli` still imports from
there.
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

from ._validate import MAX_MEANINGFUL


_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


#: A number as the CLI reads it: digits, optionally grouped in threes by commas (``1,000,000``) or underscores
#: (``1_000_000``), an optional fraction and exponent, and (for counts) a suffix. A comma is read as a
#: thousands separator only when exactly three digits follow it: ``1,5T`` (a decimal comma) is refused, not
#: read as 15T.
_NUMBER = re.compile(r"(?P<sign>[+-])?"
                     r"(?P<int>[0-9]{1,3}(?:(?P<sep>[,_])[0-9]{3})(?:(?P=sep)[0-9]{3})*|[0-9]+)"
                     r"(?P<frac>\.[0-9]*)?(?P<exp>e[+-]?[0-9]+)?", re.IGNORECASE)


_NUMBER_SUFFIXED = re.compile(_NUMBER.pattern + r"\s*(?P<suffix>[kmbgt]?)", re.IGNORECASE)


def _refuse(text: str, what: str, example: str) -> argparse.ArgumentTypeError:
    """The error for ``text`` that is not ``what``; a misplaced comma gets its own explanation."""
    if "," in text or "_" in text:
        return argparse.ArgumentTypeError(
            f"{text!r}: a comma (or _) is read only as a thousands separator, followed by exactly three "
            f"digits (1,000,000); for a decimal write a point, e.g. {example}")
    return argparse.ArgumentTypeError(f"not {what}: {text!r} (write e.g. {example})")


def _parse(text, pattern, what: str, example: str) -> re.Match:
    text = str(text).strip()
    m = pattern.fullmatch(text)
    if not m:
        raise _refuse(text, what, example)
    return m


def _finite(value: float, text: str, what: str) -> float:
    if not math.isfinite(value) or value > MAX_MEANINGFUL:
        raise argparse.ArgumentTypeError(f"{text!r} is too large to be {what} (at most {MAX_MEANINGFUL:.3g})")
    return value


def count(text: str) -> float:
    """``"15.6T"``, ``"500B"``, ``"2e12"`` or ``"1,000,000"`` as a number (argparse type for token counts and
    dollars). A comma must be a thousands separator (followed by exactly three digits): ``"1,5T"`` is
    refused."""
    m = _parse(text, _NUMBER_SUFFIXED, "a count", "1T, 1.5T, 500B, 2e12 or 1,000,000")
    number = ((m.group("sign") or "") + m.group("int").replace(",", "").replace("_",
                                                                                "") + (m.group("frac") or "")
              + (m.group("exp") or ""))
    value = _finite(float(number) * _SUFFIX[m.group("suffix").lower()], text, "a count")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a count must be > 0, got {str(text).strip()!r}")
    return value


def integer(minimum: int = 1, maximum: int | None = None):
    """An argparse type: a whole number in [minimum, maximum], digits optionally grouped (``8,192``)."""
    def parse(text: str) -> int:
        m = _parse(text, _NUMBER, "an integer", "8192 or 8,192")
        if m.group("frac") or m.group("exp"):
            raise argparse.ArgumentTypeError(f"not an integer: {text!r} (write e.g. 8192 or 8,192)")
        digits = m.group("int").replace(",", "").replace("_", "")
        if len(digits.lstrip("0")) > 16:
            raise argparse.ArgumentTypeError(f"{text.strip()!r} is too large (at most {MAX_MEANINGFUL:,})")
        value = -int(digits) if m.group("sign") == "-" else int(digits)
        top = MAX_MEANINGFUL if maximum is None else maximum
        if not minimum <= value <= top:
            allowed = (f">= {minimum:,}" if maximum is None and value < minimum
                       else f"from {minimum:,} to {top:,}")
            raise argparse.ArgumentTypeError(f"must be an integer {allowed}, got {value:,}")
        return value
    parse.__name__ = "integer"           # argparse names the type in its own messages
    return parse


def number(minimum: float = 0.0, maximum: float | None = None, *, inclusive: bool = True):
    """An argparse type: a finite decimal number (a point, not a comma) in range: ``minimum <= x`` (``<``
    unless ``inclusive``) and ``x <= maximum``."""
    def parse(text: str) -> float:
        m = _parse(text, _NUMBER, "a number", "0.4 or 1,000.5")
        value = _finite(float(m.group(0).replace(",", "").replace("_", "")), text, "a number")
        low_ok = value >= minimum if inclusive else value > minimum
        if not low_ok or (maximum is not None and value > maximum):
            op = ">=" if inclusive else ">"
            hi = "" if maximum is None else f" and <= {maximum:g}"
            raise argparse.ArgumentTypeError(f"must be a number {op} {minimum:g}{hi}, got {text.strip()!r}")
        return value
    parse.__name__ = "number"
    return parse


#: The form of ``--stage``, for its help and its errors.
STAGE_FORM = "TOKENS:SEQ[:GLOBAL_BATCH], e.g. 15T:8192 or 800B:131072:128"


_RECOMPUTE_LAYERS_HELP = ("with --recompute full: recompute only the first N layers of each model chunk (a "
                          "pipeline stage, or 1/--virtual-stages of one), Megatron-LM's --recompute-method "
                          "block --recompute-num-layers N")


def stage(text: str):
    """``"15T:8192"`` or ``"800B:131072:128"`` (tokens, sequence length, optional global batch in sequences)
    as a :class:`~llmsizing.stages.Stage` (argparse type of ``--stage``)."""
    from .stages import Stage

    parts = str(text).strip().split(":")
    if len(parts) not in (2, 3):
        raise argparse.ArgumentTypeError(f"{text!r} is not {STAGE_FORM}")
    names = ("TOKENS", "SEQ", "GLOBAL_BATCH")
    values = []
    for name, part, kind in zip(names, parts, (count, integer(), integer())):
        try:
            values.append(kind(part))
        except argparse.ArgumentTypeError as e:
            raise argparse.ArgumentTypeError(f"{text!r}: {name} {e} (the form is {STAGE_FORM})") from None
    try:
        return Stage(values[0], values[1], global_batch=values[2] if len(values) == 3 else None)
    except (TypeError, ValueError) as e:
        raise argparse.ArgumentTypeError(f"{text!r}: {e} (the form is {STAGE_FORM})") from None


def _model(name: str, moe: bool = False):
    """A catalogue name, or the path of a Hugging Face config.json (or of the folder that holds one). A
    mixture of experts is refused unless ``moe=True`` (the serve command's models may be one)."""
    from .catalog import resolve_model
    from .model import Model

    if not name.strip():
        raise ValueError("model: got an empty name; give a catalogue name (see `llmsizing models`) or the "
                         "path of a Hugging Face config.json")
    if name.endswith(".json") or "/" in name or _is_dir(name):
        return Model.from_hf_config(name)
    return resolve_model(name, moe=moe)


def _is_dir(name: str) -> bool:
    try:
        return Path(name).is_dir()
    except OSError:                        # a name no file system accepts (too long): not a folder
        return False


#: How ``--json`` writes a figure that is infinite: a queue that never settles (a percentile TTFT at the slow
#: end of the stated range, on a fleet whose slots cannot keep up with a rate given) is ``"unbounded"``, so
#: that a reader can tell it from ``null``, a figure that was not computed (JSON has no infinity; pandas
#: wrote it as ``null``). CSV writes ``inf``, which reads back as a float.
UNBOUNDED = "unbounded"


def _json_records(df) -> str:
    """``df`` as JSON records, each infinite number written as :data:`UNBOUNDED` (``"-unbounded"`` below
    zero) and each NaN as ``null``."""
    import math

    def cell(x):
        if isinstance(x, float) and math.isinf(x):
            return UNBOUNDED if x > 0 else "-" + UNBOUNDED
        return x

    return df.reset_index().astype(object).map(cell).to_json(orient="records", indent=2)


def _emit(df, args, *, title: str = "") -> None:
    if args.json:
        print(_json_records(df))
    elif args.csv:
        print(df.to_csv(), end="")
    else:
        if title:
            print(title)
        print(df.to_string())


def _fmt_frame(df, gib_cols=(), int_cols=()):
    out = df.copy()
    for c in gib_cols:
        out[c] = out[c].map(lambda x: f"{x / 2**30:,.2f}")
    for c in int_cols:
        out[c] = out[c].map(lambda x: f"{x:,.0f}")
    return out


#: How the memory table names the temporaries alive at the peak, by the phase that holds it
#: (:func:`~llmsizing.memory.step_phases`).
_TEMPORARIES = {"forward": "temporaries (ZeRO-3 gathered unit)", "loss backward": "loss temporaries",
                "backward": "backward temporaries", "optimizer step": "optimizer temporaries"}


def memory_frame(t):
    """What is alive at the peak of the step (:attr:`~llmsizing.memory.TrainingMemory.phase_parts` of its
    :attr:`~llmsizing.memory.TrainingMemory.peak_phase`), then the peak, the overhead and the total: the rows
    above ``peak`` add up to it (bytes, GiB, bytes per parameter)."""
    from .memory import _frame

    phase = t.peak_phase
    parts = t.phase_parts[phase]
    rows = {"weights": parts["weights"], "gradients": parts["gradients"],
            "optimizer states": parts["optimizer states"], "activations": parts["activations"]}
    if parts["autocast copies"]:
        rows["autocast copies"] = parts["autocast copies"]
    rows[_TEMPORARIES[phase]] = parts["temporaries"]
    rows.update({"peak": t.peak_bytes, "overhead": t.overhead_bytes, "total": t.total_bytes})
    return _frame(rows, t.states.n_params)


def _price_text(r) -> str:
    """A result's price as the command line prints it: ``"$4.99/GPU-hour"``, marked when it is an estimate
    (:func:`~llmsizing.catalog.price_note`; issue 38)."""
    from .catalog import price_note

    return f"${r.price_usd_per_gpu_hour:.2f}/GPU-hour{price_note(r.price_kind)}"


def _estimate_mark(kind: str) -> str:
    """What a table cell adds after a price or cost computed at an estimated price, ``" (estimate)"``, or at a
    price a third-party survey reports, ``" (reported)"``."""
    return {"estimate": " (estimate)", "reported": " (reported)"}.get(kind, "")


def _add_output(p) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="print JSON records (for scripts; a queue that never "
                   "settles is \"unbounded\", a figure not computed null)")
    g.add_argument("--csv", action="store_true", help="print CSV (for scripts)")


def add_moe_step_flags(p) -> None:
    """``--mtp-depth N`` and ``--capacity-factor C`` (``memory``, ``time`` and ``cost``): a mixture of
    experts' multi-token-prediction modules, DeepSeek-V3's one (:mod:`llmsizing.mtp`), and its token dropping
    (``training_memory``'s, ``training_time``'s, ``cost_by_gpu``'s and, through :func:`add_plan_moe_flags`,
    ``plan``'s ``mtp_depth`` and ``capacity_factor``: :func:`moe_step_options`)."""
    p.add_argument("--mtp-depth", type=integer(0), default=0, metavar="N",
                   help="multi-token-prediction modules of a mixture of experts on its last pipeline stage "
                        "(DeepSeek-V3: 1; default 0)")
    p.add_argument("--capacity-factor", type=number(1, 64), default=None, metavar="C",
                   help="token dropping at this expert capacity (1 to 64; default: dropless)")


def moe_step_options(args, model=None) -> dict:
    """``mtp_depth=`` and ``capacity_factor=`` of :func:`add_moe_step_flags`' flags, each only where given
    (an old call's keywords unchanged). With ``model``, checked for it as the library checks them
    (:func:`~llmsizing.job.check_moe_options`), an error naming the flags given (``--mtp-depth 9: ...``)."""
    cf, depth = getattr(args, "capacity_factor", None), getattr(args, "mtp_depth", 0)
    out = {**({} if cf is None else {"capacity_factor": cf}), **({"mtp_depth": depth} if depth else {})}
    if model is not None and out:
        from .job import check_moe_options

        try:
            check_moe_options(model, depth, cf)
        except (TypeError, ValueError) as e:
            raise type(e)(f"{moe_step_flags_text(out)}: {e}") from None
    return out


def moe_step_flags_text(options: dict) -> str:
    """:func:`moe_step_options`' keywords as the flags that gave them: ``"--mtp-depth 1 --capacity-factor
    1.25"``."""
    return " ".join(f"--{k.replace('_', '-')} {options[k]:g}" for k in ("mtp_depth", "capacity_factor")
                    if k in options)


def add_dispatcher_flag(p) -> None:
    """``--dispatcher NAME`` (``plan``, ``cost`` and ``time``): a mixture of experts' token dispatcher, one of
    :data:`~llmsizing.all_to_all.DISPATCHERS` (the choices and their help read from that table), as
    ``plan``'s, ``cost_by_gpu``'s and ``training_time``'s ``dispatcher`` (:func:`dispatcher_option`,
    :func:`moe_dispatcher_option`; issue 35)."""
    from .all_to_all import DEFAULT_DISPATCHER, DISPATCHERS

    sends = "; ".join(f"{k}: a token sent once per GPU and once per node" if d.once_per_gpu else
                      f"{k}: one copy per routed expert" for k, d in DISPATCHERS.items())
    p.add_argument("--dispatcher", choices=list(DISPATCHERS), default=None,
                   help=f"a mixture of experts' token dispatcher ({sends}; default {DEFAULT_DISPATCHER})")


def dispatcher_option(args) -> dict:
    """``dispatcher=`` of :func:`add_dispatcher_flag`'s flag, only where given (an old call's keywords
    unchanged)."""
    d = getattr(args, "dispatcher", None)
    return {} if d is None else {"dispatcher": d}


#: The flags that price a run at an MFU rather than on its MoE step, and how they put it (``--dispatcher``
#: is refused with them: :func:`moe_dispatcher_option`).
_AT_AN_MFU = {"mfu": "prices the run at one MFU", "mfu_range": "prices the run on an MFU range"}


def moe_dispatcher_option(args, model) -> dict:
    """:func:`dispatcher_option` for a command that prices a run on its MoE step (``plan``, ``cost``,
    ``time``), refused where nothing would use it: with ``--mfu`` (or ``--mfu-range``, where the command has
    it), which price the run at an MFU, or on a dense ``model``, which has no all-to-all to dispatch (ui28: a
    dispatcher named but unused would still be echoed in the title; lows29: ``plan`` ignored it)."""
    out = dispatcher_option(args)
    if not out:
        return out
    for key, how in _AT_AN_MFU.items():
        if getattr(args, key, None) is not None:
            flag = "--" + key.replace("_", "-")
            raise ValueError(f"--dispatcher {args.dispatcher}: not with {flag} (a dispatcher is priced on a "
                             f"mixture of experts' MoE step on its layout; {flag} {how}): drop one or the "
                             "other")
    if not model.is_moe:
        raise ValueError(f"--dispatcher {args.dispatcher}: {model.name} is dense (no routed experts, so no "
                         "all-to-all to dispatch): drop --dispatcher, or give a mixture of experts")
    return out


def add_step_recipe_flags(p, *, ep_overlap: bool = False, dualpipe: bool = True) -> None:
    """``--schedule``, ``--comm-sms`` and ``--load-skew`` (``time``, ``cost`` and ``plan``; with
    ``ep_overlap``, ``time`` and ``cost``, also ``--ep-overlap``): the step recipe's pipeline schedule, the
    SMs its communication kernels keep and a measured load skew, :func:`~llmsizing.layouts.step_time`'s
    ``schedule``, ``comm_sms`` and ``load_skew``, as
    :func:`~llmsizing.time_cost.training_time`, :func:`~llmsizing.time_cost.cost_by_gpu` and
    :func:`~llmsizing.planner.plan` take them (moeapi42; :func:`step_recipe_option`). These commands search
    or choose the layout, and every one offers DualPipe: the planner searches it (dual48) and so do the
    fewest GPUs through which ``time`` and ``cost`` choose theirs (dmin49). ``dualpipe``: kept for old
    calls (``False`` offered 1f1b and zb1p only)."""
    if dualpipe:
        p.add_argument("--schedule", choices=["1f1b", "zb1p", "dualpipe"], default=None,
                       help="the pipeline schedule: 1f1b (default), zb1p (zero bubble) or dualpipe "
                            "(DeepSeek's: even pp, an even number of micro-batches >= 2 pp, two stages a "
                            "rank; searched by plan and by the fewest GPUs cost and time choose from)")
    else:
        p.add_argument("--schedule", choices=["1f1b", "zb1p"], default=None,
                       help="the pipeline schedule: 1f1b (default) or zb1p (zero bubble)")
    p.add_argument("--comm-sms", type=integer(0), default=None, metavar="N",
                   help="SMs per GPU kept by communication kernels, slowing the compute (DeepSeek-V3: 20 "
                        "of the H800's 132; default 0)")
    p.add_argument("--load-skew", type=number(1, 64), default=None, metavar="X",
                   help="a mixture of experts' load skew, the slowest expert rank's routed work over the "
                        "mean (1 to 64; default: measured, by routing and ep; not with --capacity-factor)")
    if ep_overlap:
        p.add_argument("--ep-overlap", type=number(0, 1), default=None,
                       help="share of a mixture of experts' all-to-all hidden behind compute (DualPipe's: 1; "
                            "default 0)")


def add_accounted_split_flag(p) -> None:
    """``--accounted-split`` (``plan``, ``cost`` and ``time``; cost49): a mixture of experts' accounted
    pipeline splits searched too, ``accounted_split=True`` of :func:`~llmsizing.planner.plan`,
    :func:`~llmsizing.time_cost.cost_by_gpu` and :func:`~llmsizing.time_cost.training_time`."""
    p.add_argument("--accounted-split", action="store_true",
                   help="a mixture of experts: also search Megatron-LM's accounted pipeline splits (the "
                        "embedding and the loss a layer's place each; default: the even splits only)")


def add_cp_search_flags(p) -> None:
    """``--cp`` (repeated) and ``--cp-comm`` (``plan``, ``cost`` and ``time``): the context-parallel degrees
    searched and their K/V exchange, ``cp_degrees=`` and ``cp_comm=`` of :func:`~llmsizing.planner.plan`,
    :func:`~llmsizing.fewest_gpus.min_gpus` and the calls built on it (:func:`cp_search_option`)."""
    from .parallel import CP_COMMS

    p.add_argument("--cp", type=integer(), action="append",
                   help="a context-parallel degree to search; repeat for several (default: 1 below 16K "
                        "tokens, powers of two up to 32 from 16K)")
    p.add_argument("--cp-comm", choices=list(CP_COMMS), default="p2p",
                   help="how context parallelism exchanges K and V: a ring (p2p, default) or an all-gather")


def cp_search_option(args) -> dict:
    """``cp_degrees=`` and ``cp_comm=`` of :func:`add_cp_search_flags`' flags, each only where given (an old
    call's keywords unchanged)."""
    return {**({} if args.cp is None else {"cp_degrees": tuple(args.cp)}),
            **({} if args.cp_comm == "p2p" else {"cp_comm": args.cp_comm})}


def step_recipe_option(args, *, ep_overlap: bool = False) -> dict:
    """``schedule=``, ``comm_sms=``, ``load_skew=`` (and with ``ep_overlap``, ``ep_overlap=``) of
    :func:`add_step_recipe_flags`' flags, each only where given (an old call's keywords unchanged)."""
    keys = ("schedule", "comm_sms", "load_skew") + (("ep_overlap",) if ep_overlap else ())
    return {k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}


def add_plan_moe_flags(p) -> None:
    """``llmsizing plan``'s mixture-of-experts flags: ``--ep``, ``--ep-overlap``,
    ``--shared-expert-overlap``, ``--mtp-depth``, ``--capacity-factor`` and ``--dispatcher``
    (:func:`~llmsizing.planner.plan`'s ``ep_degrees``, ``ep_overlap``, ``shared_expert_overlap``,
    ``mtp_depth``, ``capacity_factor`` and ``dispatcher``: :func:`add_moe_step_flags`,
    :func:`add_dispatcher_flag`)."""
    add_moe_step_flags(p)
    add_dispatcher_flag(p)
    p.add_argument("--ep", type=integer(), action="append",
                   help="an expert-parallel degree to search for a mixture of experts; repeat for several "
                        "(default: every divisor of its routed experts)")
    p.add_argument("--ep-overlap", type=number(0, 1), default=None,
                   help="share of the all-to-all hidden behind compute (DualPipe's; default 0)")
    p.add_argument("--shared-expert-overlap", action="store_true",
                   help="run the shared experts' GEMMs beside each all-to-all, as DeepSeek-V2 and "
                        "Megatron-Core's --moe-shared-expert-overlap do (default: after the routed experts)")


def _check_single_or_stages(args, *, single: tuple) -> None:
    """``--stage`` replaces ``single`` (e.g. ``--tokens``/``--seq``); refuse a mix, or neither."""
    flags = {f: getattr(args, f.lstrip("-").replace("-", "_")) for f in single}
    if args.stage:
        given = [f for f, v in flags.items() if v is not None]
        if given:
            raise ValueError(f"give either --stage {STAGE_FORM} (repeated, one per stage) or "
                             f"{' and '.join(single)}, not both: got {', '.join(given)} with --stage")
    else:
        missing = [f for f, v in flags.items() if v is None]
        if missing:
            raise ValueError(f"the following arguments are required: {', '.join(missing)} "
                             f"(or one --stage {STAGE_FORM} per stage)")


def _staged_output(r, args, title: str) -> None:
    """A staged run (:class:`~llmsizing.stages.StagedTrainingTime`): one row per stage and the total."""
    df = r.to_frame()
    if args.json or args.csv:
        _emit(df, args)
        return
    out = df[["tokens", "seq", "n_gpus", "layout", "mfu_source"]].copy()
    out["tokens"] = out["tokens"].map("{:.3g}".format)
    out["seq"] = out["seq"].map(lambda x: "" if x != x or x is None else f"{x:,.0f}")
    out["n_gpus"] = out["n_gpus"].map("{:,.0f}".format)
    out["MFU"] = df["mfu"].map("{:.0%}".format)
    out["days"] = [f"{d:,.1f} ({lo:,.1f}-{hi:,.1f})" for d, lo, hi in zip(df["days"], df["days_low"],
                                                                          df["days_high"])]
    out["GPU-hours"] = df["gpu_hours"].map("{:,.0f}".format)
    out["cost"] = df["cost_usd"].map("${:,.0f}".format)
    _emit(out, args, title=title)
    for w in r.warnings:
        print(f"warning: {w}")


def plan_table(df, layers: int):
    """The table ``llmsizing plan`` prints of a :func:`~llmsizing.planner.plan` frame ``df`` (a model of
    ``layers`` layers): the layout (``vp``: interleaved chunks per pipeline stage, issue 34), the
    recomputation (``full (N layers)`` where fewer than all are rerun, per model chunk with ``vp > 1``),
    memory, step, MFU, days with their 80% range, cost, and with a deadline whether each plan meets it
    (``yes`` at the slow end of the range, ``likely`` by its point estimate:
    :data:`~llmsizing.planner.DEADLINE_RULES`), with a budget whether each stays within it (the same)."""
    out = df[["gpu", "n_gpus", "tp", "cp", "pp"] + (["ep"] if "ep" in df else [])
             + ["virtual_stages", "dp", "zero", "micro_batch", "grad_accum", "recompute"]].copy()
    out = out.rename(columns={"virtual_stages": "vp"})
    vp = df["virtual_stages"]
    part = df["recompute_layers"].notna() & (df["recompute_layers"] < layers // (df["pp"] * vp))
    out.loc[part, "recompute"] = [f"full ({n} layers{' per chunk' if v > 1 else ''})"
                                  for n, v in zip(df.loc[part, "recompute_layers"], vp[part])]
    out["GiB/GPU"] = (df["memory_per_gpu_bytes"] / 2**30).map("{:.1f}".format)
    out["step s"] = df["step_time_s"].map("{:.2f}".format)
    out["MFU"] = df["mfu"].map("{:.0%}".format)
    out["days"] = [f"{d:,.1f} ({lo:,.1f}-{hi:,.1f})" for d, lo, hi in zip(df["days"], df["days_low"],
                                                                          df["days_high"])]
    out["cost"] = df["cost_usd"].map("${:,.0f}".format) + df["price_kind"].map(_estimate_mark)
    if "meets_deadline" in df:
        out["deadline"] = df["meets_deadline"]
    if "within_budget" in df:
        out["budget"] = df["within_budget"]
    return out


def __getattr__(name: str):
    """``cli_args.DEFAULT_DISPATCHER``, moved to :data:`llmsizing.all_to_all.DEFAULT_DISPATCHER` (fix28b):
    the old name still works, with a DeprecationWarning."""
    if name == "DEFAULT_DISPATCHER":
        import warnings

        from .all_to_all import DEFAULT_DISPATCHER

        warnings.warn("llmsizing.cli_args.DEFAULT_DISPATCHER moved to "
                      "llmsizing.all_to_all.DEFAULT_DISPATCHER",
                      DeprecationWarning, stacklevel=2)
        return DEFAULT_DISPATCHER
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def grad_buffer_argv(argv) -> list[str]:
    """``argv`` with a bare ``--grad-buffer`` moved past the words after it that are neither an option nor a
    KIND (:func:`add_grad_buffer_flag`), so that the flag given alone before a positional argument
    (``memory --grad-buffer llama-3-8b ...``, a valid call before the flag took a KIND) still means ``True``
    instead of a bad KIND (review29a). A word that starts like a KIND (``ddp-``) stays, for argparse's
    message; nothing after ``--`` moves."""
    from .footprint import GRAD_BUFFERS           # (a lower layer)

    kinds = {k for k in GRAD_BUFFERS if isinstance(k, str)}
    out = [str(a) for a in argv]
    for i in range(len(out) - 1):
        if out[i] == "--":
            break
        nxt = out[i + 1]
        if out[i] == "--grad-buffer" and not nxt.startswith("-") and nxt not in kinds \
                and not nxt.startswith("ddp-"):
            out[i], out[i + 1] = nxt, out[i]
    return out


def add_grad_buffer_flag(p, text: str) -> None:
    """``--grad-buffer [KIND]`` on the parser ``p``: alone ``True``, or one of the library's kinds
    (:data:`~llmsizing.footprint.GRAD_BUFFERS`)."""
    from .footprint import GRAD_BUFFERS           # (a lower layer)

    kinds = [k for k in GRAD_BUFFERS if isinstance(k, str)]
    p.add_argument("--grad-buffer", nargs="?", const=True, default=False, choices=kinds, metavar="KIND",
                   help=text + f"; KIND {' or '.join(kinds)}: PyTorch DDP with gradient_as_bucket_view "
                        "True accumulating under no_sync, or False (its default), whose .grad tensors "
                        "stay apart from the buckets")


#: The flags of :func:`add_code_option_flags` by :func:`~llmsizing.memory.training_memory`'s keyword.
CODE_OPTION_FLAGS = {"loss": "--loss", "tp_vocab": "--tp-vocab", "no_sync_grads": "--no-sync-grads"}


def add_code_option_flags(p) -> None:
    """``--loss``, ``--tp-vocab`` and ``--no-sync-grads`` (``memory``; issue 38): what a run's own code does,
    :func:`~llmsizing.memory.training_memory`'s ``loss``, ``tp_vocab`` and ``no_sync_grads``, with the
    library's choices (:data:`~llmsizing.footprint.LOSS_KINDS`, :data:`~llmsizing.footprint.TP_VOCABS`,
    :data:`~llmsizing.footprint.NO_SYNC_GRADS`) and defaults (:func:`code_options`)."""
    from .footprint import LOSS_KINDS, NO_SYNC_GRADS, TP_VOCABS       # (a lower layer)

    p.add_argument("--loss", choices=list(LOSS_KINDS), default="fp32",
                   help="how the run's code computes the cross-entropy, bytes per logit kept from the "
                        "forward + allocated by its backward: fp32 (default), F.cross_entropy on fp32 "
                        "logits, 4 + 8; bf16, on the bf16 logits as they are (KempnerForge), 4 + 4; "
                        "compiled, torchtitan's loss compiled with the model (its PR #1033), 2 + 2")
    p.add_argument("--tp-vocab", choices=list(TP_VOCABS), default="split",
                   help="split (default): the embedding, logits and loss split over --tp (Megatron-LM's "
                        "and torchtitan's vocabulary parallelism); replicated: whole on every "
                        "tensor-parallel rank (KempnerForge's apply_tensor_parallel; a dense model with an "
                        "untied head)")
    p.add_argument("--no-sync-grads", choices=list(NO_SYNC_GRADS), default="none",
                   help="FSDP2's gradients with the sync off between micro-batches "
                        "(set_requires_gradient_sync(False)): kept unsharded in its reduce dtype, fp32 or "
                        "bf16, from the second micro-batch to the last one's backward (default none: "
                        "reduced after each micro-batch; not with --pp > 1 or --grad-buffer)")


def code_options(args, model, parallel) -> dict:
    """``loss=``, ``tp_vocab=`` and ``no_sync_grads=`` of :func:`add_code_option_flags`' flags, each only
    where not its default (an old call's keywords unchanged), checked for ``model`` and ``parallel``
    (``None``: one GPU) as the library checks them (:func:`~llmsizing.footprint.check_code_options`), an
    error naming the flags given."""
    from .footprint import check_code_options
    from .job import CODE_OPTION_DEFAULTS
    from .parallel import SINGLE_GPU

    given = {k: getattr(args, k) for k in CODE_OPTION_FLAGS}
    try:
        check_code_options(model, SINGLE_GPU if parallel is None else parallel, **given,
                           grad_buffer=getattr(args, "grad_buffer", False))
    except ValueError as e:
        named = [k for k, v in given.items() if v != CODE_OPTION_DEFAULTS[k]]
        named = [k for k in named if f"{k}=" in str(e)] or named          # (the flag the error is about)
        flags = " ".join(f"{CODE_OPTION_FLAGS[k]} {given[k]}" for k in named)
        raise ValueError(f"{flags}: {e}") from None
    return {k: v for k, v in given.items() if v != CODE_OPTION_DEFAULTS[k]}
