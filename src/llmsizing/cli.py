"""The command line: ``python -m llmsizing`` (or the ``llmsizing`` console script).

Every subcommand calls the same functions the book does; nothing is computed here. Errors in the input are
printed as one line naming the parameter, with exit code 2 (argparse's convention for usage errors).
"""

from __future__ import annotations

import argparse
import sys

# Argument types, the model reader and the printer live in cli_args, the serving and fine-tuning commands in
# cli_tune (issue 32), the plan and cost commands in cli_plan; every name they had here still imports from
# here (but cli_plan's two private helpers, which nothing imported from here).
from .cli_args import (_NUMBER, _NUMBER_SUFFIXED, _RECOMPUTE_LAYERS_HELP, _SUFFIX, _TEMPORARIES,  # noqa: F401
                       STAGE_FORM, UNBOUNDED, _add_output, _check_single_or_stages, _emit, _finite,
                       _fmt_frame, _is_dir, _model, _parse, _refuse, _estimate_mark, _price_text,
                       _staged_output,
                       CODE_OPTION_FLAGS, add_code_option_flags, code_options,
                       add_grad_buffer_flag, add_plan_moe_flags, count, grad_buffer_argv, integer,
                       memory_frame, number, plan_table, stage, add_dispatcher_flag, add_moe_step_flags,
                       moe_dispatcher_option, moe_step_options, add_step_recipe_flags, step_recipe_option,
                       add_accounted_split_flag, add_cp_search_flags, cp_search_option)
from .cli_plan import add_plan_commands, cmd_cost, cmd_plan  # noqa: F401
from .cli_tune import add_rl_command, cmd_finetune, cmd_serve

EXAMPLES = """examples:
  llmsizing models
  llmsizing gpus --csv
  llmsizing memory llama-3-8b --batch 1 --seq 8192 --gpu "H100 SXM"
  llmsizing memory llama-3-70b --batch 1 --seq 4096 --tp 8 --pp 2 --dp 4 --zero 1 --grad-accum 8
  llmsizing memory mixtral-8x7b --batch 1 --seq 4096 --dp 16 --ep 8 --zero 2 --recompute full --gpu "H100 SXM"
  llmsizing memory path/to/config.json --batch 2 --seq 2048 --json
  llmsizing memory llama-3-70b --batch 1 --seq 8192 --tp 8 --dp 8 --zero 1 --grad-buffer \
      --precision bf16-mixed-fp32-grads
  llmsizing memory llama-3-8b --batch 2 --seq 8192 --loss compiled   # torchtitan's compiled loss
  llmsizing time llama-3-70b --tokens 1T --gpu "H100 SXM" --gpus 1024 --seq 8192
  llmsizing time llama-3.1-405b --tokens 15.6T --gpu "H100 SXM" --gpus 16384 --seq 8192 --mfu 0.38
  llmsizing time llama-3.1-405b --stage 14.8T:8192 --stage 800B:131072 --gpu "H100 SXM" --gpus 16384 \
      --whole-run
  llmsizing cost mixtral-8x7b --tokens 1T --seq 4096 --gpu "H100 SXM" --gpu B200 --gpu MI300X
  llmsizing plan llama-3-70b --stage 1T:8192:1024 --stage 50B:32768:256 --gpu "H100 SXM" --max-gpus 1024
  llmsizing plan llama-3-70b --tokens 1T --seq 8192 --global-batch 1024 --gpu "H100 SXM" --gpu B200
  llmsizing plan llama-3-70b --tokens 1T --seq 8192 --global-batch 1024 --deadline-days 30 --budget 2M --all
  llmsizing serve llama-3-70b --gpu "H100 SXM" --prompt 1024 --output 256 --users 1000 --itl-ms 50
  llmsizing serve llama-3-8b --gpu "H100 SXM" --prompt 4096 --output 512 --rps 20 --itl-ms 30 --json
  llmsizing serve llama-3-70b --gpu "H100 SXM" --prompt 32768 --output 512 --rps 2 --itl-ms 50 \
      --ttft-ms 2000 --pp 2
  llmsizing serve mixtral-8x7b --gpu "H100 SXM" --prompt 1024 --output 256 --users 200 --itl-ms 30
  llmsizing serve deepseek-v3 --gpu H800 --prompt 1024 --output 512 --users 2000 --itl-ms 60 \
      --weights fp8 --ep 32
  llmsizing finetune llama-3-8b --method lora --gpu "H100 SXM" --tokens 100M --seq 2048 --batch 4
  llmsizing finetune llama-3-70b --method qlora --gpu "A100 80GB" --gpus 4 --strategy fsdp --tokens 50M --json
"""

stage.__name__ = "stage"


def cmd_models(args) -> None:
    from .catalog import model_table

    df = model_table()[["layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "n_params", "source"]]
    _emit(df if (args.json or args.csv) else _fmt_frame(df, int_cols=["n_params"]), args)


def cmd_gpus(args) -> None:
    from .catalog import gpu_table

    df = gpu_table()[["memory_gib", "memory_bandwidth_gbps", "bf16_dense_tflops", "fp8_dense_tflops", "link",
                      "link_bandwidth_gbps", "link_direction", "price_usd_per_gpu_hour", "price_kind",
                      "price_as_of", "as_of"]]
    _emit(df if (args.json or args.csv) else df.round(2), args)


def _parallel(args):
    from .parallel import Parallel

    ep, expert_tp = getattr(args, "ep", 1), getattr(args, "expert_tp", False)
    if (args.tp, args.pp, args.dp, args.zero, args.sp, args.virtual_stages, args.offload, args.cp, ep,
            expert_tp) == (1, 1, 1, 0, False, 1, "none", 1, 1, False):
        return None
    return Parallel(tp=args.tp, pp=args.pp, dp=args.dp, zero=args.zero, sp=args.sp,
                    virtual_stages=args.virtual_stages, offload=args.offload, cp=args.cp,
                    cp_comm=args.cp_comm, ep=ep, expert_tp=expert_tp)


def cmd_memory(args) -> None:
    from .hardware import check_recipe_runs_on
    from .footprint import grad_buffer_note
    from .memory import PHASES, training_memory

    model = _model(args.model, moe=True)                # a mixture of experts too (with --ep: issue 24)
    # an unknown GPU, or a recipe it cannot run (FP8 on an A100: issue 33), is refused before anything prints
    g = None if args.gpu is None else check_recipe_runs_on(args.precision, args.gpu)
    par = _parallel(args)
    code = code_options(args, model, par)                # (--loss, --tp-vocab, --no-sync-grads: issue 38)
    t = training_memory(model, batch=args.batch, seq=args.seq, precision=args.precision,
                        optimizer=args.optimizer, attention=args.attention, grad_accum=args.grad_accum,
                        parallel=par, stack=args.stack, **_recompute(args), **_grad_buffer(args), **code,
                        **({"schedule": args.schedule} if args.schedule != "1f1b" else {}))
    df = memory_frame(t)
    if args.json or args.csv:
        _emit(df, args)
        return
    buffer = ("; gradients in a persistent buffer" if t.grad_buffer is True
              else f"; {grad_buffer_note(t.grad_buffer)}" if t.grad_buffer else "")
    buffer += "".join(f"; {CODE_OPTION_FLAGS[k]} {v}" for k, v in code.items())
    title = (f"{t.states.n_params:,} parameters; per GPU (the most loaded one), batch {args.batch} x seq "
             f"{args.seq}{buffer}; alive at the peak of the step (the {t.peak_phase}):")
    out = df[["GiB", "bytes/param"]].copy()
    out["GiB"] = out["GiB"].map("{:,.2f}".format)
    out["bytes/param"] = out["bytes/param"].map("{:.3f}".format)
    _emit(out, args, title=title)
    phases = t.phases_bytes
    print("\npeak of each phase, GiB: " + ", ".join(f"{p} {phases[p] / 2**30:,.2f}" for p in PHASES))
    if g is not None:
        verdict = "fits" if t.total_bytes <= g.memory_bytes else "does NOT fit"
        print(f"\n{t.total_bytes / 2**30:,.1f} GiB {verdict} on one {g.label}")


def _grad_buffer(args) -> dict:
    """``grad_buffer=True`` where ``--grad-buffer`` is given alone, its kind where one is given
    (``--grad-buffer ddp-copy``; else nothing: an old call's keywords), refused with ``--zero`` 2 or 3 as
    the library refuses it (:func:`~llmsizing.footprint.check_grad_buffer`)."""
    from .footprint import check_grad_buffer

    if not args.grad_buffer:
        return {}
    try:
        check_grad_buffer(args.grad_buffer, args.zero)        # (the library's one rule, in the flags' names)
    except ValueError:
        raise ValueError(f"--grad-buffer needs --zero 0 or 1 (DDP or ZeRO-1 keep the gradients whole in a "
                         f"persistent buffer), got --zero {args.zero}: ZeRO-2 and 3 shard the gradients and "
                         "free them each step") from None
    return {"grad_buffer": args.grad_buffer}


def _recompute(args) -> dict:
    """``recompute=``, ``recompute_layers=`` (only with ``--recompute full``; the library checks the range)
    and, if given, ``mtp_depth=``/``capacity_factor=`` (:func:`~llmsizing.cli_args.add_moe_step_flags`)."""
    n = args.recompute_layers
    recompute = "none" if args.recompute is None else args.recompute      # (`time` leaves it unset: none)
    if n is not None and recompute != "full":
        raise ValueError(f"--recompute-layers {n} recomputes whole layers (Megatron-LM's block method): give "
                         f"--recompute full, got --recompute {recompute}")
    return {"recompute": recompute, "recompute_layers": n, **moe_step_options(args)}


#: What a stage with GLOBAL_BATCH takes from its plan, by the flag that would set it (refused there).
_PLANNED = {"mfu": "its MFU is an output of the planned layout's step time",
            "mfu_range": "its range is the measured range of an MFU predicted from a layout",
            "whole_run": "the planned layout's step is a steady state; no whole-run factor applies to it",
            **dict.fromkeys(("recompute", "recompute_layers"), "the plan picks the recomputation that fits")}


def _time_stages(args) -> None:
    from .time_cost import mfu_estimate, training_time

    i, st = next(((i, s) for i, s in enumerate(args.stage) if s.global_batch is not None), (0, None))
    for key, why in _PLANNED.items():                  # a planned stage would ignore these flags: refuse them
        if st is not None and getattr(args, key) not in (None, False):
            flag = "--" + key.replace("_", "-")
            raise ValueError(f"{flag} does not apply to --stage number {i + 1} ({st.tokens:.3g}:{st.seq}:"
                             f"{st.global_batch}), which is planned (it has a GLOBAL_BATCH): {why}. Drop "
                             f"{flag}, or drop the stage's GLOBAL_BATCH to price it at an MFU")
    model = _model(args.model, moe=True)
    mfu, mfu_range = args.mfu, (tuple(args.mfu_range) if args.mfu_range else None)
    if mfu_range is not None and not mfu_range[0] <= mfu_range[1]:
        raise ValueError(f"--mfu-range LOW HIGH must have LOW <= HIGH, got {mfu_range[0]:g} {mfu_range[1]:g}")
    if mfu is not None and mfu_range is None:
        mfu_range = (mfu, mfu)
    elif mfu is None and mfu_range is not None:
        for i, st in enumerate(args.stage):
            central = mfu_estimate(model, gpu=args.gpu, seq=st.seq, dtype=args.dtype,
                                   whole_run=args.whole_run).mfu
            if st.global_batch is None and not mfu_range[0] <= central <= mfu_range[1]:
                raise ValueError(f"--mfu-range {mfu_range[0]:g} {mfu_range[1]:g} does not contain the "
                                 f"calibrated MFU {central:.3g} of --stage number {i + 1} (seq {st.seq:,}): "
                                 "give --mfu too")
    r = training_time(model, stages=args.stage, gpu=args.gpu, n_gpus=args.gpus, mfu=mfu, mfu_range=mfu_range,
                      price_usd_per_gpu_hour=args.price, dtype=args.dtype, whole_run=args.whole_run,
                      **_recompute(args))
    s0 = r.stages[0]
    _staged_output(r, args, f"{r.model}: {len(r.stages)} stages, {r.tokens:.3g} tokens on {r.gpu} at "
                            f"{_price_text(s0)}; {r.total_flops:.3g} model FLOPs")


def cmd_time(args) -> None:
    from .time_cost import mfu_estimate, training_time

    _check_single_or_stages(args, single=("--tokens", "--seq"))
    if args.stage and (args.tokens_per_step is not None or args.framework is not None):
        raise ValueError("--tokens-per-step and --framework price one run (--tokens, --seq), not --stage")
    if args.stage and args.dispatcher is not None:
        raise ValueError(f"--dispatcher {args.dispatcher} prices one run's MoE step (--tokens, --seq), not "
                         "--stage (`llmsizing plan --stage` takes it: each planned stage's layout)")
    if args.stage and args.accounted_split:
        raise ValueError("--accounted-split chooses one run's layout (--tokens, --seq), not --stage's "
                         "(`llmsizing plan --stage --accounted-split` plans each stage so)")
    if args.stage and cp_search_option(args):
        raise ValueError("--cp and --cp-comm choose one run's layout (--tokens, --seq), not --stage's "
                         "(`llmsizing plan --stage --cp ...` plans each stage so)")
    if args.stage:
        _time_stages(args)
        return
    mfu, mfu_range = args.mfu, (tuple(args.mfu_range) if args.mfu_range else None)
    model = _model(args.model, moe=True)
    disp = moe_dispatcher_option(args, model)          # --dispatcher (only where given; not at an MFU)
    inputs = dict(framework=args.framework, tokens_per_step=args.tokens_per_step)
    if mfu_range is not None and not mfu_range[0] <= mfu_range[1]:
        raise ValueError(f"--mfu-range LOW HIGH must have LOW <= HIGH, got {mfu_range[0]:g} {mfu_range[1]:g}")
    if mfu is not None and mfu_range is None:
        mfu_range = (mfu, mfu)                         # an MFU given alone is exact: one row, not three
    elif mfu is None and mfu_range is not None:
        central = mfu_estimate(model, gpu=args.gpu, seq=args.seq, dtype=args.dtype,
                               whole_run=args.whole_run, n_gpus=args.gpus, **inputs).mfu
        if not mfu_range[0] <= central <= mfu_range[1]:
            raise ValueError(f"--mfu-range {mfu_range[0]:g} {mfu_range[1]:g} does not contain the calibrated "
                             f"MFU {central:.3g}: give --mfu too")
    t = training_time(model, tokens=args.tokens, gpu=args.gpu, n_gpus=args.gpus,
                      seq=args.seq, mfu=mfu, mfu_range=mfu_range, price_usd_per_gpu_hour=args.price,
                      dtype=args.dtype, whole_run=args.whole_run, **inputs, **disp, **_recompute(args),
                      **step_recipe_option(args, ep_overlap=True),
                      **({"accounted_split": True} if args.accounted_split else {}), **cp_search_option(args))
    df = t.to_frame()
    if t.mfu_low == t.mfu_high:                        # one MFU: the three cases are the same row
        df = df.loc[["central"]]
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
             f"at {_price_text(t)}; {t.total_flops:.3g} model FLOPs")
    _emit(out, args, title=title)
    for line in [t.range_note] * bool(t.range_note) + [f"warning: {w}" for w in t.warnings]:
        print(line)                                    # the range's measured coverage, then the warnings


def _command(sub, name: str, help: str, description: str,
             model_help: str = "a catalogue name or a Hugging Face config.json") -> argparse.ArgumentParser:
    """A subcommand with its description, the shared examples and its first argument, the model."""
    p = sub.add_parser(name, help=help, description=description, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help=model_help)
    return p


def parser() -> argparse.ArgumentParser:
    from .activations import ATTENTION, RECOMPUTE, STACKS
    from .parallel import CP_COMMS, OFFLOADS, RECOMPUTE_MODES
    from .precision import OPTIMIZERS, RECIPES
    from .moe_time import SCHEDULES

    ap = argparse.ArgumentParser(prog="llmsizing",
                                 description="How many GPUs? Memory, time and cost of training "
                                 "a language model, from the library behind the book.", epilog=EXAMPLES,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True,
                            metavar="{models,gpus,memory,time,cost,plan,serve,finetune,rl}")

    p = sub.add_parser("models", help="the model catalogue")
    _add_output(p)
    p.set_defaults(func=cmd_models)
    p = sub.add_parser("gpus", help="the GPU catalogue (with prices and their dates)")
    _add_output(p)
    p.set_defaults(func=cmd_gpus)

    p = _command(sub, "memory", "per-GPU memory of one training step",
                 "Per-GPU memory of one training step (training_memory), the most loaded GPU of a parallel "
                 "layout.",
                 model_help="a catalogue name (see `llmsizing models`) or a Hugging Face config.json")
    p.add_argument("--batch", type=integer(), required=True, help="micro-batch, sequences per GPU")
    p.add_argument("--seq", type=integer(), required=True, help="sequence length, tokens")
    p.add_argument("--precision", default="bf16-mixed", choices=list(RECIPES))
    p.add_argument("--optimizer", default="adamw", choices=list(OPTIMIZERS))
    p.add_argument("--attention", default="flash", choices=list(ATTENTION))
    p.add_argument("--recompute", default="none", choices=list(RECOMPUTE_MODES),
                   help="activation recomputation (default none; op-sac and op-sac-sdpa-rerun: torchtitan's "
                        "op-level selective checkpointing, without --tp, --sp or --cp)")
    p.add_argument("--recompute-layers", type=integer(0), metavar="N", help=_RECOMPUTE_LAYERS_HELP)
    add_moe_step_flags(p)
    p.add_argument("--stack", default="fused", choices=list(STACKS))
    p.add_argument("--grad-accum", type=integer(), default=1,
                   help="gradient-accumulation steps (= pipeline micro-batches)")
    for f in ("tp", "pp", "dp"):
        p.add_argument(f"--{f}", type=integer(), default=1, help=f"{f} degree (default 1)")
    p.add_argument("--cp", type=integer(), default=1,
                   help="context-parallel degree: each GPU holds seq/cp tokens (seq a multiple of 2 cp; "
                        "default 1)")
    p.add_argument("--cp-comm", choices=list(CP_COMMS), default="p2p",
                   help="how context parallelism exchanges K and V: a ring (p2p, default) or an all-gather")
    p.add_argument("--zero", type=integer(0, 3), default=0, help="ZeRO stage 0-3 over the dp group")
    p.add_argument("--sp", action="store_true", help="sequence parallelism (needs --tp > 1)")
    p.add_argument("--virtual-stages", type=integer(), default=1,
                   help="interleaved 1F1B model chunks per pipeline rank")
    p.add_argument("--offload", default="none", choices=list(OFFLOADS))
    p.add_argument("--ep", type=integer(), default=1,
                   help="expert-parallel degree for a mixture of experts: its routed experts split over ep "
                        "of the layout's GPUs (ep must divide the experts and tp x cp x dp; default 1: none)")
    p.add_argument("--expert-tp", action="store_true",
                   help="split the routed experts by --tp as well (Megatron-LM's default; "
                        "default: not split)")
    add_grad_buffer_flag(p, "the gradients live in a persistent buffer, alive in every phase (Megatron-LM's "
                            "DDP grad buffer, FP32 with --precision bf16-mixed-fp32-grads; PyTorch DDP's "
                            "buckets); --zero 0 or 1 only (default: freed after each step)")
    p.add_argument("--schedule", choices=list(SCHEDULES), default="1f1b",
                   help="the pipeline schedule (training_memory's): 1f1b (default) and zb1p hold 1F1B's "
                        "activations; dualpipe holds each rank's two stages, both directions (even --pp, "
                        "--grad-accum even and >= 2 x pp)")
    add_code_option_flags(p)
    p.add_argument("--gpu", help="say whether the total fits on this catalogue GPU")
    _add_output(p)
    p.set_defaults(func=cmd_memory)

    p = _command(sub, "time", "days, GPU-hours and cost of a training run",
                 "Days, GPU-hours and cost of a run (training_time), with the range the MFU range implies.")
    p.add_argument("--tokens", type=count, help="training tokens, e.g. 1T, 500B, 2e12 (or --stage)")
    p.add_argument("--gpu", required=True, help="a catalogue GPU (see `llmsizing gpus`)")
    p.add_argument("--gpus", type=integer(), required=True, help="number of GPUs")
    p.add_argument("--seq", type=integer(), help="sequence length, tokens (or --stage)")
    p.add_argument("--stage", type=stage, action="append", metavar="TOKENS:SEQ[:GLOBAL_BATCH]",
                   help="one stage of a run that changes its context (repeat, in order; replaces --tokens "
                        "and --seq), e.g. --stage 14.8T:8192 --stage 800B:131072; with GLOBAL_BATCH "
                        "(sequences) the stage's layout is planned: its fastest plan on at most --gpus GPUs")
    p.add_argument("--mfu", type=number(0, 1, inclusive=False),
                   help="model FLOPs utilisation, exact (default: calibrated on published runs by GPU "
                        "generation, model size and sequence length, with their range)")
    p.add_argument("--tokens-per-step", type=count, metavar="TOKENS", help="tokens per optimizer step "
                   "(batch x seq): with --framework, the MFU and its range from batch and stack (chapter 10)")
    p.add_argument("--framework", default=None, help="the training software, e.g. megatron-core, torchtitan")
    p.add_argument("--whole-run", action="store_true",
                   help="a whole run's GPU-hours (restarts, evaluation) rather than a steady state")
    p.add_argument("--mfu-range", type=number(0, 1, inclusive=False), nargs=2, metavar=("LOW", "HIGH"),
                   help="the MFU's range (must contain --mfu)")
    p.add_argument("--price", type=number(0),
                   help="USD per GPU-hour (default: the catalogue's on-demand price)")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp8"],
                   help="the peak the MFU is measured against")
    p.add_argument("--recompute", default=None, choices=list(RECOMPUTE),
                   help="activation recomputation: changes the HFU and the calibrated MFU (default none)")
    p.add_argument("--recompute-layers", type=integer(0), metavar="N",
                   help=_RECOMPUTE_LAYERS_HELP
                   + " (without a layout the model is one chunk: 0 to its layers)")
    add_moe_step_flags(p)
    add_dispatcher_flag(p)
    add_step_recipe_flags(p, ep_overlap=True)
    add_accounted_split_flag(p)
    add_cp_search_flags(p)
    _add_output(p)
    p.set_defaults(func=cmd_time)

    add_plan_commands(sub, _command)

    from .serve import ENGINES, KV_FORMATS, WEIGHT_FORMATS, WORKLOADS

    p = _command(sub, "serve", "GPUs to serve a load within a latency target",
                 "The fewest GPUs (replicas x tensor parallelism x --pp stages, or replicas x --ep GPUs for "
                 "a mixture of experts) that serve a load within an ITL and TTFT target "
                 "(replicas_for): users via Little's law, or a request rate. Mixtures of experts are "
                 "accepted: every expert resident, a decode step reading the experts its batch touches.")
    p.add_argument("--gpu", required=True, help="a catalogue GPU (see `llmsizing gpus`)")
    p.add_argument("--prompt", type=integer(), help="prompt tokens per request (or --workload)")
    p.add_argument("--output", type=integer(), help="generated tokens per request (or --workload)")
    p.add_argument("--workload", choices=list(WORKLOADS), help="preset prompt and output lengths: "
                   + "; ".join(f"{k} {v['prompt']:,} + {v['output']:,}" for k, v in WORKLOADS.items()))
    p.add_argument("--percentile", type=number(50, 99.9), help="size for this percentile of TTFT and ITL "
                   "under Poisson arrivals, slots at most --occupancy full (default: the mean, Little's law)")
    p.add_argument("--occupancy", type=number(0, 1, inclusive=False), help="slot occupancy ceiling "
                   "(default 0.8 with --percentile above 50)")
    p.add_argument("--disaggregated", action="store_true", help="separate prefill and decode pools")
    p.add_argument("--prefix-hit", type=number(0, 0.999), default=0.0,
                   help="share of each prompt found in a prefix cache (default 0)")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--users", type=integer(),
                   help="concurrent users, each sending a request when the last ends")
    g.add_argument("--rps", type=number(0, inclusive=False), help="requests per second")
    p.add_argument("--itl-ms", type=number(0, inclusive=False), required=True,
                   help="inter-token latency target, ms")
    p.add_argument("--ttft-ms", type=number(0, inclusive=False), default=1000.0,
                   help="time-to-first-token target, ms (default 1000)")
    p.add_argument("--think-s", type=number(0), default=0.0, help="seconds a user thinks between requests")
    p.add_argument("--pp", type=integer(), default=1,
                   help="pipeline-parallel stages per replica, vLLM's --pipeline-parallel-size (default 1)")
    p.add_argument("--ep", type=integer(), default=1,
                   help="expert-parallel GPUs per replica for a mixture of experts: the routed experts split "
                        "over them, attention in data-parallel groups of tp (DeepSeek-V3's layout; default "
                        "1: none)")
    p.add_argument("--weights", default="bf16", choices=list(WEIGHT_FORMATS))
    p.add_argument("--kv-cache", default="bf16", choices=list(KV_FORMATS))
    p.add_argument("--engine", choices=list(ENGINES),
                   help="a calibrated engine's own step overhead (default: vLLM's, continuous batching)")
    p.add_argument("--max-num-seqs", type=integer(), help="the engine's cap on running sequences per "
                   "replica, per attention group with expert parallelism (vLLM's --max-num-seqs; default "
                   "vLLM's on the GPU: 256 on an A100 or under 70 GiB, else 1024)")
    p.add_argument("--price", type=number(0),
                   help="USD per GPU-hour (default: the catalogue's on-demand price)")
    _add_output(p)
    p.set_defaults(func=cmd_serve)
    from .finetune import LOOPS, METHODS
    from .finetune_time import STRATEGIES

    p = _command(sub, "finetune", "memory, largest batch and context, time and cost of a fine-tune",
                 "Per-GPU memory of a LoRA, QLoRA or full fine-tuning step, the largest micro-batch and "
                 "context that fit, and the time and cost of the run (finetune_time).")
    p.add_argument("--method", choices=list(METHODS), default="lora")
    p.add_argument("--rank", type=integer(1, 65536), default=16,
                   help="LoRA rank (all linear layers; default 16)")
    p.add_argument("--gpu", default="H100 SXM", help="a catalogue GPU (default: H100 SXM)")
    p.add_argument("--gpus", type=integer(1, 65536), default=1, help="number of GPUs (default 1)")
    p.add_argument("--strategy", choices=list(STRATEGIES), default="ddp",
                   help="how several GPUs share the work: ddp replicates, fsdp/zero3 shard the base")
    p.add_argument("--seq", type=integer(), default=2048, help="sequence length, tokens (default 2048)")
    p.add_argument("--batch", type=integer(), default=1, help="micro-batch per GPU (default 1)")
    p.add_argument("--grad-accum", type=integer(), default=1, help="micro-batches per optimizer step")
    p.add_argument("--loop", choices=list(LOOPS), default="trainer",
                   help="trainer (HF's Trainer frees the model's output before the backward; default) or "
                        "keep_output (out = model(...); out.loss.backward(): the logits stay alive)")
    p.add_argument("--no-kbit-prep", action="store_true",
                   help="QLoRA without PEFT's k-bit preparation (default: with it for ddp, as qlora.py "
                        "and TRL run one GPU or DDP; without it for fsdp and zero3, as TRL and Answer.AI "
                        "run them)")
    p.add_argument("--tokens", type=count, default=1e8, help="dataset tokens, e.g. 100M (default 100M)")
    p.add_argument("--epochs", type=number(0, 1e6, inclusive=False), default=1.0, help="epochs (default 1)")
    p.add_argument("--recompute", default="full", choices=list(RECOMPUTE),
                   help="activation recomputation (default full: gradient checkpointing, as PEFT users run "
                        "it)")
    p.add_argument("--kernel-efficiency", type=number(0, 1, inclusive=False), default=None,
                   help="one share of the dense peak for every FLOP (default: priced as the step model "
                        "prices a training step: GEMMs by shape at the calibrated efficiency, causal "
                        "attention)")
    p.add_argument("--price", type=number(0),
                   help="USD per GPU-hour (default: the catalogue's on-demand price)")
    _add_output(p)
    p.set_defaults(func=cmd_finetune)
    add_rl_command(sub, _command)
    return ap


def main(argv=None) -> int:
    """Run the command line on ``argv`` (default: ``sys.argv[1:]``) and return the exit code: 0, or 2 for bad
    input (argparse's usage errors included), with one line on stderr and no traceback."""
    ap = parser()
    try:
        args = ap.parse_args(grad_buffer_argv(sys.argv[1:] if argv is None else argv))
    except SystemExit as e:            # argparse has printed the usage and its message (or --help)
        return e.code if isinstance(e.code, int) else 2
    try:
        args.func(args)
    except BrokenPipeError:            # `llmsizing gpus | head`: the reader left; not an error of ours
        sys.stderr.close()             # (before OSError, of which it is a subclass)
    except (ValueError, TypeError, OSError) as e:     # OSError: a config file that cannot be read
        print(f"llmsizing {args.command}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
