"""The command line's planning commands (split out of :mod:`llmsizing.cli`, which re-exports their handlers
and :func:`add_plan_commands`): ``llmsizing plan`` (:func:`~llmsizing.planner.plan`, one run, or each
``--stage`` of a run planned) and ``llmsizing cost`` (:func:`~llmsizing.time_cost.cost_by_gpu`), their parsers
and their tables. Nothing is computed here.
"""

from __future__ import annotations

from .cli_args import (STAGE_FORM, _add_output, _check_single_or_stages, _emit, _estimate_mark, _model,
                       _staged_output, add_dispatcher_flag, add_grad_buffer_flag, add_moe_step_flags,
                       add_plan_moe_flags, count, dispatcher_option, integer, moe_dispatcher_option,
                       moe_step_flags_text, moe_step_options, number, plan_table, stage,
                       add_step_recipe_flags, step_recipe_option, add_accounted_split_flag,
                       add_cp_search_flags, cp_search_option)


def cmd_cost(args) -> None:
    from .time_cost import cost_by_gpu

    model = _model(args.model, moe=True)
    options = moe_step_options(args, model)            # --mtp-depth, --capacity-factor (only where given)
    if options and args.mfu is not None:
        raise ValueError(f"{moe_step_flags_text(options)}: not with --mfu (they are priced on a mixture of "
                         "experts' MoE step on its layout; --mfu prices the run at one MFU): drop one or the "
                         "other")
    disp = moe_dispatcher_option(args, model)          # --dispatcher (only where given; not with --mfu)
    recipe = step_recipe_option(args, ep_overlap=True)     # --schedule, --comm-sms, --ep-overlap (moeapi42)
    said = " ".join(([moe_step_flags_text(options)] if options else [])
                    + ([f"--dispatcher {args.dispatcher}"] if disp else [])
                    + [f"--{k.replace('_', '-')} {v}" for k, v in recipe.items()]
                    + ["--accounted-split"] * bool(args.accounted_split)
                    + [f"--cp {c}" for c in args.cp or ()]
                    + [f"--cp-comm {args.cp_comm}"] * (args.cp_comm != "p2p"))
    df = cost_by_gpu(model, tokens=args.tokens, seq=args.seq, gpus=args.gpu,
                     batch=args.batch, recompute=args.recompute, mfu=args.mfu, max_gpus=args.max_gpus,
                     **({} if args.ep is None else {"ep_degrees": tuple(args.ep)}), **options, **disp,
                     **recipe, **({"accounted_split": True} if args.accounted_split else {}),
                     **cp_search_option(args))
    if args.json or args.csv:
        _emit(df, args)
        return
    ok = df[df["fits"]]
    out = ok[["gpu", "min_gpus", "layout"]].copy()
    out["$/GPU-h"] = ok["price_usd_per_gpu_hour"].map("{:.2f}".format) + ok["price_kind"].map(_estimate_mark)
    out["GPU-hours"] = ok["gpu_hours"].map("{:,.0f}".format)
    out["days on min"] = ok["days_on_min_gpus"].map("{:,.0f}".format)
    out["cost"] = [f"${c:,.0f} (${lo:,.0f}-${hi:,.0f})" for c, lo, hi in
                   zip(ok["cost_usd"], ok["cost_usd_low"], ok["cost_usd_high"])]
    _emit(out.reset_index(drop=True), args,
          title=f"{args.model}: {args.tokens:.3g} tokens of {args.seq:,}, cost of "
          "the finished job on each GPU type (its fewest GPUs; cheapest first"
          + (f"; with {said}" if said else "") + "):")
    for _, r in df[~df["fits"]].iterrows():
        print(f"{r['gpu']}: does not fit: {r['why']}")
    for w in df.attrs.get("warnings", ())[:1]:
        print(f"warning: {w}")


def _plan_layout_options(args) -> dict:
    """The layout flags of ``plan`` as :func:`~llmsizing.planner.plan` keywords: ``--cp``, ``--cp-comm``,
    ``--ep``, ``--ep-overlap``, ``--shared-expert-overlap``, ``--shard-under-pipeline``, ``--mtp-depth``,
    ``--capacity-factor``, ``--dispatcher``, ``--grad-buffer``, ``--recompute`` (``recomputes``),
    ``--schedule``, ``--comm-sms`` (moeapi42), ``--framework`` and ``--tp-backward-overlap`` (plan44). One
    place,
    so a single plan and every planned ``--stage`` take
    them alike (issue 33: the stage path dropped them)."""
    out = {"cp_comm": args.cp_comm}
    if getattr(args, "framework", None) is not None:
        out["framework"] = args.framework
    if getattr(args, "tp_backward_overlap", None) is not None:        # (plan44: on/off; default the stack's)
        out["tp_backward_overlap"] = args.tp_backward_overlap == "on"
    if args.cp is not None:
        out["cp_degrees"] = tuple(args.cp)
    if args.ep is not None:
        out["ep_degrees"] = tuple(args.ep)
    if getattr(args, "recompute", None) is not None:
        out["recomputes"] = tuple(args.recompute)
    if args.ep_overlap is not None:
        out["ep_overlap"] = args.ep_overlap
    flags = ("shard_under_pipeline", "shared_expert_overlap", "accounted_split")   # (store_true: when given)
    kind = getattr(args, "grad_buffer", False)                      # (True, a kind, or not given)
    return {**out, **{k: True for k in flags if getattr(args, k, False)}, **moe_step_options(args),
            **dispatcher_option(args), **({"grad_buffer": kind} if kind else {}), **step_recipe_option(args)}


def _plan_stages(args) -> None:
    from dataclasses import replace

    from .time_cost import training_time

    for flag, value in (("--deadline-days", args.deadline_days), ("--budget", args.budget)):
        if value is not None:
            raise ValueError(f"{flag} applies to a single-stage plan; with --stage each stage gets its "
                             "fastest plan on at most --max-gpus GPUs (the cheapest without --max-gpus)")
    if args.gpu and len(args.gpu) > 1:
        raise ValueError(f"--stage plans every stage on one GPU type: give one --gpu, got {len(args.gpu)}")
    stages = []
    for i, st in enumerate(args.stage):
        if st.global_batch is None:
            if args.global_batch is None:
                raise ValueError(f"--stage number {i + 1} ({st.tokens:.3g}:{st.seq}) has no GLOBAL_BATCH and "
                                 f"there is no --global-batch: write {STAGE_FORM}")
            st = replace(st, global_batch=args.global_batch)
        stages.append(st)
    options = dict(overlap=args.overlap, kernel_efficiency=args.kernel_efficiency, precision=args.precision,
                   optimizer_impl=args.optimizer_impl, partial_recompute=not args.no_partial_recompute,
                   **_plan_layout_options(args))
    gpu = (args.gpu or ["H100 SXM"])[0]
    r = training_time(_model(args.model, moe=True), stages=stages, gpu=gpu, n_gpus=args.max_gpus,
                      plan_options=options)
    which = f"the fastest plan on at most {args.max_gpus:,} GPUs" if args.max_gpus else "the cheapest plan"
    _staged_output(r, args, f"{r.model} on {r.gpu}: {len(r.stages)} stages, each with {which}")


def cmd_plan(args) -> None:
    from .planner import plan

    _check_single_or_stages(args, single=("--tokens", "--seq") if args.stage else
                            ("--tokens", "--seq", "--global-batch"))
    if args.dispatcher is not None:                    # --dispatcher: refused on a dense model, as cost does
        moe_dispatcher_option(args, _model(args.model, moe=True))
    if args.stage:
        _plan_stages(args)
        return
    df = plan(_model(args.model, moe=True), tokens=args.tokens, gpus=tuple(args.gpu or ("H100 SXM",)),
              seq=args.seq, global_batch=args.global_batch, max_gpus=args.max_gpus,
              deadline_days=args.deadline_days, budget_usd=args.budget, overlap=args.overlap,
              deadline_rule=args.deadline_rule,
              kernel_efficiency=args.kernel_efficiency, precision=args.precision,
              optimizer_impl=args.optimizer_impl, partial_recompute=not args.no_partial_recompute,
              **_plan_layout_options(args))
    if not args.all:
        df = df[df["pareto"]]
    df = df.head(args.top).reset_index(drop=True)
    if args.json or args.csv:
        _emit(df, args)
        return
    out = plan_table(df, _model(args.model, moe=True).layers)
    which = "plans" if args.all else "plans on the time-vs-cost front"
    rule = "; ".join(f"{k} kept by the {df.attrs[k + '_rule']}" for k in ("deadline", "budget")
                     if k + "_rule" in df.attrs)
    notes = "".join(f"; on the {g}: {n}" for g, n in df.attrs.get("range_notes", {}).items())  # stand-ins
    _emit(out, args, title=f"{len(out)} {which}, cheapest first (assumes {df.attrs.get('assumes', '')})"
          + (rule and f"; {rule}") + notes + ":")


def add_plan_commands(sub, command) -> None:
    """Add ``plan`` and ``cost`` to the subparsers ``sub`` (``command``: :mod:`llmsizing.cli`'s subcommand
    factory, with its description, the shared examples and the model argument)."""
    from .activations import RECOMPUTE
    from .plan_space import SEARCH_ORDER
    from .precision import RECIPES

    p = command(sub, "plan", "ranked plans: GPUs, layout, days and cost",
                "Every layout that fits and reaches the global batch (plan), with step time, MFU, days and "
                "cost; by default only the time-vs-cost front.")
    p.add_argument("--tokens", type=count, help="training tokens, e.g. 1T (or --stage)")
    p.add_argument("--seq", type=integer(), help="sequence length, tokens (or --stage)")
    p.add_argument("--global-batch", type=integer(), help="sequences per optimizer step")
    p.add_argument("--stage", type=stage, action="append", metavar="TOKENS:SEQ[:GLOBAL_BATCH]",
                   help="one stage of the run (repeat, in order; replaces --tokens and --seq; GLOBAL_BATCH "
                        "defaults to --global-batch): each stage gets its own plan, the fastest on at most "
                        "--max-gpus GPUs (the cheapest without --max-gpus), and the total is added up")
    p.add_argument("--gpu", action="append", help="a catalogue GPU; repeat for several (default: H100 SXM)")
    p.add_argument("--max-gpus", type=integer(), help="largest GPU count to consider")
    p.add_argument("--deadline-days", type=number(0, inclusive=False), help="drop plans slower than this")
    p.add_argument("--deadline-rule", choices=("estimate", "slow_end"), default=None,
                   help="keep a plan whose 80%% range's slow end meets --deadline-days and --budget (the "
                        "default), or its point estimate; the deadline column says yes (at the slow end) "
                        "or likely")
    p.add_argument("--budget", type=count, help="drop plans dearer than this many USD, e.g. 2M")
    p.add_argument("--overlap", type=number(0, 1), default=None,
                   help="one share of communication hidden behind compute (default: group by group)")
    p.add_argument("--kernel-efficiency", "--compute-efficiency", dest="kernel_efficiency",
                   type=number(0, 1, inclusive=False), default=None,
                   help="share of the dense peak while computing (default: calibrated per GPU; "
                        "--compute-efficiency is its old name)")
    p.add_argument("--precision", choices=sorted(RECIPES), default="bf16-mixed",
                   help="memory recipe (bf16-mixed-fp32-grads is Megatron-LM's default)")
    p.add_argument("--optimizer-impl", choices=("foreach", "fused"), default="foreach",
                   help="the optimizer step: PyTorch's default foreach, or the fused kernel (smaller)")
    add_cp_search_flags(p)
    p.add_argument("--recompute", action="append", choices=list(SEARCH_ORDER),
                   help="a recomputation to search; repeat for several, the lightest that fits is kept "
                        "(default: none, selective, full); op-sac and op-sac-sdpa-rerun are torchtitan's "
                        "op-level selective checkpointing, searched without --tp or --cp only")
    add_plan_moe_flags(p)
    add_accounted_split_flag(p)
    add_step_recipe_flags(p, dualpipe=True)
    p.add_argument("--framework", default=None,
                   help="the training software (e.g. megatron-core, nemo, torchtitan, llm-foundry): its "
                        "stack family sets the days' range (default: unknown, the pooled range) and whether "
                        "the backward's TP collectives hide behind the column-parallel GEMMs (Megatron)")
    p.add_argument("--tp-backward-overlap", choices=("on", "off"), default=None,
                   help="price the backward's TP collectives behind the column-parallel dgrad/wgrad GEMMs "
                        "(on) or exposed (off); default: as --framework's stack does (Megatron: on)")
    p.add_argument("--no-partial-recompute", action="store_true",
                   help="recompute every layer where only full recomputation fits (default: the fewest "
                        "layers per pipeline stage that fit, shown as 'full (N layers)')")
    p.add_argument("--shard-under-pipeline", action="store_true", help="also search ZeRO-2/3 under a "
                   "pipeline (off by default: doubles the layouts searched; for memory-tight pipelines)")
    add_grad_buffer_flag(p, "the DDP and ZeRO-1 layouts keep their gradients in a persistent buffer, alive "
                            "in every phase (Megatron-LM's, PyTorch DDP's; FP32 with --precision "
                            "bf16-mixed-fp32-grads); ZeRO-2/3 layouts free theirs after each step (default: "
                            "every layout frees them)")
    p.add_argument("--all", action="store_true", help="every plan, not only the time-vs-cost front")
    p.add_argument("--top", type=integer(), default=20, help="print at most this many rows (default 20)")
    _add_output(p)
    p.set_defaults(func=cmd_plan)

    p = command(sub, "cost", "the finished job's cost on each GPU type",
                "The cost of the finished job on each GPU type (cost_by_gpu): each type's fewest GPUs that "
                "hold a step, the GPU-hours and dollars, with the MFU range; mixtures of experts too "
                "(expert parallelism).")
    p.add_argument("--tokens", type=count, required=True, help="training tokens, e.g. 1T")
    p.add_argument("--seq", type=integer(), required=True, help="sequence length, tokens")
    p.add_argument("--gpu", action="append", help="a catalogue GPU; repeat for several (default: every one)")
    p.add_argument("--batch", type=integer(), default=1, help="micro-batch, sequences per GPU (default 1)")
    p.add_argument("--recompute", default="full", choices=list(RECOMPUTE), help="default full")
    p.add_argument("--mfu", type=number(0, 1, inclusive=False),
                   help="model FLOPs utilisation, exact (default: calibrated, with its range)")
    p.add_argument("--max-gpus", type=integer(), default=65536,
                   help="largest GPU count per type (default 65,536)")
    p.add_argument("--ep", type=integer(), action="append",
                   help="an expert-parallel degree to search for a mixture of experts; repeat for several "
                        "(default: every divisor of its routed experts)")
    add_moe_step_flags(p)
    add_dispatcher_flag(p)
    add_step_recipe_flags(p, ep_overlap=True)
    add_accounted_split_flag(p)
    add_cp_search_flags(p)
    _add_output(p)
    p.set_defaults(func=cmd_cost)
