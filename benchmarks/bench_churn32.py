"""churn32's speed claims, measured (paired, interleaved rounds, medians):

1. ``serving()`` is no slower than main's: the churn is computed on first use of ``Serving.churn`` only. Each
   round runs 300 calls (Llama-3-8B on an H100, 1,024 + 256 tokens, 100 and 692 requests) in a fresh
   interpreter on main's ``src`` and on this branch's, the two sides alternating (main-new, new-main).
2. The churn estimate against the token-level replay it is checked on (``serve_churn.kv_churn`` against
   ``serve_replay.replay_scheduler`` on chapter 15's batch and three of the sweep's), alternating in one
   process.

Run: ``.venv/bin/python benchmarks/bench_churn32.py [--rounds 6] [--main /work/main/src]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
CALLS = """
import time
from llmsizing.serve_step import serving
serving("llama-3-8b", "H100 SXM", prompt=1024, output=256, batch=692)      # warm the catalogues
t = time.process_time()
for i in range(150):
    serving("llama-3-8b", "H100 SXM", prompt=1024, output=256, batch=100)
    serving("llama-3-8b", "H100 SXM", prompt=1024, output=256, batch=692)
print(time.process_time() - t)
"""


def _serving_round(src: str) -> float:
    out = subprocess.run([sys.executable, "-c", CALLS], env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip()) / 300


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--main", default="/work/main/src")
    args = ap.parse_args()
    got = {"main": [], "new": []}
    for r in range(args.rounds):
        for side in (("main", "new") if r % 2 == 0 else ("new", "main")):
            got[side].append(_serving_round(args.main if side == "main" else str(HERE / "src")))
    ratios = [n / m for n, m in zip(got["new"], got["main"])]
    print(f"serving(): main {statistics.median(got['main']) * 1e3:.3f} ms, new "
          f"{statistics.median(got['new']) * 1e3:.3f} ms a call; paired new/main median "
          f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")

    sys.path.insert(0, str(HERE / "src"))
    from llmsizing.serve_churn import kv_churn
    from llmsizing.serve_replay import replay_scheduler

    cases = [(27_742, 692, 1024, 256, 1024), (3000, 184, 512, 512, 1024), (6000, 300, 128, 1024, 1024),
             (2000, 45, 1024, 1024, 256)]
    for case in cases:
        t = {"replay": [], "churn": []}
        for r in range(args.rounds):
            for side in (("replay", "churn") if r % 2 == 0 else ("churn", "replay")):
                start = time.process_time()
                if side == "replay":
                    replay_scheduler(*case, lambda c, p: 0.0)
                else:
                    kv_churn(*case)
                t[side].append(time.process_time() - start)
        print(f"blocks {case[0]:,}, batch {case[1]:,}, {case[2]:,} + {case[3]:,} tokens: replay "
              f"{statistics.median(t['replay']) * 1e3:.1f} ms, churn estimate "
              f"{statistics.median(t['churn']) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
