"""CPU time of every widget of the book, per move (issues 32 and 38): each factory of
``llmsizing.widgets.__all__`` is built (its first answer: controls, compute and the first draw), then each
control of each of its dashboards is moved to up to ``--moves`` other values (its neighbours and ends, or
other options, as tests/test_widgets.py moves them) and back to its default after each. Every move is the
dashboard's own redraw, timed in CPU seconds of this process (``time.process_time``); the part spent making
the PNG (``dashboard._figure_png``: matplotlib's draw and the encoding) is timed separately.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_widget_moves.py [--moves N] [--only NAME ...] [--profile]
        [--per-control]

Prints one row per widget: first answer, number of moves, median and max CPU ms per move, and the median share
of a move spent drawing the PNG. Does not assert (timings are not tests).

Measured 2026-11-29 (branch draw32; before = main ccad0f5, both runs side by side at a load of 4-11 on 2
cores, --moves 4, 896 moves), after widgets.canvas kept texts' layouts and, within a draw, axes' ticks: median
CPU ms per move (max) before -> after, planner 153 (982) -> 150 (1251), long context 190 (1429) -> 148 (934);
the median PNG draw of a move 94 -> 87 and 111 -> 75 ms; all moves' median 106 -> 82 ms, total 113.9 s CPU ->
92.9 s (the 18 widgets' rows were trimmed by speed29a to keep this file short).

Columns ``seen`` and ``seen med ms`` (added by widget38f) count the moves back to a setting the dashboard drew
before in the run (a widget that keeps its answers, ``Dashboard(keep=...)``, shows them without a draw), and
their median; ``no search`` and ``med ms`` the moves to a new setting that called no ``planner.plan`` (the
planner's tokens, deadline, budget and plan selector: a filter of kept plans and a draw), and their median.

Columns ``new`` and ``new med ms`` (added by draw38c) count the moves to a setting the dashboard had not
drawn before in the run, and their median: half the moves go back to the default, which a widget that keeps
its answers per setting (planner, long context, fleet) answers without a search.

Measured 2026-11-29 (branch draw38c; before = main 9525b41, both runs started together at 21:22 UTC, load
7-15 on 2 cores, with two widget-test runs beside them; one run each, not best of 3), --moves 4, CPU ms per
move (median, max), the median PNG draw of a move, and the median of the moves to new settings, before ->
after widgets.canvas kept legends' packed-box layouts within a draw and fleet_widget kept its plans per
setting:

    widget                     median       max          draw     new settings
    parameter_counts_widget       59    52    133   135    36    31     62    59
    model_states_widget          123   112    356   343    69    64    124   111
    inference_memory_widget       75    59    196   233    36    30     69    60
    activation_memory_widget      99    85    139   228    58    47    104    87
    max_micro_batch_widget       123   101    158   143    70    51    125   108
    decode_roofline_widget        88    87    121   123    64    64     97    89
    zero_stages_widget            65    50    196    80    42    32     67    53
    parallel_explorer_widget      90    91    246   280    52    52     92    92
    training_time_widget          71    86   2361  2124    47    59     71    86
    cost_widget                   97    94    282   152    63    64    102   102
    planner_widget               160   134    807   689    92    77    210   211
    seed_audit_widget            103   108    143   139    54    52    116   111
    serving_widget               110   115    173   158    77    74    112   116
    fleet_widget                 146    83    366   317    37    34    152   147
    finetune_widget               75    72    322    93    41    38     75    72
    long_context_widget          166   158   1289  1245    94    84    409   390
    moe_layout_widget            108    88    441   155    61    48    110    89
    rl_widget                     39    45     70    76    26    31     44    54
    all moves: median 94 -> 85 ms (new settings 98 -> 90 ms); total 99.5 s CPU -> 91.3 s CPU

Measured 2026-12-01 (branch moe23; base = main 7da13bf as a ``git archive`` of src and data on PYTHONPATH;
base, new, base, new, 18:19:02-18:20:41 UTC, load 6.6-8.1 on 2 cores, a test run beside them), --moves 4
--only long_context_widget planner_widget, first answer and the median of the moves to new settings, base ->
new (two pairs): long_context_widget first 398 -> 1059, 411 -> 1129 ms (its build now searches the
drop-down's ten mixtures of experts, ``warm=True``), new settings 75 -> 63, 72 -> 63 ms (a move to a
neighbouring mixture of experts is no longer a search: 2 -> 3 moves without one); planner_widget new settings
45 -> 43, 48 -> 45 ms (``_bare`` in render_plan, within the noise at that load).

A second pair at 22:04 (before = a checkout of 9525b41, load 1.2-4, one widget-test run beside them): total
97.0 -> 89.0 s CPU, median 87 -> 80 ms (new settings 90 -> 82 ms). Best of the two runs, median per move
before -> after: planner 160 -> 134, long context 160 -> 149, fleet 146 -> 83 (new settings: planner
210 -> 211, long context 409 -> 367, fleet 150 -> 147: those are the searches, plan() and replicas_for);
training_time 71 -> 83 is noise (its moves A/B in one process, box layouts kept on/off: 2.2-2.6 s either
way).

The same figures redrawn in one process, kept box layouts on and off interleaved (7 draws each, load 13):
sum of the 18 medians 1000 -> 868 ms (-13%); planner 104 -> 75, activation memory 58 -> 40, moe layout
55 -> 41, inference memory 55 -> 41 ms; widgets without a legend unchanged within +-6% (noise).

Measured 2026-11-30 (branch widget38f; base = main 437b35e; base and new alternating, 03:32-03:57 UTC, load
6-13 on 2 cores with widget-test runs beside them; 3 base runs, 5 new runs), --moves 4, CPU ms per move:
median of all moves, of the moves back to a setting drawn before (``seen``), of the moves to a new setting
without a search (``no search``) and of all new settings, base runs -> new runs, after ``Dashboard(keep=...)``
kept the PNG and summary of the last settings drawn (a move back shows them without render or draw):

    widget        median                   seen                 no search               new
    planner       128 115 129 -> 5 6 5 5 5  120 104 116 -> 1 (all)  144 117 123 -> 99-124  171-186 -> 153-184
    long_context  102 111 119 -> 6-11       88 102 100 -> 1 (all)   (all search)            322-379 -> 297-338

A move to a new setting is unchanged (its render and draw are the same): the planner's moves that filter its
kept plans (tokens, deadline, budget, plan selector) 99-124 ms at this load, a search 150-350 ms.

The widgets given ``keep=KEPT_ANSWERS`` beside them (two rounds each, alternating, 04:02-04:10 UTC, load
8-10), median CPU ms of the moves back to a setting drawn before, base runs -> new runs, and of the moves to
a new setting (unchanged: the same render and draw):

    widget                    seen                new settings
    model_states          111 103 -> 1 1     110 111 -> 94 102
    activation_memory      94  62 -> 1 1      97  67 -> 73  66
    max_micro_batch        76  77 -> 1 1     111 117 -> 100 110
    decode_roofline        86  84 -> 1 0      93  94 -> 86  70
    parallel_explorer      85  81 -> 1 1      93  80 -> 93  73
    cost                   74  78 -> 1 1      87  93 -> 96 107
    serving               101 116 -> 1 1      99 107 -> 107 116

Measured 2026-11-30 (branch widget38h; before = /work/main/src at 2e4989b, base and new alternating,
06:46-07:01 UTC, load 4.8-8.8 on 2 cores with a widget-test run beside them), --moves 4, CPU ms per move of
the moves to a new setting without a search (``no search``: median, max), base runs 1, 2 -> new runs 1, 2,
after: kept legends for the stacked and stage-memory columns, the decode-roofline and serving figures and
the figure legends of chapters 1-3 (``_kept_figure_legend``); ``stacked_bars`` as one PolyCollection per
component; the cost heat map as a pcolormesh instead of a resampled image; a kept one-axes figure resized
instead of rebuilt when its height changes, and the canvas's kept texts carried to the new size's renderer;
an axis's grid lines and tick marks drawn with one call per kind (the same pixels):

    widget                    median               max
    parameter_counts          49  38 -> 29 38      61  64 ->  42  67
    model_states             112  84 -> 52 40     205 159 ->  62  61
    inference_memory          56  51 -> 53 63      90  71 ->  72  85
    activation_memory         78  62 -> 80 80     200 219 ->  93  96
    max_micro_batch          106 112 -> 70 81     124 123 ->  81 112
    decode_roofline           80  93 -> 77 67      94 105 -> 167 193
    zero_stages               50  51 -> 27 45     168 181 ->  41  60
    parallel_explorer         84  61 -> 58 67     242 219 ->  78 123
    training_time             70  51 -> 58 60      95  78 ->  79  90
    cost                      76  85 -> 61 77     128 110 -> 226 261
    planner (filter moves)   133 118 -> 84 98     179 135 -> 108 122
    seed_audit               107 105 -> 79 68     120 128 -> 101 114
    serving                  112 105 -> 77 101    160 138 -> 113 119
    finetune                  44  60 -> 37 38      55  80 ->  57  59
    moe_layout                77  88 -> 52 50     125 168 ->  88  86
    rl                        44  36 -> 34 41     351 349 ->  58  62
    all 375 such moves: median 73, 65 -> 55, 59 ms; max 351, 349 -> 226, 261 ms; all 896 moves 55.5, 52.7 ->
    43.2, 44.9 s CPU

The maxima of cost (tokens, GPU) and decode roofline did not come back when those moves were timed again
alone (108 and 76 ms at the same load): at a load of 5-9 single moves vary by 2x.

Measured 2026-11-30 (branch widget38k; base = main 06d9b57, base and new alternating, 12:42-12:52 UTC, load
12-21 on 2 cores with a widget-test run and other helpers' browser tests beside them), --moves 4 --only the
seven widgets changed, after: kept answers (``Dashboard(keep=KEPT_ANSWERS)``) for seed audit, RL, MoE layout,
finetune and training time; the seed audit keeping its legend (only the counts in its labels change) and its
two log scales; and the capacity lines of the model-states and inference-memory bar charts added without
``axvline``'s autoscale (4 lines: 6-9 -> 3.5 ms). CPU ms per move, base runs 1, 2 -> new runs 1, 2: the
median of the moves back to a setting drawn before (``seen``) and of the moves to a new setting without a
search (``no search``); every PNG pixel-identical to base's (decoded PNG hashes of every move):

    widget                 seen                     no search
    model_states            1   1 ->  1  1          55  61 ->  54  52
    inference_memory        1   1 ->  0  1          59  62 ->  46  47
    training_time          67  73 ->  1  1          71  77 ->  53  84
    seed_audit            107 110 ->  1  1         127 129 ->  88  98
    finetune               47  36 ->  1  1          48  43 ->  38  42
    moe_layout             53  58 ->  1  1          60  60 ->  67  64
    rl                     33  36 ->  1  1          47  47 ->  38  41
    all 316 moves: total 17.5, 18.1 s CPU -> 10.2, 11.0 s; the 157 no-search moves: median 54, 58 -> 49, 51 ms

Tried and dropped (no gain measurable in one process, the two ways interleaved, at load 24-26): plain Texts
placed by offset transforms instead of the serving curve's 8 Annotations (median 102 vs 104 ms a move), and
the cost heat map's 30-36 cell labels kept and moved instead of made anew (74 vs 76 ms).

Measured 2026-11-30 (branch widget38l; base = main 1dbe9a9, base and new alternating, 15:45-15:57 UTC, load
18-23 on 2 cores with test and nbval runs beside them), --moves 4 --only the eight widgets changed, after:
the serving curve kept its sweep (per model, GPU and settings: it does not depend on the batch), its three
log scales and its legend (labels set), and added its two vertical lines without ``axvline``'s autoscale;
decode roofline, max micro-batch, training time and the cost heat map's scale kept their log scales
(``_log_scale``, ``keep_log``); ``stacked_bars`` made one PolyCollection with empty labelled legend entries;
the seed audit kept its judged table per band (an article move judged every claim again); and the canvas
transformed an axis's grid lines or tick marks together (one non-affine call, not a TransformedPath a
line). Median CPU ms of the moves to a new setting without a search, base runs 1, 2 -> new runs 1, 2; every
PNG pixel-identical to base's (decoded PNG hashes of every move of 15 widgets, and the static figures):

    serving               109 107 ->  87  87
    seed_audit            102 111 -> 109 100      (8 moves a run)
    decode_roofline        87  81 ->  63  65
    training_time          89  74 ->  60  68
    cost                  108 106 ->  92  89
    max_micro_batch       117 109 ->  82  82
    parameter_counts       38  37 ->  36  35
    model_states           58  60 ->  51  57
    all 162-163 such moves: median 93, 84 -> 71, 71 ms; all 328 moves 16.9, 14.2 -> 14.5, 14.1 s CPU

Tick lines' share of a draw (one process, load 17): serving 12.1 -> 8.0 ms, decode roofline 10.1 -> 5.0 ms.

Measured 2026-12-01 (branch lc35s; base = main 6e13dce, base and new alternating, 03:44-03:49 UTC, an idle
machine: load 0.4-0.8), --moves 6 --only long_context_widget, after: a lower GPU limit cut from the search at
the largest (planner.plans_within, no new search), a search at the other K/V exchange starting from the
entries at cp = 1 of the kept one (SearchMemory.share_cp1), render_plan's front as row labels and its front
lines from the columns' arrays, no minor ticks worked out for an axis without them, and the plans table's
key hashed by SHA-1. New settings' median, base runs 1-3 -> new runs 1-3: 104, 105, 107 -> 93, 102, 93 ms;
the four GPU-limit moves without a search 47-51 ms (base: all searched); all 42 moves 2.1, 2.1, 2.2 ->
1.9, 2.1, 1.9 s CPU; every plan bit-identical, every PNG pixel-identical. Per control (the moves of
/work/notes/lc35s.md, without the garbage collector's time): model 132-141 -> 119-133, seq 94-97 -> 91-94,
max_gpus 63-67 -> 44-48, cp_comm 104-133 -> 86-91 ms; a full collection (~90-130 ms, every ~40 moves) lands
on whichever move crosses its threshold.

Measured 2026-12-01 (branch dense35; base = main 8d004fa, base and new alternating, load 3.7-4.4 on 2 cores;
this session's machine is ~2.5x faster than the figures above), after the planner's dense memory fit on
arrays (llmsizing.dense_arrays) and the first dashboard's gc.freeze (widgets.dashboard._freeze_once: a full
collection of the kernel, 40-60 ms on whichever move crossed its threshold, is ~1 ms after). --moves 6 --only
long_context_widget --per-control, median CPU ms of the moves to new settings, base runs 1-3 -> new runs 1-3:
model 66 65 66 -> 61 57 61 (gpt2, gpt-39b, mpt-bench-30b, mixtral-8x7b, megascale-175b, granite-3.0-8b), seq
47 46 47 -> 43 41 44, cp_comm 110 110 128 -> 37 41 42 (its one move took the full collection), max_gpus
23 21 24 -> 22 23 24, gpus 44 40 39 -> 42 39 42, tokens 36 34 36 -> 35 36 38; all 42 moves 1.0 0.9 1.0 ->
0.8 0.8 0.9 s CPU, max 110-128 -> 83-91 ms. The model control moved to every catalogue model in turn (one
process a side, three each): the 52 dense models' median 55-57 -> 48-51 ms, p90 63-65 -> 55-56, max 110-127
(a full collection) -> 58-60, none over 100 ms; the 10 mixtures of experts' median 104-112 -> 96-98 ms, 5 of
10 still over 100 ms (Qwen3-30B-A3B ~145, DeepSeek-V2 ~125, granite-3.0-1b-a400m ~128, gpt-oss-120b ~110,
OLMoE ~103: their search, 45-50 ms of memory fit, is the next target).

Measured 2026-12-01 (branch merge35: dense35 merged after vpp34, which searches interleaved pipelines and
about twice the plans; base = main 3d6e033, base and new alternating, load 3.0-4.3 on 2 cores), same options,
median CPU ms of the moves to new settings, base runs 1-3 -> new runs 1-3: model 103 106 100 -> 84 88 85,
seq 90 91 89 -> 69 74 72, gpus 58 57 57 -> 46 50 48, tokens 43 44 41 -> 41 46 41, max_gpus 19 21 19 -> 20 20
19, cp_comm 154 153 151 -> 67 69 71; all 42 moves 1.4 1.4 1.4 -> 1.1 1.2 1.1 s CPU, max 151-154 -> 102-109 ms.
With the interleaved layouts' per_micro left to the per-layout path (only v = 1 on arrays; two runs a side):
model 100 96, seq 91 88, cp_comm 90 76 against 84 87, 71 69, 65 66 with them on arrays.

Measured 2026-12-01 (branch dlw12, issue 34: the planner widget's deadline-rule control; base = main 5cc3638,
load 2-10 on 2 cores), --only planner_widget --per-control, median CPU ms of the moves to new settings, base
-> new (two runs): deadline_rule (new control, from the default: no deadline, so a note) - -> 27 33; deadline
25 -> 27 33, budget 26 -> 25 31, choice 20 -> 22 26, model 61 -> 67 67, tokens 27 -> 32 38, no search in
either. The rule moved with a deadline set (point estimate -> slow end, 15 new settings over 1T/2T/15T tokens
and 7-90 days; the slow end filters the kept plans and marks their front again, no search): median 27-29,
max 31-37 ms CPU (2-3 ms where no plan is left and plan()'s message is shown from its kept search).

Measured 2026-12-01 (branch w05, issue 38: chapter 5's new widget, measured_step_widget; load 3.3 on 2 cores),
--only measured_step_widget --per-control --moves 4, two runs: first answer 412, 406 ms (the CSV read and
compared with the library once per process); 32 moves, 16 to new settings: median 23, 22 ms, max 27 ms CPU,
the PNG draw ~10 ms of it; per control median 21-27 ms (stack, model, precision, attention, recompute, batch,
sequence, working set); the AdamW moves 4-5 ms (a setting the sweep did not measure: the library's message, no
draw); the 16 moves back 0 ms (kept answers). Under the ~50 ms asked for every move.

Measured 2026-12-01 (branch w09, issue 38: chapter 9's new widget, collective_time_widget; load 10-13 on 2
cores), --only collective_time_widget --per-control --moves 4: first answer 357 ms (the gloo CSV and the five
nccl-tests logs parsed once per process); 30 moves, 15 to new settings: median 24 ms, max 33 ms CPU, the PNG
draw ~13 ms of it; per control median 20-29 ms (sweep, collective, size, line); a rank count the sweep did not
time 4 ms (the library's message, no draw); the 15 moves back 0 ms (kept answers).

Columns ``wall med`` and ``new wall`` (added by w100) are the wall-clock medians (``time.perf_counter``) of
all moves and of the moves to new settings: at a load above 2 on the 2 shared cores they also count the time
other processes hold the cores.

Measured 2026-12-01 (branch w100, issue 38: every widget <= 100 ms per move; main = 7c21f03; three runs of
main 19:25-19:29 UTC, load 2.8-4.9 by uptime before and after (run 1 beside this helper's other benchmarks:
its wall column is left out), then two of the branch 19:34-19:35, load 1.6-1.7; two other helpers on the 2
cores), --moves 4 --per-control, median CPU and wall ms of the moves to a setting not drawn before (a move
back to one drawn before shows the kept answer: 0-1 ms), and the slowest single move (CPU), main runs ->
branch runs:

    ch  widget                     new CPU       new wall     max CPU
    1   parameter_counts          12 10 10 -> 7 8   15 14 -> 8 8     18 16 14 -> 14 14
    2   model_states              17 16 13 -> 12 13  29 21 -> 13 13   24 20 18 -> 17 17
    3   inference_memory          17 17 10 -> 11 12  25 16 -> 11 13   28 27 19 -> 19 21
    4   activation_memory         25 25 18 -> 16 17  39 27 -> 16 17   30 35 22 -> 20 20
    4b  max_micro_batch           28 31 22 -> 21 23  44 33 -> 22 23   50 53 40 -> 38 38
    5   measured_step             31 28 24 -> 24 22  47 35 -> 24 23   74 63 55 -> 61 56
    6   decode_roofline           22 20 18 -> 20 18  29 28 -> 20 18   26 27 19 -> 27 26
    7   zero_stages               13 10 11 -> 12 9   15 15 -> 12 9    17 14 12 -> 17 12
    8   parallel_explorer         17 17 17 -> 18 13  24 24 -> 18 13   32 38 32 -> 26 24
    9   collective_time           25 18 24 -> 26 18  25 34 -> 26 18   36 23 36 -> 32 25
    10  training_time             15 16 19 -> 19 15  25 29 -> 19 15   240 220 281 -> 136 113
    11  cost                      20 21 23 -> 20 21  34 35 -> 20 21   31 34 28 -> 35 31
    12  planner                   54 44 44 -> 46 46  69 68 -> 49 47   132 125 140 -> 165 210
    14  seed_audit                28 24 29 -> 23 30  34 41 -> 23 30   139 133 138 -> 26 33
    15  serving                   22 21 23 -> 20 20  33 33 -> 20 20   33 25 25 -> 24 30
    15  fleet                     57 53 66 -> 40 41  78 109 -> 41 41  114 113 118 -> 83 76
    16  finetune                  14 13 14 -> 12 12  20 22 -> 12 12   19 18 17 -> 15 16
    17  long_context              55 54 56 -> 55 59  80 90 -> 55 59   123 97 94 -> 91 108
    18  moe_layout                20 14 18 -> 13 20  20 29 -> 13 20   31 26 34 -> 25 30
    19  rl                        15 11 16 -> 11 13  15 23 -> 11 13   22 19 22 -> 18 20
    all 480 new settings: median 20 18 18 -> 17 16 ms CPU; the 960 moves 13.2 12.8 12.8 -> 10.9 11.4 s CPU

The branch's runs were at a lower load: the widgets it did not change moved with the load, not the code.

Every widget's median move is under 100 ms, CPU and wall. The single moves over 100 ms: chapter 10's
move to a mixture of experts (DeepSeek-V3: one plan() per GPU count of the chart, 7 searches; 163-220 ->
118-155 ms CPU alone after stages kept the fewest-GPU layout it asked three times), chapter 12's and 17's
searches (plan(): the planner's own work), and gen-2 garbage collections: in this one process that builds all
20 widgets, a full collection walks every widget made after the first (``Dashboard``'s ``gc.freeze`` is once
per process) and took 20-140 ms (a ``gc.callbacks`` log: 128 ms in seed audit's article move, 97 ms in a
planner move, 65 ms in training time's); a chapter's kernel holds one or two widgets. Chapter 15's fleet
widget kept its Poisson quantiles (124 calls a move to GPT-2, 56 distinct: ``serve_fleet._poisson_quantile``)
and the quantised weight bytes and lookup tables per (model, dtype) (``inference._mixed_bytes``,
``_lookup_tables``: ~2,000 and ~1,200 calls a move): --only fleet_widget, main and branch alternating three
times (19:33:35-19:33:53, load 1.7-1.8): new settings 68 55 53 -> 43 42 40 ms, max 105 112 123 -> 76 83 75
ms; the same moves in one process, the collector off, three each: GPT-2 110 -> 80, int4 weights 85 -> 50.
Chapter 12's max 165, 210 on the branch are its moves of the sequence length (a search) with a full
collection in them: alone, main and branch alternating, the same moves took 62-71 and 63-83 ms.

Measured 2026-12-02 (branch speed28, issues 38 and 35; base = main d5bb6418, which the branch had merged;
paired in one process by benchmarks/bench_widget_ab.py --rounds 6, each round both sides' widgets built anew
with their kept searches cleared, base and branch alternating, 282 moves to new settings a side, paired move
by move; run 1 11:02-11:05 UTC at a load of 2.6-4.1, run 2 11:07-11:10 at 3.8-3.3 (its times ~1.5x run 1's:
other sessions' work), on 2 shared cores), after ``dense_arrays.search_pieces`` joined each call's rows from
kept arrays (the layout's model-states rows, the activations' row, the stages' columns per micro-batch count)
instead of a 25-tuple a stage, ``dense_arrays.prefetch`` and ``prefetch_cp`` worked each kind of entry out on
all its keys' rows at once, ``pointwise.stage_candidates`` read the planner's array as it is, and the planner
widget's plan selector read the front's rows off the columns' arrays (every plan and PNG bit-identical to
main's: benchmarks/walk_ch17_bits.py forward and reversed, walk_ch12_bits.py). CPU ms of the moves to new
settings, median base -> branch, and the median of the paired ratios (branch / base), runs 1 and 2:

    widget.control                 run 1: median      ratio     run 2: median      ratio
    long_context.model               73.2 ->  74.9    0.926      110.2 -> 104.0    0.882
    long_context.seq                 76.0 ->  65.1    0.884      119.7 ->  97.1    0.754
    long_context.gpus                47.8 ->  39.9    0.860       65.2 ->  63.7    0.792
    long_context.batch_tokens        55.4 ->  48.5    0.958       80.8 ->  77.5    0.883
    long_context.max_gpus            16.7 ->  14.6    0.867       24.8 ->  18.7    0.816
    long_context.cp_comm             77.9 ->  72.4    0.864      131.8 ->  93.2    0.703
    long_context (96 moves)          62.4 ->  56.0    0.902       91.4 ->  77.5    0.813
    planner.model                    76.6 ->  71.6    0.974      119.4 -> 104.2    0.890
    planner.tokens                   36.2 ->  35.9    0.974       58.4 ->  52.2    0.854
    planner.gpus                     54.3 ->  49.5    0.864       80.6 ->  69.4    0.914
    planner.seq                      72.7 ->  63.3    0.883      111.4 ->  95.3    0.881
    planner.global_batch             59.1 ->  62.9    0.978       82.6 ->  81.7    0.904
    planner.max_gpus                 38.0 ->  32.6    0.939       47.1 ->  44.7    0.940
    planner.deadline, budget, rule,  16.9-33.3 -> 17.0-33.7     24.7-48.7 -> 21.5-54.7
      choice (no search)                   0.956-1.021                0.995-1.139
    planner (186 moves)              43.7 ->  40.8    0.955       59.4 ->  56.5    0.918
    all 282 moves                    48.3 ->  44.1    0.926       65.2 ->  59.0    0.903

After main was merged again (9fa98770: the MoE dispatcher, grad_buffer through Job, serving's max_num_seqs),
the same tool against it, 11:16-11:20 (6 rounds, load 4.2-4.5) and 11:20-11:24 (8 rounds, load 3.9-4.7):
chapter 17's new settings 68.9 -> 68.1 ms, ratio 1.012, and 76.4 -> 76.7, ratio 0.967 (seq 0.967, 0.947;
cp_comm 0.938, 0.963); chapter 12's 43.0 -> 43.6, 1.030, and 55.3 -> 50.6, 0.954; in the first of these the
controls the branch leaves alone came out 1.13-1.21 (gpus, batch_tokens, max_gpus): at a load above 4 this
tool's ratios move by +-15%. plan() from scratch, benchmarks/bench_ab.py 9fa98770 9 (11:24, load 3.9-4.2),
paired ratios: llama-3-70b at 128K (chapter 17's widget) 0.92, llama-3-8b at 32K 0.91, mixtral-8x7b at 32K
0.91, llama-3.1-405b at 128K on one GPU type 0.92, llama-3-70b on 4 GPU types 0.96. Then with the CPU inside
the search's memory fit and pricing timed too (bench_widget_ab.py 9fa98770 --rounds 6 --parts
planner.fitting_plans planner.kept_price, 11:25-11:28 at a load of 4.3-3.5 and 11:27-11:31 at 3.2-2.9),
paired ratios, run a then b: inside those parts, chapter 17's seq 0.737, 0.771, model 0.780, 0.939,
cp_comm 0.790, 0.889, batch_tokens 0.782, 0.904, all its new settings 0.804, 0.879; chapter 12's model
0.856, 0.877, seq 0.875, global_batch 0.876; the whole moves, chapter 17 0.854, 0.889 (seq 0.797, 0.881),
chapter 12 0.957, 0.884.

The planner's moves without a search (deadline, its rule, budget, plan choice) are a filter of kept plans
and the figure, where the branch changed only the plan selector's options (~1 ms of a filter): their
ratios, 0.96-1.14, are this tool's noise at that load. Whole runs of this
script, main and branch alternating in their own processes (five pairs, 11:05-11:07, load 3.5-4.6), gave
long context's new settings 55, 56, 80, 83, 81 -> 61, 62, 69, 69, 80 ms: at that load a run moves by more
than the change. Issue 38's ~50 ms CPU a new setting is NOT met by chapter 17's searches (the branch's run-1
medians: seq 65, model 75, cp_comm 72 ms). What is left, per new setting of chapter 17 (its seq, model,
cp_comm, gpus and batch_tokens moves, three widgets in turn, the parts' ``time.process_time``, medians, at a
load of 2-3): of 71 ms, the figure ~36 (render_plan ~15, the Agg draw ~17, the PNG's encoding ~3, most of
it zlib), plan() ~37: its memory fit ~20 (the entries on arrays ~10: resolving each new layout and the
activations at the new context; partial recomputation's ``_least`` ~3), its pricing ~9
(``plan_stage_terms._pp_terms`` per pipeline degree, the groups' ``communication`` calls), the frame, ranks
and ranges ~7.

Measured 2026-12-02 (branch speed29a, issues 35 and 38; paired in one process by benchmarks/bench_widget_ab.py
--rounds 6, each round both sides' widgets built anew with their kept searches cleared; run A: base = the
branch's own base 162bf384, 13:33:05-13:34:36 UTC at a load of 4.6-3.8; run B: base = main bf66bb5a (which
had merged ch3's and DeepEP's work, nothing of these widgets), 13:26:45-13:27:53 at 2.7-2.3; 2 shared cores,
other sessions' work beside them), after (1) the chapter 17 widget built warm also searched the eight
settings one step of the context slider, the K/V exchange or the tokens per batch from its defaults
(``long_context_warm_settings``) and (2) ``charts.figures._kept_legend`` kept the legends it replaced (the
last 4 of an axes) and showed one again when its key came back (chapter 17's memory legend, with or without
gradients at the chosen plan's peak, was made anew on most steps of the context). CPU ms of the moves to new
settings, median base -> branch, and the median of the paired ratios (branch / base):

    widget.control             moves   run A: median    ratio    run B: median    ratio
    long_context.model            24    81.9 ->  79.2   0.953    113.1 ->  87.8   0.798
    long_context.seq              24    68.8 ->  33.0   0.407     75.8 ->  36.7   0.467
    long_context.gpus              6    43.3 ->  46.5   1.069     50.4 ->  48.8   0.930
    long_context.batch_tokens     12    55.1 ->  31.5   0.555     73.3 ->  34.8   0.487
    long_context.max_gpus         24    16.9 ->  18.5   0.978     20.6 ->  16.8   0.787
    long_context.cp_comm           6    93.3 ->  29.9   0.334     89.8 ->  32.3   0.343
    long_context (all)            96    60.2 ->  32.9   0.814     71.9 ->  36.5   0.660
    planner (all)                186    43.8 ->  40.4   1.001     43.9 ->  43.3   1.018 (again: 0.972)

The seq, cp_comm and batch_tokens moves here all start from the defaults (this tool moves each control away
and back), so (1) answers them from the build's searches: a render and a PNG. Away from the defaults (after a
model pick, another GPU type) a step is a search as before. The build (the widget's first answer) costs it:
1044 -> 1349 ms CPU (6 paired builds, base bf66bb5a, 13:27-13:28 at a load of 2.1), ~15 MB more. (2) alone, on
the moves that do not search (the plans cached, kept answers cleared, 18 moves of the context, exchange,
batch, GPU limit and GPU types, 6 rounds paired): 26.5 -> 24.5 ms (ratio 0.946, load 1.8), 32.5 -> 30.5 ms
(0.955, load 2.2); every PNG of a 19-move walk pixel-identical to a fresh figure's. What is left over ~50 ms:
a move that searches (a model pick: plan() ~50-85 ms for a new model at long context, another GPU type
~15-20 ms) plus the figure (~20-30 ms: render_plan ~9-13, the Agg draw ~10-15, the PNG's zlib ~2.5).

Measured 2026-12-02 (branch speed29b, issues 35 and 38: chapter 12's planner widget; base = 162bf384, the
branch's merge base with main; paired in one process by benchmarks/bench_widget_ab.py, 2 shared cores with
other helpers' work beside it), after: ``plan_rank.interleaving_winners`` grouping the plans by hashed codes
(``pd.factorize``), not ``np.unique`` of the GPU names' strings, and sorting by ``_lex_orders`` (2-6 ms a
search, about halved); ``plan_terms.dp_link_rows`` and ``layer_terms`` keeping each key's rows per (model,
recipe, ...) and GPU, so a search at another sequence, global batch or GPU limit prices only the keys not
seen; ``dp_link_rows`` reading the kept wire factors and latency steps; ``states._layer_params`` (one layer's
parameters per (model, tp): ``_stage_params`` and ``_stage_linear`` summed them again per (tp, pp, split));
``dense_arrays._kept_flight`` (an interleaved pipeline's micro-batches in flight by (pp, m, v, chunks));
``plan_stage_terms._kept_pointwise`` (memory-bound bytes per token read no context); ``plans_where`` reading
the columns without the attrs. Every plan and PNG bit-identical to base's (walk_ch12_bits.py and
walk_ch17_bits.py, forward and reversed). CPU ms of the moves to new settings (13:37:05-13:37:49 UTC, 10
rounds, load 2.3 -> 2.0), median base -> branch and the median of the paired ratios, whole moves and inside
plan() (``--parts planner.plan``):

    control           moves    whole move        ratio    inside plan()    ratio
    model               40    109.0 -> 101.3    0.947     53.3 -> 47.3    0.907
    seq                 20     70.1 ->  67.1    0.973     32.1 -> 28.4    0.893
    global_batch        40     65.7 ->  59.0    0.946     28.1 -> 22.8    0.825
    gpus                10     53.1 ->  55.6    0.968     16.2 -> 15.0    0.858
    tokens              40     41.8 ->  42.1    0.968      3.3 ->  3.4    0.992
    max_gpus (cuts)     40     35.7 ->  38.7    0.979      1.2 ->  1.1    0.912

An earlier run (13:33:40, 8 rounds, load 4.0 -> 3.8): model 0.942, seq 0.941, global_batch 0.923, all 248 new
settings 47.7 -> 45.4 ms, 0.934. The moves without a search (deadline, its rule, budget, plan choice):
0.86-1.13 in these mixed runs, 0.97-1.07 alone (13:37:53, 10 rounds, load 1.8): noise. plan() alone as the
widget calls it, benchmarks/bench_ch12_plan_ab.py 162bf384 6 (13:38:48, load 1.3-1.4): 16 first model picks
40.2 -> 38.9 ms, paired 0.915 (0.873 at 13:36, load 2.2); seq and global-batch moves of llama-3-70b 23.4 ->
18.9 ms, 0.810 (0.846). bench_ab.py 162bf384 5 (13:39, load 1.4-1.8), plan() from scratch: dense cases
0.82-0.95 (llama-3-70b on 4 GPU types 0.82), mixtures of experts 0.97-1.08, 0.98-0.99 with 21 runs (noise:
their search is not touched but for layer_terms' kept rows). Issue 35's bars hold (bench_moe_planner.py,
13:27, load 2.2): every mixture of experts over the catalogue 0.07-0.15 s from scratch (<= 0.3 s), the slowest
plan() of bench_ab's cases 0.16-0.18 s (<= 1 s).

Issue 38's ~50 ms CPU a new setting is NOT met by the moves that search (a quiet run of this script,
--per-control, load 2.5-2.8: model 84-103 ms, seq 63-66, global_batch 55-72). What is left per move (parts'
``time.process_time``, load 1-2): the figure ~32-35 ms (render_plan 10-15, of which _plan_groups 2.5-3.5 and
figure_axes ~2; the Agg draw 16-20, of which the plans legend ~4 drawn anew since its count changes; the PNG's
encoding 4-5); plan() of a first model pick ~35-50 ms: its memory fit 16-28 (the dense entries of each new
layout, ``dense_arrays.search_pieces`` 9-19: each layout's model-states side, resolving it; ``_least`` 2-4),
its pricing 11-16 (``stage_terms`` 2-4, the dp rows 2-3, layer terms ~2, NumPy on the 5,000-8,000 plans the
rest), the frame and ranks ~4; a sequence's or global batch's search 14-25 ms.
"""

from __future__ import annotations

import argparse
import statistics
import time

import matplotlib

matplotlib.use("Agg")

import ipywidgets as W  # noqa: E402

import llmsizing.widgets as widgets  # noqa: E402
from llmsizing.widgets import Dashboard, dashboard  # noqa: E402


def dashboards(w) -> list[Dashboard]:
    if isinstance(w, Dashboard):
        return [w]
    return [d for child in getattr(w, "children", ()) for d in dashboards(child)]


def other_values(ctrl, n: int) -> list:
    """Up to ``n`` values to move ``ctrl`` to from where it is: a slider's neighbours and ends, a selection's
    other options (spread over the list), a checkbox toggled, a multi-select with one more (or one fewer)
    option."""
    v = ctrl.value
    if isinstance(ctrl, W.SelectMultiple):
        opts = ctrl._options_values
        extra = next((o for o in opts if o not in v), None)
        return [tuple(v) + (extra,)] if extra is not None else [tuple(v[:-1])]
    if isinstance(v, bool) and not hasattr(ctrl, "_options_values"):   # (a checkbox; a drop-down: each)
        return [not v]
    if hasattr(ctrl, "_options_values"):
        others = [o for o in ctrl._options_values if o != v]
        if len(others) > n:
            step = (len(others) - 1) / (n - 1) if n > 1 else 0
            others = [others[round(i * step)] for i in range(n)] if n > 1 else others[:1]
        return others
    if isinstance(ctrl, W.FloatLogSlider):
        vals = [ctrl.base ** ctrl.min, ctrl.base ** ctrl.max]
    else:
        step = getattr(ctrl, "step", 1) or 1
        vals = [v - step, v + step, ctrl.min, ctrl.max]
        vals = [x for x in vals if ctrl.min <= x <= ctrl.max]
    return [x for x in dict.fromkeys(vals) if x != v][:n]


class DrawClock:
    """Wraps ``dashboard._figure_png`` to add up the CPU time spent making PNGs."""

    def __init__(self):
        self.total = 0.0
        self.real = dashboard._figure_png

    def __enter__(self):
        def timed(view):
            c0 = time.process_time()
            try:
                return self.real(view)
            finally:
                self.total += time.process_time() - c0

        dashboard._figure_png = timed
        return self

    def __exit__(self, *exc):
        dashboard._figure_png = self.real
        return False


class SearchCount:
    """Wraps ``llmsizing.planner.plan`` and ``llmsizing.serve.replicas_for`` (the fleet widget's search;
    before a widget is built: the widgets import them when built) to count their calls, so that a move to a
    new setting that did not search can be told from one that did."""

    def __init__(self):
        import llmsizing.planner as planner
        import llmsizing.serve as serve

        self.patched = [(planner, "plan", planner.plan), (serve, "replicas_for", serve.replicas_for)]
        self.calls = 0

    def __enter__(self):
        def counting(real):
            def counted(*args, **kwargs):
                self.calls += 1
                return real(*args, **kwargs)
            return counted

        for module, name, real in self.patched:
            setattr(module, name, counting(real))
        return self

    def __exit__(self, *exc):
        for module, name, real in self.patched:
            setattr(module, name, real)
        return False


def state(board: Dashboard) -> tuple:
    """All of a dashboard's control values (its setting), hashable."""
    return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in board.values().items())


def bench(name: str, n: int) -> dict:
    with DrawClock() as clock, SearchCount() as searches:
        c0 = time.process_time()
        w = getattr(widgets, name)()
        first = time.process_time() - c0
        moves, draws, errors, new, seen_moves, no_search, no_search_draws = [], [], 0, [], [], [], []
        walls, new_walls = [], []
        per_control: dict = {}                  # control -> [(CPU s, searched)] of its moves to new settings
        for board in dashboards(w):
            seen = {state(board)}
            for key, ctrl in board.controls.items():
                default = ctrl.value
                for value in other_values(ctrl, n):
                    for target in (value, default):
                        if target == ctrl.value:
                            continue
                        d0, s0, c0 = clock.total, searches.calls, time.process_time()
                        t0 = time.perf_counter()
                        try:
                            ctrl.value = target
                        except Exception as exc:             # noqa: BLE001  (a bug a test would report)
                            print(f"  {name}.{key} = {target!r}: {type(exc).__name__}: {exc}")
                            continue
                        moves.append(time.process_time() - c0)
                        walls.append(time.perf_counter() - t0)
                        draws.append(clock.total - d0)
                        if state(board) not in seen:        # a setting this board has not drawn before
                            seen.add(state(board))
                            new.append(moves[-1])
                            new_walls.append(walls[-1])
                            per_control.setdefault(key, []).append((moves[-1], searches.calls > s0))
                            if searches.calls == s0:        # ... answered without a plan() search
                                no_search.append(moves[-1])
                                no_search_draws.append(draws[-1])
                        else:
                            seen_moves.append(moves[-1])
                        errors += bool(board.error.value)
    shares = [d / m for d, m in zip(draws, moves) if m > 0]
    return dict(name=name, first=first, moves=moves, errors=errors, new=new, seen=seen_moves,
                no_search=no_search, per_control=per_control,
                seen_median=statistics.median(seen_moves) if seen_moves else float("nan"),
                no_search_median=statistics.median(no_search) if no_search else float("nan"),
                no_search_max=max(no_search) if no_search else float("nan"),
                no_search_draw=statistics.median(no_search_draws) if no_search else float("nan"),
                new_median=statistics.median(new) if new else float("nan"),
                new_wall_median=statistics.median(new_walls) if new else float("nan"),
                wall_median=statistics.median(walls) if walls else float("nan"),
                median=statistics.median(moves) if moves else float("nan"),
                max=max(moves) if moves else float("nan"),
                draw_median=statistics.median(draws) if draws else float("nan"),
                draw_share=statistics.median(shares) if shares else float("nan"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--moves", type=int, default=4, help="values tried per control (each one and back)")
    ap.add_argument("--only", nargs="*", help="widget factory names (default: all, in book order)")
    ap.add_argument("--per-control", action="store_true",
                    help="also print, per widget and control, its moves to new settings: median, p90, max")
    ap.add_argument("--profile", action="store_true",
                    help="cProfile the moves, print the top 40 (cumulative)")
    args = ap.parse_args()
    names = args.only or [n for n in widgets.__all__ if n.endswith("_widget")]
    prof = None
    if args.profile:
        import cProfile

        prof = cProfile.Profile(time.process_time)
        prof.enable()
    rows = [bench(name, args.moves) for name in names]
    if prof is not None:
        import pstats

        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(40)
    print(f"{'widget':28s} {'first ms':>9s} {'moves':>6s} {'median ms':>10s} {'max ms':>8s} "
          f"{'draw med ms':>12s} {'draw share':>11s} {'new':>5s} {'new med ms':>11s} {'seen':>5s} "
          f"{'seen med ms':>12s} {'no search':>10s} {'med ms':>7s} {'max ms':>7s} {'draw ms':>8s} "
          f"{'wall med':>9s} {'new wall':>9s}")
    for r in rows:
        print(f"{r['name']:28s} {r['first'] * 1e3:9.0f} {len(r['moves']):6d} {r['median'] * 1e3:10.0f} "
              f"{r['max'] * 1e3:8.0f} {r['draw_median'] * 1e3:12.0f} {r['draw_share']:10.0%} "
              f"{len(r['new']):5d} {r['new_median'] * 1e3:11.0f} {len(r['seen']):5d} "
              f"{r['seen_median'] * 1e3:12.0f} {len(r['no_search']):10d} {r['no_search_median'] * 1e3:7.0f} "
              f"{r['no_search_max'] * 1e3:7.0f} {r['no_search_draw'] * 1e3:8.0f} "
              f"{r['wall_median'] * 1e3:9.0f} {r['new_wall_median'] * 1e3:9.0f}")
    if args.per_control:
        print_per_control(rows)
    every = [m for r in rows for m in r["moves"]]
    fresh = [m for r in rows for m in r["new"]]
    quick = [m for r in rows for m in r["no_search"]]
    def ms(values, pick):                    # a subset may be empty (--only a widget without searches)
        return f"{pick(values) * 1e3:.0f} ms" if values else "-"

    print(f"{'all':28s} {sum(r['first'] for r in rows) * 1e3:9.0f} {len(every):6d} "
          f"{statistics.median(every) * 1e3:10.0f} {max(every) * 1e3:8.0f}   total moves "
          f"{sum(every):.1f} s CPU; {len(fresh)} new settings, median {ms(fresh, statistics.median)}; "
          f"{len(quick)} without a search, median {ms(quick, statistics.median)}, max {ms(quick, max)}")


def print_per_control(rows: list[dict]) -> None:
    """Per widget and control, its moves to a setting not drawn before (issue 38's bar is per move): how
    many, how many of them searched (planner.plan or serve.replicas_for), and their median, p90 (nearest
    rank) and max CPU ms."""
    print(f"{'widget.control':40s} {'new':>4s} {'searched':>9s} {'median ms':>10s} {'p90 ms':>7s} "
          f"{'max ms':>7s}")
    for r in rows:
        for key, got in r["per_control"].items():
            t = sorted(m for m, _ in got)
            p90 = t[min(len(t) - 1, round(0.9 * (len(t) - 1)))]
            print(f"{r['name'] + '.' + key:40s} {len(t):4d} {sum(s for _, s in got):9d} "
                  f"{statistics.median(t) * 1e3:10.0f} {p90 * 1e3:7.0f} {t[-1] * 1e3:7.0f}")


if __name__ == "__main__":
    main()
