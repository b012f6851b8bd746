"""alpha_beta: parsing the saved nccl-tests logs, fitting them, data/links.csv and the gloo sweep (issue 21).

Runs without torch: only the committed logs and CSVs are read. The expected numbers are read back from the log
files with a plain split in the test, not copied from the module's output."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest

from llmsizing.alpha_beta import (bus_factor, fit_alpha_beta, fit_two_regimes, from_nccl_tests,
                                  node_level_busbw, parse_nccl_tests, steps)

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "data" / "nccl_tests"
LOG_FILES = sorted(LOGS.glob("*.txt"))


def _rows_by_split(path):
    """The table rows of a log, read with a plain split: {size: tokens}."""
    rows = {}
    for line in path.read_text().splitlines():
        t = line.split()
        if t and not line.lstrip().startswith("#") and t[0].isdigit() and len(t) >= 11:
            rows.setdefault(int(t[0]), t)
    return rows


def test_there_are_logs_for_nvlink_network_and_pcie():
    names = [p.name for p in LOG_FILES]
    assert len(names) >= 3
    assert any("nvlink" in n for n in names) and any("pcie" in n for n in names)
    assert any("2x8" in n for n in names)
    for p in LOG_FILES:
        head = [ln for ln in p.read_text().splitlines() if ln.startswith("##")]
        assert any("source:" in ln for ln in head) and any("hardware:" in ln for ln in head), p.name
        assert any("trimmed:" in ln for ln in head), p.name
        assert p.name in (LOGS / "README.md").read_text()


@pytest.mark.parametrize("path", LOG_FILES, ids=lambda p: p.name)
def test_each_log_parses_to_its_rows(path):
    df = parse_nccl_tests(path.read_text())
    by_split = _rows_by_split(path)
    assert len(df) == sum(1 for ln in path.read_text().splitlines()
                          if ln.split() and ln.split()[0].isdigit() and len(ln.split()) >= 11)
    ranks = sum(1 for ln in path.read_text().splitlines() if ln.split()[:2] == ["#", "Rank"])
    assert (df["n_ranks"] == ranks).all()
    # the largest row, and the 1 GiB row where the log has one: busbw and time as the file's text says
    for size in {max(by_split), 1 << 30} & set(by_split):
        toks = by_split[size]
        row = df[df["size_bytes"] == size].iloc[0]
        assert row["busbw_gbps"] == float(toks[-6])
        assert row["algbw_gbps"] == float(toks[-7])
        assert row["time_us"] == float(toks[-8])
        assert row["busbw_gbps_inplace"] == float(toks[-2])


def test_specific_values_of_the_nvlink_log():
    path = LOGS / "a100_sxm4_8gpu_nvlink_oci_all_reduce.txt"
    df = parse_nccl_tests(path.read_text())
    assert len(df) == 28 and df["collective"].iloc[0] == "all_reduce" and df["n_ranks"].iloc[0] == 8
    line = next(ln for ln in path.read_text().splitlines() if ln.strip().startswith("1073741824 "))
    assert df.loc[df.size_bytes == 1 << 30, "busbw_gbps"].item() == float(line.split()[7])


def test_all_gather_log_keeps_its_zero_size_rows_and_reads_the_collective():
    path = LOGS / "rtx2080ti_2gpu_pcie3_all_gather.txt"
    df = parse_nccl_tests(path.read_text())
    assert df["collective"].iloc[0] == "all_gather" and (df["size_bytes"] == 0).sum() == 2
    # nccl-tests' all-gather size is the whole output: size = per-rank count x 4 bytes x n
    nz = df[df.size_bytes > 0]
    assert (nz["size_bytes"] == nz["count"] * 4 * 2).all()


def test_older_layout_without_root_and_with_error_column():
    text = ("# nThread 1 nGpus 2 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20\n"
            "#   Rank  0 Pid  1 on host device  0 [0x00] Tesla V100\n"
            "#   Rank  1 Pid  1 on host device  1 [0x00] Tesla V100\n"
            "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
            "        1024           256   float     sum    10.00    0.10    0.10  0e+00    10.10    0.10    0.10  0e+00\n"
            "        2048           512   float     sum    11.00    0.19    0.19  0e+00    11.20    0.18    0.18  0e+00\n")
    df = parse_nccl_tests(text, collective="all_reduce")
    assert list(df["time_us"]) == [10.0, 11.0] and df["n_ranks"].iloc[0] == 2 and df["wrong"].iloc[0] == "0e+00"


def _synthetic_log(alpha, busbw_gbps, n, collective="all_reduce"):
    lines = [f"# Collective test starting: {collective}_perf",
             "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor)", "#", "# Using devices"]
    lines += [f"#  Rank {r:2d} Group  0 Pid {100 + r} on host device {r % 8:2d} [0x00] GPU" for r in range(n)]
    lines.append("#       size         count      type   redop    root     time   algbw   busbw #wrong"
                 "     time   algbw   busbw #wrong")
    for k in range(3, 34):
        size = 1 << k
        t = steps(collective, n) * alpha + bus_factor(collective, n) * size / (busbw_gbps * 1e9)
        us = t * 1e6
        alg = size / t / 1e9
        lines.append(f"{size:12d} {size // 4:13d}     float     sum      -1 {us:8.6g} {alg:7.2f} "
                     f"{alg * bus_factor(collective, n):7.2f}      0 {us:8.6g} {alg:7.2f} "
                     f"{alg * bus_factor(collective, n):7.2f}      0")
    return "\n".join(lines)


@pytest.mark.parametrize("alpha,busbw,n", [(2.5e-6, 230.0, 8), (5e-6, 45.0, 16), (1e-5, 4.0, 2)])
def test_synthetic_log_is_recovered_within_one_percent(alpha, busbw, n):
    fit = from_nccl_tests(_synthetic_log(alpha, busbw, n))
    single = fit.regimes.single
    assert single.collective == "all_reduce" and single.n == n
    assert single.alpha_s == pytest.approx(alpha, rel=0.01)
    assert single.busbw_gbps == pytest.approx(busbw, rel=0.01)
    assert single.worst_rel_error < 0.01


def test_fitted_nvlink_fraction_and_links_csv():
    with open(ROOT / "data" / "links.csv", newline="") as fh:
        links = {r["link_class"]: r for r in csv.DictReader(fh)}
    assert list(links) == ["nvlink", "infinity-fabric", "pcie", "pcie-p2p", "network"]
    nv = links["nvlink"]
    fit = from_nccl_tests((ROOT / nv["source"]).read_text())
    frac = fit.regimes.large.busbw_gbps / 300.0                 # A100 NVLink 3: 300 GB/s one way per GPU
    assert 0.5 < frac < 1.0
    assert float(nv["achievable_fraction"]) == pytest.approx(frac, abs=0.006)
    assert float(nv["alpha_us"]) == pytest.approx(fit.regimes.small.alpha_s * 1e6, abs=0.06)
    for cls in ("pcie", "network"):
        assert links[cls]["source"].startswith("data/nccl_tests/") and (ROOT / links[cls]["source"]).exists()
        assert 0 < float(links[cls]["achievable_fraction"]) <= 1 and float(links[cls]["alpha_us"]) > 0
    assert "NOT FITTED" in links["infinity-fabric"]["source"]
    # PCIe with peer-to-peer (issue 34): a published large-message figure, 25.95 GB/s busbw on PCIe Gen4 x16's
    # 32 GB/s, the datasheets' figure the catalogue keeps (tinygrad/open-gpu-kernel-modules issue #36), above
    # the no-P2P log's share
    p2p = links["pcie-p2p"]
    assert "tinygrad/open-gpu-kernel-modules/issues/36" in p2p["source"]
    assert float(p2p["achievable_fraction"]) == pytest.approx(25.95 / 32, abs=0.005)
    assert float(p2p["achievable_fraction"]) > float(links["pcie"]["achievable_fraction"])


def test_links_csv_and_fits_csv_are_what_the_logs_give():
    # `fit_nccl_logs.py --check`, run in this process (the library is imported already: conftest.run_tool)
    from conftest import run_tool

    code, printed = run_tool("fit_nccl_logs.py", "--check")
    assert code == 0, printed


def test_two_node_busbw_at_node_level():
    fit = from_nccl_tests((LOGS / "h100_2x8_gcp_a3mega_tcpxo_all_reduce.txt").read_text())
    big = fit.table.iloc[-1]
    # nccl-tests' busbw counts 2(n-1)/n over 16 ranks; at node level (2 nodes) the factor is 1: algbw itself
    assert node_level_busbw(big["algbw_gbps"], nodes=2) == pytest.approx(big["algbw_gbps"])
    assert big["busbw_gbps"] > 200 > node_level_busbw(big["algbw_gbps"], nodes=2)   # 200 GB/s egress


def test_gloo_csv_fits_with_positive_alpha_and_bandwidth():
    df = pd.read_csv(ROOT / "data" / "gloo_collective_times.csv")
    assert {"collective", "n_ranks", "size_bytes", "time_s_median", "time_s_min", "repeats", "torch_version",
            "machine"} <= set(df.columns)
    assert set(df["n_ranks"]) == {2, 4} and {"all_reduce", "all_gather"} <= set(df["collective"])
    assert (df["time_s_min"] <= df["time_s_median"]).all()
    for (coll, n), g in df.groupby(["collective", "n_ranks"]):
        ab = fit_alpha_beta(g["size_bytes"].tolist(), g["time_s_median"].tolist(), collective=coll, n=int(n))
        assert ab.alpha_s > 0 and ab.busbw_gbps > 0, (coll, n)


@pytest.mark.parametrize("call,exc,name", [
    (lambda: parse_nccl_tests(b"bytes"), TypeError, "text"),
    (lambda: parse_nccl_tests("hello\nworld\n"), ValueError, "text"),
    (lambda: parse_nccl_tests("   1024  256  float sum -1 1.0 1.0 1.0 0 1.0 1.0 1.0 0"), ValueError, "collective"),
    (lambda: parse_nccl_tests("all_reduce_perf\n   1024  256  float sum -1 1.0 1.0 1.0 0 1.0 1.0 1.0 0"),
     ValueError, "n_ranks"),
    (lambda: parse_nccl_tests((LOGS / "a100_sxm4_8gpu_nvlink_oci_all_reduce.txt").read_text(), n_ranks=4),
     ValueError, "n_ranks"),
    (lambda: parse_nccl_tests((LOGS / "a100_sxm4_8gpu_nvlink_oci_all_reduce.txt").read_text(),
                              collective="all_gather"), ValueError, "collective"),
    (lambda: fit_alpha_beta([1, 2], [1.0], collective="all_reduce", n=2), ValueError, "sizes_bytes"),
    (lambda: fit_alpha_beta([1, 2], [1.0, -1.0], collective="all_reduce", n=2), ValueError, "times_s[1]"),
    (lambda: fit_alpha_beta([1, 2], [1.0, 2.0], collective="allreduce", n=2), ValueError, "collective"),
    (lambda: fit_alpha_beta([1, 2], [1.0, 2.0], collective="all_reduce", n=1), ValueError, "n"),
    (lambda: fit_alpha_beta("12", [1.0, 2.0], collective="all_reduce", n=2), TypeError, "sizes_bytes"),
    (lambda: fit_two_regimes([1, 2, 3], [1.0, 2.0, 3.0], collective="all_reduce", n=2), ValueError,
     "sizes_bytes"),
    (lambda: node_level_busbw(100.0, nodes=1), ValueError, "nodes"),
])
def test_bad_input_names_the_parameter(call, exc, name):
    with pytest.raises(exc) as info:
        call()
    assert name in str(info.value)


def test_two_runs_in_one_text_are_refused():
    text = (LOGS / "a100_sxm4_8gpu_nvlink_oci_all_reduce.txt").read_text()
    with pytest.raises(ValueError, match="two nccl-tests runs"):
        parse_nccl_tests(text + "\n" + text)
