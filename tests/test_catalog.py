"""The model and GPU catalogues (data/models.csv, data/gpus.csv): complete, sourced, dated, sane."""

from __future__ import annotations

import csv
import datetime as dt
import math
from pathlib import Path

import pytest

from llmsizing import get_gpu, get_model, gpu_table, list_gpus, list_models, model_entry, model_table
from llmsizing.catalog import GPU, list_gpu_variants, resolve_model

DATA = Path(__file__).resolve().parents[1] / "data"
REQUIRED_GPUS = ["A10", "L40S", "RTX 4090", "A100 40GB", "A100 80GB", "H100 SXM", "H200", "B200", "MI300X"]
#: Added for issue 21 ("the GPU catalogue").
ADDED_GPUS = ["H800", "H100 PCIe", "H20", "A100 PCIe 80GB", "V100", "L4", "RTX 6000 Ada", "GB200", "B300",
              "MI250X GCD", "MI325X", "MI355X"]


def rows(name: str) -> list[dict[str, str]]:
    with open(DATA / name, newline="") as fh:
        return list(csv.DictReader(fh))


def is_iso_date(s: str) -> bool:
    try:
        d = dt.date.fromisoformat(s.strip())
    except ValueError:
        return False
    return dt.date(2015, 1, 1) <= d <= dt.date(2030, 12, 31)


# ----------------------------------------------------------------------------- GPUs
def test_required_gpus_present():
    names = list_gpus()
    missing = [g for g in REQUIRED_GPUS + ADDED_GPUS if g not in names]
    assert not missing, f"GPU catalogue lacks {missing}"
    assert len(set(names)) == len(names), "duplicate GPU names"


@pytest.mark.parametrize("row", rows("gpus.csv") + rows("gpu_variants.csv"), ids=lambda r: r["name"])
def test_gpu_row_complete(row):
    assert row["spec_source"].strip(), "spec_source missing"
    assert "price_source" not in row, "prices live in data/gpu_prices.csv only (issue 38), not here"
    assert is_iso_date(row["as_of"]), f"as_of {row['as_of']!r} is not an ISO date"
    assert row["link_direction"] in {"one-way", "bidirectional"}
    assert row["memory_source"].strip(), "memory_source missing"
    # the target its GEMM kernels are compiled for, with its own source and date (gb46)
    assert row["gemm_arch"].strip() and row["gemm_arch_source"].strip(), "gemm_arch or its source missing"
    assert is_iso_date(row["gemm_arch_as_of"]), f"gemm_arch_as_of {row['gemm_arch_as_of']!r}"
    for col in ("memory_mib", "memory_marketed_gb", "memory_bandwidth_gbps", "link_bandwidth_gbps"):
        v = float(row[col])
        assert math.isfinite(v) and v > 0, f"{col} = {row[col]!r}"
    # peaks: empty = no such tensor cores (bf16: the V100; fp8: the A10, A100s, V100, MI250X) or, for the two
    # fp16 columns, "the same as the rate before" (bf16, then fp16); every given peak is a positive number
    peaks = {c: float(row[c]) for c in ("bf16_dense_tflops", "fp16_dense_tflops", "fp16_acc16_dense_tflops",
                                        "fp8_dense_tflops") if row[c].strip()}
    assert all(math.isfinite(v) and v > 0 for v in peaks.values()), peaks
    half = peaks.get("fp16_dense_tflops", peaks.get("bf16_dense_tflops"))
    assert half, "a GPU needs a 16-bit rate: bf16_dense_tflops or fp16_dense_tflops"
    if "fp8_dense_tflops" in peaks:
        assert peaks["fp8_dense_tflops"] > half, "FP8 should be faster than BF16 where it exists"
    if "fp16_acc16_dense_tflops" in peaks:   # only given where it differs: FP16 accumulation is the faster one
        assert peaks["fp16_acc16_dense_tflops"] > half
    if "fp16_dense_tflops" in peaks and "bf16_dense_tflops" in peaks:
        assert peaks["fp16_dense_tflops"] != peaks["bf16_dense_tflops"], "leave fp16 empty where it equals bf16"


def test_gemm_arch_is_the_published_compute_target():
    """Typed from NVIDIA's CUDA GPU Compute Capability page (developer.nvidia.com/cuda-gpus: 10.3 B300/GB300,
    10.0 B200/GB200, 9.0 H100/H200, 8.9 L40S/L4/RTX 4090, 8.6 A10, 8.0 A100; the legacy page: 7.0 V100) and
    AMD's GPU specifications (LLVM target: gfx950 MI355X, gfx942 MI300X/MI325X, gfx90a MI250X); the H800 and
    H20, not on NVIDIA's page, are GH100 dies (PCI ID database) like the H100."""
    published = {"sm_103": ["B300"], "sm_100": ["B200", "GB200"],
                 "sm_90": ["H100 SXM", "H100 PCIe", "H200", "H800", "H20", "H100 HBM2e (Meta)"],
                 "sm_89": ["L40S", "L4", "RTX 4090", "RTX 6000 Ada"], "sm_86": ["A10"],
                 "sm_80": ["A100 40GB", "A100 80GB", "A100 PCIe 80GB"], "sm_70": ["V100"],
                 "gfx950": ["MI355X"], "gfx942": ["MI300X", "MI325X"], "gfx90a": ["MI250X GCD"]}
    got = {n: get_gpu(n).gemm_arch for n in list_gpus() + list_gpu_variants()}
    assert got == {n: arch for arch, names in published.items() for n in names}


def test_meta_h100_variant_is_priced_from_its_source_and_kept_out_of_the_lists():
    """data/gpu_variants.csv: torchtitan's benchmark files (benchmarks/llama3_h100_202412_torchtitan.md,
    'Hardware') state 96GB HBM2e at 2.4 TB/sec and a 500W limit; no peak is published for the part, so it keeps
    the H100 SXM's (989.4 / 1,978.9 dense, NVIDIA datasheet). It is found by name, listed nowhere, and is
    Hopper at the H100 SXM's calibrated efficiencies (not a stand-in)."""
    from llmsizing.hardware import kernel_efficiency_row

    v, sxm = get_gpu("H100 HBM2e (Meta)"), get_gpu("H100 SXM")
    assert v.memory_bandwidth_gbps == 2400 and v.memory_marketed_gb == 96
    assert (v.bf16_dense_tflops, v.fp8_dense_tflops) == (sxm.bf16_dense_tflops, sxm.fp8_dense_tflops)
    assert list_gpu_variants() == ["H100 HBM2e (Meta)"]
    assert "H100 HBM2e (Meta)" not in list_gpus() and "H100 HBM2e (Meta)" not in gpu_table().index
    assert v.price_usd_per_gpu_hour is None
    for dtype in ("bf16", "fp8"):
        row, ref = kernel_efficiency_row(v, dtype), kernel_efficiency_row(sxm, dtype)
        assert row.generation == "hopper" and row.runs and row.kernel_efficiency == ref.kernel_efficiency


@pytest.mark.parametrize("name", REQUIRED_GPUS)
def test_get_gpu_fields(name):
    g = get_gpu(name)
    assert isinstance(g, GPU) and g.name == name
    assert g.memory_bytes == g.memory_mib * 2**20 and g.memory_gib == g.memory_mib / 1024
    assert g.memory_gib > 0 and g.memory_bandwidth_gbps > 0 and g.bf16_dense_tflops > 0
    assert g.price_usd_per_gpu_hour > 0
    assert get_gpu(g) is g


def test_reported_capacity_is_what_the_driver_prints():
    """The capacity "fits" uses is the driver's total, typed here from nvidia-smi/rocm-smi output as printed in
    public logs: an H100 80GB shows 81,559 MiB, an A10 23,028 MiB (ECC on), an MI300X 205,822,885,888 bytes."""
    assert get_gpu("H100 SXM").memory_bytes == 81_559 * 2**20
    assert get_gpu("A10").memory_bytes == 23_028 * 2**20
    assert get_gpu("MI300X").memory_bytes == 205_822_885_888
    assert get_gpu("H800").memory_bytes == 81_559 * 2**20
    assert get_gpu("V100").memory_bytes == 32_768 * 2**20
    assert get_gpu("L4").memory_bytes == 23_034 * 2**20
    assert get_gpu("GB200").memory_bytes == 189_471 * 2**20
    assert get_gpu("B300").memory_bytes == 275_040 * 2**20
    assert get_gpu("MI355X").memory_bytes == 309_220_868_096
    assert get_gpu("MI250X GCD").memory_bytes == 68_702_699_520      # one GCD: half the OAM module's 128 GB
    for name in list_gpus():     # never more than the box says (marketed GB read as GiB, the generous reading)
        g = get_gpu(name)
        assert g.memory_gib <= g.memory_marketed_gb
        assert g.memory_gib >= 0.9 * g.memory_marketed_gb


def test_gpu_spec_sheet_figures():
    """A few figures from vendor datasheets, hard-coded (decimal GB/s, dense TFLOP/s)."""
    assert get_gpu("H100 SXM").memory_marketed_gb == 80
    assert get_gpu("H100 SXM").memory_bandwidth_gbps == 3350
    assert get_gpu("A100 80GB").bf16_dense_tflops == 312
    assert get_gpu("A100 40GB").memory_bandwidth_gbps == 1555
    assert get_gpu("MI300X").memory_marketed_gb == 192
    assert get_gpu("H200").memory_marketed_gb == 141
    assert get_gpu("A100 80GB").fp8_dense_tflops is None   # Ampere has no FP8


def test_added_gpus_spec_sheet_figures():
    """Issue 21's rows: a few datasheet figures, dense (no sparsity)."""
    assert (get_gpu("H800").bf16_dense_tflops, get_gpu("H800").link_bandwidth_gbps) == (989.4, 400)
    assert (get_gpu("H100 PCIe").bf16_dense_tflops, get_gpu("H100 PCIe").fp8_dense_tflops) == (756.5, 1513)
    assert (get_gpu("H20").bf16_dense_tflops, get_gpu("H20").memory_bandwidth_gbps) == (148, 4000)
    assert get_gpu("A100 PCIe 80GB").memory_bandwidth_gbps == 1935
    assert (get_gpu("L4").bf16_dense_tflops, get_gpu("L4").fp8_dense_tflops) == (121, 242.5)
    assert (get_gpu("GB200").bf16_dense_tflops, get_gpu("B300").bf16_dense_tflops) == (2500, 2250)
    assert get_gpu("MI250X GCD").bf16_dense_tflops * 2 == 383          # the module's 383 TFLOP/s, halved
    assert get_gpu("MI250X GCD").fp8_dense_tflops is None              # CDNA 2 has no FP8
    assert get_gpu("MI325X").bf16_dense_tflops == get_gpu("MI300X").bf16_dense_tflops
    assert get_gpu("MI355X").fp8_dense_tflops == 2 * get_gpu("MI355X").bf16_dense_tflops


def test_v100_has_no_bf16_and_trains_in_fp16():
    g = get_gpu("V100")
    assert g.bf16_dense_tflops is None and not g.has_bf16
    assert g.fp16_dense_tflops == g.fp16_rate_tflops == 125
    assert g.fp8_dense_tflops is None
    assert all(get_gpu(n).has_bf16 for n in list_gpus() if n != "V100")


def test_fp16_accumulate_column():
    assert get_gpu("RTX 4090").fp16_acc16_dense_tflops == 330.3            # GeForce: twice the FP32-accumulate rate
    assert get_gpu("RTX 4090").fp16_rate_tflops == 165.2
    assert all(get_gpu(n).fp16_acc16_dense_tflops is None for n in list_gpus() if n != "RTX 4090")


def test_gpu_refusals_name_the_parameter():
    import dataclasses

    h100 = get_gpu("H100 SXM")
    with pytest.raises(ValueError, match="bf16_dense_tflops.*fp16_dense_tflops"):
        dataclasses.replace(h100, bf16_dense_tflops=None)
    for f in ("fp16_dense_tflops", "fp16_acc16_dense_tflops", "fp8_dense_tflops", "bf16_dense_tflops"):
        with pytest.raises(ValueError, match=f):
            dataclasses.replace(h100, **{f: 0})
        with pytest.raises(ValueError, match=f):
            dataclasses.replace(h100, **{f: float("nan")})
        with pytest.raises(TypeError, match=f):
            dataclasses.replace(h100, **{f: "fast"})
    v = dataclasses.replace(h100, name="no-bf16", bf16_dense_tflops=None, fp16_dense_tflops=500.0)
    assert v.fp16_rate_tflops == 500 and not v.has_bf16


def test_get_gpu_forgives_case_and_spaces():
    assert get_gpu("h100 sxm").name == "H100 SXM"
    assert get_gpu("rtx4090").name == "RTX 4090"
    assert get_gpu("A100-80GB").name == "A100 80GB"


@pytest.mark.parametrize("kind,typo,expected", [
    ("GPU", "H100", "H100 SXM"), ("GPU", "A100 80", "A100 80GB"), ("GPU", "mi300", "MI300X"),
    ("GPU", "4090", "RTX 4090"), ("GPU", "L40", "L40S"), ("GPU", "B20O", "B200"),
    ("model", "llama-2-7", "llama-2-7b"), ("model", "Llama-2-7B", "llama-2-7b"), ("model", "mistral", "mistral-7b"),
    ("model", "gpt-2", "gpt2"), ("model", "llama3-8b", "llama-3-8b"), ("model", "qwen2", "qwen2-7b")])
def test_unknown_name_suggests_closest(kind, typo, expected):
    with pytest.raises(ValueError) as e:
        (get_gpu if kind == "GPU" else get_model)(typo)
    msg = str(e.value)
    assert kind in msg and repr(typo) in msg
    assert f"Did you mean {expected!r}?" in msg


def test_get_gpu_type_error():
    with pytest.raises(TypeError, match="GPU"):
        get_gpu(80)


def test_gpu_table():
    t = gpu_table()
    assert list(t.index) == list_gpus()
    assert (t["memory_gib"] > 0).all()


# ----------------------------------------------------------------------------- models
@pytest.mark.parametrize("row", rows("models.csv"), ids=lambda r: r["name"])
def test_model_row_sourced_and_dated(row):
    assert row["source"].strip(), "source missing"
    assert is_iso_date(row["as_of"]), f"as_of {row['as_of']!r} is not an ISO date"
    assert int(row["published_params"]) > 0 and int(row["published_rounded_to"]) >= 1
    e = model_entry(row["name"])
    assert e.source == row["source"] and e.as_of == row["as_of"]
    assert e.model is get_model(row["name"])


def test_model_names_unique_and_listed():
    names = [r["name"] for r in rows("models.csv")]
    assert len(set(names)) == len(names)
    assert list_models() == names


def test_model_table():
    t = model_table()
    assert list(t.index) == list_models()
    assert (t["n_params"] > 0).all()
    # rows published to the parameter are exact; rows published rounded ("1.7B", "530B": Narayanan et al.'s
    # shapes, the Megatron-Core benchmark models) agree to their rounding
    exact = t[t["published_rounded_to"] == 1]
    assert len(exact) >= 10
    assert (exact["n_params"] == exact["published_params"]).all()
    rounded = t[(t["published_rounded_to"] > 1) & (t.index != "mcore-gpt-1.7b")]
    assert ((rounded["n_params"] - rounded["published_params"]).abs() <= rounded["published_rounded_to"] / 2).all()


@pytest.mark.xfail(strict=True, reason="session 23: with Megatron-Core's default learned position table (what "
                   "the README's runs use: no flag changes it) the 1.7B row of NVIDIA's model table counts "
                   "1.7539B, 0.004B over the table's rounding (1.7455B without the table, 1.7497B with a "
                   "2,048-row one); the other eight sizes of that table agree with the table. Kept as a "
                   "recorded miss rather than swapping in a looser published figure")
def test_the_megatron_table_s_1_7b_row_rounds_to_its_count():
    row = model_table().loc["mcore-gpt-1.7b"]
    assert row["published_params"] == 1_700_000_000 and row["published_rounded_to"] == 100_000_000
    assert abs(row["n_params"] - row["published_params"]) <= row["published_rounded_to"] / 2


def test_unknown_model_without_close_match_lists_known():
    with pytest.raises(ValueError) as e:
        get_model("zzzzzzzzzzzzzzzz")
    assert "llama-2-7b" in str(e.value)


@pytest.mark.parametrize("bad", [None, 7, 7.0, b"gpt2"])
def test_model_name_type_error(bad):
    with pytest.raises(TypeError):
        get_model(bad)
    with pytest.raises(TypeError, match="model"):
        resolve_model(bad)


def test_resolve_model_accepts_model_and_name():
    m = get_model("gpt2")
    assert resolve_model(m) is m
    assert resolve_model("gpt2") is m


# ----------------------------------------------------------------------------- nodes (data/nodes.csv)
def test_every_gpu_has_one_default_node_sourced_and_dated():
    nodes = rows("nodes.csv")
    defaults = [r["gpu"] for r in nodes if r["default_for_gpu"] == "yes"]
    assert sorted(defaults) == sorted(list_gpus() + list_gpu_variants()), "one default node per catalogued GPU"
    for r in nodes:
        assert r["source"].strip() and is_iso_date(r["as_of"]), r["name"]
        assert r["intra_topology"] in {"switch", "mesh", "pcie"}, r["name"]
        for col in ("gpus_per_node", "scaleup_domain_gpus", "nics_per_node"):
            assert int(r[col]) >= 1, (r["name"], col)
        assert float(r["intra_link_gbps_one_way"]) > 0 and float(r["nic_gbits"]) > 0, r["name"]
        assert int(r["scaleup_domain_gpus"]) >= int(r["gpus_per_node"]), r["name"]


def test_mesh_nodes_agree_with_the_gpu_link():
    """A mesh node's per-peer one-way figure times its 7 peers is the GPU's link total, halved (bidirectional):
    MI300X / MI325X 7 x 128 GB/s, MI355X 7 x 153.6, MI250X GCD 7 x 100 (the V100's hybrid cube-mesh is not a
    full mesh: 6 links, not 7)."""
    for r in rows("nodes.csv"):
        if r["intra_topology"] == "mesh" and r["gpu"] != "V100":
            g = get_gpu(r["gpu"])
            assert (int(r["gpus_per_node"]) - 1) * float(r["intra_link_gbps_one_way"]) == pytest.approx(
                g.link_bandwidth_gbps / 2), r["name"]
