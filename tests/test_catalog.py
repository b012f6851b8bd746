"""The model and GPU catalogues (data/models.csv, data/gpus.csv): complete, sourced, dated, sane."""

from __future__ import annotations

import csv
import datetime as dt
import math
from pathlib import Path

import pytest

from llmsizing import get_gpu, get_model, gpu_table, list_gpus, list_models, model_entry, model_table
from llmsizing.catalog import GPU, resolve_model

DATA = Path(__file__).resolve().parents[1] / "data"
REQUIRED_GPUS = ["A10", "L40S", "RTX 4090", "A100 40GB", "A100 80GB", "H100 SXM", "H200", "B200", "MI300X"]


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
    missing = [g for g in REQUIRED_GPUS if g not in names]
    assert not missing, f"GPU catalogue lacks {missing}"
    assert len(set(names)) == len(names), "duplicate GPU names"


@pytest.mark.parametrize("row", rows("gpus.csv"), ids=lambda r: r["name"])
def test_gpu_row_complete(row):
    assert row["spec_source"].strip(), "spec_source missing"
    assert row["price_source"].strip(), "price_source missing"
    assert is_iso_date(row["as_of"]), f"as_of {row['as_of']!r} is not an ISO date"
    assert row["link_direction"] in {"one-way", "bidirectional"}
    assert row["memory_source"].strip(), "memory_source missing"
    for col in ("memory_mib", "memory_marketed_gb", "memory_bandwidth_gbps", "bf16_dense_tflops",
                "link_bandwidth_gbps", "price_usd_per_gpu_hour"):
        v = float(row[col])
        assert math.isfinite(v) and v > 0, f"{col} = {row[col]!r}"
    if row["fp8_dense_tflops"].strip():       # empty = the chip has no FP8 tensor cores
        fp8 = float(row["fp8_dense_tflops"])
        assert fp8 > float(row["bf16_dense_tflops"]), "FP8 should be faster than BF16 where it exists"


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
    for name in REQUIRED_GPUS:   # never more than the box says (marketed GB read as GiB, the generous reading)
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
    exact = t.drop(index="gpt3-175b")
    assert (exact["n_params"] == exact["published_params"]).all()


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
