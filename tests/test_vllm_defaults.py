"""vLLM's batch defaults depend on the GPU (session 27, vllm27; read27c H2). vLLM's ``EngineArgs``
(``vllm/engine/arg_utils.py``, commit 99d7eb5d) sets them as ``if device_memory >= 70 * GiB_bytes and
"a100" not in device_name``: max_num_seqs 1024, max_num_batched_tokens 16384 (``LLM`` class) / 8192 (API
server); else 256 and 8192 / 2048. The expectations below apply that rule by hand to the memory nvidia-smi
reports (data/gpus.csv's memory_mib) and the GPU's name; the activation-peak differences are worked out from
Llama-3-8B's config (hidden 4096, FFN 14336, vocabulary 128256)."""

from __future__ import annotations

import csv

import pytest

from llmsizing.catalog import DATA_DIR
from llmsizing.serve_engine import (activation_peak_bytes, kv_capacity_tokens,
                                    vllm_default_max_num_batched_tokens, vllm_default_max_num_seqs)

# (GPU, memory_mib, max_num_seqs, API-server chunk, LLM-class chunk), by hand:
CASES = [
    ("H100 SXM", 81559, 1024, 8192, 16384),        # 79.6 GiB >= 70, not an A100
    ("H20", 97871, 1024, 8192, 16384),             # 95.6 GiB
    ("MI300X", 196288, 1024, 8192, 16384),         # 191.7 GiB ("For GPUs like H100 and MI300x")
    ("A100 80GB", 81920, 256, 2048, 8192),         # 80 GiB, but an A100 (PR #17885's regression)
    ("A100 PCIe 80GB", 81920, 256, 2048, 8192),
    ("L40S", 46068, 256, 2048, 8192),              # 45.0 GiB < 70
    ("MI250X GCD", 65520, 256, 2048, 8192),        # 63.98 GiB < 70
]


@pytest.mark.parametrize("gpu,mib,seqs,api,llm", CASES)
def test_the_default_follows_memory_and_the_a100_line(gpu, mib, seqs, api, llm):
    from llmsizing.catalog import get_gpu
    assert get_gpu(gpu).memory_mib == mib
    assert vllm_default_max_num_seqs(gpu) == vllm_default_max_num_seqs(gpu, "llm") == seqs
    assert vllm_default_max_num_batched_tokens(gpu) == api
    assert vllm_default_max_num_batched_tokens(gpu, usage="llm") == llm


def test_the_a100_line_in_the_data_is_every_catalogue_a100():
    # vLLM tests the device name for "a100"; the data lists those GPUs by catalogue name and must list all
    with open(DATA_DIR / "gpus.csv", newline="") as f:
        a100s = {r["name"] for r in csv.DictReader(f) if "a100" in r["name"].lower()}
    with open(DATA_DIR / "vllm_batch_defaults.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    excluded = {r["tier"]: set(r["excluded_gpus"].split(";")) - {""} for r in rows}
    assert excluded["large"] == a100s == {"A100 40GB", "A100 80GB", "A100 PCIe 80GB"}
    assert all(r["source"] for r in rows)


def test_the_sampler_logits_grow_with_the_default():
    # vLLM's profile_run: the forward over the chunk, then the sampler beside the kept hidden states; the peak
    # is the larger. Forward: 8192 x (3 x 14336 + 4 x 4096) x 2 = 973,078,528 bytes. Sampler: 8192 x 4096 x 2 =
    # 67,108,864 plus 2 x seqs x 128,256 x 4: 262,668,288 at 256 sequences (under the forward), 1,050,673,152
    # at 1,024 (over it): 1,117,782,016 - 973,078,528 = 144,703,488 bytes more on an H100
    from llmsizing.catalog import resolve_model
    m = resolve_model("llama-3-8b")
    assert activation_peak_bytes(m, max_num_seqs=256) == 973_078_528
    assert activation_peak_bytes(m, max_num_seqs=1024) == 1_117_782_016
    h100 = kv_capacity_tokens(m, "H100 SXM")
    old = kv_capacity_tokens(m, "H100 SXM", max_num_seqs=256)           # an explicit value still wins
    assert h100.activation_peak_bytes - old.activation_peak_bytes == 144_703_488
    # vLLM's API server chunks 2,048 tokens on an A100 (256 sequences): forward 2048 x 59,392 x 2 =
    # 243,269,632, sampler 2048 x 4096 x 2 + 262,668,288 = 279,445,504, the peak; against the 973,078,528 of
    # the 8,192 tokens the library keeps on every GPU (its serving fit's chunk), 693,633,024 bytes less
    chunk = vllm_default_max_num_batched_tokens("A100 80GB")
    assert chunk == 2048
    a100 = kv_capacity_tokens(m, "A100 80GB", max_num_batched_tokens=chunk)
    a100_kept = kv_capacity_tokens(m, "A100 80GB")
    assert a100_kept.activation_peak_bytes - a100.activation_peak_bytes == 693_633_024


def test_rl_engines_take_verls_rollout_defaults():
    # verl/trainer/config/rollout/rollout.yaml (volcengine/verl 035682ed): max_num_seqs 1024,
    # max_num_batched_tokens 8192, whatever the GPU
    from llmsizing import rl
    assert (rl.MAX_NUM_SEQS, rl.MAX_NUM_BATCHED_TOKENS) == (1024, 8192)
    run = dict(gpu="H100 SXM", n_gpus=8, prompts_per_step=64, samples_per_prompt=16, prompt=128,
               response=(300, 600), colocated=False, gen_gpus=4, gen_tp=1)
    assert rl.rl_run("llama-3-8b", **run, max_num_seqs=64).engine_batch == 64      # the cap, when it binds
    assert rl.rl_run("llama-3-8b", **run).engine_batch == 256                       # 64 x 16 / 4 engines


def test_a_bad_usage_is_refused_by_name():
    with pytest.raises(ValueError, match="usage"):
        vllm_default_max_num_seqs("H100 SXM", usage="server")
