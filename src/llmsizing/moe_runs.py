"""Published mixture-of-experts training runs against the library's step time (issues 24 and 35; chapter 18).

``data/moe_published_runs.csv`` holds every MoE pre-training run whose GPU-hours, GPU type and token count
could be sourced, one row each with its source and date: DeepSeek-V3 (arXiv:2412.19437), DeepSeek-V2
(arXiv:2405.04434), JetMoE-8B (arXiv:2404.07413), Phi-3.5-MoE (its model card), Llama 4 Scout and Maverick
(Meta's model card), Granite 3.0 1B-A400M and 3B-A800M (IBM's Granite 3.0 report, Table 7) and OLMoE-1B-7B
(arXiv:2409.02060, Appendix B). A row says whether its layout is published (``layout_published``): where it
is not, the row's layout is an assumption written in its note. Searched for and left out, for want of a
published GPU-hour figure with a token count: gpt-oss-120b/20b (H100-hours published, tokens only as
"trillions"), DBRX, Snowflake Arctic (an upper bound), Moonlight, the Qwen MoE models, DeepSeekMoE 16B and
DeepSeek-V2-Lite. NVIDIA's NeMo / Megatron-Bridge performance tables are left out on purpose (issue 35).

:func:`predict_moe_run` prices a row with :func:`~llmsizing.layouts.step_time` on its layout, with every MoE
term the row's recipe names (:mod:`llmsizing.moe_time`: grouped GEMMs by their rows, routing kernels, load
skew, the pipeline schedule, the MTP module, the SMs kept for communication, the all-to-all and how much of
it the schedule hides) and turns the step into GPU-hours, ``tokens / tokens per step x step x GPUs``.
Nothing is fitted on these rows (issue 35 removed the MoE factor fitted on DeepSeek-V3, issue 24's 1.30).
:func:`moe_loso_check` measures the range of an MoE step on them, leaving whole sources out (the dense
layout range, set on dense runs, held 5 of these 9 runs); :func:`moe_run_check` sets each prediction against
the range the library states for an MoE step (:func:`~llmsizing.mfu.layout_range_factors` with ``moe=True``,
``data/intervals.csv`` area ``moe-layout``).
"""

from __future__ import annotations

from pathlib import Path

from ._validate import check_int, check_number
from .all_to_all import dispatcher_kwargs
from .model import Model

#: The published MoE runs (:func:`moe_published_runs`).
MOE_PUBLISHED_RUNS_CSV = Path(__file__).resolve().parents[2] / "data" / "moe_published_runs.csv"

#: JetMoE-8B, exactly (issue 35, jetmoe38), built by :meth:`Model.from_hf_config` from the fields of its
#: ``config.json`` (huggingface.co/jetmoe/jetmoe-8b): 24 layers, hidden 2,048, a mixture of attention heads
#: (8 experts of 16 query heads of 128, top-2, K and V shared: ``num_key_value_heads`` 16, ``kv_channels``
#: 128) and 8 SwiGLU MLP experts of width 5,632, top-2, vocabulary 32,000, tied embeddings. 8,522,237,952
#: parameters, 2,331,445,248 active (the paper: "8.5B", "2.2B"), as transformers 5.24 builds it
#: (``data/hf_meta_param_counts.csv``).
JETMOE_8B = Model.from_hf_config(
    {"model_type": "jetmoe", "num_hidden_layers": 24, "hidden_size": 2048, "num_key_value_heads": 16,
     "kv_channels": 128, "intermediate_size": 5632, "num_local_experts": 8, "num_experts_per_tok": 2,
     "vocab_size": 32000, "max_position_embeddings": 4096, "activation_function": "silu",
     "tie_word_embeddings": True}, name="jetmoe-8b")

#: The stand-in the JetMoE-8B row used before the mixture of attention heads was modelled (deprecated:
#: ``JETMOE_8B_STANDIN`` warns, :data:`JETMOE_8B` replaces it): the attention as dense attention with 32
#: query and 16 KV heads (the same FLOPs a token, no attention experts' router, permutation or grouped GEMMs;
#: 7.3B parameters against the published 8.5B).
_JETMOE_8B_DENSE_ATTENTION = Model(
    name="jetmoe-8b (stand-in)", layers=24, hidden=2048, heads=32, kv_heads=16, head_dim=128, ffn_hidden=5632,
    vocab=32000, gated_mlp=True, tied_embeddings=True, norm="rmsnorm", bias=False, max_seq=4096, experts=8,
    experts_per_token=2, expert_ffn_hidden=5632)


#: Phi-3.5-MoE for its FLOPs and parameters (not in the catalogue). Its ``config.json``
#: (huggingface.co/microsoft/Phi-3.5-MoE-instruct): 32 layers, hidden 4,096, 32 query and 8 KV heads of 128,
#: 16 experts of width 6,400 (SwiGLU), top-2, vocabulary 32,064, untied; LayerNorm with biases and attention
#: biases (kept as ``norm="layernorm"``, ``qkv_bias``): 41.9B parameters, 6.6B active (card: "42B", "6.6B").
PHI_35_MOE_STANDIN = Model(name="phi-3.5-moe (stand-in)", layers=32, hidden=4096, heads=32, kv_heads=8,
                           head_dim=128, ffn_hidden=6400, vocab=32064, gated_mlp=True, tied_embeddings=False,
                           norm="layernorm", bias=False, qkv_bias=True, max_seq=4096, experts=16,
                           experts_per_token=2, expert_ffn_hidden=6400)

#: Llama 4 Maverick's text model (not in the catalogue: its MoE layers alternate with dense ones, which
#: ``data/models.csv`` has no column for), built by :meth:`Model.from_hf_config` from the fields of
#: meta-llama/Llama-4-Maverick-17B-128E's ``text_config`` (as TensorRT-LLM's Llama 4 tests copy them):
#: 48 layers, hidden 5,120, 40 query and 8 KV heads of 128, 128 routed experts of width 8,192 and a
#: shared one, top-1, an MoE layer every 2nd layer, dense layers 16,384 wide, vocabulary 202,048,
#: 8,192-token chunked attention, ``use_qk_norm`` false (its config; modeling_llama4: "the 128E model does
#: not use qk_norm"). 400.7B parameters, 17.2B active (Meta's card: "400B", "17B").
MAVERICK_STANDIN = Model.from_hf_config(
    {"model_type": "llama4_text", "num_hidden_layers": 48, "hidden_size": 5120, "num_attention_heads": 40,
     "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
     "num_local_experts": 128, "num_experts_per_tok": 1, "interleave_moe_layer_step": 2,
     "vocab_size": 202048, "attention_chunk_size": 8192, "max_position_embeddings": 1048576,
     "tie_word_embeddings": False, "use_qk_norm": False}, name="llama-4-maverick (stand-in)")

#: The stand-ins by name (:func:`moe_published_runs`' ``model`` column).
STANDINS = {m.name: m for m in (JETMOE_8B, PHI_35_MOE_STANDIN, MAVERICK_STANDIN)}


def __getattr__(name: str):
    """``JETMOE_8B_STANDIN`` (deprecated, jetmoe38): the dense-attention stand-in, with a warning."""
    if name == "JETMOE_8B_STANDIN":
        import warnings

        warnings.warn("llmsizing.moe_runs.JETMOE_8B_STANDIN is deprecated: JetMoE's mixture of attention "
                      "heads is modelled (attn_experts); use moe_runs.JETMOE_8B (this name goes in the next "
                      "release)", DeprecationWarning, stacklevel=2)
        return _JETMOE_8B_DENSE_ATTENTION
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def moe_published_runs():
    """``data/moe_published_runs.csv`` as a DataFrame: run, catalogue model (or one of :data:`STANDINS`),
    GPU, the training stack its source names (``framework``, blank if none; read by
    :mod:`llmsizing.layout_fits`),
    GPUs (``n_gpus_published`` says whether the count is the source's or assumed), sequence length, tokens,
    GPU-hours, precision recipe, the layout (``pp``, ``ep``, ``dp``, ``zero``, ``recompute``), the global
    batch in sequences, the share of the all-to-all the run hides (``ep_overlap``), whether its shared experts
    run beside the all-to-all (``shared_expert_overlap``, ``yes``/``no``), DeepSeek's node limit
    (``max_nodes``), the token ``dispatcher`` (``alltoall`` or ``deepep``), the capacity factor of token
    dropping (``capacity_factor``, empty: dropless), ``role`` (``check``: every run checks the range, none is
    fitted), source, as-of date and note."""
    import pandas as pd

    return pd.read_csv(MOE_PUBLISHED_RUNS_CSV, keep_default_na=False, na_values=[""])


def _model(name: str):
    from .catalog import get_model

    if name == _JETMOE_8B_DENSE_ATTENTION.name:         # a row written before jetmoe38
        return __getattr__("JETMOE_8B_STANDIN")
    return STANDINS[name] if name in STANDINS else get_model(name)


def _int_or_none(value):
    return None if value != value or value in ("", None) else int(value)


def run_step(row, model: Model | None = None, *, micro_batch_seqs: int = 1):
    """The :class:`~llmsizing.layouts.StepTime` of one row of :func:`moe_published_runs` on its layout,
    micro-batches of ``micro_batch_seqs`` sequences (default one, the rows' convention; it must divide the
    sequences a pipeline runs a step, ``global_batch / dp``), with the row's recipe: ``precision``,
    ``schedule``, ``mtp_depth``, ``comm_sms``, ``ep_overlap``, ``shared_expert_overlap`` (``yes``: the
    layout's :attr:`~llmsizing.parallel.Parallel.shared_expert_overlap`), ``max_nodes``, ``recompute``,
    ``dispatcher`` (empty or absent: ``"alltoall"``; :data:`llmsizing.all_to_all.DISPATCHERS`),
    ``capacity_factor`` (empty: dropless; a number: token dropping at that capacity, the load skew of
    :func:`llmsizing.moe_time.load_skew`) and ``stage_layers`` (``;``-separated, empty: Megatron's even
    split). ``model``: a variant of the row's model to price in its place (chapter 18 prices DeepSeek-V2
    without its group limit so); default the row's. Chapter 18 prices OLMoE's published micro-batch (all
    four of a GPU's sequences at once) with ``micro_batch_seqs=4``."""
    from .layouts import step_time
    from .moe_time import load_skew
    from .parallel import Parallel

    split = str(row["stage_layers"]) if row["stage_layers"] == row["stage_layers"] else ""
    par = Parallel(pp=int(row["pp"]), dp=int(row["dp"]), ep=int(row["ep"]), zero=int(row["zero"]),
                   stage_layers=tuple(int(x) for x in split.split(";")) if split else None,
                   shared_expert_overlap=row.get("shared_expert_overlap", "no") == "yes")
    model = _model(row["model"]) if model is None else model
    per_pipe = int(row["global_batch"]) // par.dp
    micro = check_int("micro_batch_seqs", micro_batch_seqs, minimum=1)
    if per_pipe % micro:
        raise ValueError(f"micro_batch_seqs must divide the {per_pipe} sequences a pipeline runs a step "
                         f"({row.get('run', 'this row')!r}), got {micro}")
    cap = row["capacity_factor"] if "capacity_factor" in row else None
    skew = {} if cap is None or cap != cap or cap == "" else {
        "load_skew": load_skew(model, par.ep, capacity_factor=float(cap))}
    return step_time(model, row["gpu"], par, batch=micro, seq=int(row["seq"]), **skew,
                     grad_accum=per_pipe // micro, precision=row["precision"],
                     ep_overlap=float(row["ep_overlap"]), max_nodes=_int_or_none(row["max_nodes"]),
                     schedule=row["schedule"], mtp_depth=int(row["mtp_depth"]), comm_sms=int(row["comm_sms"]),
                     recompute=row["recompute"], **_dispatcher(row))


def _dispatcher(row) -> dict:
    """A row's ``dispatcher`` as :func:`~llmsizing.layouts.step_time`'s keyword (none for the default)."""
    d = row.get("dispatcher", "") if hasattr(row, "get") else ""
    return {} if d != d or d == "" else dispatcher_kwargs(d)


def predict_moe_run(row, model: Model | None = None, *, micro_batch_seqs: int = 1) -> dict:
    """One row of :func:`moe_published_runs` priced by :func:`run_step` (``model`` and ``micro_batch_seqs``
    as there): ``gpu_hours``
    (``tokens / tokens per step x step x GPUs / 3600``), the step's ``mfu``, ``step_s``, and the shares of the
    step in the pipeline bubble and the exposed all-to-all."""
    st = run_step(row, model, micro_batch_seqs=micro_batch_seqs)
    gpus = st.communication.parallel.gpus
    hours = float(row["tokens"]) / st.tokens * st.step_s * gpus / 3600
    return {"gpu_hours": hours, "mfu": st.mfu, "step_s": st.step_s, "bubble_share": st.bubble_s / st.step_s,
            "all_to_all_share": st.exposed_by_group_s.get("ep", 0.0) / st.step_s}


def run_variant(row, model: Model | None = None, *, micro_batch_seqs: int = 1, **changes) -> dict:
    """:func:`predict_moe_run` of ``row`` with some of its columns changed (``changes``: column=value; the
    row itself is left as it was), plus ``ratio``: the row's published ``gpu_hours`` over the predicted. It
    prices the readings of a run's layout or recipe that its report leaves open (chapter 18: Phi-3.5-MoE at 8
    stages or with selective recomputation, the small runs with full recomputation, DeepSeek-V2 without its
    shared-expert overlap, OLMoE on its published micro-batch with ``micro_batch_seqs``, as in
    :func:`run_step`). Raises ``ValueError`` naming a change that is not one of the row's columns."""
    unknown = sorted(set(changes) - set(row.index))
    if unknown:
        raise ValueError(f"changes: {', '.join(map(repr, unknown))} not among the row's columns "
                         f"({', '.join(map(str, row.index))})")
    varied = row.copy()
    for col, value in changes.items():
        varied[col] = value
    out = predict_moe_run(varied, model, micro_batch_seqs=micro_batch_seqs)
    out["ratio"] = float(varied["gpu_hours"]) / out["gpu_hours"]
    return out


def fit_moe_factor(runs=None) -> float:
    """Deprecated (issue 35): the MoE step has no fitted factor any more. Returns the geometric mean of
    published / predicted GPU-hours over the DeepSeek-V3 rows, for old callers, with a
    :class:`DeprecationWarning`; :func:`moe_run_check`'s ``ratio`` column is the measurement."""
    import math
    import warnings

    warnings.warn("llmsizing.moe_runs.fit_moe_factor is retired: the MoE step time has no fitted factor "
                  "(issue 35); read moe_run_check()['ratio'] instead (this name goes in the next release)",
                  DeprecationWarning, stacklevel=2)
    runs = moe_published_runs() if runs is None else runs
    fit = runs[runs["model"] == "deepseek-v3"]
    if fit.empty:
        raise ValueError("fit_moe_factor: no DeepSeek-V3 row")
    logs = [math.log(float(r["gpu_hours"]) / predict_moe_run(r)["gpu_hours"]) for _, r in fit.iterrows()]
    return math.exp(sum(logs) / len(logs))


#: The score of the MoE range (:func:`moe_loso_check`): ``|log|`` of the residual (Lei et al. 2018, Sec. 2.2,
#: :func:`llmsizing.intervals.conformal_bounds`), whose 80% bounds are finite from 4 sources; the two-tailed
#: score needs 9 and these runs come from 7. Fixed before the coverage was measured (moerange33).
MOE_RANGE_SCORE = "absolute"


def moe_loso_check(runs=None, *, coverage: float = 0.8):
    """The range of a mixture of experts' step, checked by leaving whole sources out (issue 35; chapter 18):
    ``(check, per_run)``. Each run of ``runs`` (default :func:`moe_published_runs`) is priced by
    :func:`predict_moe_run` on its layout, nothing fitted on these runs (the kernel efficiencies are the dense
    calibration's, none of these sources among it), so each fold's prediction is the same and the residual
    ``log(implied / step MFU) = log(predicted / published GPU-hours)`` is out of source as it stands. A source
    is one publication (:func:`~llmsizing.intervals.source_key`: the Llama 4 card's two runs and the Granite
    3.0 report's two are one source each), each weighing the same; :func:`~llmsizing.intervals.loso_check`
    (nested: each source against the bounds of the other sources alone) states the 80% bounds of the
    absolute residual (:data:`MOE_RANGE_SCORE`; symmetric about the prediction) and measures their coverage.
    With 7 sources the stated bound is the largest residual of them all, and each fold's the largest of the
    other 6: that is what so few sources give. ``per_run``: ``run``, ``source_key``, ``published`` and
    ``predicted`` GPU-hours, ``mfu`` (the step's) and ``implied_mfu``. ``tools/calibrate.py`` writes the
    result to ``data/intervals.csv``, area :data:`~llmsizing.mfu.MOE_RANGE_AREA`."""
    if runs is None and coverage == 0.8:
        check, df = _default_moe_loso_check()
        from .intervals import copied_check

        return copied_check(check), df.copy()
    return _moe_loso_check(runs, coverage)


def _default_moe_loso_check():
    global _DEFAULT_MOE_CHECK
    if _DEFAULT_MOE_CHECK is None:
        _DEFAULT_MOE_CHECK = _moe_loso_check(None, 0.8)
    return _DEFAULT_MOE_CHECK


_DEFAULT_MOE_CHECK = None


def _moe_loso_check(runs, coverage):
    import numpy as np
    import pandas as pd

    from .intervals import loso_check, source_key

    runs = moe_published_runs() if runs is None else runs
    rows = []
    for _, r in runs.iterrows():
        p = predict_moe_run(r)
        pub = check_number(f"gpu_hours of {r['run']!r}", float(r["gpu_hours"]), allow_equal=False)
        rows.append({"run": r["run"], "source_key": source_key(r["source"]), "published": pub,
                     "predicted": p["gpu_hours"], "mfu": p["mfu"],
                     "implied_mfu": p["mfu"] * p["gpu_hours"] / pub})
    df = pd.DataFrame(rows)
    log_step = np.log(df["mfu"].to_numpy(float))

    def fit_predict(train, test):
        # nothing is fitted on these runs: every fold predicts the step's own MFU
        return log_step[np.asarray(test, bool)]

    check = loso_check(np.log(df["implied_mfu"].to_numpy(float)), df["source_key"].to_numpy(object),
                       fit_predict, coverage=coverage, score=MOE_RANGE_SCORE)
    return check, df


def moe_run_check(runs=None, factor: float | None = None, *, range_area: str | None = None):
    """Every published MoE run against the library, a DataFrame indexed by run: ``published`` GPU-hours,
    ``predicted`` (:func:`predict_moe_run`), ``ratio`` (published / predicted), the range ``low`` / ``high``
    (``predicted`` divided by the top and the bottom of the stated range of an MoE step,
    :func:`~llmsizing.mfu.layout_range_factors` with ``moe=True``: 80% nominal, measured leaving whole sources
    out on these runs, :func:`moe_loso_check`; in sample here, so the run of the largest residual sits on its
    edge), ``inside`` (published within it), the step's ``mfu``, ``layout_published`` and ``role``.
    ``factor`` is retired (a ``DeprecationWarning``; a number multiplies the prediction as before).
    ``range_area``: ``"moe-layout"`` (``None``, the default: the MoE range) or ``"training-layout"`` (the
    dense layout range of the GPU and dtype, which the library stated for these runs before issue 35's MoE
    range; chapter 18 shows what it held)."""
    import warnings

    import pandas as pd

    from ._validate import check_choice
    from .mfu import LAYOUT_RANGE_AREA, MOE_RANGE_AREA, layout_range_factors
    from .precision import compute_dtype

    moe = (MOE_RANGE_AREA if range_area is None else check_choice(
        "range_area", range_area, (MOE_RANGE_AREA, LAYOUT_RANGE_AREA))) == MOE_RANGE_AREA
    runs = moe_published_runs() if runs is None else runs
    f = 1.0
    if factor is not None:
        warnings.warn("moe_run_check(factor=...) is retired: the MoE step time has no fitted factor "
                      "(issue 35)",
                      DeprecationWarning, stacklevel=2)
        f = check_number("factor", factor, allow_equal=False)
    rows = {}
    for _, r in runs.iterrows():
        p = predict_moe_run(r)
        lo, hi = layout_range_factors(r["gpu"], compute_dtype(r["precision"]), moe=moe)
        pub, pred = float(r["gpu_hours"]), f * p["gpu_hours"]
        rows[r["run"]] = {"published": pub, "predicted": pred, "ratio": pub / pred, "low": pred / hi,
                          "high": pred / lo, "inside": pred / hi <= pub <= pred / lo, "mfu": p["mfu"],
                          "layout_published": r["layout_published"], "role": r["role"]}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "run"
    return df


__all__ = ["MOE_PUBLISHED_RUNS_CSV", "JETMOE_8B", "PHI_35_MOE_STANDIN", "MAVERICK_STANDIN",
           "STANDINS", "moe_published_runs",
           "run_step", "predict_moe_run", "run_variant", "fit_moe_factor", "moe_run_check", "moe_loso_check",
           "MOE_RANGE_SCORE"]
