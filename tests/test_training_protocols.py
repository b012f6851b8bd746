"""Issue 34 (phys47): training's collectives priced by NCCL protocol, ``protocols=True`` (default off).

Worked by hand from data/links.csv's fitted lines (not from the library's functions):

* A100 NVLink (nvidia-smi log a100_sxm4_8gpu_nvlink_oci): 300 GB/s one way per GPU, achievable 0.77 (231
  GB/s), alpha 2.3 us a ring step; LL protocol at 0.140 of the link (42 GB/s) with that alpha; LL128/Simple at
  231 GB/s with 8.0 us a step. A ring all-reduce over 8 GPUs: 2 x 7 = 14 steps, 2 x 7 / 8 = 1.75 S on the wire.
  16 MiB: one line 14 x 2.3 + 1.75 x 16,777,216 / 231e3 = 32.2 + 127.10 = 159.30 us; LL 32.2 + 699.05 =
  731.25 us; Simple 112 + 127.10 = 239.10 us: 239.10 (x1.50 the single line; chapter 15 says x1.54 against the
  log). 1 GiB: one line 32.2 us + 8,134.40 us = 8,166.60 us; Simple 112 + 8,134.40 = 8,246.40 us (LL 44.7 ms).
* Network (two-node H100 log h100_2x8_gcp_a3mega_tcpxo): achievable 0.91, alpha 4.4 us, LL 0.089, Simple
  29.6 us a step. A DGX H100's 50 GB/s of NIC a GPU: a reduce-scatter over 2 GPUs one per node (ranks 8
  apart) is 1 ring step and 1/2 S on 45.5 GB/s (LL 4.45 GB/s). 16 MiB: one line 4.4 + 8,388,608 / 45.5e3 =
  4.4 + 184.365 = 188.765 us; Simple 29.6 + 184.365 = 213.965 us; LL 4.4 + 1,885.08 us. 1 GiB: one line
  4.4 + 11,799.36 = 11,803.76 us; Simple 11,828.96 us.
"""

import pytest

from llmsizing.catalog import get_gpu
from llmsizing.comm import communication, ring_collective
from llmsizing.layouts import step_time
from llmsizing.network import get_node, group_link
from llmsizing.parallel import Parallel

MiB, GiB = 2**20, 2**30


def _a100_link():
    g = get_gpu("A100 80GB")
    return group_link(g, get_node("DGX A100 (80GB)", g), size=8)


def _h100_network_link():
    g = get_gpu("H100 SXM")
    return group_link(g, get_node("DGX H100", g), size=2, stride=8)


@pytest.mark.parametrize("size, single_us, protocol_us", [(16 * MiB, 159.30, 239.10),
                                                           (GiB, 8166.60, 8246.40)])
def test_an_nvlink_all_reduce_by_hand(size, single_us, protocol_us):
    gl = _a100_link()
    one = ring_collective("x", "dp", 8, "all-reduce", size, 1, gl)
    both = ring_collective("x", "dp", 8, "all-reduce", size, 3, gl, protocols=True)
    assert one.time_s * 1e6 == pytest.approx(single_us, rel=2e-4)
    assert both.time_s / 3 * 1e6 == pytest.approx(protocol_us, rel=2e-4)
    assert both.bytes_per_gpu == 3 * one.bytes_per_gpu            # the same bytes, on another line


@pytest.mark.parametrize("size, single_us, protocol_us", [(16 * MiB, 188.765, 213.965),
                                                           (GiB, 11803.76, 11828.96)])
def test_a_cross_node_reduce_scatter_by_hand(size, single_us, protocol_us):
    gl = _h100_network_link()
    assert gl.across and gl.per_domain == 1
    one = ring_collective("x", "dp", 2, "reduce-scatter", size, 1, gl)
    both = ring_collective("x", "dp", 2, "reduce-scatter", size, 1, gl, protocols=True)
    assert one.time_s * 1e6 == pytest.approx(single_us, rel=2e-4)
    assert both.time_s * 1e6 == pytest.approx(protocol_us, rel=2e-4)


def test_small_messages_take_the_ll_line():
    # 64 KiB over 8 A100s: LL 32.2 + 1.75 x 65,536 / 42e3 = 32.2 + 2.731 = 34.93 us; Simple 112 + 0.50 us
    c = ring_collective("x", "tp", 8, "all-reduce", 64 * 2**10, 1, _a100_link(), protocols=True)
    assert c.time_s * 1e6 == pytest.approx(34.93, rel=1e-3)


def test_default_is_the_single_line_and_protocols_never_cheaper():
    par = Parallel(tp=8, dp=4, pp=2)
    kw = dict(batch=1, seq=4096, gpu="H100 SXM", grad_accum=8)
    old, new = (communication("llama-3-70b", par, **kw, protocols=p) for p in (False, True))
    assert communication("llama-3-70b", par, **kw) == old
    assert all(b.time_s >= a.time_s - 1e-15 for a, b in zip(old.collectives, new.collectives))
    assert new.by_group()["tp"] > old.by_group()["tp"]               # 8 MiB-ish TP buffers: x1.2
    st_old, st_new = (step_time("llama-3-70b", "H100 SXM", par, batch=1, seq=4096, grad_accum=8, protocols=p)
                      for p in (False, True))
    assert st_new.step_s > st_old.step_s and st_new.compute_s == st_old.compute_s


def test_bad_protocols_refused_by_name():
    with pytest.raises(TypeError, match="protocols"):
        ring_collective("x", "dp", 8, "all-reduce", MiB, 1, _a100_link(), protocols="yes")
    with pytest.raises(TypeError, match="protocols"):
        step_time("llama-3-8b", "H100 SXM", Parallel(dp=8), batch=1, seq=4096, protocols=1)
