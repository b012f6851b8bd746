"""The node a published run ran on (data/published_runs.csv's ``node`` column; llmsizing.run_nodes; issue 34).

The per-GPU inter-node bandwidths are derived here by hand from the figures the sources print, not from the
library: BloombergGPT's p4d.24xlarge has 400 Gb/s of EFA per instance of 8 A100s (Wu et al. 2023, Sec. 3.3),
BLOOM's Jean Zay nodes 4 Omni-Path links of 100 Gb/s for 8 A100s (BLOOM model card, 'Hardware'), a DGX A100
8 x 200 Gb/s HDR InfiniBand for 8 GPUs (NVIDIA's datasheet)."""

import csv
import math
from pathlib import Path

import pandas as pd
import pytest

from llmsizing.calibration import _layout_of, attention_kernel_of, run_mfu_at, tp_overlap_of
from llmsizing.comm import group_network
from llmsizing.hardware import kernel_efficiency
from llmsizing.layouts import step_time
from llmsizing.network import get_node
from llmsizing.run_nodes import plan_network, run_node
from llmsizing.time_cost import published_runs

DATA = Path(__file__).resolve().parents[1] / "data"

# 400 Gb/s per 8-GPU instance: 400 / 8 = 50 Gb/s a GPU = 50 / 8 = 6.25 GB/s, one way
P4D_GBPS_PER_GPU = 400 / 8 / 8
# 4 Omni-Path links x 100 Gb/s per 8-GPU node: the same 6.25 GB/s
JEAN_ZAY_GBPS_PER_GPU = 4 * 100 / 8 / 8
# a DGX A100: 8 x 200 Gb/s for 8 GPUs = 25 GB/s a GPU
DGX_A100_GBPS_PER_GPU = 8 * 200 / 8 / 8


def _rows():
    with open(DATA / "published_runs.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def _run(prefix):
    df = published_runs()
    return df[df["run"].str.startswith(prefix)].iloc[0]


def test_bloomberggpt_runs_on_p4d_a_quarter_of_a_dgx_a100():
    for prefix in ("BloombergGPT 50B, 512", "BloombergGPT 50B pre-training"):
        node = run_node(_run(prefix))
        assert node.name == "AWS p4d.24xlarge" and node.gpus_per_node == 8
        assert node.nic_gbps_per_gpu == pytest.approx(P4D_GBPS_PER_GPU)          # 6.25 GB/s
    default = get_node(gpu="A100 40GB")
    assert default.nic_gbps_per_gpu == pytest.approx(DGX_A100_GBPS_PER_GPU)          # 25 GB/s
    assert P4D_GBPS_PER_GPU / DGX_A100_GBPS_PER_GPU == 0.25
    assert plan_network(_run("BloombergGPT 50B, 512")) == {"gpus_per_node": 8, "inter_node_gbps": 6.25}


def test_bloom_layout_is_priced_on_jean_zay_links():
    """BLOOM's pipeline (TP4 PP12 DP8: stages 32 ranks apart) crosses nodes on one GPU's share of the node's
    NICs, 6.25 GB/s; the calibration prices the run at that node and not at the default DGX A100's 25."""
    row = _run("BLOOM 176B, 384 GPUs")
    node = run_node(row)
    assert node.nic_gbps_per_gpu == pytest.approx(JEAN_ZAY_GBPS_PER_GPU)
    par, micro, accum, recompute = _layout_of(row)
    assert group_network(par, row.gpu, node=node)["pp"].nominal_gbps == pytest.approx(JEAN_ZAY_GBPS_PER_GPU)
    assert group_network(par, row.gpu)["pp"].nominal_gbps == pytest.approx(DGX_A100_GBPS_PER_GPU)
    e = kernel_efficiency(row.gpu, row["dtype"])         # (a Series' own .dtype is not the run's)
    on_node = step_time(row.model, row.gpu, par, batch=micro, seq=int(row.seq), grad_accum=accum,
                        kernel_efficiency=e, recompute=recompute, node=node.name, dtype=row["dtype"],
                        async_tp=tp_overlap_of(row),
                        attention_kernel=attention_kernel_of(row.framework, row.gpu))
    assert run_mfu_at(row, e) == pytest.approx(on_node.mfu, rel=1e-12)
    blank = row.copy()
    blank["node"] = float("nan")
    assert run_mfu_at(blank, e) > run_mfu_at(row, e)         # a quarter of the network: a slower step


def test_every_node_cell_names_a_node_of_the_runs_gpu_and_cites_it():
    names = {}
    with open(DATA / "nodes.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            names[r["name"]] = r
    filled = 0
    for r in _rows():
        if not r["node"].strip():
            continue
        filled += 1
        assert r["node"] in names, r["run"]
        assert names[r["node"]]["gpu"] == r["gpu"], r["run"]
        assert "node: " in r["note"], r["run"]                # the sentence of the source, in the note
        assert run_node(r).name == r["node"]
    assert filled >= 2


def test_a_blank_or_absent_node_is_the_default():
    assert run_node({"gpu": "A100 80GB", "node": ""}) is None
    assert run_node({"gpu": "A100 80GB"}) is None
    assert run_node(pd.Series({"gpu": "A100 80GB", "node": math.nan})) is None
    assert plan_network({"gpu": "A100 80GB", "node": None}) == {}


def test_bad_node_cells_are_refused_naming_the_column():
    with pytest.raises(ValueError, match="column 'node'.*no such node|column 'node'"):
        run_node({"run": "x", "gpu": "A100 40GB", "node": "DGX Z9000"})
    with pytest.raises(ValueError, match="column 'node'.*A100 80GB"):
        run_node({"run": "x", "gpu": "A100 80GB", "node": "AWS p4d.24xlarge"})
    with pytest.raises(TypeError, match="column 'node'"):
        run_node({"run": "x", "gpu": "A100 40GB", "node": 3})
