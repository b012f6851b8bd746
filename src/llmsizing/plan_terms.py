"""The per-(GPU, tp, cp, micro-batch, ep, recomputation) terms of the planner's pricing
(:func:`llmsizing.plan_pricing._price`; Part III, "How many GPUs do you need?"): the kernels' rates and one
micro-batch's tensor- and context-parallel communication, total and exposed, of all the layers, read off the
step model's own pieces (:func:`~llmsizing.comm.communication`, :func:`~llmsizing.layouts.exposed_by_group`,
:func:`~llmsizing.layouts._cp_attention_s`, :func:`~llmsizing.kernels.rates`), the ones
:func:`~llmsizing.layouts.step_time` calls. Issue 35: a whole ``step_time`` per key also worked out the
compute, the bubble and the MFU range, which the pricing forms itself on arrays; the tp and cp entries of
:func:`exposed_by_group` do not depend on the compute (tensor parallelism sits on the critical path, the
ring's hops hide behind the attention core only), so they are the same numbers, bit for bit
(``tests/test_planner_speed.py`` compares whole searches with the reference).
"""

from __future__ import annotations

import numpy as np

from .comm import communication
from .hardware import dense_tflops
from .hardware import kernel_efficiency as default_efficiency
from .kernels import rates
from .layouts import _cp_attention_s, exposed_by_group
from .moe_layouts import route_max_nodes
from .parallel import Parallel


def layer_terms(model, gpu_list, keys, *, seq: int, eff, precision: str, dtype: str, node_of: dict,
                cp_comm: str, rcs) -> tuple[np.ndarray, dict]:
    """For each key ``(GPU index, tp, cp, micro-batch, ep, recomputation index)`` of ``keys``: the Linear
    layers' and the attention core's rates (FLOP/s) and, for one micro-batch without a pipeline (``dp = 1``,
    ``grad_accum = 1``; they do not depend on ``ep``), the tensor- and context-parallel communication
    exposed and in full, as a row ``(gemm rate, tp exposed, cp exposed, tp, cp, attention rate)``; and each
    GPU's dense peak (FLOP/s) by index. ``eff`` is the kernel efficiency (``None``: the GPU generation's, as
    :func:`~llmsizing.layouts.step_time` takes it)."""
    out = np.zeros((len(keys), 6))
    peak_of: dict = {}
    comm_of: dict = {}         # one per (GPU, tp, cp, micro, rc): the communication does not depend on ep
    rates_of: dict = {}        # one per (GPU, tp, cp, micro, ep): they do not depend on the recomputation
    max_nodes = route_max_nodes(model)
    for k, (g_, t_, c_, b_, e_, r_) in enumerate(keys):
        g = gpu_list[g_]
        if g_ not in peak_of:
            peak_of[g_] = (dense_tflops(g, dtype) * 1e12,
                           default_efficiency(g, dtype) if eff is None else eff)
        e = peak_of[g_][1]
        if (g_, t_, c_, b_, r_) not in comm_of:
            comm = communication(model, Parallel(tp=t_, sp=t_ > 1, cp=c_, cp_comm=cp_comm), batch=b_, seq=seq,
                                 gpu=g, precision=precision, grad_accum=1, recompute=rcs[r_],
                                 node=node_of[g.name], max_nodes=max_nodes)
            cp_att = _cp_attention_s(model, g, comm.parallel, batch=b_, seq=seq, grad_accum=1,
                                     recompute=rcs[r_], dtype=dtype, eff=e)
            # (tp and cp exposure do not depend on the compute's windows: any compute_s gives the same)
            exposed = exposed_by_group(comm, 0.0, grad_accum=1, fwd_share=1.0, cp_attention_s=cp_att)
            by = comm.by_group()
            comm_of[g_, t_, c_, b_, r_] = (exposed["tp"], exposed.get("cp", 0.0), by.get("tp", 0.0),
                                           by.get("cp", 0.0))
        if (g_, t_, c_, b_, e_) not in rates_of:
            rates_of[g_, t_, c_, b_, e_] = rates(model, g, tp=t_, cp=c_, batch=b_, seq=seq, dtype=dtype,
                                                 kernel_efficiency=e, ep=e_)
        gemm_rate, attention_rate = rates_of[g_, t_, c_, b_, e_]
        out[k] = (gemm_rate, *comm_of[g_, t_, c_, b_, r_], attention_rate)
    return out, {g_: v[0] for g_, v in peak_of.items()}
