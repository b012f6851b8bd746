"""Figures for the book. Each chapter's figure is a ``render_*`` function that returns a :class:`View`
(a matplotlib figure plus a plain-text summary). The notebook's checked cell calls ``show(render_x())``; the
chapter's widget (in :mod:`llmsizing.widgets`) calls the same function on every change, so the static page,
the tests and the live widget all draw the same thing. A widget passes ``into=`` the figure it keeps, so that
a redraw empties and reuses its axes (:func:`figure_axes`) instead of building a new figure: same drawing, a
fraction of the time (``benchmarks/bench.py``).

One module per part of the book, each importing only :mod:`~llmsizing.charts.base` (the palette, :class:`View`
and :func:`show`, figure and axes reuse, bars, log axes and short numbers; base itself is built on
:mod:`~llmsizing.charts.figures` and :mod:`~llmsizing.charts.labels` and re-exports their names) and its own
chapter modules (below), never each other:

* :mod:`~llmsizing.charts.one_gpu`: Part I, chapters 1-5 (chapter 4's figures in
  :mod:`~llmsizing.charts.one_gpu_activations`, chapter 5's in :mod:`~llmsizing.charts.one_gpu_measure`);
* :mod:`~llmsizing.charts.many_gpus`: Part II, chapters 6-9 (chapter 6's landscape in
  :mod:`~llmsizing.charts.many_gpus_hardware`);
* :mod:`~llmsizing.charts.time_money`: Part III, chapters 10-14 (chapter 12's in
  :mod:`~llmsizing.charts.time_money_plan`, 13 and 14's in :mod:`~llmsizing.charts.time_money_checks`);
* :mod:`~llmsizing.charts.serve_tune`: Part IV, chapters 15-16;
* :mod:`~llmsizing.charts.long_context`: Part V, chapter 17;
* :mod:`~llmsizing.charts.moe`: Part V, chapter 18;
* :mod:`~llmsizing.charts.rl`: Part VI, chapter 19.

A part over 600 lines keeps some chapters' figures in chapter modules of its own, which import only
:mod:`~llmsizing.charts.base`; the part imports them and re-exports every name (issue 32), so the package
imports the parts alone.

Every top-level name of these modules is re-exported here, private helpers included (tests and widgets use a
few), so ``from llmsizing.charts import X`` and ``charts.X`` keep working as they did when ``charts`` was one
module (``tests/test_charts_package.py`` checks it). The objects are shared, not copied (``charts.COLORS`` is
``charts.base.COLORS``), but rebinding a name here (``charts.X = ...``) does not reach the module that defines
and reads it: set it there.

No formula lives here: render functions only call the library and draw.
"""

# What every figure shares: the palette, views, figure and axes reuse, bars, numbers and log axes.
from .base import (COLORS, DPI, EXPLORER_TIME_COLORS, GPU_COLORS, FixedView, View, blank_figure,
                   capacity_line, figure_alt_text, figure_axes, new_figure, reset_axes, show)
from .base import (_CAPTION_LINESPACING, _CAPTION_PAD_IN, _CAPTION_PT, _caption_room,  # noqa: F401
                   _SUFFIXES, _bar_collection, _bar_verts, _fast_hbars, _fast_stacked_columns,  # noqa: F401
                   MIN_LABEL_CONTRAST, _contrast_ratio, _label_colour,
                   KEPT_LEGENDS, _fixed_figure, _flat, _grid, _inch_margins, _kept_figure_legend,
                   _kept_legend, _set_hbars,
                   _legend_entries, _line, _log_axis, _log_kept, _log_scale, _png_kwargs, _short_number,
                   _stage_memory_columns, _settle_grids, _step_time_bars, _suffixed, _tokens, _usd)

# Part I, one GPU (ch 1-5): parameters, model states, inference memory, activations, measurements.
from .one_gpu import MEASURED_STEP_DEFAULT, render_measured_step  # chapter 5's widget
from .one_gpu import (ACT_LABELS, MEASURE_COLORS, MEASURE_STYLES, MEASURE_SWEEPS, MMB_SEQS, MMB_RIM_PT,
                      MODEL_STATES_COMPARE, RECOMPUTE_COLORS, render_activation_memory,
                      render_inference_memory, render_inference_vs_context, render_max_micro_batch,
                      render_model_states, render_parameter_counts, render_parameter_shares,
                      render_prediction_vs_measurement, render_step_phases, render_step_timeline,
                      stacked_bars)
from .one_gpu import (_CAPACITY_COLORS, _CAPACITY_STYLES, _MMB_KEEP, _MMB_KEPT, _PHASE_SHADES,  # noqa: F401
                      _TIMELINE_PHASES, _drop_offscreen_capacity_lines, _gpu_lines, _mark_beyond_max_seq,
                      _same_as, _seq_label, _widths, _zero3)

# Part II, many GPUs (ch 6-9): GPUs and the decode roofline, ZeRO and data parallelism, the pipeline bubble
# and the parallelism explorer, measured collectives.
from .many_gpus import (BUS_BANDWIDTH_SIZES, DECODE_BATCHES, DP_SCALING_PANELS, render_bus_bandwidth,
                        render_collectives_vs_prediction, render_decode_roofline, render_dp_scaling,
                        render_gpu_landscape, render_parallel_explorer, render_pipeline_bubble,
                        render_zero_stages, SCHEDULE_PANELS, render_pipeline_schedules)
from .many_gpus import COLLECTIVE_TIME_DEFAULT, COLLECTIVE_TIME_SIZES, render_collective_time  # ch9 widget
from .many_gpus import (_KIND_COLORS, _LANDSCAPE_LABEL_OFFSETS, _ZERO_STYLES, _bytes_text,  # noqa: F401
                        _ROOFLINE_NAMED, _ROOFLINE_OTHERS, _coinciding, _landscape_groups, _size_axis,
                        _time_text)

# Part III, time and money (ch 10-14): the MFU calibration, training time, cost, the planner, the case
# studies' check, the seed audit.
from .time_money import (CALIBRATION_COLORS, CALIBRATION_MIN_PT, COST_GPUS, GOODPUT_GPUS,
                         GOODPUT_STORAGE_GB_PER_S, PLAN_GPUS, OWN_FIT_POINTS, PLAN_LEGEND_PT, FRONT_LW,
                         OWN_FRONT_LW, SCALING_FIT_COLORS, SCALING_RUNS, SENSITIVITY_MFUS,
                         SENSITIVITY_PRICE_FACTORS, TIME_GPU_COUNTS, fewest_holding,
                         plan_notes, render_compute_optimal, render_cost_by_gpu,
                         render_cost_sensitivity, render_cost_vs_gpus, render_goodput, render_mfu_calibration,
                         render_plan, render_prediction_check, render_seed_audit, render_training_time,
                         resolve_model_name)
from .time_money import (_AUDIT_STYLES, _PLAN_GROUPS_KEEP, _PLAN_GROUPS_KEPT, _Same, _cp_text,  # noqa: F401
                         _deadline_lines, _fits,
                         _front_rows, _judged, _log_norm, _mfu_kind, _number_dtype, _plan_groups, _plan_label,
                         _range_note_lines, _rect, _row_type, _table_key, _values_bytes, _vp_text,
                         _GROUPS_COLUMNS, _PointCloud, _groups_key, _bare, _first_of_each, _column_arrays,
                         _retain, _step_time_update, _PlanRow, _codes_bytes, _gpu_codes, _plan_row,
                         _chosen_title)

# Part IV, serving and fine-tuning (ch 15-16).
from .serve_tune import (FINETUNE_COLORS, FINETUNE_PARTS, FLEET_COLORS, SPECULATIVE_COLORS, SPECULATIVE_KS,
                         FINETUNE_MARKERS, fleet_plans, render_fleet,
                         render_finetune_calibration, render_finetune_memory, render_serving_cost,
                         render_serving_curve, render_speculative_speedup)
from .serve_tune import (_BATCH_MARKS, _COST_AXIS_SHARE, _POINT, _SUMMARY_RANGED, _batch_state,  # noqa: F401
                         _cost_axis_ends, _fit_text, _on_this_fleet, _sweep_points, _vline)

# Part V, the models of 2026 (ch 17-18): long context; mixtures of experts.
from .long_context import (CP_KINDS, CP_OVERLAP_SEQS, KEYS_MODELS, KEYS_SEQS, llama3_long_context_layout,
                           render_attention_keys, render_cp_kinds, render_cp_overlap)
from .long_context import _KEYS_STYLES, _attention_pattern  # noqa: F401
from .moe import A2A_MACHINES, MOE_LAYOUT_DEFAULT, MOE_TIME_COLORS, render_a2a_domains, render_moe_layout

# Part VI, after pre-training (ch 19): an RL step's phases.
from .rl import (RL_DEFAULT, RL_LENGTH_CAPS, RL_PHASE_COLORS, render_rl_response_length, render_rl_step,
                 rl_length_points)

__all__ = [
    # what every figure shares
    "COLORS", "DPI", "EXPLORER_TIME_COLORS", "GPU_COLORS", "FixedView", "View", "blank_figure",
    "capacity_line", "figure_alt_text", "figure_axes", "new_figure", "reset_axes", "show", "stacked_bars",
    # Part I
    "ACT_LABELS", "MEASURE_COLORS", "MEASURE_STYLES", "MEASURE_SWEEPS", "MMB_SEQS", "MMB_RIM_PT",
    "MODEL_STATES_COMPARE",
    "RECOMPUTE_COLORS", "render_activation_memory", "render_inference_memory", "render_inference_vs_context",
    "render_max_micro_batch", "render_model_states", "render_parameter_counts", "render_parameter_shares",
    "render_prediction_vs_measurement", "render_step_phases", "render_step_timeline",
    "MEASURED_STEP_DEFAULT", "render_measured_step",
    # Part II
    "BUS_BANDWIDTH_SIZES", "DECODE_BATCHES", "DP_SCALING_PANELS", "render_bus_bandwidth",
    "SCHEDULE_PANELS", "render_pipeline_schedules",
    "render_collectives_vs_prediction", "render_decode_roofline", "render_dp_scaling", "render_gpu_landscape",
    "render_parallel_explorer", "render_pipeline_bubble", "render_zero_stages",
    "COLLECTIVE_TIME_DEFAULT", "COLLECTIVE_TIME_SIZES", "render_collective_time",
    # Part III
    "CALIBRATION_COLORS", "CALIBRATION_MIN_PT", "COST_GPUS", "PLAN_GPUS", "SENSITIVITY_MFUS",
    "SENSITIVITY_PRICE_FACTORS",
    "TIME_GPU_COUNTS", "plan_notes", "render_cost_by_gpu", "render_cost_sensitivity", "render_cost_vs_gpus",
    "render_plan", "PLAN_LEGEND_PT", "FRONT_LW", "OWN_FRONT_LW", "render_prediction_check",
    "render_mfu_calibration", "render_seed_audit",
    "render_training_time", "resolve_model_name", "GOODPUT_GPUS", "GOODPUT_STORAGE_GB_PER_S",
    "OWN_FIT_POINTS", "SCALING_FIT_COLORS", "SCALING_RUNS", "render_compute_optimal", "render_goodput",
    # Part IV
    "FINETUNE_COLORS", "FINETUNE_PARTS", "FINETUNE_MARKERS", "render_finetune_calibration",
    "render_finetune_memory", "render_serving_cost", "render_serving_curve", "FLEET_COLORS", "fleet_plans",
    "render_fleet",
    # Part V
    "CP_OVERLAP_SEQS", "CP_KINDS", "llama3_long_context_layout", "render_cp_overlap", "render_cp_kinds",
    "KEYS_MODELS", "KEYS_SEQS", "render_attention_keys",
    "MOE_LAYOUT_DEFAULT", "MOE_TIME_COLORS", "render_moe_layout", "A2A_MACHINES", "render_a2a_domains",
    # Part VI
    "RL_DEFAULT", "RL_LENGTH_CAPS", "RL_PHASE_COLORS", "render_rl_response_length", "render_rl_step",
    "rl_length_points",
]
