"""Why two families of published runs miss the memory model: the causes traced in their sources (issue 38).

Chapter 5 compares the GPU memory published runs logged with the model's peak
(:func:`~llmsizing.layout_fits.published_measured_memory`). Two patterns there come from what the runs' code
does, which the generic model does not price; this module works both out from their sources.

* **KempnerForge allocates more** (``benchmarks/mfu_scaling/mfu_scaling.md`` at abbbac3, code at 01b461a, the
  commit the report names; torch 2.11 in its ``uv.lock``). Three things its code does:

  - ``scripts/train.py`` wraps every micro-batch but the last in ``maybe_no_sync``
    (``kempnerforge/training/grad.py``: ``set_requires_gradient_sync(False)``), and ``default_mp_policy``
    (``distributed/parallel.py``) sets FSDP2's ``reduce_dtype=torch.float32``. Without the sync, FSDP2
    keeps each parameter's *unsharded* gradient and upcasts it to the reduce dtype
    (``FSDPParam.to_accumulated_grad_if_needed`` in torch's ``_fully_shard/_fsdp_param.py``): 4 bytes per
    parameter of the tensor-parallel rank, not sharded by FSDP, alive until the last micro-batch's backward.
    ``init_distributed`` (``distributed/setup.py``) keeps ``dp_shard`` in the mesh whenever tensor
    parallelism is on, so its TP-only runs are FSDP2 runs of one shard. Its single-GPU run has no FSDP: its
    bf16 ``.grad`` accumulate.
  - ``apply_tensor_parallel`` (``distributed/tensor_parallel.py``) leaves the token embedding replicated and
    gathers the output head's logits to ``Replicate()`` for the loss: every rank holds the embedding and
    the whole ``batch x seq x vocab`` logits.
  - The model is bf16 (``model.to(dtype=bf16)``) and ``F.cross_entropy`` takes its logits as they are: the
    logits (kept by the loop's ``logits`` variable), the bf16 log-probabilities and, in the loss's backward,
    two bf16 gradients: :data:`KF_LOSS_BYTES_PER_LOGIT`.

* **torchao's MI300X and B200 runs reserve less**: the torchtitan they ran (2c8b5947 and 6fc499f6, August
  2025) compiles the loss with the model (``build_cross_entropy_loss`` in ``components/loss.py``, from
  torchtitan #1033, 2025-04-02); the torchtitan 0.0.2 of the H100 runs (README of 2025-03-12) ran it eagerly,
  as the model prices it. Compiled, the loss saves the bf16 logits and two fp32 numbers per row instead of
  the fp32 log-probabilities, and its backward writes one bf16 gradient instead of 8 bytes of fp32
  temporaries (:data:`COMPILED_LOSS_SAVING`, read off Inductor's generated code for
  ``cross_entropy(pred.float(), labels)``).

Chapter 5 prints the comparison; ``tests/test_measured_traced.py`` works rows by hand.
"""

from __future__ import annotations

from ._validate import check_int

#: Bytes per logit KempnerForge's eager bf16 loss holds at its backward: the logits, the log-probabilities,
#: ``nll_loss``'s gradient of them and ``log_softmax``'s gradient of the logits, 2 bytes each (the library's
#: fp32 loss holds 4 + 8: :data:`~llmsizing.footprint.LOSS_BACKWARD_BYTES_PER_LOGIT`).
KF_LOSS_BYTES_PER_LOGIT = 8.0

#: Bytes per logit a compiled ``cross_entropy(pred.float(), labels)`` saves against the eager loss the model
#: prices, by phase: the forward keeps the bf16 logits (2) instead of fp32 log-probabilities (4); the loss's
#: backward adds a bf16 gradient (2) instead of two fp32 ones (8), so 4 of 12 bytes are left.
COMPILED_LOSS_SAVING = {"forward": 2.0, "loss backward": 8.0}


def kempnerforge_peak_bytes(model, *, tp: int, dp: int, batch: int, seq: int, grad_accum: int) -> dict:
    """KempnerForge's peak allocated bytes per GPU as its code runs (module docstring), at the last
    micro-batch's loss backward, by part: ``weights`` and ``optimizer states`` (bf16 weights, bf16 AdamW
    moments, sharded over ``dp``), ``gradients`` (FP32 and unsharded under FSDP2's no-sync; bf16 ``.grad``
    on a single GPU), ``activations`` (each layer's bf16 input, kept by full recomputation, split over ``tp``
    by sequence parallelism) and ``loss`` (:data:`KF_LOSS_BYTES_PER_LOGIT`, whole on every rank); ``peak``
    is their sum. Per tensor-parallel rank the parameters are the layers' and the LM head's split over ``tp``
    plus the whole embedding and norms (``tensor_parallel.py``). ``model``: a catalogue name or
    :class:`~llmsizing.model.Model`."""
    from .model_catalog import resolve_model

    model = resolve_model(model)
    tp, dp = check_int("tp", tp), check_int("dp", dp)
    batch, seq, grad_accum = check_int("batch", batch), check_int("seq", seq), check_int("grad_accum",
                                                                                         grad_accum)
    if model.tied_embeddings:
        raise ValueError("kempnerforge_peak_bytes prices an untied model (tie_embeddings=False, as its runs)")
    p = model.param_breakdown()
    local = (p["attention"] + p["mlp"] + p["lm_head"]) / tp + p["embedding"] + p["position"] + p["norms"]
    fsdp = tp * dp > 1                   # a mesh (world size > 1) always carries dp_shard with TP
    if grad_accum == 1:
        grads = 0.0                      # zero_grad(set_to_none) freed them; the backward has not begun
    else:
        grads = 4.0 * local if fsdp else 2.0 * local
    out = {"weights": 2.0 * local / dp, "optimizer states": 4.0 * local / dp, "gradients": grads,
           "activations": 2.0 * model.layers * batch * seq * model.hidden / tp,
           "loss": KF_LOSS_BYTES_PER_LOGIT * batch * seq * model.vocab}
    out["peak"] = sum(out.values())
    return out


def compiled_loss_peak_bytes(step, model, *, batch: int, seq: int, tp: int = 1) -> float:
    """The peak of ``step`` (a :class:`~llmsizing.footprint.TrainingMemory` priced with the eager fp32 loss)
    with the loss compiled as torchtitan compiles it: each phase less :data:`COMPILED_LOSS_SAVING` bytes per
    logit of one micro-batch (``batch x seq x vocab / tp``)."""
    from .model_catalog import resolve_model

    model = resolve_model(model)
    logits = check_int("batch", batch) * check_int("seq", seq) * model.vocab / check_int("tp", tp)
    return max(v - COMPILED_LOSS_SAVING.get(k, 0.0) * logits for k, v in step.phases_bytes.items())


#: The causes ``data/published_measured_memory.csv``'s ``code_traced`` column may name, each priced here.
TRACED_CAUSES = ("kempnerforge", "compiled loss")


def measured_memory_traced():
    """The rows of :func:`~llmsizing.layout_fits.published_measured_memory` whose ``code_traced`` names a
    cause (the data file's column, not the run's name) with their traced peak: ``run, measured_gib,
    model_gib, traced_gib, traced_ratio`` (measured / traced) and ``cause`` (``"kempnerforge"``:
    :func:`kempnerforge_peak_bytes`; ``"compiled loss"``: torchao's MI300X and B200 runs,
    :func:`compiled_loss_peak_bytes` of the row's step)."""
    import pandas as pd

    from .layout_fits import _dense_job_args, _stated_step, published_measured_memory, stated_rows
    from .memory import training_memory
    from .mfu_published import PUBLISHED_RUNS_CSV
    from .units import GiB

    mm = published_measured_memory().set_index("run")
    dense = pd.read_csv(PUBLISHED_RUNS_CSV)
    dense["dtype"] = dense["dtype"].fillna("bf16")
    rows, stated, out = {r.run: r for r in dense.itertuples()}, stated_rows(), []
    for run, m in mm.iterrows():
        cause = m["code_traced"]         # the data file's column (data/published_measured_memory.csv)
        if cause not in TRACED_CAUSES:
            if cause:
                raise ValueError(f"code_traced of {run!r} must be one of {', '.join(TRACED_CAUSES)} or "
                                 f"empty, got {cause!r}")
            continue
        kf = cause == "kempnerforge"
        args, _ = _dense_job_args(rows[run])
        mb = int(m["micro_batch"])
        args = {**args, "batch": mb, "grad_accum": args["batch"] * args["grad_accum"] // mb}
        par = args["parallel"]
        if kf:
            traced = kempnerforge_peak_bytes(args["model"], tp=par.tp, dp=par.dp, batch=mb, seq=args["seq"],
                                             grad_accum=args["grad_accum"])["peak"]
        else:
            kind = stated.get(run, ("", None))[1]
            step = _stated_step(kind, args) if kind == "recipe" else training_memory(**args)
            traced = compiled_loss_peak_bytes(step, args["model"], batch=mb, seq=args["seq"], tp=par.tp)
        out.append(dict(run=run, measured_gib=m["measured_gib"], model_gib=m["model_gib"],
                        traced_gib=traced / GiB, traced_ratio=m["measured_gib"] * GiB / traced,
                        cause=cause))
    return pd.DataFrame(out)
