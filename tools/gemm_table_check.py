#!/usr/bin/env python3
"""Would pricing each GEMM as XLA measured it, with a layer's other costs priced apart, narrow the ranges
checked out of source? (issue 34, "GEMM efficiency by shape"; gemm37). An experiment: nothing in ``src/`` or
``data/`` changes.

Each variant copies ``src/``, ``data/`` and the two calibration tools into a temporary directory, swaps the
pricing there by a ``sitecustomize`` module (so it also holds in the process ``tools/calibrate.py`` starts
anew), runs ``tools/calibrate.py``, ``tools/calibrate_finetune.py`` and ``tools/calibrate.py`` again, and
prints the coverage and median width of every area of the fresh ``data/intervals.csv``, the kernel
efficiencies, the training-layout per-source table and the MoE runs' ratios:

    .venv/bin/python tools/gemm_table_check.py                       # the variants below, about 2 minutes
    .venv/bin/python tools/gemm_table_check.py table --layer-us 100  # one variant, 100 us a layer

Variants of :func:`llmsizing.kernels._efficiency_at` (a GEMM's share of the dense peak, before the calibrated
kernel efficiency):

* ``curve``: the library's pricing (the baseline: should reproduce ``data/intervals.csv``; since gemm44 the
  intensity curve, below 4,096 rows at 4,096 rows times :func:`llmsizing.kernels.few_row_share`);
* ``table``: XLA's measured H100 BF16 table (``data/gemm_efficiency.csv``, ``kind == "grid"``, ``gpu == "H100
  SXM"``: 256 to 4,096 in each of ``m``, ``n``, ``k``; the B200's table, b200gemm, reaches only ``curve``'s
  and ``few-rows``' few rows), interpolated in ``log2`` of each dimension, each held at 4,096 above it (the
  largest share in the table, 0.789, is within 1% of Bekman's best H100 BF16 GEMM, 794.5 / 989.4 = 0.803),
  and below 256 the time of 256 (share times ``dim / 256``); the same shares on every GPU and dtype (the
  A100's squares follow the H100's within 12% from 1,024: tests/test_gemm_table.py);
* ``table-product``: the table read by ``m x n`` and ``k`` (its shares depend on the output's size, not on
  its shape: (4,096, 1,024), (2,048, 2,048) and (1,024, 4,096) all give 0.76 at ``k = 4,096``), so
  an output larger than 4,096 x 4,096 takes that corner's share;
* ``refit``: the intensity curve refitted by :func:`llmsizing.kernels.fit_gemm_curve` on the curve rows and
  the grid together;
* ``few-rows``: below 4,096 rows the intensity curve at 4,096 rows times the ``table`` variant's share at the
  GEMM's rows over its share at 4,096 rows, same ``n`` and ``k`` (what gemm44 adopted: the same as ``curve``
  since); ``few-rows-large``: that only where ``n`` and ``k`` are both >= 4,096, the bare curve elsewhere.

``--layer-us``: a fixed time per transformer layer and micro-batch, forward and backward (4/3 of it with full
recomputation: the forward's kernels again, about a third of them), added to each stage's compute
(``llmsizing.layouts.step_time``'s); a layer's kernel launches: about 40 kernels a layer (Megatron-Core with
Transformer Engine: 4 GEMMs forward and 8 backward, the norms, residual adds, activation, rotary embedding and
the attention kernels each way) at 1 to 5 us each (a GPU-side gap between queued kernels, up to the 4-6 us a
launch costs the CPU when the step is launch-bound: pegainfer's measurement on an RTX 5070 Ti, susun-blog.com,
"From Launch Overhead to CUDA Graph"), so 40 to 200 us. It reaches the training-layout and MoE checks (both
price ``layouts.step_time``), not fine-tuning (whose fitted ``layer_overhead_s`` already prices HF + PEFT's
launches).

``--moe-layer``: the routed experts' grouped GEMMs (:func:`llmsizing.kernels.grouped_gemm_share`) times what
SonicMoE's measured MoE layers (``data/moe_layer_kernels.csv``: Guo et al. 2025, Fig. 14, H100, four kernels,
hidden 768 to 4,096) reach of the variant's own price of each bar at the benchmark's level (no kernel
efficiency; :func:`llmsizing.moe_evidence.moe_layer_tflops`' terms), the geometric mean over every forward and
backward bar: 0.977 under the curve, 0.724 under the table. Measured on those layers, not on the checked
runs; a layer whose GPU holds a single expert is not a grouped GEMM and keeps its price.

What it found (gemm37, 2026-12-03): ``table`` narrows the layout range (coverage 82.9% -> 87.4%, median
width 1.652 -> 1.541) and fine-tuning's (2.396 -> 2.359) and widens the MoE range (2.323 -> 3.365);
``--layer-us`` 40 or 200 leaves the layout range within 0.01 and the MoE range at 3.29 or 3.04;
``--moe-layer`` brings it to 2.458, still wider than the curve's. gemm44 (2026-12-04, from the bare curve):
``few-rows`` layout 81.1% / 1.583 -> 87.4% / 1.529, named stack 79.3% / 1.494 -> 85.6% / 1.461, fp8 62.5% /
1.501 -> 75.0% / 1.463, fine-tuning by base 83.9% / 2.274 -> 83.0% / 2.200 (one range 81.4% / 2.359 -> 79.7%
/ 2.249), MoE 88.9% / 1.952 unchanged (every run's ratio the same); ``few-rows-large`` the same widths but
coverage 85.6% (fp8 62.5%, fine-tuning 78.8%): adopted ``few-rows``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("curve", "table", "table-product", "refit", "few-rows", "few-rows-large")
AREAS = (("training", "all"), ("training-inputs", "all"), ("training-layout", "all"),
         ("training-layout", "bf16"), ("training-layout", "fp8"), ("training-layout", "stack:all"),
         ("moe-layout", "all"), ("fine-tuning", "all"), ("fine-tuning-base", "all"))

# the pricing swapped in every process of a variant (read from the environment at start-up)
SITECUSTOMIZE = '''
import csv, math, os
from functools import lru_cache

VARIANT = os.environ.get("GEMM_TABLE_VARIANT", "curve")
LAYER_S = float(os.environ.get("GEMM_TABLE_LAYER_US", "0")) * 1e-6
SIZES = (256, 512, 1024, 2048, 4096)
H100_BF16_PEAK = 989.4

if VARIANT != "curve" or LAYER_S:
    import llmsizing.kernels as K
    import llmsizing.layouts as L

    @lru_cache(maxsize=1)
    def _grid():
        with open(K.DATA / "gemm_efficiency.csv", newline="") as fh:
            rows = [r for r in csv.DictReader(fh) if r["kind"] == "grid" and r["gpu"] == "H100 SXM"]
        return {(int(r["m"]), int(r["n"]), int(r["k"])): float(r["tflops"]) / H100_BF16_PEAK for r in rows}

    def _axis(d):
        scale = min(1.0, d / 256)
        x = math.log2(min(max(d, 256), 4096)) - 8
        i = min(3, int(x))
        return scale, i, x - i

    @lru_cache(maxsize=65536)
    def table_share(m, n, k):
        g, share = _grid(), 1.0
        axes = []
        for d in (m, n, k):
            scale, i, f = _axis(d)
            share *= scale
            axes.append(((SIZES[i], 1 - f), (SIZES[i + 1], f)))
        total = 0.0
        for dm, wm in axes[0]:
            for dn, wn in axes[1]:
                for dk, wk in axes[2]:
                    if wm * wn * wk:
                        total += wm * wn * wk * g[dm, dn, dk]
        return share * total

    def product_share(m, n, k):
        out = m * n
        if out >= 4096 * 4096:
            return table_share(4096, 4096, k)
        n2 = min(n, 4096)
        m2 = out / n2
        if m2 > 4096:
            m2, n2 = 4096, out / 4096
        return table_share(m2, n2, k)

    if VARIANT == "refit":
        import pandas as pd
        d = pd.read_csv(K.DATA / "gemm_efficiency.csv")
        grid = d[(d["kind"] == "grid") & (d["gpu"] == "H100 SXM")].assign(kind="curve")
        R_HALF, EMAX, _ = K.fit_gemm_curve(pd.concat([d[d["kind"] == "curve"], grid]))

    def _curve_at(ridge, m, n, k, dtype):
        r = K._intensity(m, k, n, K._ELEMENT_BYTES.get(dtype, 2.0)) / ridge
        return min(K.GEMM_CEILING, K.GEMM_EMAX * r / (r + K.GEMM_R_HALF))

    def _efficiency_at(ridge, m, n, k, dtype, table=None):
        if VARIANT in ("few-rows", "few-rows-large") and m < 4096:
            if VARIANT == "few-rows" or (n >= 4096 and k >= 4096):   # the GPU's own table (b200gemm)
                t = table or K.GRID_STAND_IN
                d = K.grid_dtype(t, dtype)                           # sm_100's FP8 rows (gb46)
                return (_curve_at(ridge, 4096, n, k, dtype) * K._grid_rate(m, n, k, t, d)
                        / K._grid_rate(4096, n, k, t, d))
            return _curve_at(ridge, m, n, k, dtype)
        if VARIANT == "table":
            return table_share(m, n, k)
        if VARIANT == "table-product":
            return product_share(m, n, k)
        r = K._intensity(m, k, n, K._ELEMENT_BYTES.get(dtype, 2.0)) / ridge
        if VARIANT == "refit":
            return min(K.GEMM_CEILING, EMAX * r / (r + R_HALF))
        return min(K.GEMM_CEILING, K.GEMM_EMAX * r / (r + K.GEMM_R_HALF))

    K._efficiency_at = _efficiency_at

if os.environ.get("GEMM_TABLE_MOE_LAYER") == "1":
    import numpy as np
    import llmsizing.kernels as K
    from llmsizing.catalog import get_gpu
    from llmsizing.hardware import dense_tflops
    from llmsizing.model import Model
    from llmsizing.moe_evidence import MOE_LAYER_KERNELS_CSV
    from llmsizing.moe_time import routing_bytes_per_token

    def _bench_price_tflops(r):
        # moe_layer_tflops' price of one SonicMoE bar at the benchmark's own level (no kernel efficiency)
        gpu, h, ffn = r["gpu"], int(r["hidden"]), int(r["expert_ffn"])
        e, k = int(r["experts"]), int(r["top_k"])
        rows = int(r["tokens"]) * k
        up, down = 2 * rows * 2 * ffn * h, 2 * rows * ffn * h
        gemm_s = (up / K.gemm_efficiency(gpu, rows, 2 * ffn, h) + down / K.gemm_efficiency(gpu, rows, h, ffn)
                  ) / (K.grouped_gemm_share(rows / e) * dense_tflops(gpu, "bf16") * 1e12)
        layer = Model(name=f"bar h{h}", layers=1, hidden=h, heads=max(1, h // 128), head_dim=128,
                      ffn_hidden=ffn, vocab=32000, gated_mlp=True, experts=e, experts_per_token=k,
                      expert_ffn_hidden=ffn)
        route_s = int(r["tokens"]) * routing_bytes_per_token(layer, act_bytes=2) / 3 / (
            get_gpu(gpu).memory_bandwidth_gbps * 1e9)
        return (up + down) / (gemm_s + route_s) / 1e12

    with open(MOE_LAYER_KERNELS_CSV, newline="") as fh:
        _bars = list(csv.DictReader(fh))
    _logs = [math.log(float(r[c]) / _bench_price_tflops(r)) for r in _bars
             for c in ("fwd_tflops", "bwd_tflops")]
    MOE_LAYER_FACTOR = math.exp(sum(_logs) / len(_logs))
    _share = K.grouped_gemm_share

    def grouped_gemm_share(rows):
        return _share(rows) * MOE_LAYER_FACTOR

    K.grouped_gemm_share = grouped_gemm_share

    if LAYER_S:
        from llmsizing.catalog import resolve_model
        from llmsizing.parallel import layers_per_stage, resolve_parallel

        _compute = L.step_compute_time_s

        def step_compute_time_s(model, parallel=None, *, batch, seq, gpu, grad_accum=1, recompute="none",
                                **kw):
            t = _compute(model, parallel, batch=batch, seq=seq, gpu=gpu, grad_accum=grad_accum,
                         recompute=recompute, **kw)
            model = resolve_model(model, moe=True)
            par = resolve_parallel(parallel, model, seq=seq)
            again = 4 / 3 if recompute == "full" else 1.0
            return t + LAYER_S * again * grad_accum * max(layers_per_stage(model.layers, par))

        L.step_compute_time_s = step_compute_time_s
'''

# what each variant reports (run in the variant's directory, after its calibration)
REPORT = '''
import csv, json, math
import numpy as np
from llmsizing import kernels as K
from llmsizing.moe_runs import moe_loso_check
from llmsizing.step_intervals import source_table, step_loso_check

out = {"areas": {}, "kernel": {}, "sources": [], "moe": []}
for r in csv.DictReader(open("data/intervals.csv")):
    out["areas"][r["area"] + "/" + r["group"]] = (float(r["measured_coverage"]), float(r["median_width"]),
                                                 r["low"], r["high"])
for r in csv.DictReader(open("data/kernel_efficiency.csv")):
    out["kernel"][r["generation"] + "/" + r["dtype"]] = float(r["kernel_efficiency"])
check, df = step_loso_check()
for r in source_table(check, df).itertuples():
    out["sources"].append((r.source[:44], int(r.runs), float(r.min_ratio), float(r.max_ratio), int(r.inside)))
m, mdf = moe_loso_check()
for run, ratio in zip(mdf["run"], np.exp(m.residuals)):
    out["moe"].append((run[:44], float(ratio)))
import llmsizing.kernels as KK
out["moe_factor"] = getattr(__import__("sitecustomize"), "MOE_LAYER_FACTOR", None)
out["shares"] = {str(s): K.gemm_efficiency("H100 SXM", *s) for s in ((256, 4096, 4096), (512, 4096, 4096),
                                                                     (4096, 4096, 4096), (8192, 2048, 2048))}
print(json.dumps(out))
'''


def run_variant(variant: str, layer_us: float, moe_layer: bool = False) -> dict:
    """Calibrate under ``variant`` (and ``layer_us``, ``moe_layer``) in a temporary copy; the report's
    dictionary."""
    with tempfile.TemporaryDirectory(prefix="gemm_table_") as tmp:
        tmp = Path(tmp)
        shutil.copytree(ROOT / "src", tmp / "src", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(ROOT / "data", tmp / "data")
        (tmp / "tools").mkdir()
        for name in ("calibrate.py", "calibrate_finetune.py"):
            shutil.copy(ROOT / "tools" / name, tmp / "tools" / name)
        (tmp / "sitecustomize.py").write_text(SITECUSTOMIZE)
        env = dict(os.environ, PYTHONPATH=f"{tmp}{os.pathsep}{tmp / 'src'}", GEMM_TABLE_VARIANT=variant,
                   GEMM_TABLE_LAYER_US=str(layer_us), GEMM_TABLE_MOE_LAYER="1" if moe_layer else "0")
        for tool in ("calibrate.py", "calibrate_finetune.py", "calibrate.py"):
            subprocess.run([sys.executable, str(tmp / "tools" / tool)], cwd=tmp, env=env, check=True,
                           stdout=subprocess.DEVNULL)
        done = subprocess.run([sys.executable, "-c", REPORT], cwd=tmp, env=env, check=True,
                              capture_output=True, text=True)
        return json.loads(done.stdout)


def show(label: str, rep: dict) -> None:
    print(f"== {label}")
    for area, group in AREAS:
        cov, width, low, high = rep["areas"].get(f"{area}/{group}", (float("nan"),) * 2 + ("", ""))
        bounds = f" [{float(low):.3f}, {float(high):.3f}]" if low else ""
        print(f"  {area:16s} {group:10s} coverage {cov:6.1%}  median width {width:.3f}{bounds}")
    print("  kernel efficiency:", ", ".join(f"{k} {v:.3f}" for k, v in rep["kernel"].items()
                                          if k.split("/")[0] in ("ampere", "hopper", "blackwell")))
    print("  GEMM shares (H100 SXM, BF16):", ", ".join(f"{k} {v:.3f}" for k, v in rep["shares"].items()))
    print("  training-layout, published / predicted by source (least, largest, inside of runs):")
    for src, runs, lo, hi, inside in rep["sources"]:
        print(f"    {src:44s} {lo:6.3f} {hi:6.3f} {inside:3d}/{runs}")
    if rep.get("moe_factor"):
        print(f"  MoE layer factor on the grouped expert GEMMs: {rep['moe_factor']:.3f}")
    print("  moe-layout, published / predicted:", ", ".join(f"{r} {x:.3f}" for r, x in rep["moe"]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="*", help=f"the pricings to calibrate, of {', '.join(VARIANTS)} "
                                                "(default: all)")
    ap.add_argument("--layer-us", type=float, default=0.0,
                    help="microseconds a layer and micro-batch, forward and backward (default 0)")
    ap.add_argument("--moe-layer", action="store_true",
                    help="the routed experts' grouped GEMMs times what SonicMoE's measured MoE layers "
                         "reach of the variant's price (data/moe_layer_kernels.csv, geometric mean of every "
                         "bar)")
    args = ap.parse_args(argv)
    bad = [v for v in args.variants if v not in VARIANTS]
    if bad:
        ap.error(f"variants must be of {', '.join(VARIANTS)}, got {', '.join(bad)}")
    if args.layer_us < 0 or args.layer_us != args.layer_us:
        ap.error(f"--layer-us must be a number of microseconds >= 0, got {args.layer_us}")
    for v in args.variants or VARIANTS:
        label = v + (f" + {args.layer_us:g} us a layer" if args.layer_us else "") + (
            " + measured MoE layers" if args.moe_layer else "")
        show(label, run_variant(v, args.layer_us, args.moe_layer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
