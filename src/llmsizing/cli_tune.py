"""The command line's serving and fine-tuning commands (issue 32: split out of :mod:`llmsizing.cli`):
``llmsizing serve`` (:func:`~llmsizing.serve.replicas_for` with the stated range of its ITL) and
``llmsizing finetune`` (:mod:`llmsizing.finetune_time`). Nothing is computed here.
"""

from __future__ import annotations

from .catalog import price_note
from .cli_args import _emit, _model


def cmd_serve(args) -> None:
    from .serve import replicas_for
    from .serve_calibration import serving_range

    from .serve import WORKLOADS

    load = dict(users=args.users) if args.users is not None else dict(requests_per_s=args.rps)
    model = _model(args.model, moe=True)
    preset = WORKLOADS.get(getattr(args, "workload", None) or "", {})
    for k in ("prompt", "output"):       # --prompt/--output win over the preset's
        if getattr(args, k) is None:
            if not preset:
                raise ValueError(f"--{k} is required (or give --workload, one of {sorted(WORKLOADS)})")
            setattr(args, k, preset[k])
    kw = dict(prompt=args.prompt, output=args.output, weights=args.weights, kv_cache=args.kv_cache,
              pp=args.pp, ep=args.ep, engine=args.engine,
              max_num_seqs=getattr(args, "max_num_seqs", None))
    fleet = dict(percentile=getattr(args, "percentile", None), occupancy=getattr(args, "occupancy", None),
                 disaggregated=getattr(args, "disaggregated", False),
                 prefix_hit=getattr(args, "prefix_hit", 0.0))
    plan = replicas_for(model, args.gpu, itl_s=args.itl_ms / 1e3, ttft_s=args.ttft_ms / 1e3,
                        think_s=args.think_s, price_usd_per_gpu_hour=args.price, **kw, **load, **fleet)
    # the stated 80% range of the plan's ITL (chapter 15), for the plan's engine (default vLLM)
    rng = serving_range(model, args.gpu, tp=plan.tp, batch=plan.batch, **kw).itl_s
    df = plan.to_frame().T.reset_index(drop=True)
    df["itl_s_low"], df["itl_s_high"] = rng
    if args.json or args.csv:
        _emit(df, args)
        return
    s = plan.serving
    layout = f"{plan.replicas:,} x " + (f"ep={s.ep} (tp={plan.tp} attention groups)" if s.ep > 1
                                        else f"tp={plan.tp}") \
        + (f" x pp={s.pp}" if s.pp > 1 else "")
    # the engine whose fitted step overhead the plan used: the JSON/CSV "engine" column, the same value
    out = {"GPUs": f"{plan.gpus:,}", "layout": layout, "engine": s.engine, "batch": f"{plan.batch:,}",
           # issue 38: the engine's largest batch and what caps it (KV room or max_num_seqs)
           "max batch": f"{s.max_batch:,} (" + ("KV room" if s.batch_bound == "kv"
                                                 else f"max_num_seqs; KV room {s.kv_batch:,}") + ")",
           "TTFT ms": f"{s.ttft_s * 1e3:,.1f}", "ITL ms": f"{s.itl_s * 1e3:,.1f}",
           "ITL stated range ms": f"{rng[0] * 1e3:,.1f}-{rng[1] * 1e3:,.1f}",
           "requests/s": f"{plan.requests_per_s:,.2f}",
           "capacity requests/s": f"{plan.capacity_requests_per_s:,.2f}",
           "tokens/s/GPU": f"{s.output_tokens_per_s_per_gpu:,.0f}", "$/hour": f"${plan.usd_per_hour:,.2f}",
           "$/M output tokens": f"${s.usd_per_million_output_tokens:,.3f}"}
    if plan.percentile is not None:      # issue 37: the percentile, the headroom and the range of the count
        p = f"p{plan.percentile:g}"
        out.update({f"TTFT {p} ms": f"{plan.ttft_p_s * 1e3:,.1f}",
                    f"ITL {p} ms": f"{plan.itl_p_s * 1e3:,.1f}",
                    "occupancy": f"{plan.occupancy:.0%} (ceiling {plan.occupancy_ceiling:.0%})",
                    "GPUs stated range": f"{plan.gpus_low or '-'}-{plan.gpus_high or '-'}"})
    if plan.prefill_gpus is not None:
        out.update({"prefill GPUs": f"{plan.prefill_gpus:,} ({plan.prefill_replicas:,} x "
                    f"tp={plan.prefill_serving.tp})", "decode GPUs": f"{plan.decode_gpus:,}",
                    "KV transfer ms": f"{plan.kv_transfer_s * 1e3:,.2f}"})
    import pandas as pd

    load_text = f"{args.users:,} users" if args.users is not None else f"{args.rps:g} requests/s"
    _emit(pd.DataFrame([out]), args, title=f"{s.model} on {s.gpu}: {load_text} of {args.prompt:,} + "
          f"{args.output:,} tokens at ITL <= {args.itl_ms:g} ms, TTFT <= {args.ttft_ms:g} ms")


def cmd_finetune(args) -> None:
    """Memory per GPU, the largest micro-batch and context that fit, and time and cost of a fine-tune
    (:mod:`llmsizing.finetune_time`)."""
    import pandas as pd

    from .catalog import get_gpu
    from .finetune_time import (adapter_checkpoint_bytes, finetune_memory_per_gpu, finetune_time,
                                max_batch_per_gpu, max_seq)

    model = _model(args.model)
    g = get_gpu(args.gpu)
    if args.no_kbit_prep and args.method != "qlora":
        raise ValueError(f"--no-kbit-prep applies to --method qlora; --method {args.method} has no k-bit "
                         "preparation (PEFT's, of a quantised base) to leave out")
    mem_kw = dict(method=args.method, n_gpus=args.gpus, strategy=args.strategy, rank=args.rank,
                  recompute=args.recompute, grad_accum=args.grad_accum, loop=args.loop,
                  **({"kbit_prep": False} if args.no_kbit_prep else {}))
    m = finetune_memory_per_gpu(model, batch=args.batch, seq=args.seq, **mem_kw)
    largest_batch = max_batch_per_gpu(model, g, seq=args.seq, **mem_kw)
    largest_seq = max_seq(model, g, batch=args.batch, **mem_kw)
    t = finetune_time(model, gpu=g, method=args.method, tokens=args.tokens, epochs=args.epochs, seq=args.seq,
                      batch=args.batch, grad_accum=args.grad_accum, n_gpus=args.gpus, strategy=args.strategy,
                      rank=args.rank, recompute=args.recompute, kernel_efficiency=args.kernel_efficiency,
                      price_usd_per_gpu_hour=args.price,
                      **({"kbit_prep": False} if args.no_kbit_prep else {}))
    adapter = 0.0 if args.method == "full" else adapter_checkpoint_bytes(model, rank=args.rank)
    row = {**t.to_dict(), "rank": args.rank, "recompute": args.recompute,
           "memory_per_gpu_bytes": m.total_bytes, "gpu_memory_bytes": float(g.memory_bytes),
           "fits": bool(m.total_bytes <= 0.9 * g.memory_bytes), "max_batch": largest_batch,
           "max_seq": largest_seq,
           "adapter_checkpoint_bytes": adapter, "loop": args.loop, "assumes": m.assumes}
    if args.json or args.csv:
        _emit(pd.DataFrame([row]).set_index("model"), args)
        return
    verdict = "fits" if row["fits"] else "does NOT fit"
    where = f"{args.gpus:,} x {g.name}" + (f" ({args.strategy})" if args.gpus > 1 else "")
    lines = {
        "memory per GPU": f"{m.total_bytes / 2**30:,.1f} GiB ({verdict} in 90% of {g.memory_gib:,.1f} GiB)",
        "largest micro-batch": f"{largest_batch:,} x {args.seq:,} tokens",
        "largest context": f"{largest_seq:,} tokens at micro-batch {args.batch}",
        "FLOPs per token": f"{t.flops.model_flops:.3g} ({t.flops.ratio_to_full:.0%} of full fine-tuning's)",
        "step": f"{t.step_s:,.2f} s (compute {t.compute_s:,.2f}, dequantisation {t.dequant_s:,.2f}, "
                f"exposed communication {t.exposed_comm_s:,.2f})",
        "throughput": f"{t.tokens_per_s:,.0f} tokens/s, MFU {t.mfu:.0%} at kernel efficiency "
                      f"{t.kernel_efficiency:.0%}",
        "time": f"{t.hours:,.1f} hours ({t.days:,.2f} days), {t.steps:,} steps" + (
            "" if t.hours_range is None else
            f"; stated range {t.hours_range[0]:,.1f}-{t.hours_range[1]:,.1f} hours (the {t.range_group} "
            "step's range of published runs, chapter 16)"),
        "cost": f"{t.gpu_hours:,.1f} GPU-hours x ${t.price_usd_per_gpu_hour:.2f}{price_note(t.price_kind)} = "
                f"${t.cost_usd:,.2f}" + ("" if t.cost_usd_range is None else "; stated range "
                                         f"${t.cost_usd_range[0]:,.2f}-${t.cost_usd_range[1]:,.2f}"),
    }
    if args.method != "full":
        lines["adapter checkpoint"] = f"{adapter / 2**20:,.0f} MiB (fp32)"
    out = pd.DataFrame({"value": lines})
    _emit(out, args, title=f"{args.method} of {t.model} on {where}: {t.tokens:.3g} tokens "
                           f"({args.epochs:g} epoch(s)), micro-batch {args.batch} x {args.seq:,}, "
                           f"{args.grad_accum} micro-batch(es) per step, recompute {args.recompute}")
    print("assumes:\n" + "\n".join(f"  {a}" for a in m.single.assumptions))


def cmd_rl(args) -> None:
    """Time per step by phase, GPU-hours and cost of an RL post-training run (:func:`llmsizing.rl.rl_run`,
    chapter 19)."""
    import pandas as pd

    from .rl import rl_run

    r = rl_run(_model(args.model, moe=True), gpu=args.gpu, n_gpus=args.gpus, prompts_per_step=args.prompts,
               samples_per_prompt=args.samples, prompt=args.prompt,
               response=(args.response, args.max_response or args.response), steps=args.steps,
               algorithm=args.algorithm, colocated=not args.split, off_policy_steps=args.off_policy,
               gen_tp=args.gen_tp, price_usd_per_gpu_hour=args.price)
    if args.json or args.csv:
        row = {"step_s": r.step_s, "step_s_low": r.step_s_low, "step_s_high": r.step_s_high,
               **{f"{k}_s": v for k, v in r.phases.items()}, "gpu_hours": r.gpu_hours,
               "gpu_hours_low": r.gpu_hours_low, "gpu_hours_high": r.gpu_hours_high, "days": r.days,
               "cost_usd": r.cost_usd, "gen_gpus": r.gen_gpus, "train_gpus": r.train_gpus, "gen_tp": r.gen_tp,
               "fits": r.fits}
        _emit(pd.DataFrame([row]), args)
        return
    out = {"phase": list(r.phases) + ["step"],
           "seconds": [f"{v:,.1f}" for v in r.phases.values()] + [f"{r.step_s:,.1f}"],
           "range": [f"{r.phases_low[k]:,.1f}-{r.phases_high[k]:,.1f}" for k in r.phases]
           + [f"{r.step_s_low:,.1f}-{r.step_s_high:,.1f}"]}
    pools = "colocated" if r.colocated else f"{r.gen_gpus} generating + {r.train_gpus} training"
    _emit(pd.DataFrame(out).set_index("phase"), args,
          title=f"{r.model}, {r.algorithm.upper()} on {r.n_gpus} x {r.gpu} ({pools}; engines tp={r.gen_tp}): "
          f"{r.steps:,} steps = {r.days:,.1f} days, {r.gpu_hours:,.0f} GPU-hours "
          f"({r.gpu_hours_low:,.0f}-{r.gpu_hours_high:,.0f}), ${r.cost_usd:,.0f}{price_note(r.price_kind)}; "
          "memory "
          f"{'fits' if r.fits else 'does NOT fit'}")


def add_rl_command(sub, command) -> None:
    """``llmsizing rl``: the subcommand's arguments (``command`` makes a subparser with its model argument, as
    cli's ``_command``)."""
    from .cli_args import _add_output, integer, number
    from .rl import ALGORITHMS

    p = command(sub, "rl", "GPUs, hours and cost of RL post-training (GRPO/PPO)",
                "Time per RL step by phase (generation, log-probabilities, reward, update, weight sync), "
                "GPU-hours and cost of a run of --steps steps (rl_run, chapter 19).")
    p.add_argument("--gpu", default="H100 SXM", help="a catalogue GPU (default: H100 SXM)")
    p.add_argument("--gpus", type=integer(1, 1 << 20), required=True, help="GPUs in the run")
    p.add_argument("--prompts", type=integer(), required=True, help="prompts per step")
    p.add_argument("--samples", type=integer(), default=16,
                   help="samples per prompt (GRPO's group; default 16)")
    p.add_argument("--prompt", type=integer(), default=512, help="prompt tokens (default 512)")
    p.add_argument("--response", type=integer(), required=True, help="mean response tokens")
    p.add_argument("--max-response", type=integer(), help="longest response tokens (default: the mean)")
    p.add_argument("--steps", type=integer(), default=1000, help="RL steps (default 1000)")
    p.add_argument("--algorithm", choices=list(ALGORITHMS), default="grpo")
    p.add_argument("--split", action="store_true", help="separate generation and training pools")
    p.add_argument("--off-policy", type=integer(0), default=0, help="steps off policy (with --split)")
    p.add_argument("--gen-tp", type=integer(), help="the engine's tensor parallelism (default: smallest fit)")
    p.add_argument("--price", type=number(0), help="USD per GPU-hour (default: the catalogue's)")
    _add_output(p)
    p.set_defaults(func=cmd_rl)
