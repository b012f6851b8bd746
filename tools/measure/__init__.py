"""The memory measurements behind the book (``tools/measure_memory.py``, its entry point), one module per experiment.

Imports go downwards only::

    cli            the command line: main() and the sub-commands' options
    saved          ``saved``: the tensors autograd saves, of the book's own modules (chapter 5)
    step           ``step``: live bytes over one training step, HF models and the book's fused stack (chapter 5)
    dist           ``dist``: per-rank states and collectives under DDP / ZeRO-1 / FSDP2 / TP / SP (chapter 9)
    ddp_buckets    ``ddp-buckets``: PyTorch DDP's gradient buckets and their order (issue 38); builds ``dist``'s
                   DIST_SHAPE model
    megatron_buckets ``megatron-buckets``: Megatron-Core's own gradient buckets (megatron-core installed; meta
                   device; issue 34)
    fsdp_units     ``fsdp-units``: FSDP2's collectives per step by wrapping and layer count (issue 38); counts
                   with ``dist``'s CollectiveCounter
    peft_counts    ``peft``: LoRA trainable parameters PEFT reports (meta device)
    lora           ``lora``: live bytes over a PEFT LoRA step; builds on peft_counts (its ranks, targets, HF builder)
    loss_peak      ``loss-peak``: what is alive at the loss-backward peak of HF GPT-2 fp32 steps; runs ``step``'s
                   harness (the one other experiment it imports)
    nf4            ``nf4``: bitsandbytes NF4 storage of one linear layer
    dropout        ``dropout``: what PyTorch's dropout keeps for its backward
    moe_a2a        ``a2a``: expert-parallel all-to-all bytes and times of one HF Mixtral MoE layer step (issue 24)
    book_modules   the book's own torch modules (Transformer and its fused-kernel stand-ins), for saved and step
    core           shared: the live-bytes tracker, one measured step and its phases, weight copies, CSV writing

Every module but ``cli`` imports ``core`` (and ``saved``/``step`` ``book_modules``); no experiment imports another,
except ``fsdp_units`` and ``ddp_buckets``, which take ``dist``'s collective counter and model shape, ``lora``, which measures the step of the
very LoRA set-ups ``peft_counts`` counts, and ``loss_peak``,
which snapshots ``step``'s own measurement.
"""

import sys
from pathlib import Path

# llmsizing from this checkout first, also without ``pip install -e .``
_SRC = str(Path(__file__).resolve().parents[2] / "src")
if sys.path[:1] != [_SRC]:
    sys.path.insert(0, _SRC)
