"""Compare normalisations of the GEMM curve on data/gemm_efficiency.csv (issue 34, GEMM by shape; gemm33).

``kernels.gemm_efficiency`` reads a GEMM's arithmetic intensity ``I`` over the GPU's ridge point (peak FLOP/s
over HBM bytes/s), so faster HBM at the same tensor cores raises the share of every GEMM, compute-bound or
not. This script refits, with :func:`llmsizing.kernels.fit_gemm_curve`'s procedure (a grid over the half
point, one level per (generation, dtype) by least squares in logs, the curve's level their geometric mean),
four forms of the same two-parameter curve ``E x / (x + R)`` and checks each on rows it was not fitted on:

* ``ridge``   (the library): ``x = I / ridge``, ``share = min(C, E x / (x + R))``.
* ``peak``    (a): ``x = I x B_REF / peak``, a size axis that scales with the GPU's compute, and the roofline
  ``share = min(C, E x / (x + R), I / ridge)``: bandwidth matters only where the GEMM is memory-bound.
  ``B_REF`` (3.35 TB/s, the H100 SXM's HBM) is a unit: only ``R / B_REF`` enters, so no extra parameter.
* ``sum``     (b): the roofline sum ``t = F / (peak x e(x)) + bytes / HBM`` with ``x`` as in (a), i.e.
  ``share = 1 / (1 / e(x) + ridge / I)``, capped at ``C``.
* ``die``     : as (a) but ``B_REF`` is the lowest HBM bandwidth among the catalogue's parts of the same
  generation and peak (the same tensor cores): the library's curve for every part but the H200-like ones.
* ``shape``   : ``x = I / I_REF`` (``I_REF`` = 295 FLOP/byte, a unit), the curve by shape alone, with the
  roofline min of (a): neither compute nor bandwidth moves the curve.

Checks: rms of log error on the fitted ``curve`` rows (each group at its own level, as ``fit_gemm_curve``
reports it), on the curve rows the fit leaves out (small outputs), on the ``grid`` rows (XLA's H100 BF16
table) and on each ``best`` row (Bekman's MAMF search) at the curve's single level; and the one clean
bandwidth-only comparison: Bekman's table gives the H200 the H100 SXM's 794.5 TFLOP/s in BF16 ("H200 is the
same", stas00/ml-engineering compute/accelerator/README.md, as of 2026-08-22) and 1,453.4 against 1,402.6 in
FP8 (best shapes 1280x4096x12032 and 1024x9216x14336, torch 2.7.1+cu128 against 2.7.0+cu126).

Run: ``PYTHONPATH=src python tools/gemm_normalisation.py``. Prints the table; changes nothing.
``--runs``: the kernel efficiency each published H100 SXM / H200 run needs
(:func:`llmsizing.calibration.run_kernel_efficiency`), under the library's curve and with the H200's GEMMs
priced at the H100's ridge (a patch of this process only): the end-to-end view of the same question.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from llmsizing.catalog import get_gpu  # noqa: E402
from llmsizing.hardware import dense_tflops, kernel_efficiency_row, matmul_intensity_flops_per_byte  # noqa: E402
from llmsizing.kernels import DATA, GEMM_CEILING, WAVE_OUTPUTS  # noqa: E402

B_REF_GBPS = 3350.0          # the H100 SXM's HBM, a unit for form (a)/(b)
I_REF = 295.0                # FLOP/byte, a unit for the shape-only form
#: Bekman's MAMF rows for the H200 (not in data/gemm_efficiency.csv): BF16 "same" as the H100 SXM's row, FP8.
H200_ROWS = [("H200", "hopper", "bf16", 2048, 2048, 13312, 794.5, "best (H100 row's note)"),
             ("H200", "hopper", "fp8", 1280, 4096, 12032, 1453.4, "best")]
FORMS = ("ridge", "peak", "sum", "shape", "die")


def _cols(d: pd.DataFrame) -> pd.DataFrame:
    d = d.copy()
    d["I"] = [matmul_intensity_flops_per_byte(int(x.m), int(x.k), int(x.n), 1 if x.dtype == "fp8" else 2)
              for x in d.itertuples()]
    d["peak"] = [dense_tflops(get_gpu(g), t) for g, t in zip(d["gpu"], d["dtype"])]
    d["hbm"] = [get_gpu(g).memory_bandwidth_gbps for g in d["gpu"]]
    d["ridge"] = d["peak"] * 1e12 / (d["hbm"] * 1e9)
    d["share"] = d["tflops"] / d["peak"]
    return d


def _die_hbm_gbps(gpu: str, dtype: str) -> float:
    """The lowest HBM bandwidth among the catalogue's parts of ``gpu``'s generation with its peak in ``dtype``
    (the same tensor cores): H100 SXM / H800 / H200 -> 3,350 GB/s."""
    g = get_gpu(gpu)
    peak, gen = dense_tflops(g, dtype), kernel_efficiency_row(g, "bf16").generation
    same = []
    for name in pd.read_csv(DATA / "gpus.csv")["name"]:
        o = get_gpu(name)
        try:
            same_die = kernel_efficiency_row(o, "bf16").generation == gen
            if same_die and abs(dense_tflops(o, dtype) - peak) < 1e-6:
                same.append(o.memory_bandwidth_gbps)
        except ValueError:
            pass
    return min(same)


def _x(form: str, d) -> np.ndarray:
    if form == "die":
        hbm = np.array([_die_hbm_gbps(g, t) for g, t in zip(d["gpu"], d["dtype"])])
        return (d["I"] * hbm * 1e9 / (d["peak"] * 1e12)).to_numpy()
    if form == "ridge":
        return (d["I"] / d["ridge"]).to_numpy()
    if form in ("peak", "sum"):
        return (d["I"] * B_REF_GBPS * 1e9 / (d["peak"] * 1e12)).to_numpy()
    return (d["I"] / I_REF).to_numpy()


def share(form: str, d, r_half: float, emax: float, cap: bool = True) -> np.ndarray:
    """The form's share of the peak at level ``emax`` (uncapped for the fit, as fit_gemm_curve)."""
    x = _x(form, d)
    e = emax * x / (x + r_half)
    mem = (d["I"] / d["ridge"]).to_numpy()          # the bandwidth roofline, as a share of the peak
    if form == "sum":
        e = 1.0 / (1.0 / e + 1.0 / mem)
    elif form in ("peak", "shape", "die"):
        e = np.minimum(e, mem)
    return np.minimum(GEMM_CEILING, e) if cap else e


def fit(form: str, d):
    """(r_half, emax, rms_log, per-group levels) on the curve rows whose output fills a wave."""
    d = d[(d["kind"] == "curve") & (d["m"] * d["n"] >= WAVE_OUTPUTS)].reset_index(drop=True)
    eff = np.log(d["share"].to_numpy())
    keys = sorted(set(zip(d["generation"], d["dtype"])))
    groups = [np.flatnonzero((d["generation"] == g) & (d["dtype"] == t)) for g, t in keys]
    best = None
    for rh in np.round(np.arange(0.1, 10.001, 0.01), 2):
        if form == "sum":          # the level is not a log offset here: a 1-D search per group
            lev = []
            grid = np.exp(np.linspace(math.log(0.3), math.log(3.0), 241))
            x, mem = _x(form, d), (d["I"] / d["ridge"]).to_numpy()
            for i in groups:
                pred = 1.0 / (1.0 / (grid[:, None] * x[i] / (x[i] + rh)) + 1.0 / mem[i])
                lev.append(math.log(grid[int(np.argmin(((eff[i] - np.log(pred)) ** 2).sum(axis=1)))]))
            ss = sum(float(((eff[i] - np.log(share(form, d.iloc[i], rh, math.exp(le), cap=False))) ** 2)
                           .sum()) for i, le in zip(groups, lev))
        else:
            f = np.log(share(form, d, rh, 1.0, cap=False))
            lev = [float(np.mean(eff[i] - f[i])) for i in groups]
            ss = sum(float(((eff[i] - le - f[i]) ** 2).sum()) for i, le in zip(groups, lev))
        if best is None or ss < best[0]:
            best = (ss, float(rh), float(np.exp(np.mean(lev))), dict(zip(keys, np.exp(lev))))
    return best[1], best[2], math.sqrt(best[0] / len(d)), best[3]


def _rms(a) -> float:
    return float(np.sqrt(np.mean(np.square(a))))


def main() -> None:
    raw = pd.read_csv(DATA / "gemm_efficiency.csv")
    d = _cols(raw)
    cols = ["gpu", "generation", "dtype", "m", "n", "k", "tflops", "kind"]
    h200 = _cols(pd.DataFrame(H200_ROWS, columns=cols))
    out = d[(d["kind"] == "curve") & (d["m"] * d["n"] < WAVE_OUTPUTS)]
    grid = d[(d["kind"] == "grid") & (d["gpu"] == "H100 SXM")]   # XLA sm_90
    gridw = grid[grid["m"] * grid["n"] >= WAVE_OUTPUTS]
    best = pd.concat([d[d["kind"] == "best"], h200], ignore_index=True)
    h100 = d[(d["gpu"] == "H100 SXM") & (d["kind"] == "best")]
    print(f"rows: fitted curve {int(((d['kind'] == 'curve') & (d['m'] * d['n'] >= WAVE_OUTPUTS)).sum())}, "
          f"curve left out {len(out)}, grid {len(grid)} ({len(gridw)} filling a wave), best {len(best)}")
    res = {}
    for form in FORMS:
        rh, em, rms, lev = fit(form, d)
        res[form] = (rh, em)
        e_out = np.log(share(form, out, rh, em) / out["share"])
        e_grid = np.log(share(form, grid, rh, em) / grid["share"])
        e_gridw = np.log(share(form, gridw, rh, em) / gridw["share"])
        levs = ", ".join(f"{g}/{t} {v:.3f}" for (g, t), v in lev.items())
        print(f"\n== {form}: R_half {rh:.2f}, E {em:.3f} (levels {levs})")
        print(f"   fitted curve rows rms log {rms:.4f}; left-out curve rows rms {_rms(e_out):.3f} "
              f"(mean {np.mean(e_out):+.3f})")
        print(f"   H100 grid rms log {_rms(e_grid):.3f} (mean {np.mean(e_grid):+.3f}); filling a wave "
              f"rms {_rms(e_gridw):.3f} (mean {np.mean(e_gridw):+.3f})")
        # the grid's shape, level removed: how well the curve's slope matches XLA's table
        print(f"   grid, own level: rms {_rms(e_grid - np.mean(e_grid)):.3f}; filling a wave "
              f"{_rms(e_gridw - np.mean(e_gridw)):.3f}")
        for x in best.itertuples():
            p = float(share(form, best.iloc[[x.Index]], rh, em)[0])
            print(f"   best {x.gpu:<10s} {x.dtype:<4s} {x.m}x{x.n}x{x.k}: measured {x.share:.3f}, "
                  f"curve {p:.3f} "
                  f"(log err {math.log(p / x.share):+.3f})")
        nv = [x.gpu != "MI300X" for x in best.itertuples()]
        eb = np.log(share(form, best, rh, em) / best["share"])[nv]
        print(f"   best rows (NVIDIA, 7): log err range {eb.max() - eb.min():.3f}, sd {np.std(eb):.3f}, "
              f"mean {np.mean(eb):+.3f}")
        same = pd.concat([h100[h100["dtype"] == "bf16"], h200[h200["dtype"] == "bf16"]], ignore_index=True)
        p = share(form, same, rh, em)
        f8 = pd.concat([h100[h100["dtype"] == "fp8"], h200[h200["dtype"] == "fp8"]], ignore_index=True)
        q = share(form, f8, rh, em)
        print(f"   H200 / H100 at the H100's BF16 best shape: curve {p[1] / p[0]:.3f}, measured 1.000; "
              f"FP8 at each part's best shape: curve {q[1] / q[0]:.3f}, measured {1453.4 / 1402.6:.3f}")
    # The CUDA 11 figure (2020-05-14) predates the A100 80GB (announced 2020-11-16): it was most likely an
    # A100 40GB (1,555 GB/s). The forms that read bandwidth move with that label; the fit, again:
    r2 = raw.copy()
    r2.loc[(r2["kind"] == "curve") & (r2["gpu"] == "A100 80GB"), "gpu"] = "A100 40GB"
    d2 = _cols(r2)
    print("\nFitted curve rows with the A100 figure read as an A100 40GB: " + ", ".join(
        f"{form} R_half {fit(form, d2)[0]:.2f} rms {fit(form, d2)[2]:.4f}" for form in FORMS))
    print("\nA GEMM on the H100 and H200 under each form (share of the BF16 peak):")
    probe = _cols(pd.DataFrame([("H100 SXM", 128, 4096, 4096), ("H200", 128, 4096, 4096),
                                ("H100 SXM", 8192, 4096, 4096), ("H200", 8192, 4096, 4096),
                                ("H100 SXM", 8192, 14336, 4096), ("H200", 8192, 14336, 4096)],
                               columns=["gpu", "m", "n", "k"]).assign(dtype="bf16", tflops=1.0))
    for form in FORMS:
        s = share(form, probe, *res[form])
        print(f"   {form:<6s} " + "  ".join(f"{g.split()[0]} {m}x{n}x{k} {v:.3f}"
                                           for g, m, n, k, v in zip(probe["gpu"], probe["m"], probe["n"],
                                                                     probe["k"], s)))


def _run_efficiencies(h200_as_h100: bool) -> None:
    """Print, as JSON, {run: [gpu, dtype, kernel efficiency or None]} for the H100 SXM / H200 runs; with
    ``h200_as_h100`` the H200's GEMMs are priced at the H100's ridge (this process only: the library caches
    step times, so each pricing runs in its own process)."""
    import json

    import llmsizing.kernels as kernels
    from llmsizing.calibration import run_kernel_efficiency
    from llmsizing.time_cost import published_runs

    if h200_as_h100:
        ridge = kernels.ridge_point_flops_per_byte
        kernels.ridge_point_flops_per_byte = lambda gpu, dtype="bf16": ridge(
            "H100 SXM" if get_gpu(gpu).name == "H200" else gpu, dtype)
    df = published_runs()
    df = df[df["gpu"].isin(["H200", "H100 SXM"])]
    print(json.dumps({r.run: [r.gpu, r.dtype, run_kernel_efficiency(r)] for r in df.itertuples()}))


def runs() -> None:
    import json
    import os
    import statistics
    import subprocess

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))

    def get(flag):
        out = subprocess.run([sys.executable, __file__, flag], capture_output=True, text=True, env=env,
                             check=True)
        return json.loads(out.stdout)

    cur, same = get("--_plain"), get("--_h200-as-h100")

    def show(e):
        return "unreachable" if e is None else f"{e:.3f}"

    for run, (gpu, dtype, e) in cur.items():
        if gpu == "H200":
            print(f"H200 {dtype:<4s} {show(e):>11s} -> {show(same[run][2]):>11s}  {run[:70]}")
    for label, table, gpu in (("H100 SXM bf16, library", cur, "H100 SXM"),
                              ("H200 bf16, library", cur, "H200"),
                              ("H200 bf16, GEMMs at H100 speed", same, "H200")):
        vals = [e for g, t, e in table.values() if g == gpu and t == "bf16" and e is not None]
        print(f"median {label}: {statistics.median(vals):.3f} (n {len(vals)})")


if __name__ == "__main__":
    if "--_plain" in sys.argv[1:] or "--_h200-as-h100" in sys.argv[1:]:
        _run_efficiencies("--_h200-as-h100" in sys.argv[1:])
    else:
        runs() if "--runs" in sys.argv[1:] else main()
