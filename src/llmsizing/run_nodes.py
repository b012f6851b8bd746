"""The node a published run ran on (chapter 12; issue 34).

``data/published_runs.csv`` has an optional ``node`` column: the name of a row of ``data/nodes.csv`` where the
run's source names its cluster, instance or network (the sentence is cited at the end of the run's ``note``),
blank where it names none, which prices the run on its GPU's default node
(:func:`~llmsizing.network.get_node`), as before. The node's row, never its name, sets the links the step
model charges: GPUs per node, the scale-up link and the NICs. BloombergGPT, for one, ran on AWS p4d.24xlarge
instances whose 400 Gb/s of EFA serve 8 A100s (Wu et al. 2023, Sec. 3.3): 50 Gb/s = 6.25 GB/s per GPU one
way, a quarter of the 25 GB/s of the DGX A100 it was priced on before.

:func:`run_node` is what the calibration of the step model (:func:`~llmsizing.calibration.run_mfu_at`, hence
``data/kernel_efficiency.csv`` and the ``training-layout`` range) and ``tools/step_terms.py`` read;
:func:`plan_network` turns the node into the two network arguments :func:`~llmsizing.planner.plan` takes
(``gpus_per_node``, ``inter_node_gbps``), for :func:`~llmsizing.range_candidates.planner_layout_check`.
The end-to-end model (``training-inputs``) has no network term, so a run's node does not move it."""

from __future__ import annotations

from .network import Node, get_node


def _blank(value) -> bool:
    return value is None or (isinstance(value, float) and value != value) or \
        (isinstance(value, str) and not value.strip())


def _field(row, name):
    if isinstance(row, dict):
        return row.get(name)
    try:
        return getattr(row, name)
    except AttributeError:
        return None


def run_node(row) -> Node | None:
    """The :class:`~llmsizing.network.Node` of ``row``'s ``node`` cell (a run of ``data/published_runs.csv``:
    a row of ``itertuples()``, a ``Series``, a dict or a ``SimpleNamespace``), or ``None`` where the cell is
    blank or absent (the GPU's default node). Refused, naming the run and the column: a cell that is not a
    string (TypeError), a name not in ``data/nodes.csv``, or a node of another GPU than the run's
    (ValueError)."""
    value = _field(row, "node")
    if _blank(value):
        return None
    run = _field(row, "run")
    where = "row" + (f" ({run!r})" if isinstance(run, str) else "")
    if not isinstance(value, str):
        raise TypeError(f"{where}, column 'node': must be a node name of data/nodes.csv (a string) or blank; "
                        f"got {type(value).__name__} {value!r}")
    try:
        node = get_node(value.strip())
    except (KeyError, ValueError) as e:
        raise ValueError(f"{where}, column 'node': {e}") from None
    gpu = _field(row, "gpu")
    if node.gpu != gpu:
        raise ValueError(f"{where}, column 'node': node {node.name!r} holds {node.gpu} GPUs, the run ran on "
                         f"{gpu!r}; name a node of that GPU or leave the cell blank")
    return node


def plan_network(row) -> dict:
    """``{"gpus_per_node": ..., "inter_node_gbps": ...}`` for :func:`~llmsizing.planner.plan` from ``row``'s
    node (:func:`run_node`): its GPUs per node and its NICs' bandwidth per GPU, one way in GB/s; ``{}`` where
    the row has no node of its own. ``plan`` takes no node, so the scale-up link stays the GPU's default
    node's (the same on every catalogued run node but the 4-GPU H200 board, whose mesh gives a pair 150
    GB/s each way against the default switch's 450; groups of 4 get 450 either way)."""
    node = run_node(row)
    if node is None:
        return {}
    return {"gpus_per_node": node.gpus_per_node, "inter_node_gbps": node.nic_gbps_per_gpu}
