#!/usr/bin/env python
"""Fit every nccl-tests log in data/nccl_tests/ and write the per-link-class figures to data/links.csv (issue 21).

Usage (from the repository root, in the project venv; no torch needed)::

    PYTHONPATH=src .venv/bin/python tools/fit_nccl_logs.py [--check]

Writes data/nccl_tests/fits.csv (one row per log: the single line, the small- and large-message regimes, the
combined line and its worst relative error) and rewrites the rows of data/links.csv named in :data:`LINKS`
(the other rows, e.g. infinity-fabric with no log, are kept as they are). ``--check`` writes nothing and exits 1
if either file differs from what the logs give.

achievable_fraction = the large-message bus bandwidth / the link's nominal one-way bandwidth per GPU: the
figure the library applies it to. For PCIe that is the datasheets' figure data/gpus.csv keeps (GT/s x lanes / 8:
16 GB/s for Gen3 x16, 32 for Gen4; not the line rates after the 128b/130b code, 15.75 and 31.5), so the two
agree (review28a L15). For a multi-node log the bus bandwidth is taken at node level, algbw x
:func:`llmsizing.network.wire_factor` of the log's ranks with its GPUs per node (2(N-1)/N over N nodes), and
compared with the node's egress, NICs x line
rate / 8 = the per-GPU NIC bandwidth x the GPUs per node: NCCL reduces inside the node first, so the network
carries 2(N-1)/N x S per node (issue 34). The library's collective times use the same function, so the
fraction is applied with the byte count it was fitted with. alpha_us = the small-message regime's alpha, per
ring step over all the log's ranks.
small_fraction = the small-message regime's bus bandwidth / the same nominal bandwidth (NCCL's LL protocol: low
latency, a fraction of the bandwidth) and large_alpha_us = the large-message regime's alpha per ring step (its
Simple/LL128 protocols: full bandwidth, more latency per step); :func:`llmsizing.network.collective_time_s` with
``protocols=True`` charges the cheaper of the two lines, as NCCL's tuner picks a protocol per message size
(issue 22). A row without a log (infinity-fabric) keeps these two columns empty.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from llmsizing.alpha_beta import bus_factor, from_nccl_tests  # noqa: E402
from llmsizing.network import wire_factor  # noqa: E402

LOGS = ROOT / "data" / "nccl_tests"
LINKS_CSV = ROOT / "data" / "links.csv"

#: link class -> (log file, nominal one-way GB/s the busbw is compared with, nodes in the log, what it is)
LINKS = {
    "nvlink": ("a100_sxm4_8gpu_nvlink_oci_all_reduce.txt", 300.0, 1,
               "NVLink 3 (A100 SXM4) 300 GB/s one way per GPU"),
    "pcie": ("rtx2080ti_2gpu_pcie3_all_reduce.txt", 8 * 16 / 8, 1,
             "PCIe Gen3 x16 16 GB/s one way (8 GT/s x 16 lanes / 8, the datasheets' figure as data/gpus.csv "
             "keeps PCIe; the 128b/130b line code makes the line rate 15.75); no peer-to-peer (through host "
             "memory)"),
    "network": ("h100_2x8_gcp_a3mega_tcpxo_all_reduce.txt", 8 * 200 / 8, 2,
                "node egress 8 NICs x 200 Gb/s / 8 = 200 GB/s (25 GB/s per GPU x 8 GPUs)"),
}
AS_OF = "2026-11-25"


def fits(logs=LOGS):
    """One row per log in ``logs``. A log that cannot be fitted (a corrupt cell, a row whose results
    nccl-tests found wrong: ``llmsizing.alpha_beta.parse_nccl_tests`` refuses both) raises ``ValueError``
    naming the file, its line and its column."""
    rows = []
    for path in sorted(logs.glob("*.txt")):
        try:
            f = from_nccl_tests(path.read_text())
        except ValueError as e:
            raise ValueError(f"{path.name}: {e}") from None
        r = f.regimes
        rows.append({"log": path.name, "collective": f.collective, "n_ranks": f.n_ranks, "rows": len(f.table),
                     "peak_busbw_gbps": f.peak_busbw_gbps,
                     "single_alpha_us": round(r.single.alpha_s * 1e6, 3),
                     "single_busbw_gbps": round(r.single.busbw_gbps, 2),
                     "single_worst_rel_error": round(r.single.worst_rel_error, 3),
                     "split_bytes": r.split_bytes,
                     "small_alpha_us": round(r.small.alpha_s * 1e6, 3),
                     "small_worst_rel_error": round(r.small.worst_rel_error, 3),
                     "large_busbw_gbps": round(r.large.busbw_gbps, 2),
                     "large_alpha_us": round(r.large.alpha_s * 1e6, 3),
                     "large_worst_rel_error": round(r.large.worst_rel_error, 3),
                     "combined_worst_rel_error": round(r.combined.worst_rel_error, 3),
                     "small_busbw_gbps": round(r.small.busbw_gbps, 2),
                     "protocols_worst_rel_error": round(r.protocols_worst_rel_error, 3)})
    return rows


def link_rows(fit_rows, old_rows):
    by_log = {r["log"]: r for r in fit_rows}
    out = []
    for old in old_rows:
        cls = old["link_class"]
        if cls not in LINKS:
            out.append(old)
            continue
        log, nominal, nodes, what = LINKS[cls]
        f = by_log[log]
        bus, small_bus = f["large_busbw_gbps"], f["small_busbw_gbps"]
        if nodes > 1:     # nccl-tests' busbw back to algbw (its own convention), then the network's bytes
            ranks = f["n_ranks"]
            wire = wire_factor(f["collective"].replace("_", "-"), ranks, ranks // nodes)
            bus, small_bus = (b / bus_factor(f["collective"], ranks) * wire for b in (bus, small_bus))
        frac = bus / nominal
        note = (f"fitted: large-message busbw {bus:.1f} GB/s"
                + (" (node level, algbw x 2(N-1)/N)" if nodes > 1 else "")
                + f" / {what}; alpha per ring step over {f['n_ranks']} ranks from the small-message regime "
                f"(below {f['split_bytes']:,} B); the combined line's worst relative error over the sweep is "
                f"{f['combined_worst_rel_error']:.0%} (mid-size messages); the cheaper of the two regimes' lines "
                f"(small_fraction, large_alpha_us: NCCL's protocol choice) is within "
                f"{f['protocols_worst_rel_error']:.0%}, see data/nccl_tests/README.md")
        out.append({**old, "achievable_fraction": f"{frac:.2f}", "alpha_us": f"{f['small_alpha_us']:.1f}",
                    "source": f"data/nccl_tests/{log}", "as_of": AS_OF, "note": note,
                    "small_fraction": f"{small_bus / nominal:.3f}", "large_alpha_us": f"{f['large_alpha_us']:.1f}"})
    return out


def _csv_text(rows):
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if the files are out of date")
    args = ap.parse_args(argv)
    try:
        fit_rows = fits()
    except ValueError as e:
        print(f"fit_nccl_logs: error: {e}", file=sys.stderr)
        return 2
    with open(LINKS_CSV, newline="") as fh:
        old = list(csv.DictReader(fh))
    texts = {LOGS / "fits.csv": _csv_text(fit_rows), LINKS_CSV: _csv_text(link_rows(fit_rows, old))}
    stale = [p for p, t in texts.items() if not p.exists() or p.read_text() != t]
    if args.check:
        for p in stale:
            print(f"out of date: {p.relative_to(ROOT)}")
        return 1 if stale else 0
    for p, t in texts.items():
        p.write_text(t)
    for r in fit_rows:
        print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
