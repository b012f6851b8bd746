"""What every experiment shares: paths, modes, CSV writing, the live-bytes tracker and one measured step.

* :class:`LiveBytes` (a ``TorchDispatchMode``) counts the bytes of every storage alive, op by op, also in backward;
  :func:`selfcheck` proves it sees the backward pass; :class:`ModuleTagger` tells it the running module.
* :func:`warm_up`, :func:`start_tracker`, :class:`PhaseMarkers`, :func:`measured_step`, :func:`phase_columns`
  and :func:`end_state`: one steady-state training step under the tracker, phase by phase, as ``step`` and
  ``lora`` measure it (the phases are described in :mod:`measure.step`).
* :func:`is_weight_copy` and :func:`saved_storage`: which tensors autograd saves count as activations.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import gc
import time
import warnings
import weakref
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
MODES = {"fp32": torch.float32, "bf16": torch.bfloat16, "autocast-bf16": torch.float32}  # mode -> param dtype
#: The modes of the HF sweeps (``step``, ``lora``).
STEP_MODES = ("fp32", "bf16", "autocast-bf16")
#: The phases of one measured step, in order (see :class:`PhaseMarkers`).
PHASES = ("forward", "loss_forward", "loss_backward", "head_backward", "backward", "optimizer")


# ============================================================================ small helpers
def date_today() -> str:
    return _dt.date.today().isoformat()


def dtype_name(t) -> str:
    return str(t).replace("torch.", "") if t is not None else ""


def write_csv(path, rows):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def gloo_join(rank: int, world: int, port: int) -> None:
    """Join rank ``rank`` of ``world`` to a gloo process group on 127.0.0.1:``port`` (what :func:`gloo_ranks`
    starts), one CPU thread per rank."""
    import os

    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)


def gloo_ranks(label: str, world: int, worker, extra_args: tuple):
    """Run ``worker(rank, world, port, *extra_args, queue)`` in ``world`` spawned processes (gloo over loopback
    TCP, one free port) and return what rank 0 puts on the queue, with a note on the machine; a rank that exits
    with an error stops the others and raises (the collective, all-to-all and Ulysses sweeps share this)."""
    import os
    import platform

    import torch.multiprocessing as mp

    cpus = os.cpu_count() or 1
    note = (f"{cpus} CPUs, {platform.machine()}, gloo over loopback TCP, 1 thread per rank"
            + (f"; {world} ranks oversubscribe {cpus} CPUs" if world > cpus else ""))
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, world, port, *extra_args, queue)) for r in range(world)]
    return gather_ranks(procs, queue, 1, f"{label} x {world}")[0], note


def free_port() -> int:
    """A free TCP port on loopback for a gloo rendezvous."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gather_ranks(procs, queue, count: int, label: str) -> list:
    """Start ``procs`` and take ``count`` results off ``queue``; a rank that exits with an error stops the
    others and raises, naming ``label`` (its peers would wait forever). Used by :func:`gloo_ranks` and by the CP
    and DDP/ZeRO sweeps (cp.py, dist.py), which gather one result per rank."""
    for p in procs:
        p.start()
    got = []
    while len(got) < count:
        try:
            got.append(queue.get(timeout=5))
        except Exception:                                   # noqa: BLE001  (queue.Empty: check the ranks)
            if any(p.exitcode not in (None, 0) for p in procs):
                for p in procs:
                    p.kill()
                raise RuntimeError(f"{label}: a rank failed (see its traceback above)")
    for p in procs:
        p.join()
    return got


def autocast(mode):
    return torch.autocast("cpu", dtype=torch.bfloat16) if mode == "autocast-bf16" else contextlib.nullcontext()


def adamw(params, impl):
    """AdamW (lr 1e-4) with the ``foreach``, for-loop (``forloop``) or ``fused`` implementation."""
    kw = {"foreach": dict(foreach=True), "forloop": dict(foreach=False), "fused": dict(fused=True)}[impl]
    return torch.optim.AdamW(params, lr=1e-4, **kw)


def optimizer_states(opt, counters=False) -> list:
    """The tensors of an optimizer's state: AdamW's moments (exp_avg, exp_avg_sq), or with ``counters`` its
    ``step`` counters."""
    return [v for s in opt.state.values() for k, v in s.items() if torch.is_tensor(v) and (k == "step") == counters]


def attention_impl(attention, ops):
    """Which attention kernel ran: ``eager-matmul`` for ``eager``, else what the ops seen by a tracker say."""
    if attention == "eager":
        return "eager-matmul"
    if "_scaled_dot_product_flash_attention_for_cpu" in ops:
        return "sdpa-flash-cpu"
    if "_scaled_dot_product_attention_math" in ops or "_scaled_dot_product_attention_math_for_mps" in ops:
        return "sdpa-math"
    return "sdpa-other"


def recompute_full(hf_model):
    """Recompute ``full`` on an HF model, as its users turn it on: ``gradient_checkpointing_enable`` with
    ``use_reentrant=False`` (transformers 5.23 warns that the name becomes ``activation_checkpointing_enable`` in v6;
    the warning is silenced)."""
    warnings.filterwarnings("ignore", message=".*gradient_checkpointing_enable.*")
    hf_model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def token_batch(vocab, batch, seq, labels_are_ids=True):
    """Seeded random token ids and labels: a copy of the ids (HF shifts them inside its loss) or, for the book's
    own stack, random targets of their own."""
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (batch, seq), generator=gen)
    labels = ids.clone() if labels_are_ids else torch.randint(0, vocab, (batch, seq), generator=gen)
    return ids, labels


# ============================================================================ what autograd saves
_VIEW_OR_COPY = {"ToCopyBackward0", "TBackward0", "ViewBackward0", "TransposeBackward0", "PermuteBackward0",
                 "ExpandBackward0", "UnsafeViewBackward0", "AliasBackward0"}


def is_weight_copy(t: torch.Tensor) -> bool:
    """True for autocast's low-precision copy of a parameter (or a view of it): a grad_fn chain of views and
    copies that ends in AccumulateGrad (i.e. at a parameter)."""
    fn = t.grad_fn
    for _ in range(4):
        if fn is None:
            return False
        if type(fn).__name__ == "AccumulateGrad":
            return True
        if type(fn).__name__ not in _VIEW_OR_COPY:
            return False
        nxt = [f for f, _ in fn.next_functions if f is not None]
        fn = nxt[0] if nxt else None
    return False


def saved_storage(t, param_ptrs):
    """The storage behind a tensor autograd saves (a ``saved_tensors_hooks`` pack hook's argument), or None for
    what no count of saved tensors includes: non-tensors, tensors off the CPU, empty storages and parameters
    (storages whose ``data_ptr`` is in ``param_ptrs``)."""
    if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
        return None
    st = t.untyped_storage()
    if st.nbytes() == 0 or st.data_ptr() in param_ptrs:
        return None
    return st


# ============================================================================ the live-bytes tracker
class LiveBytes(TorchDispatchMode):
    """Counts the bytes of every tensor storage alive, op by op.

    Every op runs through :meth:`__torch_dispatch__`; each output storage not seen before adds its ``nbytes``
    to :attr:`live`, and a ``weakref.finalize`` on the storage subtracts it when the storage is freed (torch
    keeps one Python object per live storage, so the finalizer fires when the C++ storage dies, also when the
    autograd engine frees it during backward). Storages that exist before the mode is entered (parameters,
    optimizer states, inputs) are registered with :meth:`add_baseline`. Kernel-internal scratch buffers that
    never become a tensor visible to the dispatcher (e.g. the CPU flash-attention kernel's per-thread buffers)
    are not seen.
    """

    def __init__(self, record_timeline=False):
        super().__init__()
        self.live = 0
        self.known = {}               # data_ptr -> [nbytes, op, module, category, token]
        self.baseline = 0
        self.untracked = 0            # storages first seen as an op *input* that were never registered
        self.weight_copy_live = 0
        self.param_ptrs = set()
        self.phase = "setup"
        self.phase_max = {}
        self.phase_ops = {}
        self.ops_seen = set()
        self.module = "-"             # set by a ModuleTagger, if any
        self.timeline = [] if record_timeline else None
        self.n_ops = 0

    # -- bookkeeping
    def _register(self, st, op, category):
        ptr = st.data_ptr()
        n = st.nbytes()
        if ptr == 0 or n == 0 or ptr in self.known:
            return False
        token = object()
        self.known[ptr] = [n, op, self.module, category, token]
        if category == "untracked":
            self.untracked += n
        else:
            self.live += n
            if category == "weight_copy":
                self.weight_copy_live += n
        weakref.finalize(st, self._free, ptr, token)
        return True

    def _free(self, ptr, token):
        rec = self.known.get(ptr)
        if rec is None or rec[4] is not token:
            return
        del self.known[ptr]
        n, _, _, category, _ = rec
        if category == "untracked":
            self.untracked -= n
        else:
            self.live -= n
            if category == "weight_copy":
                self.weight_copy_live -= n

    def add_baseline(self, tensors, params=()):
        for t in tensors:
            if torch.is_tensor(t) and t.device.type == "cpu":
                st = t.untyped_storage()
                if self._register(st, "baseline", "baseline"):
                    self.baseline += st.nbytes()
        self.param_ptrs |= {p.untyped_storage().data_ptr() for p in params}

    def set_phase(self, phase):
        self.phase = phase
        self._record("<" + phase + ">")

    def _record(self, op):
        self.phase_max[self.phase] = max(self.phase_max.get(self.phase, 0), self.live)
        if self.timeline is not None:
            self.timeline.append((self.phase, op, self.live, self.weight_copy_live))

    # -- the dispatch hook
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        ins = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        for a in ins:                 # a storage made outside the mode (e.g. torch.tensor(...)): not live-counted
            try:
                self._register(a.untyped_storage(), "input", "untracked")
            except (RuntimeError, NotImplementedError):
                pass
        out = func(*args, **kwargs)
        name = func.__name__ if hasattr(func, "__name__") else str(func)
        opname = str(func.overloadpacket.__name__) if hasattr(func, "overloadpacket") else name
        self.ops_seen.add(opname)
        weight_copy = (opname == "_to_copy" and ins and ins[0].untyped_storage().data_ptr() in self.param_ptrs)
        for o in tree_flatten(out)[0]:
            if isinstance(o, torch.Tensor) and o.device.type == "cpu":
                try:
                    st = o.untyped_storage()
                except (RuntimeError, NotImplementedError):
                    continue
                self._register(st, opname, "weight_copy" if weight_copy else "activation")
        self.n_ops += 1
        self.phase_ops[self.phase] = self.phase_ops.get(self.phase, 0) + 1
        self._record(opname)
        return out


class ModuleTagger:
    """Forward pre-/post-hooks that keep the qualified name of the innermost running module."""

    def __init__(self, model, tracker=None):
        self.stack = ["-"]
        self.tracker = tracker
        self.handles = []
        for name, mod in model.named_modules():
            self.handles.append(mod.register_forward_pre_hook(lambda m, a, n=name: self._push(n)))
            self.handles.append(mod.register_forward_hook(lambda m, a, o: self._pop()))

    def _push(self, name):
        self.stack.append(name or "<root>")
        if self.tracker is not None:
            self.tracker.module = self.stack[-1]

    def _pop(self):
        self.stack.pop()
        if self.tracker is not None:
            self.tracker.module = self.stack[-1]

    def remove(self):
        for h in self.handles:
            h.remove()


def selfcheck():
    """The tracker sees backward ops: y = relu(x W), loss = sum(y); after backward the live bytes must have
    grown by exactly W.grad's bytes (hand-computed: 4 bytes x 512 x 256) and every forward temporary be freed."""
    W = torch.randn(512, 256, requires_grad=True)
    x = torch.randn(64, 512)
    tr = LiveBytes()
    tr.add_baseline([W, x], [W])
    with tr:
        tr.set_phase("forward")
        loss = torch.relu(x @ W).sum()
        tr.set_phase("backward")
        loss.backward()
    del loss
    gc.collect()
    expected = 4 * 512 * 256
    grown = tr.live - tr.baseline
    bwd_ops = tr.phase_ops.get("backward", 0)
    ok = grown == expected == W.grad.nbytes and bwd_ops >= 3
    print(f"selfcheck: backward ops seen {bwd_ops}, live grew by {grown} B after backward, W.grad is "
          f"{W.grad.nbytes} B (hand: {expected}) -> {'ok' if ok else 'FAILED'}", flush=True)
    if not ok:
        raise SystemExit("the live-bytes tracker does not see the backward pass")


# ============================================================================ one measured step
def warm_up(loss_fn, opt, mode):
    """One step that is not measured: it creates the optimizer's states; the gradients are set to None after it."""
    with autocast(mode):
        loss = loss_fn()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    del loss
    gc.collect()


def start_tracker(params, opt, buffers, ids, labels, timeline=False):
    """A :class:`LiveBytes` whose baseline is all that lives before the step (parameters, gradients if any,
    optimizer states, buffers, ids and labels); returns it and the bytes of the ids and labels."""
    state = [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v)]
    tr = LiveBytes(record_timeline=timeline)
    tr.add_baseline(params + [p.grad for p in params if p.grad is not None] + state, params)
    tr.add_baseline(list(buffers))
    input_bytes = ids.untyped_storage().nbytes() + labels.untyped_storage().nbytes()
    tr.add_baseline([ids, labels])
    return tr, input_bytes


class PhaseMarkers:
    """Moves a tracker through the phases of a step as the step reaches them: ``loss_forward`` when the LM head
    returns the logits, ``head_backward`` when the logits get their gradient, ``backward`` when the final norm's
    input gets its gradient (the end of the LM-head + final-norm backward). :attr:`info` keeps the logits'
    dtypes and the live bytes at the two backward markers."""

    def __init__(self, tracker):
        self.tr = tracker
        self.info = {}

    def on_logits(self, t):
        self.info["logits_dtype"] = t.dtype
        self.tr.set_phase("loss_forward")
        if t.requires_grad:
            t.register_hook(self.on_logits_grad)

    def on_logits_grad(self, g):
        self.info["logits_grad_dtype"] = g.dtype
        self.info["logits_grad_live"] = self.tr.live
        self.tr.set_phase("head_backward")

    def on_final_norm_grad(self, g):
        self.info["head_backward_end_live"] = self.tr.live
        self.tr.set_phase("backward")

    def _final_norm_pre(self, mod, args):
        if torch.is_tensor(args[0]) and args[0].requires_grad:
            args[0].register_hook(self.on_final_norm_grad)

    def install(self, lm_head, final_norm):
        """Hooks on the LM head (None: the model calls :meth:`on_logits` itself) and the final norm; returns
        their handles."""
        handles = [] if lm_head is None else [lm_head.register_forward_hook(lambda m, a, o: self.on_logits(o))]
        handles.append(final_norm.register_forward_pre_hook(self._final_norm_pre))
        return handles


def measured_step(tr, loss_fn, opt, mode, *, pack=None, after_forward=None):
    """One training step under the tracker ``tr``: forward (with ``pack`` as the saved-tensor hook, if given, and
    under autocast for ``autocast-bf16``), backward, optimizer step. ``after_forward`` runs when the forward has
    returned. Returns the loss, the live bytes at the end of each part (``forward_end``, ``backward_end``,
    ``optimizer_end``; ``wc_*``: autocast's weight copies) and the seconds the step took. The loss tensor is
    dropped before it returns, so that only what the step leaves behind is alive."""
    saving = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t) if pack else contextlib.nullcontext()
    ends = {}
    t0 = time.perf_counter()
    with tr:
        tr.set_phase("forward")
        with saving, autocast(mode):
            loss = loss_fn()
        ends["forward_end"], ends["wc_forward_end"] = tr.live, tr.weight_copy_live
        if after_forward is not None:
            after_forward()
        tr.set_phase("loss_backward")
        loss.backward()
        ends["backward_end"], ends["wc_backward_end"] = tr.live, tr.weight_copy_live
        tr.set_phase("optimizer")
        opt.step()
        tr._record("<end>")
        ends["optimizer_end"] = tr.live
    seconds = time.perf_counter() - t0
    lossval = loss.item()
    del loss
    gc.collect()
    return lossval, ends, seconds


def phase_columns(tr, info: dict, ends: dict, input_bytes) -> dict:
    """The live-bytes columns of one measured step, phase by phase, then its peak and the phase of the peak (the
    ``step`` and ``lora`` CSVs share them)."""
    pmax = {ph: tr.phase_max.get(ph, 0) for ph in PHASES}
    return {
        "baseline_bytes": tr.baseline, "input_bytes": input_bytes,
        "forward_max_bytes": pmax["forward"], "loss_forward_max_bytes": pmax["loss_forward"],
        "forward_end_bytes": ends["forward_end"],
        "loss_backward_max_bytes": pmax["loss_backward"], "logits_grad_bytes": info.get("logits_grad_live", ""),
        "head_backward_max_bytes": pmax["head_backward"],
        "head_backward_end_bytes": info.get("head_backward_end_live", ""),
        "backward_max_bytes": pmax["backward"], "backward_end_bytes": ends["backward_end"],
        "optimizer_max_bytes": pmax["optimizer"], "optimizer_end_bytes": ends["optimizer_end"],
        "peak_bytes": max(pmax.values()), "peak_phase": max(PHASES, key=lambda ph: pmax[ph]),
    }


def end_state(tr, params, opt) -> dict:
    """What the step leaves behind: gradient bytes, AdamW's moments and step counters, and ``end_residual_bytes``,
    the live bytes beyond baseline + gradients (only states and gradients may remain: 0)."""
    grad_bytes = sum(p.grad.untyped_storage().nbytes() for p in {id(p): p for p in params}.values()
                     if p.grad is not None)
    return {"grad_bytes": grad_bytes,
            "optimizer_state_bytes": sum(t.nbytes for t in optimizer_states(opt)),
            "optimizer_step_bytes": sum(t.nbytes for t in optimizer_states(opt, counters=True)),
            "end_residual_bytes": tr.live - (tr.baseline + grad_bytes)}
