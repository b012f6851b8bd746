"""The book's units policy, in one place (taught in chapter 0, "Units and notation").

* **Memory on a device** (weights, gradients, optimizer states, activations, KV cache, GPU capacity) is in
  binary units: 1 GiB = 2**30 bytes. This is what ``nvidia-smi`` and ``torch.cuda.memory_allocated`` report,
  and what HBM stacks are built in. A GPU's capacity is what the driver reports (an H100 sold as "80 GB"
  reports 81,559 MiB = 79.6 GiB); the catalogue keeps the marketed figure alongside.
* **Bandwidth** (memory and links) is in decimal units: 1 GB/s = 10**9 bytes per second, as on spec sheets.
  Every link bandwidth states whether it is one-way or bidirectional.
* **Compute** is in decimal units: 1 TFLOP/s = 10**12 floating-point operations per second, dense (no
  2:4 sparsity).
* **Counts** (parameters, tokens) are decimal: 7B = 7 * 10**9.

Every quantity in the library carries its unit in its name: ``_bytes``, ``_gib``, ``_gbps``, ``_tflops``,
``_s``.
"""

from __future__ import annotations

from ._validate import check_int, check_number

KiB = 2**10
MiB = 2**20
GiB = 2**30
TiB = 2**40

KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12


def to_gib(n_bytes: float) -> float:
    """Bytes to GiB (2**30 bytes)."""
    return n_bytes / GiB


def fmt_gib(n_bytes: float, digits: int = 1) -> str:
    """Format a byte count in GiB, e.g. ``fmt_gib(16 * 2**30) == '16.0 GiB'``."""
    n_bytes, digits = _fmt_args("n_bytes", n_bytes, digits)
    return f"{n_bytes / GiB:,.{digits}f} GiB"


def fmt_bytes(n_bytes: float, digits: int = 1) -> str:
    """Format a byte count with the largest binary unit that keeps the number >= 1."""
    n_bytes, digits = _fmt_args("n_bytes", n_bytes, digits)
    for unit, size in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n_bytes) >= size:
            return f"{n_bytes / size:,.{digits}f} {unit}"
    return f"{n_bytes:,.0f} B"


def fmt_size(n_bytes: float) -> str:
    """A message size in B, KiB, MiB or GiB, whole where it is a whole number of the unit (``4 MiB``,
    ``1.5 KiB``): nccl-tests' sizes as chapter 9 prints them."""
    n_bytes = _fmt_args("n_bytes", n_bytes, 0)[0]
    for name, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n_bytes) >= size:
            v = n_bytes / size
            return f"{v:,.0f} {name}" if v == int(v) else f"{v:,.1f} {name}"
    return f"{n_bytes:,.0f} B"


def fmt_count(n: float, digits: int = 2) -> str:
    """Format a count with a decimal suffix: ``fmt_count(6_738_415_616) == '6.74B'``."""
    n, digits = _fmt_args("n", n, digits)
    for suffix, size in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if abs(n) >= size:
            return f"{n / size:,.{digits}f}{suffix}"
    return f"{n:,.0f}"


def _fmt_args(name: str, value, digits) -> tuple[float, int]:
    """The formatting helpers take any finite number (signed: differences are formatted too) and 0-12
    digits."""
    return (check_number(name, value, minimum=None, maximum=1e30),
            check_int("digits", digits, minimum=0, maximum=12))
