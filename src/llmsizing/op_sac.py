"""torchtitan's op-level selective activation checkpointing (``recompute="op-sac"`` and its variant
``"op-sac-sdpa-rerun"``; issues 34/38): which tensors one dense layer keeps, from torchtitan's policy and
its Llama block's call order (:data:`OP_SAC_SOURCE`). :mod:`llmsizing.act_terms` prices the activations
from it and :mod:`llmsizing.flops` the rerun FLOPs. Taught in chapter 5 ("Did the published runs fit?").

Whether SDPA's output is kept is data, not part of the policy's code
(:data:`llmsizing.parallel.OP_SAC_SDPA_SAVED`): torchtitan's ``_save_list`` named SDPA's flash and
memory-efficient kernels only until b39377f9 (2025-12-01, PR #2095), while from 3b85aa31 (2025-05-14,
PR #1196) it puts cuDNN attention first on compute capability 10.0 and up (``torchtitan/models/attention.py``
l.209-211 at 6fc499f6). A B200 run of that span reran its attention forward in the backward.
"""

from __future__ import annotations

from ._validate import check_bool, check_choice, check_int
from .catalog import DATA_DIR, resolve_model
from .model import Model
from .parallel import OP_SAC, OP_SAC_MODES, OP_SAC_SDPA_SAVED
from .precision import ACTIVATION_DTYPES, DTYPE_BYTES

#: Where ``recompute="op-sac"`` is read from: torchtitan ``torchtitan/parallelisms/parallelize_llama.py``
#: l.214-264 at 9dec370ad26b (the version of its 2024-12 H100 benchmarks; the same policy, moved to
#: ``models/llama3/parallelize_llama.py`` l.218-227, at e7c0cae, and ``models/llama3/infra/parallelize.py``
#: l.234-305 at 2c8b5947 and 6fc499f6). ``_save_list``: ``aten.mm``, SDPA's flash and memory-efficient
#: kernels, ``reduce_scatter_tensor``, ``max`` (and ``abs`` until 88247277c, 2025-02-06, PR #820);
#: ``_custom_policy`` counts the ``mm`` calls of each checkpointed block's forward and saves the 1st, 3rd,
#: 5th, ... (``not (mm and count % 2 == 0)``); every other op is ``PREFER_RECOMPUTE``. The matmuls of
#: torchtitan's Llama block in call order: ``models/llama/model.py`` at 9dec370, l.189 ``wq, wk, wv``, l.214
#: ``wo``, l.253 ``w2(silu(w1(x)) * w3(x))`` (``w1``, ``w3``, then ``w2``).
OP_SAC_SOURCE = ("pytorch/torchtitan 9dec370ad26b torchtitan/parallelisms/parallelize_llama.py l.214-264 "
                 "(_save_list, _custom_policy); torchtitan/models/llama/model.py l.189, 214, 253")


def sdpa_saved(recompute: str) -> bool:
    """Whether op SAC mode ``recompute`` keeps SDPA's output and log-sum-exp
    (:data:`~llmsizing.parallel.OP_SAC_SDPA_SAVED`)."""
    return OP_SAC_SDPA_SAVED[check_choice("recompute", recompute, OP_SAC_MODES)]


def op_sac_matmuls(model: Model | str) -> tuple[tuple[str, int, int, bool], ...]:
    """``(name, in_features, out_features, saved)`` of each matmul of one dense layer in torchtitan's call
    order (:data:`OP_SAC_SOURCE`): ``wq, wk, wv, wo`` and ``w1, w3, w2`` (gated MLP) or ``w1, w2``; the op
    policy saves the odd-numbered ones (1st, 3rd, ...), and the backward reruns the others' forward. A
    mixture of experts, a model with a bias on a projection (``F.linear`` with a bias runs ``addmm``, which
    the policy does not count) and a fused QKV matrix are refused: what their layers save is not modelled."""
    model = resolve_model(model, moe=True)
    _check_op_sac_model(model)
    h, a, g, d, f = model.hidden, model.heads, model.kv_heads, model.head_dim, model.ffn_hidden
    mms = [("wq", h, a * d), ("wk", h, g * d), ("wv", h, g * d), ("wo", a * d, h), ("w1", h, f)]
    mms += [("w3", h, f), ("w2", f, h)] if model.gated_mlp else [("w2", f, h)]
    return tuple((n, i, o, k % 2 == 0) for k, (n, i, o) in enumerate(mms))


def _check_op_sac_model(model: Model) -> None:
    if model.is_moe:
        raise ValueError(f"recompute={OP_SAC!r} is modelled for dense layers; {model.name!r} is a mixture of "
                         "experts (use recompute='none', 'selective' or 'full')")
    biased = [k for k in ("bias", "qkv_bias", "mlp_bias", "o_bias", "fused_qkv") if getattr(model, k, False)]
    if biased:
        raise ValueError(f"recompute={OP_SAC!r} counts torchtitan's bias-free, unfused projections "
                         f"(aten.mm); {model.name!r} has {', '.join(biased)}")


def op_sac_layer_bytes(model: Model | str, *, batch: int, seq: int, dtype: str = "bf16",
                       recompute: str = OP_SAC, tp: int = 1, sp: bool = False, cp: int = 1) -> float:
    """Bytes one layer keeps until its backward under torchtitan's op-level selective checkpointing
    (:data:`OP_SAC_SOURCE`), for one micro-batch on one GPU: its input (the checkpoint's argument), the
    outputs of the saved matmuls (:func:`op_sac_matmuls`: ``wq``, ``wv``, ``w1``, ``w2`` for Llama) and,
    where ``recompute`` keeps it (:func:`sdpa_saved`), SDPA's output and its fp32 log-sum-exp per row and
    head. ``max`` outputs are scalars (0 here). For Llama-3-8B that is ``p s b (4h + g d + f)`` plus
    ``4 a b s`` (``p s b (3h + g d + f)`` without SDPA's).

    With tensor parallelism (:data:`OP_SAC_TP_SOURCE`) the column-parallel outputs (``wq``, ``wv``, ``w1``)
    and SDPA's heads are split ``tp`` ways, but ``w2``'s saved output is the row-parallel matmul's local
    partial sum, ``s b h`` on every rank; with ``sp`` the input is this rank's ``s / tp`` tokens and the two
    ``reduce_scatter_tensor`` outputs (``wo``'s and ``w2``'s, ``s b h / tp`` each) are saved too (without
    ``sp`` the all-reduces are not on the list). Context parallelism: every tensor is of ``seq / cp`` tokens
    (torchtitan shards the sequence; the ring's SDPA output is this rank's). Measured with torch in
    ``data/op_sac_tp_saved.csv``."""
    model = resolve_model(model, moe=True)
    b, s, cp = check_int("batch", batch), check_int("seq", seq), check_int("cp", cp)
    tp, sp = check_int("tp", tp), check_bool("sp", sp)
    _check_op_sac_tp(model, recompute, tp, sp)
    s //= cp
    p = DTYPE_BYTES[check_choice("dtype", dtype, ACTIVATION_DTYPES)]
    mms = op_sac_matmuls(model)
    col = sum(o for n, _, o, saved in mms if saved and n not in _ROW_PARALLEL)      # split tp ways
    row = sum(o for n, _, o, saved in mms if saved and n in _ROW_PARALLEL)          # partial sums: whole
    sdpa = sdpa_saved(recompute)
    a_d, r = model.heads * model.head_dim, tp if sp else 1
    scattered = 2 * model.hidden / tp if sp else 0.0                                # wo's and w2's
    return (p * s * b * (model.hidden / r + (col + sdpa * a_d) / tp + row + scattered)
            + sdpa * 4 * b * model.heads / tp * s)


#: torchtitan's row-parallel projections (``RowwiseParallel``): their local matmul output is a partial sum of
#: the whole width; the others are ``ColwiseParallel`` (:data:`OP_SAC_TP_SOURCE`).
_ROW_PARALLEL = ("wo", "w2")

#: Where op SAC under tensor/sequence parallelism is read from: torchtitan
#: ``torchtitan/parallelisms/parallelize_llama.py`` at 9dec370ad26b, ``apply_tp`` l.164-180 (every block:
#: ``SequenceParallel`` norms, ``PrepareModuleInput`` Shard(1) -> Replicate, ``ColwiseParallel`` wq, wk, wv,
#: w1, w3, ``RowwiseParallel(output_layouts=Shard(1))`` wo, w2: torchtitan always pairs TP with SP) and
#: ``_save_list`` l.214-223 (``reduce_scatter_tensor``, no all-reduce). Measured: ``data/op_sac_tp_saved.csv``
#: (``tools/measure_op_sac_tp.py``).
OP_SAC_TP_SOURCE = ("pytorch/torchtitan 9dec370ad26b torchtitan/parallelisms/parallelize_llama.py l.164-180 "
                    "(apply_tp), l.214-223 (_save_list)")


def _check_op_sac_tp(model: Model, recompute: str, tp: int, sp: bool) -> None:
    tp = check_int("tp", tp)
    if check_bool("sp", sp) and tp == 1:
        raise ValueError("sp=True needs tp > 1")
    if tp > 1 and model.kv_heads % tp:
        raise ValueError(f"recompute={recompute!r} with tp={tp}: torchtitan's column-parallel wk and wv "
                         f"split the {model.kv_heads} KV heads, so tp must divide them")


def op_sac_shared_bytes(model: Model, *, batch: int, seq: int, dtype: str, recompute: str = OP_SAC,
                        tp: int = 1, sp: bool = False) -> float:
    """What a rebuilt layer's fused working set (:func:`~llmsizing.act_terms.dense_layer_terms`) shares with
    what op SAC keeps: the layer's input (its first norm's), V, ``w1``'s output (the MLP activation's input)
    and, where SDPA's are kept, its output (the output projection's input) and log-sum-exp; per
    tensor-parallel rank (``seq``: this rank's tokens of a context-parallel group)."""
    p, sb, sdpa = DTYPE_BYTES[dtype], seq * batch, sdpa_saved(recompute)
    h, a, g, d, f = model.hidden, model.heads, model.kv_heads, model.head_dim, model.ffn_hidden
    r = tp if sp else 1
    return p * sb * (h / r + (g * d + sdpa * a * d + f) / tp) + sdpa * 4 * batch * a / tp * seq


def check_op_sac(model, *, recompute=OP_SAC, tp=1, sp=False, cp=1, attention, stack, autocast, fp8,
                 dropout) -> None:
    """Refuse what op SAC does not model (each by its parameter). Tensor, sequence and context parallelism
    are modelled (:func:`op_sac_layer_bytes`); ``tp`` must divide the KV heads, as torchtitan's split
    needs."""
    _check_op_sac_model(model)
    _check_op_sac_tp(model, recompute, tp, sp)
    for name, value, allowed in (("attention", attention, "flash"), ("stack", stack, "fused"), ("autocast",
                                 autocast, False), ("fp8", fp8, None), ("dropout", dropout, False)):
        if value != allowed:
            raise ValueError(f"recompute={recompute!r} is modelled with {name}={allowed!r} only "
                             f"(torchtitan's SDPA block), got {name}={value!r}")


#: PyTorch's own op SAC cache on a torchtitan Llama block split by torchtitan's TP plan
#: (``tools/measure_op_sac_tp.py``, torch 2.13, gloo on CPU): bytes by op per ``(tp, sp)``.
OP_SAC_TP_CSV = DATA_DIR / "op_sac_tp_saved.csv"


def op_sac_tp_measured():
    """:data:`OP_SAC_TP_CSV` as a frame, one row per ``(tp, sp)``: the block's sizes, the measured bytes one
    rank keeps (``measured_bytes``, summed over its ops) and :func:`op_sac_layer_bytes` of the same block
    (``model_bytes``). Checked in ``tests/test_op_sac_tp.py``; shown in chapter 5."""
    import pandas as pd

    from .model import Model

    df = pd.read_csv(OP_SAC_TP_CSV)
    keys = ["tp", "sp", "batch", "seq", "hidden", "heads", "kv_heads", "ffn_hidden"]
    out = df.groupby(keys, as_index=False)["bytes"].sum().rename(columns={"bytes": "measured_bytes"})

    def model_bytes(r):
        block = Model("tiny-titan", layers=1, hidden=int(r.hidden), heads=int(r.heads),
                      kv_heads=int(r.kv_heads), ffn_hidden=int(r.ffn_hidden), vocab=2048, gated_mlp=True,
                      tied_embeddings=False, norm="rmsnorm", max_seq=int(r.seq))
        return op_sac_layer_bytes(block, batch=int(r.batch), seq=int(r.seq), tp=int(r.tp), sp=bool(r.sp))
    out["model_bytes"] = [model_bytes(r) for r in out.itertuples()]
    return out
