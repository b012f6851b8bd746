"""serving()'s running batch is capped at the engine's max_num_seqs as well as by its KV room (issue 38,
session 28, serve28; read28a L6).

vLLM V1's scheduler admits a waiting request only while ``len(self.running) < self.max_num_running_reqs``
(``vllm/v1/core/sched/scheduler.py``: ``self.max_num_running_reqs = self.scheduler_config.max_num_seqs``),
whatever KV room is left. Its default is 256 on an A100 or a GPU under 70 GiB and 1,024 otherwise
(``EngineArgs`` in ``vllm/engine/arg_utils.py``; data/vllm_batch_defaults.csv).

The KV rooms below are worked out by hand from Llama-3-8B's config.json (32 layers, 8 KV heads of 128, 16-bit:
2 x 32 x 8 x 128 x 2 = 131,072 bytes per token, 2,097,152 per 16-token block; 8,030,261,248 parameters, 2
bytes each), the driver's memory (A100 80GB 81,920 MiB, H100 SXM 81,559 MiB), vLLM's 0.9 utilisation, its
profiled activation peak (the forward over an 8,192-token chunk, 973,078,528 bytes, or the sampler's
67,108,864 + 2 x seqs x 128,256 x 4 bytes if larger: tests/test_vllm_defaults.py), and the library's stated
allowances (1 GiB of CUDA context and buffers, 0.5 GiB of CUDA graphs).
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from llmsizing.serve import replicas_for, serving, serving_sweep

MIB, GIB = 2**20, 2**30
WEIGHTS = 8_030_261_248 * 2
BLOCK = 16 * 2 * 32 * 8 * 128 * 2
FORWARD = 973_078_528


def _kv_room(mib, seqs, context):
    """Sequences of ``context`` tokens the KV blocks of one GPU hold, by hand (module docstring)."""
    act = max(FORWARD, 8192 * 4096 * 2 + 2 * seqs * 128_256 * 4)
    kv = 0.9 * mib * MIB - WEIGHTS - act - 1 * GIB - 0.5 * GIB
    return math.floor(kv / BLOCK) // math.ceil(context / 16)


def test_the_cap_binds_on_an_a100_with_short_sequences():
    # 128 + 128 tokens: 16 blocks a sequence;
    # (77,309,411,328 - 16,060,522,496 - 973,078,528 - 1 GiB - 0.5 GiB) / 2 MiB = 27,973 blocks: room for
    # 1,748 sequences, where vLLM's A100 default runs 256
    room = _kv_room(81_920, 256, 256)
    assert room == 1748
    s = serving("llama-3-8b", "A100 80GB", prompt=128, output=128)
    assert s.kv_batch == room
    assert s.max_num_seqs == 256
    assert s.max_batch == 256 and s.batch_bound == "max_num_seqs"
    assert serving("llama-3-8b", "A100 80GB", prompt=128, output=128, batch=256).fits
    assert not serving("llama-3-8b", "A100 80GB", prompt=128, output=128, batch=257).fits


def test_the_kv_room_binds_on_an_h100_with_longer_sequences():
    # 1,024 + 256 tokens: 80 blocks; the H100's 1,024 sequences put the sampler's logits over the forward
    # (1,117,782,016 bytes): 27,742 blocks, room for 346 sequences, under the cap
    room = _kv_room(81_559, 1024, 1280)
    assert room == 346
    s = serving("llama-3-8b", "H100 SXM", prompt=1024, output=256)
    assert s.max_num_seqs == 1024
    assert s.max_batch == s.kv_batch == room and s.batch_bound == "kv"


def test_a_larger_cap_lets_the_kv_room_bind_and_grows_the_logits():
    # --max-num-seqs 2048 on the A100: the sampler's 2,168,455,168 bytes now set the activation peak, 27,403
    # blocks, room for 1,712 sequences, under the 2,048
    room = _kv_room(81_920, 2048, 256)
    assert room == 1712
    s = serving("llama-3-8b", "A100 80GB", prompt=128, output=128, max_num_seqs=2048)
    assert s.max_num_seqs == 2048
    assert s.max_batch == s.kv_batch == room and s.batch_bound == "kv"


def test_a_stated_batch_over_the_cap_runs_the_cap_at_once():
    # issue 34 (queue29): a batch over the cap is priced as vLLM runs it, 256 at a time in 512 / 256 = 2 waves;
    # a cap that holds it prices it at once (tests/test_serving_waves.py)
    a = serving("llama-3-8b", "A100 80GB", prompt=128, output=128, batch=512)
    b = serving("llama-3-8b", "A100 80GB", prompt=128, output=128, batch=512, max_num_seqs=4096)
    c = serving("llama-3-8b", "A100 80GB", prompt=128, output=128, batch=256, max_num_seqs=4096)
    assert not a.fits and b.fits
    assert a.batch == b.batch == 512 and (a.running_batch, a.waves, b.running_batch, b.waves) == (256, 2, 512, 1)
    # the larger cap's logits take KV room, not step time: the running batch of 256 costs the same step
    assert (a.decode_step_s, a.itl_s, a.batch_prefill_s) == (c.decode_step_s, c.itl_s, c.batch_prefill_s)
    assert b.decode_step_s > a.decode_step_s


def test_expert_parallel_groups_each_schedule_their_own():
    # with ep, each of the ep / tp attention groups is an engine of its own (vLLM's data-parallel ranks):
    # 8 groups of 4 sequences run 32
    s = serving("mixtral-8x7b", "H100 SXM", tp=1, ep=8, prompt=128, output=128, max_num_seqs=4)
    assert s.kv_batch > 32
    assert s.max_batch == 4 * 8


def test_pipeline_stages_share_one_scheduler():
    s = serving("llama-3-70b", "H100 SXM", tp=4, pp=2, prompt=128, output=128, max_num_seqs=16)
    assert s.kv_batch > 16
    assert s.max_batch == 16


def test_the_search_stops_at_the_cap():
    # a loose ITL target: the KV room would allow far more than vLLM runs on an A100
    kw = dict(prompt=128, output=128, users=5000, itl_s=0.1, ttft_s=1.0, tps=(1,), with_range=False)
    capped = replicas_for("llama-3-8b", "A100 80GB", **kw)
    assert capped.batch == 256
    wide = replicas_for("llama-3-8b", "A100 80GB", **kw, max_num_seqs=4096)
    assert 256 < wide.batch <= wide.serving.kv_batch
    assert wide.gpus < capped.gpus
    p95 = replicas_for("llama-3-8b", "A100 80GB", **kw, percentile=95)
    assert p95.batch <= 256
    split = replicas_for("llama-3-8b", "A100 80GB", **kw, percentile=95, disaggregated=True)
    assert split.batch <= 256


def test_the_sweep_ends_at_the_cap():
    sweep = serving_sweep("llama-3-8b", "A100 80GB", prompt=128, output=128)
    assert sweep[-1].batch == 256 and all(s.fits for s in sweep)


@pytest.mark.parametrize("bad,exc", [(0, ValueError), (-1, ValueError), (2_000_000, ValueError),
                                     (2.5, TypeError), (True, TypeError), ("256", TypeError)])
def test_a_bad_cap_names_the_parameter(bad, exc):
    with pytest.raises(exc, match="max_num_seqs"):
        serving("llama-3-8b", "A100 80GB", max_num_seqs=bad)


def test_a_result_built_without_the_new_fields_keeps_max_batch():
    s = serving("llama-3-8b", "H100 SXM", prompt=1024, output=256)
    old = {f.name: getattr(s, f.name) for f in dataclasses.fields(s)
           if f.name not in ("kv_batch", "max_num_seqs")}
    t = type(s)(**old)
    assert t.kv_batch == t.max_batch == s.max_batch and t.max_num_seqs is None and t.batch_bound == "kv"
    frame = s.to_frame()["value"]
    assert frame["max_batch"] == s.max_batch and frame["kv_batch"] == s.kv_batch
    assert frame["batch_bound"] == "kv"


def test_the_cli_takes_the_cap(capsys):
    import json

    from llmsizing import cli

    base = ["serve", "llama-3-8b", "--gpu", "A100 80GB", "--prompt", "128", "--output", "128",
            "--users", "5000", "--itl-ms", "100", "--json"]
    rows = []
    for extra in ([], ["--max-num-seqs", "4096"]):
        assert cli.main(base + extra) == 0
        rows.append(json.loads(capsys.readouterr().out)[0])
    assert rows[0]["batch"] == 256                      # vLLM's A100 default caps the batch
    assert rows[1]["batch"] > 256 and rows[1]["gpus"] < rows[0]["gpus"]
    assert cli.main(base + ["--max-num-seqs", "0"]) == 2
    assert "--max-num-seqs" in capsys.readouterr().err
