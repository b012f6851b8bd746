"""Training software stacks grouped into families by what their engine does (chapter 10; issue 34).

The range of an MFU predicted from a layout (:mod:`llmsizing.step_intervals`) may depend on the stack that
ran it: the step model prices one kernel efficiency per GPU generation and one way of overlapping
collectives, and the stacks differ in both. The family of a stack is fixed by the **engine that runs the
training step** (who fuses the layer's kernels and who schedules its collectives), from the stacks' own
documentation, not from the residuals:

- ``"megatron"``: Megatron-LM's own training loop and its descendants, Megatron-Core and NeMo (NeMo 2 and
  Megatron-Bridge call Megatron-Core's schedules). Fused transformer kernels (fused softmax, bias-GeLU and
  layer norm; Transformer Engine in Megatron-Core), Megatron's pipeline schedules (interleaved 1F1B with
  overlapped point-to-point), the distributed optimizer with gradient reduce-scatter and parameter gather
  overlapped with compute (``--overlap-grad-reduce``, ``--overlap-param-gather``) and TP communication
  overlap (Transformer Engine userbuffers). Narayanan et al. 2021 (arXiv:2104.04473), Sec. 4; Megatron-LM
  README; NeMo performance docs.
- ``"deepspeed"``: Megatron's model code run by DeepSpeed's engine (Megatron-DeepSpeed: BLOOM, MT-NLG): the
  fused kernels of Megatron-LM, but DeepSpeed's pipeline engine (``deepspeed.runtime.pipe``, non-interleaved
  1F1B) and its ZeRO data parallelism schedule the step. Smith et al. 2022 (arXiv:2201.11990), Sec. 2
  (pipeline and data parallelism from DeepSpeed, tensor slicing from Megatron); bigscience tr11-176B README.
- ``"pytorch"``: PyTorch-native modules sharded by PyTorch FSDP (llm-foundry/Composer, torchtitan's FSDP2,
  metaseq's FairScale FSDP): the layer is eager PyTorch (optionally ``torch.compile``) around a
  FlashAttention kernel, and FSDP's per-layer all-gather and reduce-scatter are the collectives it overlaps.
  llm-foundry and torchtitan READMEs; Zhang et al. 2022 (OPT), Sec. 2.4. KempnerForge is one too (its README:
  "PyTorch-native: FSDP2, DTensor, DeviceMesh, DCP, SDPA, torch.compile"). FlashAttention's training scripts
  (``"pytorch"`` in ``data/published_runs.csv``: DDP with a ZeRO-1 optimizer, not FSDP) run the same step.
- ``"unknown"``: anything else (an internal stack such as Meta's Llama 3 trainer, or none stated): its range
  is the pooled one, as if no stack were given.

The rule reads ``data/published_runs.csv``'s ``framework`` cell (or what a user states) by its name: see
:func:`stack_family`.
"""

from __future__ import annotations

#: The families, the last one (``"unknown"``) taking the pooled range.
STACK_FAMILIES = ("megatron", "deepspeed", "pytorch", "unknown")

#: Each family as a reader's table names it (chapter 10): its projects' own spelling.
STACK_FAMILY_NAMES = {"megatron": "Megatron", "deepspeed": "DeepSpeed", "pytorch": "PyTorch",
                      "unknown": "unknown"}

#: ``framework`` names (lower case, as ``data/published_runs.csv`` spells them, and their short forms) ->
#: family (module docstring). A name starting with ``"megatron-deepspeed"`` is DeepSpeed's engine.
FRAMEWORK_FAMILY = {
    "megatron": "megatron", "megatron-lm": "megatron", "megatron-core": "megatron", "mcore": "megatron",
    "nemo": "megatron", "nemo/megatron-bridge": "megatron", "megatron-bridge": "megatron",
    "megatron-deepspeed": "deepspeed", "deepspeed": "deepspeed",
    "fsdp": "pytorch", "fsdp/llm-foundry": "pytorch", "llm-foundry": "pytorch", "composer": "pytorch",
    "torchtitan": "pytorch", "metaseq": "pytorch", "metaseq (fsdp + megatron tp)": "pytorch",
    "kempnerforge": "pytorch",
    "pytorch": "pytorch",
}


def stack_family(framework, *, lenient: bool = False) -> str:
    """The family (:data:`STACK_FAMILIES`) of a training ``framework``: a family name itself or a name of
    :data:`FRAMEWORK_FAMILY` (case-insensitive); ``None`` or NaN (not stated) -> ``"unknown"``. Any other name
    raises ValueError naming the allowed names (a typo must not silently give the pooled range), unless
    ``lenient`` (reading ``data/published_runs.csv``'s ``framework`` cells, where a blank or an internal stack
    such as ``"Meta internal (4D parallelism)"`` is ``"unknown"``). A non-string raises TypeError."""
    if framework is None or (isinstance(framework, float) and framework != framework):
        return "unknown"
    if not isinstance(framework, str):
        raise TypeError(f"framework must be a name such as 'megatron-core', 'torchtitan' or one of "
                        f"{', '.join(STACK_FAMILIES)}, or None; got {type(framework).__name__}")
    name = framework.strip().lower()
    if name in STACK_FAMILIES:
        return name
    if name in FRAMEWORK_FAMILY or lenient:
        return FRAMEWORK_FAMILY.get(name, "unknown")
    raise ValueError(f"framework must be None, one of the families {', '.join(STACK_FAMILIES)} or a known "
                     f"framework name ({', '.join(sorted(FRAMEWORK_FAMILY))}), case-insensitive; got "
                     f"{framework!r}")


#: Whether a family's default path hides the backward's tensor-parallel collectives behind the
#: column-parallel layers' dgrad and wgrad GEMMs (:data:`~llmsizing.exposure.TP_BACKWARD_ASYNC`; plan44,
#: issue 34). ``"megatron"``: Megatron-LM's ``LinearWithGradAccumulationAndAsyncCommunication.backward``
#: (megatron/core/tensor_parallel/layers.py, commits cf7efd4f 2021-08-30 and 02bb1f5c 2022-03-02, no flag)
#: and Transformer Engine's ``_Linear`` (linear.py: "Tensor-parallel communication is overlapped with dgrad
#: GEMM"): the 17 runs ``data/published_runs.csv`` marks ``tp_comm_overlap = backward`` are this family's.
#: ``"deepspeed"``: Megatron-DeepSpeed forked Megatron-LM before it (BLOOM, MT-NLG unmarked); ``"pytorch"``:
#: DTensor's ``ColwiseParallel`` waits for its collectives; ``"unknown"``: nothing stated, priced exposed.
TP_BACKWARD_OVERLAP = {"megatron": True, "deepspeed": False, "pytorch": False, "unknown": False}


def tp_backward_overlap_of(framework, tp_backward_overlap=None) -> bool:
    """Whether the step of a run on ``framework`` (a name :func:`stack_family` knows, or ``None``) is priced
    with the backward TP overlap: ``tp_backward_overlap`` if given (``True``/``False``), else what the stack's
    family does on its default path (:data:`TP_BACKWARD_OVERLAP`; ``None``, no stack named: ``False``, every
    TP collective exposed). Anything else than a bool or ``None`` raises TypeError."""
    family = stack_family(framework)
    if tp_backward_overlap is None:
        return TP_BACKWARD_OVERLAP[family]
    if not isinstance(tp_backward_overlap, bool):
        raise TypeError(f"tp_backward_overlap must be True, False or None (as the stack named by framework "
                        f"does); got {type(tp_backward_overlap).__name__} {tp_backward_overlap!r}")
    return tp_backward_overlap
