"""Catalogues of models and GPUs, read from the CSV files in the repository's ``data/`` folder (the
model catalogue's reader is :mod:`llmsizing.model_catalog`, re-exported here; the GPUs and their prices are
read here).

Every row carries its source and an as-of date; nothing in the library hard-codes a model shape or a GPU spec.
Models are taught in chapter 1, GPUs are introduced in chapter 2 and used in every chapter after it.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path

from ._compat import keep_hash
from ._validate import check_choice, check_int, check_number, check_sequence
from ._validate import _suggest, _unknown  # noqa: F401 (moved down in session 25; still importable here)
from .model import Model, moe_layer_indices, require_dense  # noqa: F401 (were importable here)
from .model_catalog import (  # noqa: F401 (the model catalogue, moved out in session 25; every name here)
    MODELS_CSV, ModelEntry, _OPTIONAL_FLAG, _OPTIONAL_INT, _model_entries, _model_from_row, get_model,
    list_models, model_entry, model_table, resolve_model)

#: ``data/`` at the repository root (the package is installed editable from ``src/``).
DATA_DIR = Path(__file__).resolve().parents[2] / "data"


def _read(filename: str) -> list[dict[str, str]]:
    with open(DATA_DIR / filename, newline="") as fh:
        return list(csv.DictReader(fh))


# ----------------------------------------------------------------------------- GPUs
#: How a GPU's ``link_bandwidth_gbps`` is quoted: both directions added (NVLink and PCIe datasheets), or one
#: way.
LINK_DIRECTIONS = ("bidirectional", "one-way")

#: The class of a GPU's scale-up link, a column of ``data/gpus.csv`` (issue 33: read from data, never from the
#: ``link`` text, whose "PCIe Gen4 x16 (no NVLink)" once made three PCIe cards NVLink ones). Each class has
#: its fitted achievable fraction and latency in ``data/links.csv`` (:mod:`llmsizing.network`).
GPU_LINK_CLASSES = ("nvlink", "infinity-fabric", "pcie")

#: PCIe generations a GPU's host link may name (``host_pcie_gen`` in ``data/gpus.csv``): 1 and 2 (8b/10b line
#: code), 3 to 5 (128b/130b), whose one-way rates :func:`llmsizing.network.pcie_gbps_one_way` works out.
HOST_PCIE_GENERATIONS = (1, 2, 3, 4, 5)

#: The smallest speed a GPU may claim, for its dense TFLOP/s and its GB/s of HBM and link bandwidth: 0.001
#: (a GFLOP/s, a MB/s). A GPU at zero would divide every time by zero.
MIN_GPU_SPEED = 1e-3

#: The largest memory a GPU may report, in MiB: 2**30 MiB (1 PiB, some 5,000 times a B200).
MAX_GPU_MIB = 2**30

_GPU_TEXT_FIELDS = ("vendor", "memory_source", "link", "price_source", "spec_source", "as_of", "price_as_of")

#: What a price is (:attr:`GPU.price_kind`): ``"list"`` (a provider's published price, read from its price
#: page), ``"reported"`` (a provider's price as a dated third-party survey reports it: ranked, but
#: marked), ``"estimate"`` (no price found: never ranked as if it were a list price) or ``"reader"``
#: (:func:`use_prices`).
PRICE_KINDS = ("list", "estimate", "reader", "reported")

#: What an estimate's rule may scale its neighbour's price by (``estimate_basis`` in ``data/gpu_prices.csv``):
#: a column of ``data/gpus.csv``. Only the BF16 dense peak so far (issue 38, one rule for every estimate).
ESTIMATE_BASES = ("bf16_dense_tflops",)

#: The environment variable that names a reader's own price table (a CSV with the columns of
#: ``data/gpu_prices.csv``; only ``name`` and ``price_usd_per_gpu_hour`` are required), read when the
#: catalogue is first loaded. :func:`use_prices` does the same from Python. It is the one place to set prices.
PRICES_ENV = "LLMSIZING_PRICES"


@keep_hash
@dataclass(frozen=True)
class GPU:
    """One accelerator. Units follow :mod:`llmsizing.units`: memory in GiB, bandwidth in decimal GB/s,
    compute in dense TFLOP/s (no sparsity). ``fp8_dense_tflops`` is ``None`` where the chip has no FP8 (so
    arithmetic on it fails loudly instead of returning NaN).

    Half precision: ``bf16_dense_tflops`` is the BF16 tensor-core peak (FP32 accumulation), ``None`` on a chip
    without BF16 (the V100). ``fp16_dense_tflops`` is the FP16 peak with FP32 accumulation where it differs
    from the BF16 one or where there is no BF16 (the V100's 125); ``None`` means "the BF16 rate". At least one
    of the two is given. ``fp16_acc16_dense_tflops`` is FP16 with FP16 accumulation where that runs faster
    (GeForce cards: the RTX 4090's 330.3 against 165.2); ``None`` means "the FP16 rate". Read them through
    :func:`llmsizing.hardware.dense_tflops`, which states the policy for a chip without BF16.

    Memory: ``memory_mib`` is the total the driver reports (``nvidia-smi`` / ``rocm-smi``), which is what a
    program can allocate before the CUDA context; every "does it fit" in the book uses it
    (:attr:`memory_bytes`, :attr:`memory_gib`). ``memory_marketed_gb`` is the figure on the box ("80 GB" for
    an H100, which reports 79.6 GiB; "24 GB" for an A10, which reports 22.5 GiB with ECC on)."""

    name: str
    vendor: str
    memory_marketed_gb: float
    memory_mib: int
    memory_source: str
    memory_bandwidth_gbps: float
    bf16_dense_tflops: float
    fp8_dense_tflops: float | None
    link: str
    link_bandwidth_gbps: float
    link_direction: str
    price_usd_per_gpu_hour: float
    price_source: str
    spec_source: str
    as_of: str
    fp16_dense_tflops: float | None = None
    fp16_acc16_dense_tflops: float | None = None
    #: Dense FP4 (NVFP4/MXFP4) tensor-core peak, ``None`` without FP4 tensor cores (``data/gpus_fp4.csv``,
    #: each row with its source and ``as_of``; issue 36: B200, GB200, B300, MI355X).
    fp4_dense_tflops: float | None = None
    #: :data:`GPU_LINK_CLASSES`; ``None`` (a hand-made GPU) takes the class of its node's topology.
    link_class: str | None = None
    #: The date of the price (``data/gpu_prices.csv``), each dated on its own; ``""`` for a hand-made GPU.
    price_as_of: str = ""
    #: :data:`PRICE_KINDS`: ``"list"`` (a provider's published price), ``"reported"`` (a provider's price as a
    #: third-party survey reports it), ``"estimate"`` (no price found: a stated assumption or the rule of
    #: :func:`estimated_price`; never ranked as if it were a list price) or ``"reader"`` (:func:`use_prices`).
    price_kind: str = "list"
    #: The GPU's link to its host's memory (:func:`llmsizing.network.host_link_gbps`, chapter 7): a PCIe
    #: generation (1-5, :data:`HOST_PCIE_GENERATIONS`) and its lanes, or, for a link that is not PCIe (a
    #: GB200's NVLink-C2C to its Grace, Frontier's Infinity Fabric CPU-GPU), ``host_link_gbps_one_way``; each
    #: row's ``host_link_source`` and ``host_link_as_of`` (``data/gpus.csv``). All None: not known (a
    #: hand-made GPU).
    host_pcie_gen: int | None = None
    host_pcie_lanes: int | None = None
    host_link_gbps_one_way: float | None = None
    host_link_source: str = ""
    host_link_as_of: str = ""
    #: The target the GPU's GEMM kernels are compiled for (``gemm_arch`` in ``data/gpus.csv``, with its
    #: ``gemm_arch_source`` and ``gemm_arch_as_of``): NVIDIA's compute capability as ``sm_XY`` (``sm_90``:
    #: H100, H200, H800, H20; ``sm_100``: B200 and GB200), AMD's LLVM target (``gfx942``). It picks the
    #: measured few-row GEMM table (:func:`llmsizing.kernels.grid_gpu`). ``None``: not known (hand-made).
    gemm_arch: str | None = None
    gemm_arch_source: str = ""
    gemm_arch_as_of: str = ""

    def __post_init__(self):
        # a hand-made GPU (or dataclasses.replace of a catalogued one) is checked like the catalogue's rows: a
        # speed of zero would divide by zero in every time, a negative memory count negative GPUs. Each field
        # keeps what its check returns (Python numbers: a NumPy int32 memory_mib would overflow in bytes).
        if not isinstance(self.name, str) or not self.name.strip():
            raise TypeError(f"GPU name must be a non-empty string, got {self.name!r}")
        for f in _GPU_TEXT_FIELDS:
            if not isinstance(getattr(self, f), str):
                raise TypeError(f"{f} of GPU {self.name!r} must be a string, got {getattr(self, f)!r}")

        def field(f, **kw):
            object.__setattr__(self, f, check_number(f"{f} of GPU {self.name!r}", getattr(self, f), **kw))

        object.__setattr__(self, "memory_mib", check_int(f"memory_mib of GPU {self.name!r}", self.memory_mib,
                                                         maximum=MAX_GPU_MIB))
        for f in ("memory_bandwidth_gbps", "link_bandwidth_gbps"):
            field(f, minimum=MIN_GPU_SPEED)
        if self.bf16_dense_tflops is None and self.fp16_dense_tflops is None:
            raise ValueError(f"bf16_dense_tflops of GPU {self.name!r} is None (no BF16) and so is "
                             "fp16_dense_tflops: give the GPU's 16-bit tensor-core peak in one of them")
        # None: no FP8 tensor cores (the A10, the A100s, the V100); no BF16 (the V100); FP16 at the BF16 rate,
        # or FP16-accumulate FP16 at the FP16 rate (every GPU but a GeForce card)
        for f in ("bf16_dense_tflops", "fp8_dense_tflops", "fp16_dense_tflops", "fp16_acc16_dense_tflops",
                  "fp4_dense_tflops"):
            if getattr(self, f) is not None:
                field(f, minimum=MIN_GPU_SPEED)
        if self.memory_marketed_gb is not None:
            field("memory_marketed_gb", allow_equal=False)
        if self.price_usd_per_gpu_hour is not None:  # None: no price (no row in data/gpu_prices.csv)
            field("price_usd_per_gpu_hour")
        check_choice(f"link_direction of GPU {self.name!r}", self.link_direction, LINK_DIRECTIONS)
        check_choice(f"price_kind of GPU {self.name!r}", self.price_kind, PRICE_KINDS)
        if self.link_class is not None:
            check_choice(f"link_class of GPU {self.name!r}", self.link_class, GPU_LINK_CLASSES)
        self._check_host_link()
        if self.gemm_arch is not None and (not isinstance(self.gemm_arch, str) or not self.gemm_arch.strip()):
            raise TypeError(f"gemm_arch of GPU {self.name!r} must be a non-empty string (a compute target: "
                            f"'sm_90', 'gfx942') or None, got {self.gemm_arch!r}")

    def _check_host_link(self):
        """The host link's fields: a PCIe generation with its lanes, or a one-way figure, never both."""
        pcie = (self.host_pcie_gen, self.host_pcie_lanes)
        if (pcie[0] is None) != (pcie[1] is None):
            raise ValueError(f"host_pcie_gen and host_pcie_lanes of GPU {self.name!r} go together: give both "
                             f"or neither, got {pcie}")
        if pcie[0] is not None:
            if self.host_link_gbps_one_way is not None:
                raise ValueError(f"GPU {self.name!r}: give its host link as a PCIe generation and lanes "
                                 "or as host_link_gbps_one_way, not both")
            gen = check_int(f"host_pcie_gen of GPU {self.name!r}", pcie[0],
                            minimum=min(HOST_PCIE_GENERATIONS), maximum=max(HOST_PCIE_GENERATIONS))
            lanes = check_int(f"host_pcie_lanes of GPU {self.name!r}", pcie[1], maximum=32)
            if lanes & (lanes - 1):
                raise ValueError(f"host_pcie_lanes of GPU {self.name!r} must be 1, 2, 4, 8, 16 or 32 (a PCIe "
                                 f"link's width), got {lanes}")
            object.__setattr__(self, "host_pcie_gen", gen)
            object.__setattr__(self, "host_pcie_lanes", lanes)
        if self.host_link_gbps_one_way is not None:
            object.__setattr__(self, "host_link_gbps_one_way", check_number(
                f"host_link_gbps_one_way of GPU {self.name!r}", self.host_link_gbps_one_way,
                minimum=MIN_GPU_SPEED))
        for f in ("host_link_source", "host_link_as_of", "gemm_arch_source", "gemm_arch_as_of"):
            if not isinstance(getattr(self, f), str):
                raise TypeError(f"{f} of GPU {self.name!r} must be a string, got {getattr(self, f)!r}")

    @property
    def has_bf16(self) -> bool:
        """Whether the GPU has BF16 tensor cores (every catalogued GPU but the V100)."""
        return self.bf16_dense_tflops is not None

    @property
    def fp16_rate_tflops(self) -> float:
        """The dense FP16 tensor-core peak with FP32 accumulation: ``fp16_dense_tflops``, or the BF16 rate
        where that column is empty."""
        return self.fp16_dense_tflops if self.fp16_dense_tflops is not None else self.bf16_dense_tflops

    @property
    def memory_bytes(self) -> int:
        """Bytes the driver reports as the GPU's total memory."""
        return self.memory_mib * 2**20

    @property
    def memory_gib(self) -> float:
        """:attr:`memory_bytes` in GiB (e.g. 79.65 for an H100 SXM)."""
        return self.memory_mib / 1024

    @property
    def label(self) -> str:
        """``"H100 SXM (79.6 GiB)"``: how charts name a GPU."""
        return f"{self.name} ({self.memory_gib:.1f} GiB)"


_READER_PRICES: list[dict[str, str]] | None = None     # set by use_prices(); None: the environment's, if any


def _price_rows(rows, where: str, *, rules: bool = False) -> dict[str, dict[str, str]]:
    out = {}
    for i, r in enumerate(rows):
        if rules and r.get("name") and (r.get("estimate_neighbour") or "").strip():
            out[r["name"]] = r                     # an estimate by rule: priced by _apply_rules
            continue
        if not r.get("name") or not str(r.get("price_usd_per_gpu_hour", "")).strip():
            raise ValueError(f"{where}: row {i + 1} needs a name and a price_usd_per_gpu_hour, "
                             f"got {dict(r)!r}")
        out[r["name"]] = r
    return out


def _read_price_csv(path) -> list[dict[str, str]]:
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"prices: no price table at {str(path)!r} (a CSV with the columns name and "
                         "price_usd_per_gpu_hour, like data/gpu_prices.csv)")
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _prices() -> dict[str, dict[str, str]]:
    """Each GPU's price row: ``data/gpu_prices.csv``, then the reader's table over it (:func:`use_prices` or
    the file named by :data:`PRICES_ENV`), a reader's row marked ``price_kind="reader"`` unless it says."""
    table = _price_rows(_read("gpu_prices.csv"), "data/gpu_prices.csv", rules=True)
    reader = _READER_PRICES
    if reader is None and os.environ.get(PRICES_ENV):
        reader = _read_price_csv(os.environ[PRICES_ENV])
    # (a reader's copy of data/gpu_prices.csv keeps its rules; a price typed into a rule's row wins over it)
    for name, r in _price_rows(reader or [], "prices", rules=True).items():
        key = get_gpu_name_from(name, list(_gpu_specs()))
        row = {k: v for k, v in r.items() if v not in (None, "")}
        if str(row.get("price_usd_per_gpu_hour", "")).strip() and row.pop("estimate_neighbour", None):
            row.pop("estimate_basis", None)
            row.update(price_kind="reader", price_source="set by the reader (use_prices), in place of the "
                       "estimate rule", price_as_of="reader's price")
        table[key] = {"price_kind": "reader", "price_source": "set by the reader (use_prices)",
                      "price_as_of": "reader's price", **row, "name": key,
                      "_table": "the reader's price table"}
    return _apply_rules(table)


def estimated_price(neighbour_price_usd_per_gpu_hour: float, gpu_basis: float,
                    neighbour_basis: float) -> float:
    """The one rule for a GPU with no price found (issue 38): its neighbour's price scaled by the ratio of
    their ``estimate_basis`` (the BF16 dense peak), rounded to the cent as prices are quoted.
    ``data/gpu_prices.csv`` holds the rule (``estimate_neighbour``, ``estimate_basis``), not the number, and
    :func:`_prices` applies it to the neighbour's *current* price (the catalogue's, or the reader's through
    :func:`use_prices`), so an estimate cannot go stale. An approximation: the rental market prices memory,
    age and vendor too (the MI300X is reported at $1.85 against the H100 SXM's $3.99 list for 1.32x the BF16
    peak: AMD's hour buys some 2.8x the peak per dollar), so an estimate across vendors or generations may be
    off by 2-3x; that is why an estimate is marked and never ranked. Chapter 11."""
    price = check_number("neighbour_price_usd_per_gpu_hour", neighbour_price_usd_per_gpu_hour)
    ratio = check_number("gpu_basis", gpu_basis, allow_equal=False) / check_number(
        "neighbour_basis", neighbour_basis, allow_equal=False)
    return round(price * ratio, 2)


def _apply_rules(table: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """Prices each row of ``table`` that names an ``estimate_neighbour`` by :func:`estimated_price`."""
    specs = {**_gpu_specs(), **_variant_specs()}
    for name, r in table.items():
        nb = (r.get("estimate_neighbour") or "").strip()
        if not nb:
            continue
        table_name = r.get("_table", "data/gpu_prices.csv")
        where = f"{table_name}, the {name}'s estimate_neighbour"
        basis = check_choice(f"{table_name}, the {name}'s estimate_basis", r.get("estimate_basis", ""),
                             ESTIMATE_BASES)
        if nb not in table or (table[nb].get("estimate_neighbour") or "").strip() \
                or table[nb].get("price_kind") not in ("list", "reader"):
            raise ValueError(f"{where} {nb!r} must name a GPU with a list (or the reader's) price in the "
                             "same table, not an estimate")
        if r.get("price_kind") != "estimate" or str(r.get("price_usd_per_gpu_hour", "")).strip():
            raise ValueError(f"{where}: a row priced by rule has price_kind estimate and no price of its own")
        got, theirs = (specs.get(k, {}).get(basis, "").strip() for k in (name, nb))
        if not got or not theirs:
            raise ValueError(f"{where}: the {name} and the {nb} both need a {basis} in data/gpus.csv")
        n = table[nb]
        their_price = float(n["price_usd_per_gpu_hour"])
        price = estimated_price(their_price, float(got), float(theirs))
        table[name] = {**r, "price_usd_per_gpu_hour": f"{price:.2f}", "price_as_of": n.get("price_as_of", ""),
                       "price_source": f"{r.get('price_source', '').strip()}; priced by the one estimate "
                       f"rule (catalog.estimated_price): the {nb}'s price ${their_price:.2f} "
                       f"({n.get('price_kind', 'list')}, as of {n.get('price_as_of', '')}) x {basis} "
                       f"{got} / {theirs} = ${price:.2f}"}
    return table


def get_gpu_name_from(name: str, known: list[str]) -> str:
    """The catalogue spelling of ``name`` among ``known`` (case, spaces and hyphens forgiven)."""
    for k in known:
        if k == name or _norm_gpu(k) == _norm_gpu(str(name)):
            return k
    raise _unknown("GPU", name, known)


def use_prices(prices=None) -> None:
    """Set the prices every function uses, in one place: ``prices`` is a path to a CSV with the columns of
    ``data/gpu_prices.csv`` (``name`` and ``price_usd_per_gpu_hour`` required; ``price_source``,
    ``price_as_of`` and ``price_kind`` optional) or a dict ``{gpu: USD per GPU-hour}``; the GPUs not named
    keep the catalogue's price. ``None`` goes back to the catalogue (and to the file named by
    :data:`PRICES_ENV`, if set). Call it before computing: results already computed keep the prices they were
    computed with. Chapter 11."""
    global _READER_PRICES
    if prices is None:
        rows = None
    elif isinstance(prices, Mapping):
        rows = [{"name": str(getattr(k, "name", k)),
                 "price_usd_per_gpu_hour": str(check_number(f"prices[{k!r}]", v))} for k, v in prices.items()]
    elif isinstance(prices, (str, Path)):
        rows = _read_price_csv(prices)
    else:
        raise TypeError(f"prices must be a path to a CSV, a dict of GPU -> USD per GPU-hour or None, got "
                        f"{type(prices).__name__}")
    old, _READER_PRICES = _READER_PRICES, rows
    try:
        _prices()                                  # a bad name or price is refused now, not at first use
    except Exception:
        _READER_PRICES = old
        raise
    _gpus.cache_clear()


def _gpu_specs() -> dict[str, dict[str, str]]:
    return {r["name"]: r for r in _read("gpus.csv")}


def _variant_specs() -> dict[str, dict[str, str]]:
    """``data/gpu_variants.csv``: GPUs a published run used that no one sells (Meta's 96 GB HBM2e, 500 W
    H100, issue 34), in ``gpus.csv``'s columns: :func:`get_gpu` finds them, :func:`list_gpus` leaves them
    out."""
    if not (DATA_DIR / "gpu_variants.csv").exists():
        return {}
    return {r["name"]: r for r in _read("gpu_variants.csv")}


def _int_or_none(cell: str | None) -> int | None:
    """A CSV cell as an int, or None when empty or absent (a catalogue copied without the column)."""
    return int(cell) if cell and cell.strip() else None


def _float_or_none(cell: str | None) -> float | None:
    return float(cell) if cell and cell.strip() else None


@cache
def _gpus() -> dict[str, GPU]:
    out = {}
    fp4 = {r["name"]: float(r["fp4_dense_tflops"]) for r in _read("gpus_fp4.csv")} \
        if (DATA_DIR / "gpus_fp4.csv").exists() else {}    # (a catalogue copied without it: no FP4 peaks)
    prices = _prices()                             # read with the specs, so one cache_clear reloads both
    for r in [*_gpu_specs().values(), *_variant_specs().values()]:
        p = prices.get(r["name"], {})
        r = {**r, "price_usd_per_gpu_hour": p.get("price_usd_per_gpu_hour", ""),
             "price_source": p.get("price_source", ""), "price_as_of": p.get("price_as_of", ""),
             "price_kind": p.get("price_kind", "list")}
        def num(k, r=r):
            return float(r[k]) if r[k].strip() else None
        g = GPU(
            name=r["name"], vendor=r["vendor"], memory_marketed_gb=num("memory_marketed_gb"),
            memory_mib=int(r["memory_mib"]), memory_source=r["memory_source"],
            memory_bandwidth_gbps=num("memory_bandwidth_gbps"), bf16_dense_tflops=num("bf16_dense_tflops"),
            fp8_dense_tflops=num("fp8_dense_tflops"), link=r["link"],
            link_bandwidth_gbps=num("link_bandwidth_gbps"), link_direction=r["link_direction"],
            price_usd_per_gpu_hour=num("price_usd_per_gpu_hour"), price_source=r["price_source"],
            spec_source=r["spec_source"], as_of=r["as_of"], fp16_dense_tflops=num("fp16_dense_tflops"),
            fp16_acc16_dense_tflops=num("fp16_acc16_dense_tflops"), link_class=r["link_class"],
            fp4_dense_tflops=fp4.get(r["name"]), price_as_of=r["price_as_of"], price_kind=r["price_kind"],
            host_pcie_gen=_int_or_none(r.get("host_pcie_gen")),
            host_pcie_lanes=_int_or_none(r.get("host_pcie_lanes")),
            host_link_gbps_one_way=_float_or_none(r.get("host_link_gbps_one_way")),
            host_link_source=r.get("host_link_source") or "", host_link_as_of=r.get("host_link_as_of") or "",
            gemm_arch=(r.get("gemm_arch") or "").strip() or None,
            gemm_arch_source=r.get("gemm_arch_source") or "", gemm_arch_as_of=r.get("gemm_arch_as_of") or "",
        )
        out[g.name] = g
    return out


def list_gpus() -> list[str]:
    """Names of the catalogued GPUs, in catalogue order (not the variants of :func:`list_gpu_variants`)."""
    specs = _gpu_specs()        # (read once: in the condition it read data/gpus.csv again for every GPU)
    return [n for n in _gpus() if n in specs]


def list_gpu_variants() -> list[str]:
    """Names of the GPU variants (``data/gpu_variants.csv``): parts a published run used that no one sells,
    priced for those runs and left out of every list of GPUs to choose from. Each row cites its source
    (``spec_source``, ``as_of``); chapter 10 prices torchtitan's H100 runs on Meta's part."""
    specs = _gpu_specs()
    return [n for n in _gpus() if n not in specs]


def _norm_gpu(name: str) -> str:
    """How GPU names are compared: case, spaces and hyphens forgiven (``"h100-sxm"`` is ``"H100 SXM"``)."""
    return name.lower().replace(" ", "").replace("-", "")


def get_gpu(name: str) -> GPU:
    """The catalogued :class:`GPU` called ``name`` (e.g. ``"H100 SXM"``); case and spaces are forgiven. A
    :class:`GPU` is returned as it is (it was checked when it was made)."""
    if isinstance(name, GPU):
        return name
    if not isinstance(name, str):
        raise TypeError(f"GPU name must be a string, got {type(name).__name__}")
    gpus = _gpus()
    if name in gpus:
        return gpus[name]
    for k, g in gpus.items():
        if _norm_gpu(k) == _norm_gpu(name):
            return g
    raise _unknown("GPU", name, list(gpus))


def resolve_gpus(gpus, *, name: str = "gpus", example: str = '["H100 SXM", "A100 80GB"]',
                 allow_empty: bool = False) -> list[GPU]:
    """A list of GPU names (any spelling :func:`get_gpu` accepts) or :class:`GPU` objects as a list of
    :class:`GPU`. The same GPU twice, under any two spellings, is refused, naming both: every table keyed by
    GPU would otherwise show each of its rows twice."""
    out: list[GPU] = []
    seen: dict[str, object] = {}
    for item in check_sequence(name, gpus, example=example, allow_empty=allow_empty):
        g = get_gpu(item)
        if g.name in seen:
            raise ValueError(f"{name} lists the GPU {g.name!r} twice (as {seen[g.name]!r} and {item!r}): "
                             "give each GPU once")
        seen[g.name] = item
        out.append(g)
    return out


def resolve_prices(prices, gpus=(), *, name: str = "prices", allow_zero: bool = True) -> dict[str, float]:
    """``prices`` (a dict of GPU -> USD per GPU-hour, or ``None``) keyed by each GPU's :attr:`GPU.name`, every
    price checked. A key may be any spelling :func:`get_gpu` accepts, a :class:`GPU`, or the name of one of
    ``gpus`` (the GPUs being priced: hand-made ones too). A key that names no GPU, or the same GPU under two
    spellings, is refused (naming ``name``): a price that silently prices nothing is a wrong total."""
    if prices is None:
        return {}
    if not isinstance(prices, Mapping):
        raise TypeError(f"{name} must be a dict of GPU name -> USD per GPU-hour, e.g. {{'H100 SXM': 2.5}}; "
                        f"got {type(prices).__name__} {prices!r}")
    listed = {_norm_gpu(g.name): g for g in gpus}
    out: dict[str, float] = {}
    seen: dict[str, object] = {}
    for key, value in prices.items():
        if isinstance(key, GPU):
            g = key
        elif isinstance(key, str) and _norm_gpu(key) in listed:
            g = listed[_norm_gpu(key)]
        else:
            try:
                g = get_gpu(key)
            except (TypeError, ValueError) as e:
                raise type(e)(f"{name}: {e}") from None
        if g.name in seen:
            raise ValueError(f"{name} gives the GPU {g.name!r} twice (as {seen[g.name]!r} and {key!r})")
        seen[g.name] = key
        out[g.name] = check_number(f"{name}[{key!r}]", value, allow_equal=allow_zero)
    return out


def gpu_price(gpu: GPU, price=None, *, name: str = "price_usd_per_gpu_hour") -> float:
    """``price`` checked (USD per GPU-hour), or, when it is ``None``, ``gpu``'s catalogue price; a GPU without
    one (no row in ``data/gpu_prices.csv``, or a hand-made GPU with ``price_usd_per_gpu_hour=None``) is
    refused, naming ``name``, rather than priced at nothing."""
    if price is not None:
        return check_number(name, price)
    if gpu.price_usd_per_gpu_hour is None:
        raise ValueError(f"the {gpu.name} has no price_usd_per_gpu_hour (the catalogue or the GPU gives "
                         f"none): pass {name}=...")
    return gpu.price_usd_per_gpu_hour


def price_kind_of(gpu: GPU, price=None) -> str:
    """What the price a result was computed with is (:data:`PRICE_KINDS`): ``gpu``'s own
    :attr:`GPU.price_kind` when ``price`` is ``None`` or equals the catalogue's price, else ``"reader"`` (a
    price the caller passed). Every result that carries a cost carries it, so an *estimated* price is never
    read as a list price (issue 38)."""
    if price is None or price == gpu.price_usd_per_gpu_hour:
        return gpu.price_kind
    return "reader"


def price_note(kind: str) -> str:
    """How text output marks a price of ``kind``: ``" (estimated price)"`` for an estimate, ``" (reported
    price)"`` for a survey's report of a provider's price, ``""`` otherwise (a list price needs no mark; a
    reader's price is the reader's own)."""
    kind = check_choice("price_kind", kind, PRICE_KINDS)
    return {"estimate": " (estimated price)", "reported": " (reported price)"}.get(kind, "")


def prices_as_of(gpus=None) -> str:
    """The date of the catalogue's prices for ``gpus`` (names or :class:`GPU`; default every catalogued GPU),
    as the chapters print it next to a cost: ``"2025-06-01"``, or ``"2025-06-01 to 2025-10-01"`` when the rows
    were priced on different days. Each price in ``data/gpu_prices.csv`` carries its own ``price_as_of``
    (issues 26 and 38: a visible "prices as of" wherever a price is used; a hand-made GPU's ``as_of`` stands
    in). A GPU made by hand with no ``as_of`` is refused, naming
    it."""
    chosen = resolve_gpus(list_gpus()) if gpus is None else resolve_gpus(gpus)
    missing = [g.name for g in chosen if not (g.price_as_of or g.as_of)]
    if missing:
        raise ValueError(f"gpus: no as_of date for {', '.join(missing)} (only catalogued prices are dated)")
    dates = sorted({g.price_as_of or g.as_of for g in chosen})
    return dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"


def gpu_table():
    """The GPU catalogue as a pandas DataFrame (for the book's tables; not the variants of
    :func:`list_gpu_variants`)."""
    import pandas as pd

    # (the fields, not __dict__: a GPU keeps its hash there once hashed, _compat.keep_hash)
    rows = [{**{f.name: getattr(g, f.name) for f in fields(g)}, "memory_gib": g.memory_gib}
            for g in map(get_gpu, list_gpus())]
    return pd.DataFrame(rows).set_index("name")
