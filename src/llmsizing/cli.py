"""The command line: ``python -m llmsizing`` (or the ``llmsizing`` console script).

Every subcommand calls the same functions the book does; nothing is computed here. Errors in the input are
printed as one line naming the parameter, with exit code 2 (argparse's convention for usage errors).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

EXAMPLES = """examples:
  llmsizing models
  llmsizing gpus --csv
  llmsizing memory llama-3-8b --batch 1 --seq 8192 --gpu "H100 SXM"
  llmsizing memory llama-3-70b --batch 1 --seq 4096 --tp 8 --pp 2 --dp 4 --zero 1 --grad-accum 8
  llmsizing memory path/to/config.json --batch 2 --seq 2048 --json
  llmsizing time llama-3-70b --tokens 1T --gpu "H100 SXM" --gpus 1024 --seq 8192
  llmsizing time llama-3.1-405b --tokens 15.6T --gpu "H100 SXM" --gpus 16384 --seq 8192 --mfu 0.38
  llmsizing plan llama-3-70b --tokens 1T --seq 8192 --global-batch 1024 --gpu "H100 SXM" --gpu B200
  llmsizing plan llama-3-70b --tokens 1T --seq 8192 --global-batch 1024 --deadline-days 30 --budget 2M --all
"""

_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def count(text: str) -> float:
    """``"15.6T"``, ``"500B"``, ``"2e12"`` or ``"1,000,000"`` as a number (argparse type for token counts)."""
    m = re.fullmatch(r"\s*([0-9][0-9_,]*\.?[0-9]*(?:e[+-]?[0-9]+)?)\s*([kmbgt]?)\s*", str(text), re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"not a count: {text!r} (write e.g. 1T, 500B, 2e12 or 1000000)")
    return float(m.group(1).replace(",", "").replace("_", "")) * _SUFFIX[m.group(2).lower()]


def _model(name: str):
    from .catalog import resolve_model
    from .model import Model

    if name.endswith(".json") or Path(name).is_dir():
        return Model.from_hf_config(name)
    return resolve_model(name)


def _emit(df, args, *, title: str = "") -> None:
    if args.json:
        print(df.reset_index().to_json(orient="records", indent=2))
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


def cmd_models(args) -> None:
    from .catalog import model_table

    df = model_table()[["layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "n_params", "source"]]
    _emit(df if (args.json or args.csv) else _fmt_frame(df, int_cols=["n_params"]), args)


def cmd_gpus(args) -> None:
    from .catalog import gpu_table

    df = gpu_table()[["memory_gib", "memory_bandwidth_gbps", "bf16_dense_tflops", "fp8_dense_tflops", "link",
                      "link_bandwidth_gbps", "link_direction", "price_usd_per_gpu_hour", "as_of"]]
    _emit(df if (args.json or args.csv) else df.round(2), args)


def _parallel(args):
    from .parallel import Parallel

    if (args.tp, args.pp, args.dp, args.zero, args.sp, args.virtual_stages, args.offload) == (1, 1, 1, 0, False, 1,
                                                                                             "none"):
        return None
    return Parallel(tp=args.tp, pp=args.pp, dp=args.dp, zero=args.zero, sp=args.sp,
                    virtual_stages=args.virtual_stages, offload=args.offload)


def cmd_memory(args) -> None:
    from .catalog import get_gpu
    from .memory import training_memory

    t = training_memory(_model(args.model), batch=args.batch, seq=args.seq, precision=args.precision,
                        optimizer=args.optimizer, attention=args.attention, recompute=args.recompute,
                        grad_accum=args.grad_accum, parallel=_parallel(args), stack=args.stack)
    df = t.to_frame()
    if args.json or args.csv:
        _emit(df, args)
        return
    title = f"{t.states.n_params:,} parameters; per GPU (the most loaded one), batch {args.batch} x seq {args.seq}"
    out = df[["GiB", "bytes/param"]].copy()
    out["GiB"] = out["GiB"].map("{:,.2f}".format)
    out["bytes/param"] = out["bytes/param"].map("{:.3f}".format)
    _emit(out, args, title=title)
    if args.gpu:
        g = get_gpu(args.gpu)
        verdict = "fits" if t.total_bytes <= g.memory_bytes else "does NOT fit"
        print(f"\n{t.total_bytes / 2**30:,.1f} GiB {verdict} on one {g.label}")


def cmd_time(args) -> None:
    from .time_cost import training_time

    mfu_range = tuple(args.mfu_range) if args.mfu_range else None
    t = training_time(_model(args.model), tokens=args.tokens, gpu=args.gpu, n_gpus=args.gpus, seq=args.seq,
                      mfu=args.mfu, mfu_range=mfu_range, price_usd_per_gpu_hour=args.price, dtype=args.dtype)
    df = t.to_frame()
    if args.json or args.csv:
        _emit(df, args)
        return
    out = df.copy()
    out["mfu"] = out["mfu"].map("{:.0%}".format)
    out["tokens_per_s_per_gpu"] = out["tokens_per_s_per_gpu"].map("{:,.0f}".format)
    out["days"] = out["days"].map("{:,.1f}".format)
    out["gpu_hours"] = out["gpu_hours"].map("{:,.0f}".format)
    out["cost_usd"] = out["cost_usd"].map("${:,.0f}".format)
    title = (f"{t.model}: {t.tokens:.3g} tokens of {t.seq:,} on {t.n_gpus:,} x {t.gpu} "
             f"at ${t.price_usd_per_gpu_hour:.2f}/GPU-hour; {t.total_flops:.3g} model FLOPs")
    _emit(out, args, title=title)


def cmd_plan(args) -> None:
    from .planner import plan

    df = plan(_model(args.model), tokens=args.tokens, gpus=tuple(args.gpu or ("H100 SXM",)), seq=args.seq,
              global_batch=args.global_batch, max_gpus=args.max_gpus, deadline_days=args.deadline_days,
              budget_usd=args.budget, overlap=args.overlap, compute_efficiency=args.compute_efficiency)
    if not args.all:
        df = df[df["pareto"]]
    df = df.head(args.top).reset_index(drop=True)
    if args.json or args.csv:
        _emit(df, args)
        return
    out = df[["gpu", "n_gpus", "tp", "pp", "dp", "zero", "micro_batch", "grad_accum", "recompute"]].copy()
    out["GiB/GPU"] = (df["memory_per_gpu_bytes"] / 2**30).map("{:.1f}".format)
    out["step s"] = df["step_time_s"].map("{:.2f}".format)
    out["MFU"] = df["mfu"].map("{:.0%}".format)
    out["days"] = [f"{d:,.1f} ({lo:,.1f}-{hi:,.1f})" for d, lo, hi in zip(df["days"], df["days_low"], df["days_high"])]
    out["cost"] = df["cost_usd"].map("${:,.0f}".format)
    which = "plans" if args.all else "plans on the time-vs-cost front"
    _emit(out, args, title=f"{len(out)} {which}, cheapest first:")


def _add_output(p) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="print JSON records (for scripts)")
    g.add_argument("--csv", action="store_true", help="print CSV (for scripts)")


def _command(sub, name: str, help: str, description: str) -> argparse.ArgumentParser:
    """A subcommand with its description and the shared examples."""
    return sub.add_parser(name, help=help, description=description, epilog=EXAMPLES,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def parser() -> argparse.ArgumentParser:
    from .activations import ATTENTION, RECOMPUTE, STACKS
    from .parallel import OFFLOADS
    from .planner import COMPUTE_EFFICIENCY, OVERLAP
    from .precision import OPTIMIZERS, RECIPES
    from .time_cost import MFU_DEFAULT, MFU_HIGH, MFU_LOW

    ap = argparse.ArgumentParser(prog="llmsizing", description="How many GPUs? Memory, time and cost of training "
                                 "a language model, from the library behind the book.", epilog=EXAMPLES,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True, metavar="{models,gpus,memory,time,plan}")

    p = sub.add_parser("models", help="the model catalogue")
    _add_output(p)
    p.set_defaults(func=cmd_models)
    p = sub.add_parser("gpus", help="the GPU catalogue (with prices and their dates)")
    _add_output(p)
    p.set_defaults(func=cmd_gpus)

    p = _command(sub, "memory", "per-GPU memory of one training step",
                 "Per-GPU memory of one training step (training_memory), the most loaded GPU of a parallel layout.")
    p.add_argument("model", help="a catalogue name (see `llmsizing models`) or a Hugging Face config.json")
    p.add_argument("--batch", type=int, required=True, help="micro-batch, sequences per GPU")
    p.add_argument("--seq", type=int, required=True, help="sequence length, tokens")
    p.add_argument("--precision", default="bf16-mixed", choices=list(RECIPES))
    p.add_argument("--optimizer", default="adamw", choices=list(OPTIMIZERS))
    p.add_argument("--attention", default="flash", choices=list(ATTENTION))
    p.add_argument("--recompute", default="none", choices=list(RECOMPUTE))
    p.add_argument("--stack", default="fused", choices=list(STACKS))
    p.add_argument("--grad-accum", type=int, default=1, help="gradient-accumulation steps (= pipeline micro-batches)")
    for f in ("tp", "pp", "dp"):
        p.add_argument(f"--{f}", type=int, default=1, help=f"{f} degree (default 1)")
    p.add_argument("--zero", type=int, default=0, help="ZeRO stage 0-3 over the dp group")
    p.add_argument("--sp", action="store_true", help="sequence parallelism (needs --tp > 1)")
    p.add_argument("--virtual-stages", type=int, default=1, help="interleaved 1F1B model chunks per pipeline rank")
    p.add_argument("--offload", default="none", choices=list(OFFLOADS))
    p.add_argument("--gpu", help="say whether the total fits on this catalogue GPU")
    _add_output(p)
    p.set_defaults(func=cmd_memory)

    p = _command(sub, "time", "days, GPU-hours and cost of a training run",
                 "Days, GPU-hours and cost of a run (training_time), with the range the MFU range implies.")
    p.add_argument("model", help="a catalogue name or a Hugging Face config.json")
    p.add_argument("--tokens", type=count, required=True, help="training tokens, e.g. 1T, 500B, 2e12")
    p.add_argument("--gpu", required=True, help="a catalogue GPU (see `llmsizing gpus`)")
    p.add_argument("--gpus", type=int, required=True, help="number of GPUs")
    p.add_argument("--seq", type=int, required=True, help="sequence length, tokens")
    p.add_argument("--mfu", type=float, help=f"model FLOPs utilisation (default: calibrated {MFU_DEFAULT:.2f}, "
                                             f"range {MFU_LOW:.2f}-{MFU_HIGH:.2f})")
    p.add_argument("--mfu-range", type=float, nargs=2, metavar=("LOW", "HIGH"), help="the MFU's range")
    p.add_argument("--price", type=float, help="USD per GPU-hour (default: the catalogue's on-demand price)")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp8"], help="the peak the MFU is measured against")
    _add_output(p)
    p.set_defaults(func=cmd_time)

    p = _command(sub, "plan", "ranked plans: GPUs, layout, days and cost",
                 "Every layout that fits and reaches the global batch (plan), with step time, MFU, days and cost; "
                 "by default only the time-vs-cost front.")
    p.add_argument("model", help="a catalogue name or a Hugging Face config.json")
    p.add_argument("--tokens", type=count, required=True, help="training tokens, e.g. 1T")
    p.add_argument("--seq", type=int, required=True, help="sequence length, tokens")
    p.add_argument("--global-batch", type=int, required=True, help="sequences per optimizer step")
    p.add_argument("--gpu", action="append", help="a catalogue GPU; repeat for several (default: H100 SXM)")
    p.add_argument("--max-gpus", type=int, help="largest GPU count to consider")
    p.add_argument("--deadline-days", type=float, help="drop plans slower than this")
    p.add_argument("--budget", type=count, help="drop plans dearer than this many USD, e.g. 2M")
    p.add_argument("--overlap", type=float, default=OVERLAP, help="share of communication hidden behind compute")
    p.add_argument("--compute-efficiency", type=float, default=COMPUTE_EFFICIENCY,
                   help="share of the peak while computing")
    p.add_argument("--all", action="store_true", help="every plan, not only the time-vs-cost front")
    p.add_argument("--top", type=int, default=20, help="print at most this many rows (default 20)")
    _add_output(p)
    p.set_defaults(func=cmd_plan)
    return ap


def main(argv=None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    try:
        args.func(args)
    except (ValueError, TypeError, FileNotFoundError) as e:
        print(f"llmsizing {args.command}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:            # `llmsizing gpus | head`: the reader left; not an error of ours
        sys.stderr.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
