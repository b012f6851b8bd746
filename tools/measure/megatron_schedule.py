"""Sub-command ``megatron-schedule``: Megatron-Core's own 1F1B pipeline schedule, timed with unequal stages.

``llmsizing.pipeline_schedule`` prices a 1F1B step of ``m`` micro-batches whose stages take ``t_i`` (forward
and backward of one micro-batch) as ``m max + (sum - max) / v`` (:func:`unbalanced_1f1b_makespan`) and lays
it out op by op (:func:`pipeline_schedule`). This runs the real schedule: megatron-core's
``forward_backward_pipelining_without_interleaving`` and ``forward_backward_pipelining_with_interleaving``
(megatron/core/pipeline_parallel/schedules.py) with its ``P2PCommunicator`` (p2p_communication.py,
``batch_p2p_comm=False``: its ``_p2p_ops`` isend/irecv), ``pp`` gloo processes on one machine. Each stage
(each model chunk) is one custom ``autograd.Function`` that sleeps ``t_f`` in forward and ``t_b = 2 t_f`` in
backward (sleeping, not spinning: ``pp`` ranks share 2 cores), on a (1, 1, 8) fp32 activation; the loss is the
last stage's sum. The whole call is timed on each rank between two barriers on one monotonic clock; the
makespan is the last rank's end less the first rank's start, the median of ``REPS`` runs after a warm-up.

No GPU: ``torch.cuda.current_device`` answers ``"cpu"``, ``torch.cuda.synchronize`` does nothing, and a
``TorchFunctionMode`` turns the schedule's ``torch.zeros(..., device="cuda")`` (its token counter) into a CPU
tensor. Process groups are passed in (``pg_collection``, ``p2p_communicator``): pp = the world, tp / cp /
dp-cp one rank each, no embedding groups, no ``finalize_model_grads_func``. gloo's send, like NCCL's,
completes only once the matching receive is posted (checked in session 40: an ``isend`` waited 1.0 s for a
``recv`` posted 1 s late), so the ranks block on each other as they would on GPUs.
Writes ``data/megatron_schedule_measured.csv`` (issues 34/35: the check of session 39's fill/drain pricing).
"""

from __future__ import annotations

import statistics
import time

import torch

from .core import date_today, free_port, gather_ranks, gloo_join, write_csv

SCRIPT = "tools/measure/megatron_schedule.py"
#: One stage's forward (s) in the equal case (``--unit-ms``); the backward takes twice as long; a slow stage
#: ``SLOW`` times.
UNIT_F_S = 0.030
SLOW = 2.0
REPS = 5
HIDDEN = 8


def stage_forwards(pp: int, where: str, unit_s: float = UNIT_F_S) -> list[float]:
    """The forward time (s) of each stage: all ``unit_s``, one of them (``where``: first, middle = stage 1,
    last) ``SLOW`` times as long."""
    f = [unit_s] * pp
    if where != "equal":
        f[{"first": 0, "middle": 1, "last": pp - 1}[where]] *= SLOW
    return f


def chunk_forwards(pp: int, v: int, where: str, head: str, unit_s: float = UNIT_F_S) -> list[list[float]]:
    """Per stage, the forward time of each of its ``v`` chunks: a stage's time split evenly over its chunks
    (``head="even"``, what the library assumes), or with the slow stage's extra all in its last chunk
    (``head="last-chunk"``: Megatron's last chunk of the last stage holds the output layer and the loss)."""
    f = stage_forwards(pp, where, unit_s)
    out = [[x / v] * v for x in f]
    if head == "last-chunk" and where != "equal":
        i = {"first": 0, "middle": 1, "last": pp - 1}[where]
        out[i] = [unit_s / v] * (v - 1) + [f[i] - unit_s * (v - 1) / v]
    return out


class _Sleep(torch.autograd.Function):
    """``x * w`` that takes ``tf`` seconds forward and ``tb`` backward (a stand-in for a stage's layers)."""

    @staticmethod
    def forward(ctx, x, w, tf, tb):
        ctx.save_for_backward(x, w)
        ctx.tb = tb
        time.sleep(tf)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        time.sleep(ctx.tb)
        return g * w, (g * x).sum(), None, None


class _Chunk(torch.nn.Module):
    """One model chunk as Megatron's schedule sees it: ``config``, ``set_input_tensor``, a forward."""

    def __init__(self, config, tf_s: float, vp_stage: int | None = None):
        super().__init__()
        self.config, self.tf, self.input_tensor = config, tf_s, None
        if vp_stage is not None:
            self.vp_stage = vp_stage
        self.w = torch.nn.Parameter(torch.ones(()))
        from megatron.core.enums import ModelType
        self.model_type = ModelType.encoder_or_decoder

    def set_input_tensor(self, t):
        self.input_tensor = t[0] if isinstance(t, list) else t

    def forward(self, x):
        return _Sleep.apply(x, self.w, self.tf, 2 * self.tf)


def _forward_step(data_iterator, model):
    x = model.input_tensor if model.input_tensor is not None else next(data_iterator)
    out = model(x)
    return out, lambda o: (o.sum(), {"loss": o.detach().sum()})


class _CudaToCpu(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if str(kwargs.get("device", "")).startswith("cuda"):
            kwargs["device"] = "cpu"
        return func(*args, **kwargs)


def _worker(rank, world, port, cases, queue):
    import torch.distributed as dist
    from megatron.core.transformer.transformer_config import TransformerConfig
    from megatron.core.pipeline_parallel import schedules
    from megatron.core.pipeline_parallel.p2p_communication import P2PCommunicator
    from megatron.core.process_groups_config import ProcessGroupCollection

    gloo_join(rank, world, port)
    torch.cuda.current_device = lambda: "cpu"
    torch.cuda.synchronize = lambda *a, **k: None
    singles = [dist.new_group([r]) for r in range(world)]
    pgc = ProcessGroupCollection()
    pgc.tp = pgc.cp = pgc.dp_cp = singles[rank]
    pgc.pp, pgc.embd, pgc.pos_embd = dist.group.WORLD, None, None
    rows = []
    for case in cases:
        m, v = case["micro_batches"], case["virtual_stages"]
        cfg = TransformerConfig(num_layers=world * v, hidden_size=HIDDEN, num_attention_heads=1,
                                pipeline_model_parallel_size=world, pipeline_dtype=torch.float32,
                                batch_p2p_comm=False,
                                  virtual_pipeline_model_parallel_size=v if v > 1 else None,
                                  microbatch_group_size_per_vp_stage=world if v > 1 else None)
        p2p = P2PCommunicator(pp_group=dist.group.WORLD, config=cfg)
        tfs = case["chunk_forward_s"][rank]
        if v > 1:
            model = [_Chunk(cfg, tfs[c], vp_stage=c) for c in range(v)]
            func = schedules.forward_backward_pipelining_with_interleaving
        else:
            model, func = _Chunk(cfg, tfs[0]), schedules.forward_backward_pipelining_without_interleaving
        spans = []
        for rep in range(REPS + 1):                          # rep 0: the warm-up, not kept
            if v > 1:
                it = [iter([torch.ones(1, 1, HIDDEN)] * m) for _ in range(v)]
            else:
                it = iter([torch.ones(1, 1, HIDDEN)] * m)
            dist.barrier()
            t0 = time.monotonic()
            with _CudaToCpu():
                func(forward_step_func=_forward_step, data_iterator=it, model=model, num_microbatches=m,
                     seq_length=1, micro_batch_size=1, p2p_communicator=p2p, pg_collection=pgc)
            t1 = time.monotonic()
            dist.barrier()
            got = [None] * world
            dist.all_gather_object(got, (t0, t1))
            if rep:
                spans.append((max(e for _, e in got) - min(s for s, _ in got),
                              [e - s for s, e in got]))
        if rank == 0:
            mk = [s for s, _ in spans]
            med = statistics.median(mk)
            rows.append({**case, "makespan_s": med, "makespan_min_s": min(mk), "makespan_max_s": max(mk),
                         "rank_busy_s": [statistics.median(r[i] for _, r in spans) for i in range(world)]})
            print(f"pp={world} v={v} m={m} {case['case']:28s} {med * 1e3:8.1f} ms "
                  f"(min {min(mk) * 1e3:.1f}, max {max(mk) * 1e3:.1f})", flush=True)
    if rank == 0:
        queue.put(rows)
    dist.destroy_process_group()


def build_cases(quick: bool = False, unit_s: float = UNIT_F_S) -> dict[int, list[dict]]:
    """The cases per pipeline size: equal stages, and one slow stage first, in the middle (pp >= 3) or last,
    m = 1..8 micro-batches (1F1B); interleaved v = 2 with m = pp and 2 pp, equal or slow last stage (its
    extra spread evenly or all in its last chunk)."""
    out = {}
    for pp in (2, 3, 4):
        cases = []
        wheres = ["equal", "last", "first"] + (["middle"] if pp >= 3 else [])
        for where in wheres:
            for m in ((1, 4, 8) if quick else range(1, 9)):
                cases.append(dict(case=f"1f1b {where}", pp=pp, virtual_stages=1, micro_batches=m, slow=where,
                                  head="even", chunk_forward_s=chunk_forwards(pp, 1, where, "even", unit_s)))
        if pp in (2, 4):
            for where, head in (("equal", "even"), ("last", "even"), ("last", "last-chunk"),
                                ("first", "even")):
                for m in (pp, 2 * pp):
                    cases.append(dict(case=f"interleaved {where} {head}", pp=pp, virtual_stages=2,
                                      micro_batches=m, slow=where, head=head,
                                      chunk_forward_s=chunk_forwards(pp, 2, where, head, unit_s)))
        out[pp] = cases
    return out


def cmd_megatron_schedule(args):
    """Run every case of :func:`build_cases` under megatron-core's schedules; write ``args.out``."""
    import platform
    from importlib.metadata import version

    import torch.multiprocessing as mp

    mc = version("megatron-core")
    rows = []
    unit_s = getattr(args, "unit_ms", UNIT_F_S * 1e3) / 1e3
    for pp, cases in build_cases(getattr(args, "quick", False), unit_s).items():
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        port = free_port()
        procs = [ctx.Process(target=_worker, args=(r, pp, port, cases, queue)) for r in range(pp)]
        rows += gather_ranks(procs, queue, 1, f"megatron-schedule pp={pp}")[0]
    out = []
    for r in rows:
        fw = r["chunk_forward_s"]
        out.append({
            "case": r["case"], "pp": r["pp"], "virtual_stages": r["virtual_stages"],
            "micro_batches": r["micro_batches"], "slow_stage": r["slow"], "slow_extra_in": r["head"],
            "chunk_forward_ms": "|".join(";".join(f"{x * 1e3:g}" for x in s) for s in fw),
            "stage_forward_ms": ";".join(f"{sum(s) * 1e3:g}" for s in fw),
            "stage_backward_ms": ";".join(f"{2 * sum(s) * 1e3:g}" for s in fw),
            "makespan_ms": round(r["makespan_s"] * 1e3, 3),
            "makespan_min_ms": round(r["makespan_min_s"] * 1e3, 3),
            "makespan_max_ms": round(r["makespan_max_s"] * 1e3, 3),
            "rank_call_ms": ";".join(f"{x * 1e3:.3f}" for x in r["rank_busy_s"]),
            "reps": REPS, "megatron_core_version": mc, "torch_version": torch.__version__,
            "machine": f"{platform.machine()}, gloo over loopback TCP, {r['pp']} processes",
            "script": SCRIPT,
            "source": f"megatron-core {mc} schedules.forward_backward_pipelining_"
                      + ("with_interleaving" if r["virtual_stages"] > 1 else "without_interleaving")
                      + " run under gloo on CPU, stages sleep",
            "as_of": date_today()})
    write_csv(args.out, out)
    print(f"megatron-schedule: wrote {len(out)} rows to {args.out}")
