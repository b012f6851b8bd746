"""Part II, chapter 6 ("Hardware"): the GPU landscape, memory capacity against bandwidth and each GPU's bf16
roofline (:func:`render_gpu_landscape`). :mod:`~llmsizing.charts.many_gpus` imports every name here and
re-exports it (split out when the roofline panel's legend grew, lows29).

No formula lives here: render functions only call the library and draw.
"""

from __future__ import annotations

from .base import GPU_COLORS, View, _grid, _label_colour, new_figure


#: Where a GPU's name sits next to its dot in the capacity panel (points; alignment), where the default
#: overlaps. A label of several GPUs whose dots (nearly) coincide is keyed by its first name. A fourth item,
#: ``"leader"``, sets the label off in free space with a thin line from its lower left corner to the dot (the
#: L40S and RTX 6000 Ada: centred on their dot, the label ran into the y axis; lows29).
_LANDSCAPE_LABEL_OFFSETS = {"A100 80GB": (0, 7, "center"), "RTX 4090": (5, -8, "left"),
                            "H100 SXM": (5, -4, "left"), "B200": (-5, -3, "right"),
                            "L40S": (-18, 62, "left", "leader"), "A10": (0, 5, "center"),
                            "L4": (0, -7, "center")}
#: The GPUs the roofline panel colours and names in its legend: those chapter 6's prose compares (the A100,
#: H100, H200 and B200 generations, AMD's MI300X and the L40S, a GDDR card with a high ridge point). The
#: others are drawn light, unnamed, under one legend entry (21 lines of one grey could not be told apart;
#: read28g, lows29). A figure of at most this many GPUs names every one.
_ROOFLINE_NAMED = ("A100 80GB", "H100 SXM", "H200", "B200", "MI300X", "L40S")
#: The colour and line width of the roofline panel's other GPUs.
_ROOFLINE_OTHERS = ("#BBBBBB", 0.8)


def _landscape_groups(df) -> list[list[str]]:
    """The GPUs of ``df`` whose dots (nearly) coincide in the capacity panel, in catalogue order: within
    0.15 TB/s and 2% of the memory axis of the group's first GPU (the H100 SXM and the H800 share a dot).
    One label, one name a line, names each group, so that names never print over each other."""
    groups: list[list[str]] = []
    near = (df[["hbm_tbps", "memory_gib"]] / [0.15, 0.02 * float(df["memory_gib"].max())]).T
    for name in df.index:
        g = next((g for g in groups if (abs(near[name] - near[g[0]]) <= 1).all()), None)
        groups.append([name]) if g is None else g.append(name)
    return groups


def render_gpu_landscape(gpus=None, named=None) -> View:
    """Chapter 6: the catalogue's GPUs (default: all) on two axes. Left: memory capacity (GiB, as the driver
    reports it) against HBM bandwidth (TB/s). Right: the bf16 roofline of each GPU, attainable TFLOP/s =
    min(dense peak, intensity x HBM bandwidth), with its ridge point marked, and the intensity of two matrix
    multiplies for reference (one decoding token, and a 4096-cube training matmul). ``named`` (GPU names;
    default :data:`_ROOFLINE_NAMED`, the ones chapter 6 compares) are coloured and named on the roofline, the
    others drawn light under one legend entry. Numbers come from :mod:`llmsizing.hardware`."""
    import numpy as np

    given = named is not None
    if not given:
        named = _ROOFLINE_NAMED
    elif (isinstance(named, str) or not hasattr(named, "__iter__")
          or not all(isinstance(g, str) for g in named)):
        raise TypeError(f"named must be a sequence of GPU names; got {named!r}")

    from ..hardware import gpu_comparison, matmul_intensity_flops_per_byte

    df = gpu_comparison(gpus)
    fig, (ax1, ax2) = new_figure(9.6, 3.9, ncols=2)
    for name, r in df.iterrows():
        ax1.scatter(r["hbm_tbps"], r["memory_gib"], color=GPU_COLORS.get(name, "0.3"), s=40, zorder=3)
    for group in _landscape_groups(df):
        r = df.loc[group[0]]
        # a name in its GPU's colour, unless that colour is too light to read on white (the dot keeps it)
        c = _label_colour(GPU_COLORS.get(group[0], "0.3"), fig.get_facecolor()) if len(group) == 1 else "0.25"
        dx, dy, ha, *leader = _LANDSCAPE_LABEL_OFFSETS.get(group[0], (4, 3, "left"))
        va = "bottom" if dy > 0 else "top" if dy < -5 else "center_baseline"
        line = dict(arrowprops=dict(arrowstyle="-", color=c, lw=0.6, shrinkA=0, shrinkB=4,
                                    relpos=(0, 0))) if leader else {}
        ax1.annotate("\n".join(group), (r["hbm_tbps"], r["memory_gib"]), xytext=(dx, dy),
                     textcoords="offset points", fontsize=7.5, color=c, ha=ha, va=va, linespacing=1.0,
                     **line)
    ax1.set_xlabel("HBM / GDDR bandwidth (TB/s, decimal)")
    ax1.set_ylabel("memory (GiB, as reported)")
    ax1.set_xlim(0, df["hbm_tbps"].max() * 1.22)
    ax1.set_ylim(0, df["memory_gib"].max() * 1.12)
    _grid(ax1, lw=0.4, alpha=0.5)
    ax1.set_title("capacity vs bandwidth", fontsize=9, loc="left")

    x = np.logspace(-1, 13, 300, base=2)
    if given and (unknown := [g for g in named if g not in df.index]):
        raise ValueError(f"named={unknown!r}: not among the GPUs drawn ({', '.join(df.index)})")
    named = (list(df.index) if len(df) <= len(named) else [g for g in df.index if g in named])
    others = [g for g in df.index if g not in named]
    grey, thin = _ROOFLINE_OTHERS
    for name in others:                      # light, under the named ones, and one legend entry for all
        r = df.loc[name]
        ax2.plot(x, np.minimum(r["bf16_dense_tflops"], x * r["hbm_tbps"]), color=grey, lw=thin, zorder=1,
                 label=f"the other {len(others)} GPUs (table above)" if name == others[0] else None)
        ax2.scatter([r["ridge_flops_per_byte"]], [r["bf16_dense_tflops"]], color=grey, s=8, zorder=1)
    # the slower memory on top: where two roofs meet (the H200 is an H100 with faster HBM) both ridges show
    for name in sorted(named, key=lambda g: -df.loc[g, "hbm_tbps"]):
        r = df.loc[name]
        c = GPU_COLORS.get(name, "0.3")
        label = name if r["dtype"] == "bf16" else f"{name} ({r['dtype']})"  # the V100: no bf16, its fp16 rate
        ax2.plot(x, np.minimum(r["bf16_dense_tflops"], x * r["hbm_tbps"]), color=c, lw=1.6, label=label,
                 zorder=2)
        ax2.scatter([r["ridge_flops_per_byte"]], [r["bf16_dense_tflops"]], color=c, s=18, zorder=3)
    marks = {"decode, 1 token\n(1 x 4096 x 4096)": matmul_intensity_flops_per_byte(1, 4096, 4096),
             "training matmul\n(4096 x 4096 x 4096)": matmul_intensity_flops_per_byte(4096, 4096, 4096)}
    for label, xi in marks.items():
        ax2.axvline(xi, color="0.35", lw=0.8, ls=":")
        ax2.annotate(label, (xi, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -3),
                     textcoords="offset points", ha="left", va="top", fontsize=7, color="0.25")
    ax2.set_xscale("log", base=2)
    ax2.set_yscale("log", base=10)
    ax2.set_xlabel("arithmetic intensity (FLOP per byte of HBM traffic)")
    ax2.set_ylabel("attainable dense bf16 TFLOP/s")
    _grid(ax2, lw=0.4, alpha=0.5)
    ax2.set_title("bf16 rooflines; dots are the ridge points", fontsize=9, loc="left")
    handles, labels = ax2.get_legend_handles_labels()      # the named GPUs in table order, then the others
    rank = {g: i for i, g in enumerate(df.index)}
    order = sorted(range(len(labels)), key=lambda i: rank.get(labels[i].split(" (")[0], len(rank)))
    ax2.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=7, frameon=False,
               loc="lower right")

    w = max(10, *(len(n) for n in df.index))      # the longest name ("A100 PCIe 80GB") keeps the columns
    lines = [f"{'GPU':<{w}s} {'memory':>10s} {'HBM/GDDR':>10s} {'bf16 dense':>13s} {'ridge':>14s} "
             f"{'link one way: all / one peer':>29s}"]
    for name, r in df.iterrows():
        lines.append(f"{name:<{w}s} {r['memory_gib']:>6.1f} GiB {r['hbm_tbps']:>5.2f} TB/s "
                     f"{r['bf16_dense_tflops']:>6.0f} TFLOP/s {r['ridge_flops_per_byte']:>5.0f} FLOP/byte "
                     f"{r['link_one_way_gbps']:>15.0f} / {r['pair_one_way_gbps']:.0f} GB/s"
                     + ("" if r["dtype"] == "bf16" else f" ({r['dtype']}: no bf16)"))
    return View(fig, "\n".join(lines))
