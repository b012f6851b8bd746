"""Measure the memory of one training step in PyTorch and write it to data/ (book chapter 5, "Measure it yourself").

The command line of ``tools/measure_memory.py`` (its docstring lists the sub-commands and their options):
:func:`main` parses it and runs one experiment module per sub-command, or all of them in turn.
"""

from __future__ import annotations

import argparse
import time

import torch

from .collective_time import cmd_collectives
from .core import DATA
from .cp import cmd_cp
from .cp_merge import cmd_cp_merge
from .ddp_buckets import cmd_ddp_buckets
from .dist import cmd_dist
from .dropout import cmd_dropout
from .fsdp_root import cmd_fsdp_root
from .fsdp_units import cmd_fsdp_units
from .grad_buffer import cmd_grad_buffer
from .hf_counts import cmd_hf_counts
from .hf_sweep import cmd_hf_sweep
from .lora import cmd_lora
from .mask import cmd_mask
from .megatron_buckets import cmd_megatron_buckets
from .megatron_schedule import cmd_megatron_schedule
from .swiglu import cmd_swiglu
from .ulysses import cmd_ulysses
from .loss import cmd_loss
from .loss_peak import cmd_loss_peak
from .moe_a2a import cmd_a2a
from .nf4 import cmd_nf4
from .peft_counts import cmd_peft
from .saved import cmd_saved
from .step import cmd_step


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command")
    data = DATA
    p_saved = sub.add_parser("saved", help="tensors saved for backward by the book's own module code")
    p_saved.add_argument("--out", default=str(data / "activation_measurements.csv"))
    p_saved.add_argument("--tensors-out", default=str(data / "activation_saved_tensors.csv"))
    p_step = sub.add_parser("step", help="live bytes over a whole training step (HF models + the fused stack)")
    p_step.add_argument("--out", default=str(data / "step_measurements.csv"))
    p_step.add_argument("--timeline-out", default=str(data / "step_timeline_example.csv"))
    p_step.add_argument("--tensors-out", default=str(data / "step_saved_tensors.csv"))
    p_dist = sub.add_parser("dist", help="per-rank model states under torch.distributed (DDP, ZeRO-1, FSDP2)")
    p_dist.add_argument("--out", default=str(data / "dist_measurements.csv"))
    p_dist.add_argument("--collectives-out", default=str(data / "dist_collectives.csv"))
    p_dist.add_argument("--only", nargs="*", help="only these layouts (e.g. tp sp); for a quick look")
    p_fu = sub.add_parser("fsdp-units", help="FSDP2's all-gathers and reduce-scatters per step by wrapping and layer "
                                             "count (gloo, CPU; issue 38)")
    p_fu.add_argument("--out", default=str(data / "fsdp_unit_calls.csv"))
    p_fr = sub.add_parser("fsdp-root", help="when FSDP2 holds its root unit gathered, by reshard_after_forward "
                                            "(gloo, CPU; issue 38)")
    p_fr.add_argument("--out", default=str(data / "fsdp_root_held.csv"))
    p_db = sub.add_parser("ddp-buckets", help="PyTorch DDP's gradient buckets, initial and rebuilt, and their launch "
                                              "order (gloo, CPU; issue 38)")
    p_db.add_argument("--out", default=str(data / "ddp_bucket_order.csv"))
    p_gb = sub.add_parser("grad-buffer", help="gradient bytes alive at the forward peak, the backward's end "
                                             "and the optimizer step under DDP (bucket view off/on, on with "
                                             "set_to_none=False) vs "
                                             "set_to_none (gloo, CPU; issue 38)")
    p_gb.add_argument("--out", default=str(data / "grad_buffer_measurements.csv"))
    p_peft = sub.add_parser("peft", help="trainable/total parameters PEFT reports for LoRA (meta device)")
    p_peft.add_argument("--out", default=str(data / "peft_trainable_params.csv"))
    p_lora = sub.add_parser("lora", help="live bytes over a PEFT LoRA training step (small HF Llama models)")
    p_lora.add_argument("--out", default=str(data / "lora_step_measurements.csv"))
    p_loss = sub.add_parser("loss", help="bytes of HF's fp32 causal-LM loss at long context (PEFT LoRA, CPU)")
    p_loss.add_argument("--out", default=str(data / "loss_logits_measurements.csv"))
    p_lpk = sub.add_parser("loss-peak", help="tensors alive at the loss-backward peak of HF GPT-2 fp32 steps "
                                            "(issue 22; the sweep's shape and the real 124M shape)")
    p_lpk.add_argument("--out", default=str(data / "gpt2_loss_peak_steps.csv"))
    p_lpk.add_argument("--tensors-out", default=str(data / "gpt2_loss_peak_tensors.csv"))
    p_nf4 = sub.add_parser("nf4", help="bitsandbytes NF4 storage of one linear layer's weight (CPU)")
    p_nf4.add_argument("--out", default=str(data / "nf4_storage.csv"))
    p_drop = sub.add_parser("dropout", help="the tensors PyTorch's dropout keeps for its backward (CPU)")
    p_drop.add_argument("--out", default=str(data / "dropout_saved.csv"))
    p_coll = sub.add_parser("collectives", help="time all-reduce / all-gather / reduce-scatter under gloo at 2 "
                                                "and 4 ranks (chapter 9's alpha-beta demo)")
    p_coll.add_argument("--out", default=str(data / "gloo_collective_times.csv"))
    p_cp = sub.add_parser("cp", help="context parallelism (ring attention, all-gather KV) on a small HF Llama at "
                                      "cp = 1, 2, 4 (gloo, CPU; issue 23)")
    p_cp.add_argument("--out", default=str(data / "cp_gloo_measurements.csv"))
    p_cp.add_argument("--messages-out", default=str(data / "cp_gloo_messages.csv"))
    p_cpm = sub.add_parser("cp-merge", help="bytes PyTorch's ring attention moves around its attention kernels "
                                            "(merge, fp32 accumulation) at cp = 2 and 4 (gloo, CPU; issue 34)")
    p_cpm.add_argument("--out", default=str(data / "cp_merge_bytes.csv"))
    p_a2a = sub.add_parser("a2a", help="expert-parallel all-to-all bytes and times of one MoE layer step (HF "
                                       "Mixtral block, ep = 2 and 4, gloo; issue 24)")
    p_a2a.add_argument("--out", default=str(data / "moe_all_to_all_gloo.csv"))
    p_uly = sub.add_parser("ulysses", help="Ulysses context parallelism's sequence<->head all-to-alls of one "
                                           "attention layer at cp = 2 and 4 (gloo, CPU; issue 38)")
    p_uly.add_argument("--out", default=str(data / "ulysses_all_to_all_gloo.csv"))
    p_hfc = sub.add_parser("hf-counts", help="exact parameters of every HF family from_hf_config reads, built on the "
                                             "meta device from small and published configs (issue 24)")
    p_hfc.add_argument("--out", default=str(data / "hf_meta_param_counts.csv"))
    p_hfs = sub.add_parser("hf-sweep", help="every decoder-only causal-LM type of the installed transformers, "
                                            "class default on the meta device (issue 36)")
    p_hfs.add_argument("--out", default=str(data / "hf_type_sweep.csv"))
    p_hfs.add_argument("--only", nargs="*", help="only these model types")
    p_hfs.add_argument("--classes-out", default=str(data / "hf_config_classes.json"))
    p_mask = sub.add_parser("mask", help="HF Llama's saved tensors with and without an attention mask (SDPA "
                                         "repeats K and V when a mask is passed; CPU; issue 26)")
    p_mask.add_argument("--out", default=str(data / "masked_sdpa.csv"))
    p_sw = sub.add_parser("swiglu", help="what Megatron-LM's fused SwiGLU saves, run from a Megatron-LM checkout "
                                         "(--megatron PATH), against an unfused SwiGLU (CPU; issue 26)")
    p_sw.add_argument("--out", default=str(data / "fused_swiglu_saved.csv"))
    p_sw.add_argument("--megatron", help="a Megatron-LM checkout, or its megatron/core/fusions/fused_bias_swiglu.py")
    p_sw.add_argument("--megatron-commit", help="the checkout's commit, written to the CSV")
    p_mb = sub.add_parser("megatron-buckets", help="Megatron-Core's own gradient buckets (_ParamAndGradBuffer "
                                                   "of the installed megatron-core, meta device; issue 34)")
    p_mb.add_argument("--out", default=str(data / "megatron_buckets_measured.csv"))
    p_ms = sub.add_parser("megatron-schedule",
                          help="Megatron-Core's own 1F1B and interleaved pipeline schedules timed with unequal "
                               "stages (gloo, CPU; issue 35)")
    p_ms.add_argument("--out", default=str(data / "megatron_schedule_measured.csv"))
    p_ms.add_argument("--unit-ms", type=float, default=30.0,
                      help="an ordinary stage's forward (ms; backward twice, a slow stage twice both)")
    p_all = sub.add_parser("all", help="every sub-command in turn (saved ... collectives, cp, a2a, hf-counts), with "
                                       "the default output files (the default)")
    p_all.set_defaults(only=None)
    for p in (p_saved, p_step, p_dist, p_peft, p_lora, p_loss, p_lpk, p_nf4, p_drop, p_coll, p_cp, p_cpm,
              p_a2a, p_uly, p_hfc, p_hfs, p_mask, p_sw, p_gb, p_fu, p_fr, p_db, p_mb, p_ms,
              p_all):
        p.add_argument("--quick", action="store_true", help="a handful of small configurations (smoke test)")
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    commands = {"saved": cmd_saved, "step": cmd_step, "dist": cmd_dist, "peft": cmd_peft, "lora": cmd_lora, "loss": cmd_loss,
                "loss-peak": cmd_loss_peak,
                "nf4": cmd_nf4, "dropout": cmd_dropout, "collectives": cmd_collectives, "cp": cmd_cp,
                "cp-merge": cmd_cp_merge,
                "a2a": cmd_a2a, "ulysses": cmd_ulysses,
                "hf-counts": cmd_hf_counts, "hf-sweep": cmd_hf_sweep, "mask": cmd_mask, "swiglu": cmd_swiglu,
                "grad-buffer": lambda a: cmd_grad_buffer(a.out, quick=a.quick), "fsdp-units": cmd_fsdp_units,
                "fsdp-root": cmd_fsdp_root, "ddp-buckets": cmd_ddp_buckets,
                "megatron-buckets": cmd_megatron_buckets, "megatron-schedule": cmd_megatron_schedule}
    if args.command in commands:
        t0 = time.perf_counter()
        commands[args.command](args)
        print(f"{args.command}: {time.perf_counter() - t0:.0f} s")
        return
    quick = bool(getattr(args, "quick", False))
    for name in commands:
        if name in ("megatron-buckets", "megatron-schedule"):   # (need megatron-core: not in the extra)
            continue
        main([name] + (["--quick"] if quick else []))
