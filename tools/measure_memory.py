#!/usr/bin/env python
"""Measure the memory of one training step in PyTorch and write it to data/ (book chapter 5, "Measure it yourself").

Usage (from the repository root, in the optional torch venv; ``make measure`` runs ``all``)::

    .venv-measure/bin/python tools/measure_memory.py COMMAND [--quick] [options]

    COMMAND: all, saved, step, dist, peft, lora, loss, loss-peak, nf4, dropout, collectives, cp, cp-merge,
    a2a, ulysses, hf-counts, hf-sweep, mask, swiglu, grad-buffer, fsdp-units, fsdp-root, ddp-buckets, megatron-buckets or megatron-schedule
    (``--quick``: a handful of small configurations)

    saved  [--out data/activation_measurements.csv] [--tensors-out data/activation_saved_tensors.csv]
    step   [--out data/step_measurements.csv] [--timeline-out data/step_timeline_example.csv]
           [--tensors-out data/step_saved_tensors.csv]
    dist   [--out data/dist_measurements.csv] [--collectives-out data/dist_collectives.csv] [--only LAYOUT ...]
           per-rank states and the collectives of one step under DDP / ZeRO-1 / FSDP2 / TP / SP (gloo, CPU)
    megatron-buckets [--out data/megatron_buckets_measured.csv]
           Megatron-Core's own gradient buckets: its _ParamAndGradBuffer on the meta device, 1-rank gloo
           (needs ``pip install megatron-core`` in .venv-measure; not run by ``all``; issue 34)
    megatron-schedule [--out data/megatron_schedule_measured.csv] [--unit-ms 30]
           Megatron-Core's own 1F1B and interleaved schedules, pp = 2..4 gloo processes whose stages sleep
           unequal times (needs megatron-core; not run by ``all``; issues 34/35)
    ddp-buckets [--out data/ddp_bucket_order.csv]
           PyTorch DDP's gradient buckets, first and rebuilt, and their launch order (gloo, CPU; issue 38)
    fsdp-units [--out data/fsdp_unit_calls.csv]
           FSDP2's all-gathers and reduce-scatters per step by wrapping and layer count (gloo, CPU; issue 38)
    fsdp-root [--out data/fsdp_root_held.csv]
           when FSDP2 holds its root unit gathered, by reshard_after_forward (gloo, CPU; issue 38)
    peft   [--out data/peft_trainable_params.csv]   LoRA trainable/total parameters PEFT reports (meta device)
    lora   [--out data/lora_step_measurements.csv]  live bytes over a PEFT LoRA step (small HF Llama, CPU)
    loss   [--out data/loss_logits_measurements.csv] bytes per logit of HF's fp32 loss, long context (CPU)
    loss-peak [--out data/gpt2_loss_peak_steps.csv] [--tensors-out data/gpt2_loss_peak_tensors.csv]
           the tensors alive at the loss-backward peak of HF GPT-2 fp32 steps, 512-1,024 tokens (issue 22; CPU)
    nf4    [--out data/nf4_storage.csv]             bitsandbytes NF4 storage of one linear layer (CPU)
    dropout [--out data/dropout_saved.csv]          the tensors PyTorch's dropout keeps for its backward (CPU)
    collectives [--out data/gloo_collective_times.csv]
           all-reduce / all-gather / reduce-scatter times under gloo at 2 and 4 ranks, 1 KiB .. 64 MiB, and
           their alpha-beta fits (chapter 9; ``collective_time.py``)
    cp     [--out data/cp_gloo_measurements.csv] [--messages-out data/cp_gloo_messages.csv]
           context parallelism on a small HF Llama at cp = 1, 2, 4 and 256-1,024 tokens (gloo, CPU; issue 23): ring
           attention and all-gather KV (the tool's stand-ins for Transformer Engine's functions), per-rank saved
           bytes by category, every message, receive-buffer peaks, and the check against a whole-sequence run
           (about 4 minutes on 2 cores)
    cp-merge [--out data/cp_merge_bytes.csv]
           the bytes PyTorch's own ring attention (``_templated_ring_attention`` and its backward, torch's
           defaults) moves outside its attention kernel and collectives at cp = 2 and 4: the fp32 log-sum-exp
           merge, ``_partial_update``'s concatenations, K/V packing and fp32 gradient accumulation (issue 34;
           ``cp_merge.py``; about 20 s; ``--quick``: the smaller of its two shapes only)
    a2a    [--out data/moe_all_to_all_gloo.csv]
           expert-parallel dispatch/combine all-to-all of one MoE layer step (HF MixtralSparseMoeBlock, hidden 256,
           8 experts, top-2), ep = 2 and 4 under gloo: bytes and messages per rank, phase and direction, the
           routing histogram, call times (issue 24; about 3 minutes; ``moe_a2a.py``)
    ulysses [--out data/ulysses_all_to_all_gloo.csv]
           Ulysses context parallelism (cp_comm="a2a"): the sequence<->head all-to-alls of one attention layer
           (q, k, v before it, the output after; dO, dQ, dK, dV in the backward), cp = 2 and 4, 256-4,096
           tokens, checked against the unsplit attention (issue 38; ``ulysses.py``)
    hf-counts [--out data/hf_meta_param_counts.csv]
           exact parameters of every Hugging Face family Model.from_hf_config reads (MoE, MLA, Gemma, Falcon,
           ...): transformers' ForCausalLM built on the meta device from small and published configs (issue 24)
    hf-sweep [--out data/hf_type_sweep.csv] [--classes-out data/hf_config_classes.json] [--only TYPE ...]
           every decoder-only causal-LM type of the installed transformers, its class default on the meta device
           (to_dict and save_pretrained's dict), and every config class's attribute_map and defaults, which the
           library's reader uses (issue 36; about 3 minutes; ``hf_sweep.py``)
    mask   [--out data/masked_sdpa.csv]
           a small HF Llama's saved tensors with no attention mask, an all-ones one and a padded batch's (SDPA,
           CPU; issue 26): with a mask HF repeats K and V to every query head (``mask.py``)
    swiglu --megatron PATH [--megatron-commit SHA] [--out data/fused_swiglu_saved.csv]
           what Megatron-LM's fused SwiGLU (its own fused_bias_swiglu.py, loaded from a checkout) saves for the
           backward, against an unfused SwiGLU (CPU; issue 26; ``swiglu.py``; skipped by ``all``)
    all    every sub-command above in turn (saved, step, dist, peft, lora, loss, loss-peak, nf4, dropout,
           collectives, cp, a2a, hf-counts), with the default files (also what runs with no sub-command)

(``peft``, ``lora``: peft==0.21.2; ``nf4``: bitsandbytes==0.50.2; all in .venv-measure.)

Sub-command ``saved`` (about 50 s on 2 cores) is the original experiment; ``step`` (about 5 minutes) measures the
live bytes over a whole training step. This file is only the entry point: the code is the package
``tools/measure/``, one module per sub-command (``saved.py``, ``step.py``, ``dist.py``, ``peft_counts.py``,
``lora.py``, ``nf4.py``, ``dropout.py``, ``cp.py``, ``moe_a2a.py``, ``hf_counts.py``, ...; each module's docstring
describes its experiment and the columns of its CSVs) on a shared ``core.py`` (the live-bytes tracker, one measured
step and its phases, CSV writing) and
``book_modules.py`` (the book's own torch modules); ``cli.py`` holds :func:`main`.
"""

import sys
from pathlib import Path

_TOOLS = str(Path(__file__).resolve().parent)
if _TOOLS not in sys.path:          # (as a script, Python has put it first already)
    sys.path.insert(0, _TOOLS)

from measure.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
