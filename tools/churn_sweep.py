#!/usr/bin/env python3
"""Check the churn estimate against the token-level replay of vLLM V1's scheduler over a sweep, and write
data/serve_churn_sweep.csv (churn32, issue 34):

    .venv/bin/python tools/churn_sweep.py            # write the file (a few minutes on one core)
    .venv/bin/python tools/churn_sweep.py --check    # exit 1 if the file differs from a fresh sweep

Each row is one closed batch of equal requests over the KV room: ``blocks`` KV blocks of 16 tokens, ``batch``
requests of ``prompt`` + ``output`` tokens (``over_room`` times the ``floor(blocks / ceil((prompt + output) /
16))`` whole sequences the blocks hold), vLLM's ``max_num_seqs`` and admission ``watermark``. The replay
(:func:`llmsizing.serve_replay.replay_scheduler`, token by token) gives ``replay_recomputed_tokens`` and
``replay_preemptions``; :func:`llmsizing.serve_churn.kv_churn` (cohorts) gives ``churn_*``, and
:func:`llmsizing.serve_churn.first_wave_recompute_tokens` (closed form) ``first_wave_recomputed_tokens``.
ttft35: ``replay_first_token_*`` and ``churn_first_token_*`` are the work both count up to the end of the step
that samples the batch's last first token (:class:`llmsizing.serve_churn.StepCounts`: steps, decode tokens,
the contexts they attend to, prefilled tokens), which ``Serving.last_ttft_s`` prices over the KV room;
cohort36: ``replay_last_token_*`` and ``churn_last_token_*`` are the same counts over the whole run, to the
batch's last token, which ``Serving.cycle_s`` prices there.
tests/test_serve_churn.py reads the file and states the errors. Both are the book's reading of vLLM's rules,
not vLLM running (no GPU here).
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from itertools import product
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tools")]

from _generated import write_or_check  # noqa: E402
from llmsizing.serve_churn import first_wave_recompute_tokens, kv_churn  # noqa: E402
from llmsizing.serve_replay import replay_scheduler  # noqa: E402

OUT = ROOT / "data" / "serve_churn_sweep.csv"
AS_OF = "2026-12-03"
SOURCE = "tools/churn_sweep.py: serve_replay.replay_scheduler (vLLM V1 scheduler.py rules, token by token)"
BLOCKS, PROMPTS, OUTPUTS = (2000, 6000), (128, 1024, 4096), (128, 1024)
OVER, CAPS, WATERMARKS = (1.5, 3.0, 6.0), (256, 1024), (0.0, 0.05)
FIELDS = ["blocks", "prompt", "output", "over_room", "batch", "max_num_seqs", "watermark",
          "replay_recomputed_tokens", "replay_preemptions", "churn_recomputed_tokens", "churn_preemptions",
          "first_wave_recomputed_tokens"]
COUNTS = ("steps", "decodes", "context_tokens", "prefill_tokens")     # StepCounts' fields (ttft35)
FIELDS += [f"{who}_first_token_{k}" for who in ("replay", "churn") for k in COUNTS]
FIELDS += [f"{who}_last_token_{k}" for who in ("replay", "churn") for k in COUNTS] + ["source", "as_of"]


def rows():
    for blocks, prompt, output, over, cap, mark in product(BLOCKS, PROMPTS, OUTPUTS, OVER, CAPS, WATERMARKS):
        batch = math.ceil(over * (blocks // math.ceil((prompt + output) / 16)))
        r = replay_scheduler(blocks, batch, prompt, output, cap, lambda c, p: 0.0, watermark=mark)
        c = kv_churn(blocks, batch, prompt, output, cap, watermark=mark)
        first = first_wave_recompute_tokens(blocks, batch, prompt, output, cap)
        yield {"blocks": blocks, "prompt": prompt, "output": output, "over_room": over, "batch": batch,
               "max_num_seqs": cap, "watermark": mark, "replay_recomputed_tokens": r.recomputed_tokens,
               "replay_preemptions": r.preemptions, "churn_recomputed_tokens": c.recomputed_tokens,
               "churn_preemptions": c.preemptions,
               "first_wave_recomputed_tokens": first,
               **{f"replay_first_token_{k}": getattr(r.to_last_first_token, k) for k in COUNTS},
               **{f"churn_first_token_{k}": getattr(c.to_last_first_token, k) for k in COUNTS},
               **{f"replay_last_token_{k}": getattr(r.to_last_token, k) for k in COUNTS},
               **{f"churn_last_token_{k}": getattr(c.to_last_token, k) for k in COUNTS},
               "source": SOURCE, "as_of": AS_OF}


def text() -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, FIELDS, lineterminator="\n")
    w.writeheader()
    for row in rows():
        w.writerow(row)
    return buf.getvalue()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the file differs from a fresh sweep")
    args = ap.parse_args()
    sys.exit(write_or_check(OUT, text(), check=args.check, rerun="tools/churn_sweep.py"))
