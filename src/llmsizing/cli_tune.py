"""The command line's serving and fine-tuning commands (issue 32: split out of :mod:`llmsizing.cli`):
``llmsizing serve`` (:func:`~llmsizing.serve.replicas_for` with the stated range of its ITL) and
``llmsizing finetune`` (:mod:`llmsizing.finetune_time`). Nothing is computed here.
"""

from __future__ import annotations

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
              pp=args.pp, ep=args.ep, engine=args.engine)
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
    out = {"GPUs": f"{plan.gpus:,}", "layout": layout, "batch": f"{plan.batch:,}",
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
                      price_usd_per_gpu_hour=args.price)
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
            f"; stated range {t.hours_range[0]:,.1f}-{t.hours_range[1]:,.1f} hours (published runs, chapter "
            "16)"),
        "cost": f"{t.gpu_hours:,.1f} GPU-hours x ${t.price_usd_per_gpu_hour:.2f} = ${t.cost_usd:,.2f}",
    }
    if args.method != "full":
        lines["adapter checkpoint"] = f"{adapter / 2**20:,.0f} MiB (fp32)"
    out = pd.DataFrame({"value": lines})
    _emit(out, args, title=f"{args.method} of {t.model} on {where}: {t.tokens:.3g} tokens "
                           f"({args.epochs:g} epoch(s)), micro-batch {args.batch} x {args.seq:,}, "
                           f"{args.grad_accum} micro-batch(es) per step, recompute {args.recompute}")
    print("assumes:\n" + "\n".join(f"  {a}" for a in m.single.assumptions))
