"""What the small MoE runs' own sources say about their hours and their stacks (issue 35; chapter 18).

The published MoE runs of :mod:`llmsizing.moe_runs` that are smallest and trained without expert parallelism
(Granite 3.0 1B-A400M and 3B-A800M, JetMoE-8B, OLMoE-1B-7B) take about 1.4x the GPU-hours the library's step
says, and Phi-3.5-MoE less than it. The Granite report's dense 2B and 8B, on the same cluster and priced the
same way, take x0.94 and x1.17 (``tests/test_granite_dense_control.py``, granite40): Granite's gap belongs to
its MoE runs, not to the cluster or the hours' accounting, though not, as far as measured, to their kernels.
This module holds the pieces of evidence chapter 18 and ``tests/test_moe_kernel_evidence.py`` read about them,
computed once here:

- :func:`table7_energy_mwh`: the energy of a Granite 3.0 run by the formula of IBM's Granite 3.0 report
  (Sec. 6, Table 7): energy = GPU-hours x a GPU's power (700 W, an H100's TDP) x the data centre's PUE (1.3).
  The report *computes* Table 7's MWh from the hours by that formula, it does not meter them: that the
  figures match per-GPU hours shows that IBM's own accounting counts each hour as one GPU's, not a node's. It
  is no independent measurement of the run.
- :func:`node_hours_reading`: a run's published hours read two ways, as GPU-hours (as published) and as
  node-hours of its node's GPUs (the node from the run's ``node`` cell, else its GPU's default node of
  ``data/nodes.csv``): tokens a GPU-second and the implied MFU under each. Chapter 18 uses it to show that the
  Granite 3.0 hours cannot be node-hours.
- :func:`compute_only_ratio`: a run's published tokens a GPU-second over the step's compute and pipeline
  bubble alone (no communication): how much faster the library's compute is than the run.
- :func:`grin_table3_faster`: GRIN's throughput study (Liu et al. 2024, arXiv:2409.12136, Table 3 and
  Sec. 3.2: Phi-3.5-MoE's architecture at 7,077 tokens/s a GPU and its 6.6B dense twin at 8,176, on 64 H100s
  with data and pipeline parallelism) against the step at :data:`GRIN_T3_STAGES` stages. The study's layout is
  not published: the stage count is an assumption, the fewest powers of two that hold the MoE's 42B
  parameters at 16 bytes each (ZeRO 0) in 80 GB.
- :func:`card_training`, :func:`card_tokens_per_gpu_s` and :func:`grin_production_over_study`: the same
  architecture's two 512-GPU runs (GRIN MoE's card: 18 days, 4.0T tokens; Phi-3.5-MoE's: 23 days, 4.9T; each
  figure a row of ``data/moe_kernel_evidence.csv``) ran at 0.71 and 0.68 of the
  64-GPU study's speed per GPU; the library's step on the study's layout at the assumed 16 stages, with the
  same 4M-token batch spread over 8x the GPUs (32 micro-batches a pipeline instead of 256, so a larger 1F1B
  bubble), gives 0.76 (0.71 before session 39 passed the fill and drain through each stage at its own speed;
  the cards now drop 6% and 10% more than that). That suggests a batch of about 4M tokens given the stage
  count; it does not test the stage count, the recomputation or the ZeRO stage: 8 stages with ZeRO-1 give
  nearly the same drop (0.75; the two cards differ by 4%) and move the Phi-3.5-MoE row up (x0.81 against
  x0.74, since session 39; x0.78 against x0.69 before; before the experts' tile padding was priced, moe38:
  x0.85 against x0.75), and selective recomputation at 16 stages gives x0.91. What the drop shows is only
  that the row and the study share the price of the assumed layout; it does not clear that layout.
- :func:`moe_layer_tflops` and :func:`sonicmoe_layer_ratios`: the library's price of one MoE layer as
  SonicMoE's benchmark counts it (Guo et al. 2025, arXiv:2512.14080, Fig. 14, ``data/moe_layer_kernels.csv``),
  and the measured ScatterMoE and MegaBlocks layers over it.

- :func:`run_layer_shape`, :func:`tile_padding_share` and :func:`kernel_bars_near_run`: SonicMoE's measured
  layers of a run's own kernel (ScatterMoE: Granite 3.0) near the run's own layer shape, carried to it as
  lower bounds, against the library's price there (smallmoe40; pre-registered in
  ``tests/test_moe_kernel_shapes.py``).

- :func:`compute_terms_s`: a published run's step compute split into the terms
  :func:`~llmsizing.comm.step_compute_time_s` adds (the Linear GEMMs at the layer's rate, and of them the
  routed experts'; the attention core; the memory-bound kernels; the routing kernels; the load skew), on its
  slowest stage, summing to the step's ``compute_s`` (``tests/test_moe_kernel_evidence.py`` holds them to
  it), and :func:`moe_part_factor_needed`: how much slower than priced the MoE layers' own terms (routed
  expert GEMMs and routing kernels) would have to run for the step to take the published hours (smallmoe34).

Nothing here is priced into a step or fitted: these are checks, and the figures come from
``data/moe_kernel_evidence.csv`` and ``data/moe_layer_kernels.csv`` (each row with its source and date).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ._validate import check_choice, check_int, check_number
from .model import Model

#: Issue 35's kernel-level and controlled-pair figures, one row each with its source, place and date.
MOE_KERNEL_EVIDENCE_CSV = Path(__file__).resolve().parents[2] / "data" / "moe_kernel_evidence.csv"
#: SonicMoE's Fig. 14: whole MoE layers of several kernels on an H100, forward and backward TFLOP/s.
MOE_LAYER_KERNELS_CSV = MOE_KERNEL_EVIDENCE_CSV.parent / "moe_layer_kernels.csv"

#: Granite 3.0 report, Sec. 6: the H100's power in its energy formula (W) and the data centre's PUE.
TABLE7_GPU_WATTS = 700.0
TABLE7_PUE = 1.3

#: GRIN's Table 3 study (arXiv:2409.12136, Sec. 3.2): 64 H100s; the stage count assumed (see the module's
#: docstring); 4,096-token sequences in batches of 1,024 (4M tokens, assumed as for the Phi-3.5-MoE row).
GRIN_T3_GPUS = 64
GRIN_T3_STAGES = 16
GRIN_T3_SEQ = 4096
GRIN_T3_BATCH_SEQS = 1024
#: How close the MoE's and its dense twin's measured-over-priced factors must be for chapter 18 to call them
#: "the same factor": within 10% of each other.
GRIN_T3_TOLERANCE = 0.10
#: The dense twin's MLP: the MoE's two active experts of 6,400 side by side (GRIN, Table 3: "6.6B dense").
GRIN_T3_DENSE_FFN = 2 * 6400
#: GPUs of the 16 x 3.8B architecture's production runs: 512 H100-80G (GRIN MoE's card, README of
#: github.com/microsoft/GRIN-MoE at 60c44a3; Phi-3.5-MoE-instruct's card).
GRIN_PRODUCTION_GPUS = 512


def moe_kernel_evidence():
    """``data/moe_kernel_evidence.csv`` as a DataFrame indexed by ``id`` (the column kept)."""
    import pandas as pd

    return pd.read_csv(MOE_KERNEL_EVIDENCE_CSV).set_index("id", drop=False)


def table7_energy_mwh(gpu_hours, *, watts: float = TABLE7_GPU_WATTS, pue: float = TABLE7_PUE) -> float:
    """Training energy in MWh by the Granite 3.0 report's formula (Sec. 6, Table 7): ``gpu_hours x watts x
    pue``. IBM computes its Table 7 energy this way from the hours (it is not metered), so a match says how
    IBM counts its hours (each one GPU's at 700 W), not that the hours were measured independently."""
    hours = check_number("gpu_hours", gpu_hours, allow_equal=False)
    watts = check_number("watts", watts, allow_equal=False)
    pue = check_number("pue", pue, minimum=1.0)
    return hours * watts * pue / 1e6


@dataclass(frozen=True)
class NodeHoursReading:
    """A run's published hours read as GPU-hours and as node-hours (:func:`node_hours_reading`)."""

    gpus_per_node: int
    tokens_per_gpu_s: float          # read as GPU-hours (as published)
    node_tokens_per_gpu_s: float     # read as node-hours of ``gpus_per_node`` GPUs
    mfu: float                       # the MFU the GPU-hours imply
    node_mfu: float                  # the MFU the node-hours would imply


def node_hours_reading(row, gpus_per_node: int | None = None) -> NodeHoursReading:
    """A row of :func:`~llmsizing.moe_runs.moe_published_runs` (``model``, ``gpu``, ``seq``, ``tokens``,
    ``gpu_hours``): tokens a GPU-second ``tokens / (hours x 3,600)`` and the implied MFU
    (:func:`~llmsizing.mfu.implied_mfu`) with the hours read as GPU-hours, and the same with them read as
    node-hours, each hour ``gpus_per_node`` GPUs'. ``gpus_per_node``: default the run's node
    (:func:`~llmsizing.run_nodes.run_node`, where the row names one), else its GPU's default node
    (:func:`~llmsizing.network.get_node`). Granite 3.0 1B-A400M: 10e12 / (71,171 x 3,600) = 39,030 tokens a
    GPU-second as published, 4,879 as node-hours of 8 H100s (Blue Vela, Sec. 6 of its report)."""
    from .mfu import implied_mfu
    from .moe_runs import STANDINS
    from .network import get_node
    from .run_nodes import run_node

    hours = check_number("row['gpu_hours']", row["gpu_hours"], allow_equal=False)
    tokens = check_number("row['tokens']", row["tokens"], allow_equal=False)
    if gpus_per_node is None:
        node = run_node(row) or get_node(gpu=row["gpu"])
        gpus_per_node = node.gpus_per_node
    per_node = check_int("gpus_per_node", gpus_per_node, minimum=1, maximum=65536)
    model = STANDINS.get(row["model"], row["model"])
    seq = int(row["seq"])
    mfu = implied_mfu(model, gpu=row["gpu"], seq=seq, tokens=tokens, gpu_hours=hours)
    node_mfu = implied_mfu(model, gpu=row["gpu"], seq=seq, tokens=tokens, gpu_hours=hours * per_node)
    tps = tokens / (hours * 3600)
    return NodeHoursReading(per_node, tps, tps / per_node, mfu, node_mfu)


def compute_only_ratio(row) -> float:
    """A row of :func:`~llmsizing.moe_runs.moe_published_runs`: its published tokens a GPU-second
    (``tokens / (gpu_hours x 3,600)``) over the tokens a GPU-second of its step's compute and pipeline bubble
    alone (:attr:`~llmsizing.layouts.StepTime.busy_s`, no communication), priced by
    :func:`~llmsizing.moe_runs.run_step`. Above 1: the run was slower than the library's compute alone."""
    from .moe_runs import run_step

    hours = check_number("row['gpu_hours']", row["gpu_hours"], allow_equal=False)
    tokens = check_number("row['tokens']", row["tokens"], allow_equal=False)
    st = run_step(row)
    return st.tokens / st.busy_s / st.communication.parallel.gpus / (tokens / (hours * 3600))


def grin_dense_twin() -> Model:
    """Phi-3.5-MoE's dense twin of GRIN's Table 3: the same model with one MLP :data:`GRIN_T3_DENSE_FFN` wide
    (the two active experts), 6.6B parameters."""
    from .moe_runs import PHI_35_MOE_STANDIN

    return replace(PHI_35_MOE_STANDIN, name="grin dense twin", experts=0, experts_per_token=0,
                   expert_ffn_hidden=None, ffn_hidden=GRIN_T3_DENSE_FFN)


def grin_table3_layout():
    """The layout GRIN's Table 3 is priced on: :data:`GRIN_T3_STAGES` pipeline stages, the rest of the
    :data:`GRIN_T3_GPUS` GPUs data-parallel, ZeRO 0."""
    from .parallel import Parallel

    return Parallel(pp=GRIN_T3_STAGES, dp=GRIN_T3_GPUS // GRIN_T3_STAGES, zero=0)


def grin_table3_faster(recompute: str = "full", evidence=None) -> tuple[float, float]:
    """GRIN's Table 3 against the step: measured over priced tokens a second per GPU of (the MoE, its dense
    twin), on :func:`grin_table3_layout`, micro-batches of one :data:`GRIN_T3_SEQ`-token sequence,
    :data:`GRIN_T3_BATCH_SEQS` sequences a step, BF16, with ``recompute`` (``"full"``, as GRIN's training
    ran, or ``"none"``: the study does not say). ``evidence``: :func:`moe_kernel_evidence`, default read."""
    from .layouts import step_time
    from .moe_runs import PHI_35_MOE_STANDIN

    recompute = check_choice("recompute", recompute, ("full", "none"))
    ev = moe_kernel_evidence() if evidence is None else evidence
    par = grin_table3_layout()
    out = []
    pairs = ((PHI_35_MOE_STANDIN, "grin_t3_moe_42b_tps"), (grin_dense_twin(), "grin_t3_dense_6p6b_tps"))
    for m, key in pairs:
        st = step_time(m, "H100 SXM", par, batch=1, seq=GRIN_T3_SEQ, grad_accum=GRIN_T3_BATCH_SEQS // par.dp,
                       precision="bf16-mixed", recompute=recompute)
        out.append(float(ev.loc[key, "value"]) / (st.tokens / st.step_s / par.gpus))
    return out[0], out[1]


def card_tokens_per_gpu_s(tokens: float, gpus: int, days: float) -> float:
    """Tokens a GPU-second of a model card's ``Training data`` / (``GPUs`` x ``Training time``), the days
    read as wall-clock days of all the GPUs (the reading of the Phi-3.5-MoE row's GPU-hours)."""
    tokens = check_number("tokens", tokens, allow_equal=False)
    gpus = check_int("gpus", gpus, minimum=1)
    days = check_number("days", days, allow_equal=False)
    return tokens / (gpus * days * 86400)


#: The model cards whose 'Training' tables ``data/moe_kernel_evidence.csv`` holds (``<card>_card_tokens``,
#: ``_gpus``, ``_days``): GRIN MoE's (README of github.com/microsoft/GRIN-MoE at 60c44a3) and
#: Phi-3.5-MoE-instruct's, both 512 H100-80G.
CARDS = ("grin", "phi35")


@dataclass(frozen=True)
class CardTraining:
    """A model card's 'Training' table as printed (:func:`card_training`): tokens, GPUs, wall-clock days."""

    card: str
    tokens: float
    gpus: int
    days: float

    @property
    def tokens_per_gpu_s(self) -> float:
        """:func:`card_tokens_per_gpu_s` of the card's three figures."""
        return card_tokens_per_gpu_s(self.tokens, self.gpus, self.days)


def card_training(card: str, evidence=None) -> CardTraining:
    """The 'Training' table of ``card`` (one of :data:`CARDS`), read from the rows ``<card>_card_tokens``,
    ``<card>_card_gpus`` and ``<card>_card_days`` of ``evidence`` (default :func:`moe_kernel_evidence`), each
    with its source and date. GRIN MoE: 4.0T tokens, 512 GPUs, 18 days; Phi-3.5-MoE: 4.9T, 512, 23 (chapter
    18 compares the two 512-GPU runs with GRIN's 64-GPU study)."""
    card = check_choice("card", card, CARDS)
    ev = moe_kernel_evidence() if evidence is None else evidence
    val = {k: float(ev.loc[f"{card}_card_{k}", "value"]) for k in ("tokens", "gpus", "days")}
    if not val["gpus"].is_integer():
        raise ValueError(f"card_training: {card}_card_gpus must be a whole number of GPUs, got {val['gpus']}")
    return CardTraining(card, check_number("tokens", val["tokens"], allow_equal=False),
                        check_int("gpus", int(val["gpus"]), minimum=1),
                        check_number("days", val["days"], allow_equal=False))


def grin_production_over_study(model: Model | None = None, recompute: str = "full",
                               gpus: int = GRIN_PRODUCTION_GPUS, *, stages: int = GRIN_T3_STAGES,
                               zero: int = 0) -> float:
    """The library's tokens a second per GPU on ``gpus`` GPUs over that on GRIN's 64-GPU study
    (:func:`grin_table3_layout`), the same ``stages`` (default :data:`GRIN_T3_STAGES`) and ``zero`` (default
    0) on both, micro-batches of one :data:`GRIN_T3_SEQ`-token sequence and the same
    :data:`GRIN_T3_BATCH_SEQS`-sequence batch, so each pipeline runs ``64 / gpus`` as many micro-batches (256
    -> 32 at 512 GPUs and 16 stages) and its 1F1B bubble, each other stage passed once at its own speed,
    grows from 15/256 to 15/32 of the mean other stage's compute (session 39). ``model``: default
    Phi-3.5-MoE's architecture (:data:`~llmsizing.moe_runs.PHI_35_MOE_STANDIN`); ``recompute`` ``"full"`` or
    ``"none"``; ``stages`` and
    ``zero``: another reading of the unpublished layout (8 stages with ZeRO-1 give the same drop within 2%, so
    the drop cannot tell them apart). The measured counterpart is :func:`card_tokens_per_gpu_s` of the 512-GPU
    cards over Table 3's 7,077."""
    from .layouts import step_time
    from .moe_runs import PHI_35_MOE_STANDIN
    from .parallel import Parallel

    recompute = check_choice("recompute", recompute, ("full", "none"))
    stages = check_int("stages", stages, minimum=1, maximum=GRIN_T3_GPUS)
    zero = check_int("zero", zero, minimum=0, maximum=3)
    if GRIN_T3_GPUS % stages or GRIN_T3_BATCH_SEQS % (GRIN_T3_GPUS // stages):
        raise ValueError(f"grin_production_over_study: stages must divide {GRIN_T3_GPUS} GPUs into a "
                         f"data-parallel degree that divides {GRIN_T3_BATCH_SEQS} sequences, got {stages}")
    gpus = check_int("gpus", gpus, minimum=stages)
    if gpus % stages or GRIN_T3_BATCH_SEQS % (gpus // stages):
        raise ValueError(f"grin_production_over_study: gpus must be a multiple of {stages} whose "
                         f"data-parallel degree divides {GRIN_T3_BATCH_SEQS} sequences, got {gpus}")
    model = PHI_35_MOE_STANDIN if model is None else model
    speeds = []
    for n in (GRIN_T3_GPUS, gpus):
        par = Parallel(pp=stages, dp=n // stages, zero=zero)
        st = step_time(model, "H100 SXM", par, batch=1, seq=GRIN_T3_SEQ,
                       grad_accum=GRIN_T3_BATCH_SEQS // par.dp, precision="bf16-mixed", recompute=recompute)
        speeds.append(st.tokens / st.step_s / par.gpus)
    return speeds[1] / speeds[0]


def moe_layer_tflops(tokens: int, hidden: int, expert_ffn: int, experts: int, top_k: int,
                     gpu="H100 SXM") -> float:
    """The library's price of one MoE layer's forward in TFLOP/s as SonicMoE's benchmark counts it (expert
    FLOPs ``6 T n d K`` over the layer's time): the two grouped GEMMs at the GPU's BF16 peak x its kernel
    efficiency x :func:`~llmsizing.kernels.gemm_efficiency` (all rows) x
    :func:`~llmsizing.kernels.grouped_gemm_share` x :func:`~llmsizing.kernels.expert_padding_share` (rows
    an expert), as :func:`~llmsizing.kernels.layer_gemm_efficiency` takes a GPU's experts, plus the
    routing kernels' forward bytes (:func:`~llmsizing.moe_time.routing_bytes_per_token`, a step's third)
    at HBM bandwidth. The backward runs at the same rate (2x the FLOPs, 2x the bytes)."""
    from . import kernels
    from .catalog import get_gpu
    from .hardware import dense_tflops, kernel_efficiency_row
    from .moe_time import routing_bytes_per_token

    tokens, hidden = check_int("tokens", tokens, minimum=1), check_int("hidden", hidden, minimum=1)
    ffn, experts = check_int("expert_ffn", expert_ffn, minimum=1), check_int("experts", experts, minimum=1)
    top_k = check_int("top_k", top_k, minimum=1, maximum=experts)
    peak = dense_tflops(gpu, "bf16") * 1e12 * kernel_efficiency_row(gpu, "bf16").kernel_efficiency
    rows = tokens * top_k
    share = kernels.grouped_gemm_share(rows / experts) * kernels.expert_padding_share(rows / experts)
    up, down = 2 * rows * 2 * ffn * hidden, 2 * rows * ffn * hidden
    gemm_s = (up / kernels.gemm_efficiency(gpu, rows, 2 * ffn, hidden)
              + down / kernels.gemm_efficiency(gpu, rows, hidden, ffn)) / (share * peak)
    layer = Model(name=f"sonicmoe layer h{hidden}", layers=1, hidden=hidden, heads=max(1, hidden // 128),
                  head_dim=128, ffn_hidden=ffn, vocab=32000, gated_mlp=True, experts=experts,
                  experts_per_token=top_k, expert_ffn_hidden=ffn)
    hbm_bytes_per_s = get_gpu(gpu).memory_bandwidth_gbps * 1e9
    route_s = tokens * routing_bytes_per_token(layer, act_bytes=2) / 3 / hbm_bytes_per_s
    return (up + down) / (gemm_s + route_s) / 1e12


def sonicmoe_layer_ratios(kernels=("ScatterMoE", "MegaBlocks"), max_hidden: int = 1536):
    """SonicMoE's Fig. 14 bars of ``kernels`` at hidden sizes up to ``max_hidden`` (the small-MoE widths)
    over :func:`moe_layer_tflops`: ``data/moe_layer_kernels.csv``'s rows with ``library_tflops``,
    ``fwd_ratio`` and ``bwd_ratio`` added (measured over priced; the bars are read to +-10 TFLOP/s)."""
    import pandas as pd

    t = pd.read_csv(MOE_LAYER_KERNELS_CSV)
    t = t[t["kernel"].isin(list(kernels)) & (t["hidden"] <= max_hidden)].copy()
    if t.empty:
        raise ValueError(f"sonicmoe_layer_ratios: kernels {tuple(kernels)} have no bar at hidden <= "
                         f"{max_hidden} (max_hidden must reach 768)")
    t["library_tflops"] = [moe_layer_tflops(r["tokens"], r["hidden"], r["expert_ffn"], r["experts"],
                                            r["top_k"], r["gpu"]) for _, r in t.iterrows()]
    t["fwd_ratio"] = t["fwd_tflops"] / t["library_tflops"]
    t["bwd_ratio"] = t["bwd_tflops"] / t["library_tflops"]
    return t.reset_index(drop=True)


#: ScatterMoE's forward kernel (scatter2scatter): a Triton program's block of 128 rows (tokens of one
#: expert, the index list padded to whole blocks), 128 output columns and 32 of depth; the same at
#: shawntan/scattermoe 3eb4631 (2024-03) to 2d15f31 (2025-08) and in xma 384ed0a7, the copy SonicMoE's
#: Fig. 14 benchmarks (``data/moe_kernel_evidence.csv``, ``scattermoe_tile_*``; smallmoe40).
SCATTERMOE_TILE_ROWS = 128
#: A measured layer counts as "near" a run's layer at the same expert width and a hidden size within this
#: factor either way (pre-registered in tests/test_moe_kernel_shapes.py before any range was looked at).
NEAR_HIDDEN_FACTOR = 2.0
#: SonicMoE's Fig. 14 bars are read to +-10 TFLOP/s (``data/moe_layer_kernels.csv``).
BAR_READ_TFLOPS = 10.0


def run_layer_shape(row) -> dict:
    """One micro-batch's MoE layer of a row of :func:`~llmsizing.moe_runs.moe_published_runs` as
    :func:`moe_layer_tflops` takes it: ``tokens`` (one sequence a micro-batch, as
    :func:`~llmsizing.moe_runs.run_step` prices it; these rows have no tensor or context parallelism),
    ``hidden``, ``expert_ffn``, ``experts``, ``top_k`` (the row's model)."""
    m = _run_model(row)
    if not m.experts:
        raise ValueError(f"run_layer_shape: {row['run']!r} has no routed experts")
    return {"tokens": int(row["seq"]), "hidden": m.hidden, "expert_ffn": m.expert_ffn_hidden or m.ffn_hidden,
            "experts": m.experts, "top_k": m.experts_per_token}


def tile_padding_share(tokens: int, experts: int, top_k: int, tile_rows: int = SCATTERMOE_TILE_ROWS) -> float:
    """Rows a tiled grouped kernel computes over rows routed, with every expert's mean rows
    (``tokens x top_k / experts``) rounded up to whole ``tile_rows`` blocks: ScatterMoE pads each expert's
    index list so (Tan et al. 2024, arXiv:2403.08245, Sec. 3). 1 when the mean is a whole number of blocks."""
    tokens, experts = check_int("tokens", tokens, minimum=1), check_int("experts", experts, minimum=1)
    top_k = check_int("top_k", top_k, minimum=1, maximum=experts)
    tile_rows = check_int("tile_rows", tile_rows, minimum=1)
    rows = tokens * top_k / experts
    return -(-rows // tile_rows) * tile_rows / rows


def kernel_bars_near_run(row, kernel: str) -> "object":
    """SonicMoE's measured layers of ``kernel`` (``data/moe_layer_kernels.csv``) near a run's MoE layer
    (:func:`run_layer_shape`; same GPU, same expert width, hidden within :data:`NEAR_HIDDEN_FACTOR`), each
    carried to the run's shape as a lower bound: the bar less its reading error (:data:`BAR_READ_TFLOPS`)
    over the run's :func:`tile_padding_share` (the bars' own shapes are whole blocks). Columns added:
    ``fwd_low``, ``bwd_low`` (TFLOP/s), ``library_tflops`` (:func:`moe_layer_tflops` at the run's shape) and
    ``fwd_low_over_price``, ``bwd_low_over_price``. Empty when no bar is near (nothing can be said)."""
    import pandas as pd

    shape = run_layer_shape(row)
    t = pd.read_csv(MOE_LAYER_KERNELS_CSV)
    h = shape["hidden"]
    t = t[(t["kernel"] == kernel) & (t["gpu"] == row["gpu"]) & (t["expert_ffn"] == shape["expert_ffn"])
          & (t["hidden"] >= h / NEAR_HIDDEN_FACTOR) & (t["hidden"] <= h * NEAR_HIDDEN_FACTOR)].copy()
    pad = tile_padding_share(shape["tokens"], shape["experts"], shape["top_k"])
    price = moe_layer_tflops(shape["tokens"], h, shape["expert_ffn"], shape["experts"], shape["top_k"],
                             row["gpu"])
    for d in ("fwd", "bwd"):
        t[f"{d}_low"] = (t[f"{d}_tflops"] - BAR_READ_TFLOPS) / pad
        t[f"{d}_low_over_price"] = t[f"{d}_low"] / price
    t["library_tflops"] = price
    return t.reset_index(drop=True)


def compute_terms_s(row) -> dict:
    """A row of :func:`~llmsizing.moe_runs.moe_published_runs` priced as :func:`~llmsizing.moe_runs.run_step`
    prices it, its step's compute (:attr:`~llmsizing.layouts.StepTime.compute_s`) split into the terms of
    :func:`~llmsizing.comm.step_compute_time_s` on its slowest stage (seconds a step, one GPU), by the same
    functions: ``linear`` (every Linear GEMM's FLOPs at the layer's GEMM rate,
    :func:`~llmsizing.kernels.rates`; ``routed_experts`` is the routed experts' part of it,
    :func:`~llmsizing.moe_time.routed_expert_flops_per_token` at the same rate), ``attention`` (the causal
    core at the attention kernel's rate), ``pointwise`` (norms, residual adds, activation, rotary, loss:
    :mod:`llmsizing.pointwise`), ``routing`` (router, top-k, permutation and unpermutation on HBM,
    :func:`~llmsizing.moe_time.routing_bytes_per_token`) and ``skew``
    (the routed work the load skew adds), each divided by ``1 - `` the share of SMs ``comm_sms`` keeps; and
    ``micro_batches`` (a step's, per pipeline). ``linear + attention + pointwise + routing + skew`` is the
    step's ``compute_s``. A DualPipe row's terms are each rank's mean of its two stages, as the step's are."""
    from .comm import step_compute_time_s  # noqa: F401 (the function these terms split)
    from .flops import stage_attention_flops_per_token
    from .hardware import kernel_efficiency
    from .kernels import rates
    from .moe import moe_stage_flops, stage_moe_layers
    from .moe_runs import run_step
    from .moe_time import comm_sm_share, routed_expert_flops_per_token, routing_bytes_per_token
    from .pipeline_schedule import dualpipe_rank_mean
    from .pointwise import pointwise_seconds, stage_pointwise_bytes_per_token
    from .precision import compute_dtype

    st = run_step(row)
    par = st.communication.parallel
    model = _run_model(row)
    seq, rec = int(row["seq"]), str(row["recompute"])
    mtp, sms, sched = int(row["mtp_depth"]), int(row["comm_sms"]), str(row["schedule"])
    dtype = compute_dtype(row["precision"])
    gpu = row["gpu"]
    m = int(row["global_batch"]) // par.dp
    per_gpu = seq * m / (par.tp * par.cp)
    stages = moe_stage_flops(model, par, seq=seq, recompute=rec, mtp_depth=mtp)
    full = stage_attention_flops_per_token(model, par, seq=seq, recompute=rec)
    causal = stage_attention_flops_per_token(model, par, seq=seq, recompute=rec, causal=True)
    pw = stage_pointwise_bytes_per_token(model, par, recompute=rec, mtp_depth=mtp)
    moe_layers = stage_moe_layers(model, par)[:-1] + (stage_moe_layers(model, par)[-1] + mtp,)
    if sched == "dualpipe":
        stages, full, causal, pw, moe_layers = (dualpipe_rank_mean(x) for x in
                                                (stages, full, causal, pw, moe_layers))
    gemm, attn = rates(model, gpu, tp=par.tp, cp=par.cp, batch=1, seq=seq, dtype=dtype,
                       kernel_efficiency=kernel_efficiency(gpu, dtype), ep=par.ep)
    hbm = _hbm_bytes_per_s(gpu)
    skew = _row_skew(row, model, par.ep)
    route = routing_bytes_per_token(model, recompute=rec)
    expert = routed_expert_flops_per_token(model, recompute=rec)
    slow = 1.0 / (1.0 - comm_sm_share(gpu, sms)) if sms else 1.0
    per_stage = [{"linear": (stages[i] - full[i]) * per_gpu / gemm,
                  "routed_experts": moe_layers[i] * per_gpu * expert / gemm,
                  "attention": causal[i] * per_gpu / attn,
                  "pointwise": pointwise_seconds(pw[i], per_gpu, hbm),
                  "routing": moe_layers[i] * per_gpu * route / hbm,
                  "skew": moe_layers[i] * per_gpu * (skew - 1.0) * expert / gemm} for i in range(len(stages))]
    worst = max(per_stage, key=lambda t: sum(t[k] for k in ("linear", "attention", "pointwise", "routing",
                                                             "skew")))
    out = {k: v * slow for k, v in worst.items()}
    out["micro_batches"] = m
    return out


def moe_part_factor_needed(row) -> float:
    """How many times slower than priced a run's MoE layers' own terms (:func:`compute_terms_s`'
    ``routed_experts``, ``routing`` and ``skew``) would have to run, everything else as priced, for its step
    to give the published GPU-hours: ``1 + (published / predicted - 1) x step_s / moe``. Not a term of the
    step (nothing is fitted on these rows): the size of what a missing MoE-layer cost would have to be, if the
    whole gap sat there (Granite: 1.61-1.66; 1.51-1.55 once its report's dense runs' shared x1.05 is out)."""
    from .moe_runs import predict_moe_run

    p = predict_moe_run(row)
    t = compute_terms_s(row)
    moe = t["routed_experts"] + t["routing"] + t["skew"]
    if moe <= 0:
        raise ValueError(f"moe_part_factor_needed: {row['run']!r} prices no MoE-layer time")
    ratio = float(row["gpu_hours"]) / p["gpu_hours"]
    return 1.0 + (ratio - 1.0) * p["step_s"] / moe


@dataclass(frozen=True)
class LayerCallGap:
    """One MoE layer's call on one micro-batch of a run, published and priced (:func:`layer_call_gap`)."""

    moe_layers: int
    published_s: float        # the published GPU-hours' seconds for one call (one sequence, one MoE layer)
    priced_s: float           # the step's (:func:`~llmsizing.moe_runs.run_step`) seconds for the same call
    routing_passes: float     # how many times its routing kernels' HBM bytes the gap would take to move

    @property
    def gap_s(self) -> float:
        """Published minus priced seconds a call."""
        return self.published_s - self.priced_s


def layer_call_gap(row) -> LayerCallGap:
    """A row of :func:`~llmsizing.moe_runs.moe_published_runs` without a pipeline (``pp`` 1), per MoE layer
    call (one layer on one micro-batch of one ``seq``-token sequence): the published GPU-seconds
    ``gpu_hours x 3,600 x seq / tokens / moe_layers``, the step's ``step_s / (moe_layers x global_batch /
    dp)``, and how many times the call's routing-kernel bytes
    (:func:`~llmsizing.moe_time.routing_bytes_per_token` x seq, at the row's recomputation) the gap would move
    at the GPU's HBM bandwidth. Granite 3.0 1B-A400M:
    71,171 x 3,600 x 4,096 / 10e12 / 24 = 4.37 ms a call published; chapter 18 shows the gap growing with the
    call's work (1B against 3B), as a per-call cost such as kernel launches would not."""
    from .moe_runs import run_step
    from .moe_time import routing_bytes_per_token

    if int(row["pp"]) != 1:
        raise ValueError(f"layer_call_gap: {row['run']!r} has pp={int(row['pp'])}; only pp=1 rows (every "
                         "GPU holds every layer) have one call a layer a micro-batch")
    hours = check_number("row['gpu_hours']", row["gpu_hours"], allow_equal=False)
    tokens = check_number("row['tokens']", row["tokens"], allow_equal=False)
    seq = check_int("row['seq']", int(row["seq"]), minimum=1)
    model = _run_model(row)
    layers = model.n_moe_layers
    micro = int(row["global_batch"]) // int(row["dp"])
    published = hours * 3600 * seq / tokens / layers
    priced = run_step(row).step_s / (layers * micro)
    route_s = routing_bytes_per_token(model, recompute=row["recompute"]) * seq / _hbm_bytes_per_s(row["gpu"])
    return LayerCallGap(layers, published, priced, (published - priced) / route_s)


def _run_model(row):
    """The model a row of :func:`~llmsizing.moe_runs.moe_published_runs` names (its stand-in, else the
    catalogue's)."""
    from .catalog import get_model
    from .moe_runs import STANDINS

    return STANDINS[row["model"]] if row["model"] in STANDINS else get_model(row["model"])


def _hbm_bytes_per_s(gpu) -> float:
    from .catalog import get_gpu

    return get_gpu(gpu).memory_bandwidth_gbps * 1e9


def fill_drain_overcharge(row) -> float:
    """A row of :func:`~llmsizing.moe_runs.moe_published_runs`: its step as the step model priced it before
    session 39, the 1F1B bubble ``(pp - 1) / m`` charged at the slowest stage's speed, over its step as
    :func:`~llmsizing.moe_runs.run_step` prices it now, the fill and drain at each stage's own speed
    (:func:`~llmsizing.pipeline_schedule.unbalanced_1f1b_makespan` of the stages' seconds a micro-batch,
    :func:`~llmsizing.comm.stage_compute_times_s`), the exposed communication unchanged. Where the last stage
    is slower (the output layer and the loss) the old charge was ``(pp - 1)(max - mean of the others)`` too
    much. 1 for a row without a pipeline, an interleaved one or another schedule. Phi-3.5-MoE (16 stages of
    two layers, the last with the output layer, 32 micro-batches): 1.07 (phi39, issue 35, found on that row's
    miss; priced from session 39, pipe39)."""
    from .comm import stage_compute_times_s
    from .moe_runs import _model, run_step
    from .pipeline_schedule import unbalanced_1f1b_makespan
    from .precision import compute_dtype

    st = run_step(row)
    par = st.communication.parallel
    if par.pp == 1 or par.virtual_stages != 1 or row["schedule"] != "1f1b":
        return 1.0
    m, model = int(row["global_batch"]) // par.dp, _model(row["model"])
    times = stage_compute_times_s(model, par, batch=1, seq=int(row["seq"]), gpu=row["gpu"], grad_accum=m,
                                  recompute=row["recompute"], dtype=compute_dtype(row["precision"]),
                                  mtp_depth=int(row["mtp_depth"]), comm_sms=int(row["comm_sms"]),
                                  load_skew=_row_skew(row, model, par.ep), schedule="1f1b")
    own = unbalanced_1f1b_makespan(tuple(t / m for t in times), m)
    if max(times) != st.compute_s or abs(own - st.busy_s) > 1e-9 * own:   # a guard against drift
        raise RuntimeError(f"fill_drain_overcharge: {row['run']}: stage times disagree with the step's")
    return (st.step_s - st.busy_s + st.compute_s * (1 + (par.pp - 1) / m)) / st.step_s


def _row_skew(row, model, ep: int) -> float:
    """The load skew :func:`~llmsizing.moe_runs.run_step` prices a row at (its capacity factor, else
    dropless)."""
    from .moe_time import load_skew

    cap = row["capacity_factor"] if "capacity_factor" in row else None
    dropless = cap is None or cap != cap or cap == ""
    return load_skew(model, ep) if dropless else load_skew(model, ep, capacity_factor=float(cap))


__all__ = ["MOE_KERNEL_EVIDENCE_CSV", "MOE_LAYER_KERNELS_CSV", "TABLE7_GPU_WATTS", "TABLE7_PUE",
           "GRIN_T3_GPUS", "GRIN_T3_STAGES", "GRIN_T3_SEQ", "GRIN_T3_BATCH_SEQS", "GRIN_T3_TOLERANCE",
           "GRIN_T3_DENSE_FFN", "GRIN_PRODUCTION_GPUS", "moe_kernel_evidence", "table7_energy_mwh",
           "NodeHoursReading", "node_hours_reading", "compute_only_ratio",
           "grin_dense_twin", "grin_table3_layout", "grin_table3_faster", "card_tokens_per_gpu_s",
           "CARDS", "CardTraining", "card_training",
           "grin_production_over_study", "moe_layer_tflops",
           "sonicmoe_layer_ratios", "SCATTERMOE_TILE_ROWS", "NEAR_HIDDEN_FACTOR", "BAR_READ_TFLOPS",
           "run_layer_shape", "tile_padding_share", "kernel_bars_near_run", "compute_terms_s",
           "moe_part_factor_needed", "fill_drain_overcharge",
           "LayerCallGap", "layer_call_gap"]
