"""``python -m measure`` (from tools/): the same command line as ``tools/measure_memory.py``."""

from .cli import main

main()
