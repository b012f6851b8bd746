#!/bin/bash
# Keep the server side (Voila, the kernels it starts and their workers) on CPU 0 while the participant side
# (pytest, Playwright's driver, Chromium) runs under `taskset -c 1`: a participant's browser on a machine of
# its own, as at a workshop (benchmarks/README.md, the 100 ms row, session 47). Run it beside
# `taskset -c 1 .venv/bin/python -m pytest tests/browser/measure_participant.py -k "voila and 17"` and stop
# it with kill. It skips any process whose command line names pytest (the participant's side).
while true; do
  for p in $(pgrep -f "voila|ipykernel"); do
    if ! tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -q pytest; then
      taskset -a -p -c 0 $p >/dev/null 2>&1
    fi
  done
  sleep 0.2
done
