"""Interactive widgets for the book (need a running kernel: ``make lab``).

One public factory per widget, callable with no arguments. Each is thin glue: controls -> a ``render_*``
function from :mod:`llmsizing.charts` -> a PNG image and a text summary. Bad input (a combination the library
rejects) shows the library's error message in the widget instead of a traceback.

The package, by part of the book (each module imports only the machinery, never another part):

* :mod:`.dashboard`: :class:`Dashboard` (layout, redraw into one kept figure); :mod:`.png`: its PNG encoder;
* :mod:`.speculate`: the searches a reader is likely to ask for next, worked out by a worker process;
* :mod:`.canvas`: the Agg canvas every dashboard draws on, which keeps texts' bitmaps and layouts between
  redraws; :mod:`.pixels`: the legends' and texts' pixels it keeps;
* :mod:`.controls`: the controls the widgets share and how they are wired to the redraw;
* :mod:`.one_gpu` (chapters 1-4), :mod:`.measure` (5), :mod:`.many_gpus` (6-8), :mod:`.measure_split` (9),
  :mod:`.time_money` (10-14), :mod:`.serve_tune` (15-16), :mod:`.long_context` (17), :mod:`.moe` (18) and
  :mod:`.rl` (19): the chapters' widgets.

Every name is re-exported here, so ``from llmsizing.widgets import planner_widget`` works as before. A name is
looked up in the module that defines it: to patch one (a test's ``monkeypatch``), patch it there.
"""

from __future__ import annotations

from .canvas import (_FAMILY_RC, _bbox_unions_in_one, _boxes_kept_per_draw, _draw_lines_as_one, _in_place,
                     _Joined, _kept_layouts, _null_minor_ticks_in_draws, _text_cache_canvas,
                     _text_sets_skipped_in_draws, _tick_label_boxes_kept_per_draw, _tick_positions_kept,
                     _ticks_drawn_together, _ticks_kept_per_draw)
from .controls import (_SEQS, GPU_SELECT_HINT, GPU_SELECT_MAX_ROWS, _button_px, _choice, _dense_models,
                       _divisors_up_to, _follow_max_seq, _gpu_multiselect, _moe_options, _nearest,
                       _react_then_redraw, _reroute, _set_quietly, _style, _up_to_max_seq)
from .dashboard import (_BUSY_CSS, _BUSY_SIDE, _CONTROL_ROOM_PX, BUSY_CLASS, BUSY_DELAY_MS, CONTROL_MARGIN_PX,
                        CONTROLS_WIDTH_PX, DEFAULT_MARKER, FIGURE_MAX_PX, FIGURE_MIN_PX, HINT_INDENT_PX,
                        HINT_LINE_HEIGHT, LIVE_MARKER, PageImage, _data_url,
                        SUMMARY_FONT_PX, SUMMARY_HEIGHT_PX, _GUTTER, _SUMMARY_CSS, Dashboard, _columns,
                        _line_html, _table_html, live_style, summary_html, _rc_snapshot, _setting,
                        _figure_png, _hint, KEPT_ANSWERS, _freeze_once)
from .png import _deflate, encode_png, png_size  # noqa: F401
from .many_gpus import decode_roofline_widget, parallel_explorer_widget, zero_stages_widget
from .one_gpu import (_CONTEXTS, _MAX_HEADS, _WIDGET_STATES_COMPARE, LOSS_LABELS, MIN_BAR_SHARE,
                      _cap_gpus_per_line, _render_inference_memory, _render_model_states, _render_parameters,
                      activation_memory_widget, gpus_per_line_cap, inference_memory_widget,
                      max_micro_batch_widget, model_states_widget, parameter_counts_widget)
from .serve_tune import (FLEET_CACHED, FLEET_PERCENTILES, FLEET_USERS, _FINETUNE_SEQS,  # noqa: F401
                         finetune_widget,
                         fleet_widget, serving_widget)
from .long_context import (LONG_CONTEXT_BATCH_TOKENS, LONG_CONTEXT_CACHED, LONG_CONTEXT_KEPT,
                           LONG_CONTEXT_MAX_GPUS, LONG_CONTEXT_SEQS, LONG_CONTEXT_TOKENS, _plan_args,
                           long_context_ahead, long_context_jobs, long_context_tier, long_context_warm_models,
                           long_context_warm_settings, long_context_widget)
from .speculate import (_GENERATION, _HANDED, _HANDOFF, _POOL, AUTOGROUP, CGROUP_ROOT, ENV, NICE_ENV,  # noqa: F401
                        HANDOFF_MIN_BYTES, MEMINFO, PARENT_CHECK_S, PROC_CGROUP, SPECULATE_HELD,
                        SPECULATE_JOBS, SPECULATE_MIN_FREE_BYTES, START_DELAY_S, _STARTED, _UNREAD,
                        Speculation, _delete, _drop,
                        _handoff_dir, _pool,
                        _read_handoff, _remove_dir, _run, _shutdown_at_exit, _worker_init, cgroup_files,
                        free_bytes, nearest, shutdown, wanted_by_environment, watch, worker_nice)
from .moe import MOE_DPS, MOE_EPS, _eps_for, moe_layout_widget  # noqa: F401
from .pixels import (_DRAWING, _box_key, _changed, _common_key, _font_key, _handle_key, _legend_key,
                     _legends_kept_as_pixels, _line_style_key, _text_key)
from .rl import RL_GPUS, RL_LENGTHS, RL_MODES, _mode, rl_widget  # noqa: F401
from .time_money import (PLAN_BUDGETS, PLAN_DEADLINE_RULES, PLAN_DEADLINES, PLAN_GLOBAL_BATCHES,
                         PLAN_GRAD_BUFFER_HINT, PLAN_GRAD_BUFFERS, PLAN_MAX_GPUS, PLAN_SEQS, PLANNER_GPU_ROWS,
                         FITS_KEPT, PLANNER_KEPT, PLANNER_SEARCHED, TIME_MFUS, TOKEN_BUDGETS, _buffer,
                         _front_options, _set_front_options, cost_widget, planner_ahead, planner_warm_models,
                         planner_widget, seed_audit_widget, training_time_widget)

# the factories, in book order
__all__ = ["parameter_counts_widget", "model_states_widget", "inference_memory_widget",
           "activation_memory_widget", "max_micro_batch_widget", "decode_roofline_widget",
           "zero_stages_widget", "parallel_explorer_widget", "training_time_widget", "cost_widget",
           "planner_widget", "seed_audit_widget", "serving_widget", "fleet_widget", "finetune_widget",
           "long_context_widget", "moe_layout_widget", "rl_widget"]
from .measure import measured_step_widget; __all__.insert(5, "measured_step_widget")  # noqa: E402 (ch5)
from .measure_split import collective_time_widget  # noqa: E402 (ch9)
__all__.insert(9, "collective_time_widget")
