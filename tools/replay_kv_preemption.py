"""Replay vLLM V1's scheduler on closed batches of equal requests over the KV room, against the library's
waves of ``kv_batch`` (kv30, issue 34): :func:`llmsizing.serve_replay.waves_against_vllm` on the cases below
(the rules replayed and the pricing are that module's docstring).

Run: ``.venv/bin/python tools/replay_kv_preemption.py`` (about a second a case; one GPU). Session 30 (kv30):
vLLM's rules take 0.78x (Llama-2-7B on an A100, 128 + 2,048 tokens, 60 requests over a room of 53: the 7
preempted late keep most of their answers) to 1.15x (Llama-3-8B on an A100, 2,048 + 2,048 tokens, twice the
room: long prompts recomputed) the waves' time; the replayed waves match ``cycle_s`` within 1%. Session 32
(churn32): the waves plus :mod:`llmsizing.serve_churn`'s recomputed tokens at the prefill price (``cycle_s``
since churn35, ``cycle_with_churn_s`` before) comes within 1% of vLLM's rules in the five cases with
1,024-token or longer prompts at 1.5 times the room or more (4% high at 1.1 times), and 9-30% high in the
three with 128-token prompts and 2,048-token answers, where the first wave's extra requests share decode steps
(not priced). Session 35 (churn35), the same nine cases: vLLM's rules over the waves alone (``waves_s``)
1.012, 1.087, 1.067, 1.092, 0.783, 1.030, 0.969, 1.154, 1.030 (median error 6.3%, seven short); over
``cycle_s`` 0.960, 1.003, 1.006, 1.004, 0.772, 0.916, 0.915, 1.002, 1.006 (median error 0.6%, never more than
0.6% short): so ``cycle_s`` includes the churn. The last first token (``Replay.last_first_token_s``)
against ``last_ttft_s``, then the waves': 0.695, 1.125, 1.120, 1.130, 0.011, 0.043, 0.020, 1.389, 1.072
(vLLM admits every 128-token prompt at once, so their first tokens come within 1.5 s). Session 35 (ttft35):
``last_ttft_s`` over the KV room is vLLM's admission, the cohort run's work to the last first token priced at
the wave's step terms: vLLM's rules over it 1.0014, 0.9989, 0.9996, 1.0021, 1.0000, 1.0000, 1.0000, 1.0007,
1.0012 (median error 0.07%); the waves' figure (``waves_last_ttft_s``) gave the numbers above. Session 36
(cohort36): the sum's excess in the three 128-token cases is the step count alone (the replayed waves plus the
recomputed tokens compute the same tokens at contexts within 0.03% of vLLM's rules', in 4,096, 4,099 and
4,096 steps against 2,272, 3,176 and 3,129: 18.4, 6.5 and 9.8 s of fixed step cost); ``cycle_s`` over the KV
room is now the cohort run to the last token priced at the wave's step terms: vLLM's rules over it 0.9981,
0.9989, 0.9993, 1.0019, 1.0000, 1.0003, 1.0001, 1.0003, 1.0009 (median error 0.07%, at most 0.19%).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from llmsizing.serve_replay import waves_against_vllm  # noqa: E402
from llmsizing.serve_step import serving  # noqa: E402

#: (model, GPU, prompt, output, batch over the KV room)
CASES = [("llama-3-8b", "H100 SXM", 1024, 256, 1.1), ("llama-3-8b", "H100 SXM", 1024, 256, 1.5),
         ("llama-3-8b", "H100 SXM", 1024, 256, 2), ("llama-3-8b", "H100 SXM", 1024, 256, 4),
         ("llama-2-7b", "A100 80GB", 128, 2048, 60 / 53), ("llama-3-8b", "H100 SXM", 128, 2048, 2),
         ("llama-2-7b", "A100 80GB", 128, 2048, 2), ("llama-3-8b", "A100 80GB", 2048, 2048, 2),
         ("llama-3-8b", "H100 SXM", 4096, 512, 2)]

if __name__ == "__main__":
    for model, gpu, prompt, output, over in CASES:
        r = waves_against_vllm(model, gpu, prompt=prompt, output=output, over_room=over)
        s = serving(model, gpu, prompt=prompt, output=output, batch=r.batch)
        print(f"{r.model} {r.gpu} {r.prompt}+{r.output}: room {r.kv_batch}, cap {r.max_num_seqs}, batch "
              f"{r.batch} ({r.decode_bound}-bound): library waves {r.waves_s:.1f} s; replayed waves "
              f"{r.waves.seconds:.1f} s ({r.waves.preemptions} preemptions), vLLM's rules "
              f"{r.vllm.seconds:.1f} s = {r.ratio:.3f}x, {r.vllm.preemptions:,} preemptions, "
              f"{r.vllm.recomputed_tokens:,} tokens recomputed; the waves plus the churn (churn35) "
              f"{s.waves_s + s.churn_s:.1f} s ({s.churn.recomputed_tokens:,} tokens): vLLM's rules "
              f"{r.vllm.seconds / (s.waves_s + s.churn_s):.3f}x; the cohort run priced (cycle_s, cohort36) "
              f"{s.cycle_s:.2f} s ({s.churn.to_last_token.steps:,.0f} steps, the replay's "
              f"{r.vllm.steps:,}): vLLM's rules {r.vllm.seconds / s.cycle_s:.4f}x; last first token: "
              f"vLLM's rules "
              f"{r.vllm.last_first_token_s:.2f} s, library (last_ttft_s) {s.last_ttft_s:.2f} s "
              f"({r.vllm.last_first_token_s / s.last_ttft_s:.4f}x), the waves' {s.waves_last_ttft_s:.1f} s "
              f"({r.vllm.last_first_token_s / s.waves_last_ttft_s:.3f}x; replayed waves "
              f"{r.waves.last_first_token_s:.1f} s)")
