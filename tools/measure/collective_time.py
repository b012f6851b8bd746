"""Sub-command ``collectives``: time all-reduce, all-gather and reduce-scatter under gloo on this CPU (chapter 9).

The "method" demonstration of the alpha-beta model: the same sweep nccl-tests runs on GPUs, run here with gloo
processes on one machine, then fitted with :mod:`llmsizing.alpha_beta`. Sizes follow nccl-tests' convention
(``doc/PERFORMANCE.md``): the whole array, i.e. the all-reduce buffer, the gathered output of an all-gather and
the input of a reduce-scatter (each rank holds ``size / n`` of it). Each rank is a process started with
``torch.multiprocessing``'s ``spawn`` (:func:`_worker` stays a module-level function so that children can
unpickle it). Each call is timed on every rank after a barrier; the time of a call is the slowest rank's
(gathered by an all-reduce MAX outside the timed region); the CSV keeps the median and the minimum over the
repeats. gloo runs reduce-scatter since torch 2.x (``reduce_scatter_tensor``); if this torch's gloo refuses it,
the row is skipped and the refusal printed.

Columns of data/gloo_collective_times.csv: collective, n_ranks, size_bytes, time_s_median, time_s_min, repeats,
torch_version, machine (CPU count and the oversubscription note), measured_on.
"""

from __future__ import annotations

import statistics
import time

import torch

from .core import date_today, gloo_join, gloo_ranks, write_csv

#: The sizes of the full sweep: 1 KiB .. 64 MiB by factors of 4 (a multiple of 4 x 4 bytes, so every rank's
#: share is a whole number of floats for 2 and 4 ranks).
SIZES = tuple(1024 * 4 ** k for k in range(0, 9))          # 1 KiB .. 64 MiB
QUICK_SIZES = (1024, 64 * 1024, 4 * 1024 ** 2)
COLLECTIVE_NAMES = ("all_reduce", "all_gather", "reduce_scatter")


def _call(name, size_bytes, world):
    import torch.distributed as dist
    elems = size_bytes // 4
    if name == "all_reduce":
        buf = torch.ones(elems)
        return lambda: dist.all_reduce(buf)
    if name == "all_gather":
        out, inp = torch.empty(elems), torch.ones(elems // world)
        return lambda: dist.all_gather_into_tensor(out, inp)
    out, inp = torch.empty(elems // world), torch.ones(elems)
    return lambda: dist.reduce_scatter_tensor(out, inp)


def _repeats(size_bytes, quick):
    if quick:
        return 5
    return 25 if size_bytes <= 1024 ** 2 else (9 if size_bytes <= 16 * 1024 ** 2 else 5)


def _worker(rank, world, port, sizes, quick, queue):
    import torch.distributed as dist

    gloo_join(rank, world, port)
    results = []
    for name in COLLECTIVE_NAMES:
        for size in sizes:
            try:
                fn = _call(name, size, world)
                for _ in range(2):                         # warm-up (connection set-up, first-touch pages)
                    fn()
            except (RuntimeError, NotImplementedError) as exc:
                if rank == 0:
                    print(f"  gloo refuses {name}: {exc}", flush=True)
                break
            times = []
            for _ in range(_repeats(size, quick)):
                dist.barrier()
                t0 = time.perf_counter()
                fn()
                dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
                dist.all_reduce(dt, op=dist.ReduceOp.MAX)   # the call lasts as long as its slowest rank
                times.append(float(dt))
            results.append((name, size, times))
    if rank == 0:
        queue.put(results)
    dist.barrier()
    dist.destroy_process_group()


def cmd_collectives(args):
    """Sub-command ``collectives``: the sweep at 2 and 4 ranks (``--quick``: 3 sizes, 5 repeats), written to
    ``--out`` (data/gloo_collective_times.csv); then the alpha-beta fit of each (collective, ranks) printed."""
    sizes = QUICK_SIZES if args.quick else SIZES
    rows = []
    for world in (2, 4):
        results, note = gloo_ranks("collectives", world, _worker, (sizes, args.quick))
        for name, size, times in results:
            rows.append({"collective": name, "n_ranks": world, "size_bytes": size,
                         "time_s_median": f"{statistics.median(times):.6e}", "time_s_min": f"{min(times):.6e}",
                         "repeats": len(times), "torch_version": torch.__version__, "machine": note,
                         "measured_on": date_today()})
            print(f"{name:15s} n={world} {size:>10,} B  median {statistics.median(times) * 1e6:10.1f} us", flush=True)
    write_csv(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")
    _print_fits(rows)


def _print_fits(rows):
    from llmsizing.alpha_beta import fit_alpha_beta
    keys = sorted({(r["collective"], r["n_ranks"]) for r in rows})
    for coll, n in keys:
        sel = [r for r in rows if (r["collective"], r["n_ranks"]) == (coll, n)]
        try:
            ab = fit_alpha_beta([r["size_bytes"] for r in sel], [float(r["time_s_median"]) for r in sel],
                                collective=coll, n=n)
        except ValueError as exc:
            print(f"fit {coll} n={n}: {exc}")
            continue
        print(f"fit {coll:15s} n={n}: alpha {ab.alpha_s * 1e6:8.1f} us/step, busbw {ab.busbw_gbps:6.2f} GB/s, "
              f"worst relative error {ab.worst_rel_error:.0%}")
