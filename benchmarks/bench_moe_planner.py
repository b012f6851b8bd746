"""How long the planner takes for a mixture of experts (issue 35's targets: the whole GPU catalogue <= 0.3 s,
any plan() <= 1 s, e.g. Qwen3-30B-A3B at 64K), with the MoE time terms of llmsizing.moe_time in the search.

    .venv/bin/python benchmarks/bench_moe_planner.py        # best of 3 each, from scratch
    .venv/bin/python benchmarks/bench_moe_planner.py --ch10 # chapter 10's chart at moves to an MoE, once
    .venv/bin/python benchmarks/bench_moe_planner.py --accounted  # the MoE searches with accounted_split=True
    .venv/bin/python benchmarks/bench_moe_planner.py --dualpipe   # plan(schedule="dualpipe"), dual48
    .venv/bin/python benchmarks/bench_moe_planner.py --fewest-dualpipe  # min_gpus(schedule="dualpipe")

The MoE cases of benchmarks/bench_planner.py, timed by its own loop (kept results cleared before each run).
Prints; does not assert (timings are not tests).

Issue 35, second round (branch moeplan35, 2026-11-29): CPU seconds of one plan() from scratch, the better of two
runs, main (85ae43b) then this branch back to back, in one process each, with the time inside the pieces
(process time, the same runs). The machine was shared by other jobs at a load of 6 to 13 on its 2 cores, so
a single figure moves by 10-30%; the search's output is bit-identical (every column of every plan, checked with
pandas' assert_frame_equal(check_exact=True) on these six cases and three more: expert_tp, FP8, a dense model).

    case                                              total          price        dp collectives  all-to-all
                                                  main  branch   main  branch     main  branch    main  branch
    deepseek-v3, whole catalogue                  1.56   1.33    1.07   0.87      0.48   0.37     0.19   0.11
    deepseek-v3 at 15,360 sequences               1.25   1.04    0.87   0.61      0.33   0.25     0.22   0.11
    mixtral-8x7b, whole catalogue                 1.38   1.11    0.75   0.50      0.24   0.18     0.06   0.05
    qwen3-30b-a3b on H100s, <= 1,024              0.99   0.82    0.11   0.09      0.04   0.03     0.01   0.01
    qwen3-30b-a3b at 64K                          1.46   1.40    0.26   0.18      0.07   0.05     0.06   0.01
    mixtral-8x7b at 32K                           0.61   0.57    0.15   0.07      0.03   0.02     0.02   0.00

What changed (plan_pricing): the kernels' rates once per (GPU, tp, cp, micro-batch, ep), not per
recomputation too; the data-parallel collectives priced once per distinct (group link, tp, ZeRO stage, group
size, ep) after numbering the links, instead of visiting every (GPU, ...) key; the expert all-to-alls once per
(GPU, tokens a GPU routes, etp, ep) instead of per (GPU, tp, cp, micro-batch, ep); _groups builds its tuples
in one tolist(). The targets (<= 0.3 s over the catalogue, <= 1 s for any plan()) are NOT met: what is left is
the memory fit (plan_memory.fitting_plans: 0.3-1.2 s, ~1,200 training_memory calls for Qwen3 at 64K) and, over
the catalogue, ~15,000 ring_collective and ~3,800 group_link calls of the network model, one at a time. Making
those fast means pricing the network model and the memory model on arrays, not in a loop.

Issue 35, third round (branch planfast35, 2026-11-29): CPU seconds, best of 3 from scratch (every kept result
cleared, the new ones too), main (ccad0f5) and this branch alternately, one case per process
(benchmarks/bench_compare.py), at a load of 13 to 18 on the 2 cores (a figure moves by 10-30%, more for the
short ones); and the calls that do not depend on the load: training_memory, and group_link from the pricing.
The frames are the same (tests/test_planner_speed.py against tests/reference/plans.npz, frozen on ccad0f5).

    case                                          CPU s main -> branch   training_memory   group_link (pricing)
    deepseek-v3, whole catalogue                     1.28 -> 0.78           300 -> 300        4,238 -> 409
    deepseek-v3 at 15,360 sequences                  0.96 -> 0.93           221 -> 221        3,711 -> 414
    mixtral-8x7b, whole catalogue                    1.30 -> 1.12           412 -> 412        1,749 -> 441
    qwen3-30b-a3b on H100s, <= 1,024                 1.04 -> 0.99           886 -> 886          112 -> 20
    qwen3-30b-a3b at 64K                             1.47 -> 1.57         1,208 -> 1,208        153 -> 19
    mixtral-8x7b at 32K                              0.57 -> 0.56           580 -> 580           86 -> 20
    cost_by_gpu("deepseek-v3"), whole catalogue      4.00 -> 1.48         9,199 -> 605           38 -> 38

Again alternately ten minutes later at a lower load (main -> branch, CPU s): DeepSeek-V3 over the catalogue
0.67 -> 0.51, Qwen3-30B-A3B at 64K 0.91 -> 0.87, cost_by_gpu("deepseek-v3") 2.77 -> 1.30.

The widgets' compute per move, without drawing (CPU s, main -> branch, alternately): chapter 17 at a new model
or context is a whole plan() (Qwen3-30B-A3B at 32K 1.06 -> 1.13, the same 1,234 training_memory calls); a move
of its GPU limit (16,384 -> 4,096) or its tokens per batch (16M -> 8M) reuses the memory coefficients of the
setting it leaves: Mixtral-8x7B at 32K 0.49 -> 0.25 and 0.47 -> 0.22, Qwen3-30B-A3B at 64K 0.97 -> 0.59 and
0.95 -> 0.56 (580 and 1,228 training_memory calls -> 0). Chapter 18's move is one training_memory and one
step_time: 3-5 ms of compute (the rest of its 120-175 ms is drawing). None of the chapter 17 moves meets 100 ms.

What changed: an MoE's data-parallel collectives priced once per (tp, ZeRO stage, group size, ep, leaving the
scale-up domain) on a unit link and scaled by each row's link (1,800 schedules instead of 8,300 for
DeepSeek-V3), links once per (GPU, GPUs per domain, across) (plan_pricing._row_links); one all_to_all_s per
buffer size in ep_all_to_all; searches share their memory coefficients (plan_memory.kept_search_memory: they
depend on neither the GPUs, the global batch nor max_gpus), and min_gpus weighs a layout once across GPU types
(layouts._stage_runs): cost_by_gpu's 21 min_gpus and 21 plans then share their training_memory calls. The
targets are still NOT met from scratch: DeepSeek-V3 over the catalogue is 0.8 s (target 0.3), Qwen3-30B-A3B at
64K 1.5 s (target 1): the memory fit (1,208 training_memory calls and the per-layout NumPy work around them)
and, in the pricing, one step_time per (GPU, tp, cp, micro-batch, recomputation) and one ep_all_to_all per
(GPU, tokens, etp, ep) are what is left; making them fast means the memory and step models on arrays.

Issue 35, fourth round (branch planfast35c, 2026-11-29): CPU seconds, best of 3 from scratch (every kept
result cleared, kernels._attention_efficiency too), main (9525b41) and this branch alternately, one case per
process (benchmarks/bench_compare.py), the better of two or three rounds, at a load of 9 to 15 on the 2 cores
(a figure moves by 10-30%). The frames are bit-identical (tests/reference/plans.npz, and 15 whole searches,
dense and MoE, against main with assert_frame_equal(check_exact=True)); the training_memory and group_link
calls did not move.

    case                                          CPU s main -> branch   training_memory   target
    deepseek-v3, whole catalogue                     0.55 -> 0.52               300        <= 0.3: NOT met
    deepseek-v3 at 15,360 sequences                  0.67 -> 0.63               221        <= 1: met
    mixtral-8x7b, whole catalogue                    0.74 -> 0.57               412        <= 1: met
    qwen3-30b-a3b on H100s, <= 1,024                 0.61 -> 0.52               886        <= 1: met
    qwen3-30b-a3b at 64K                             1.14 -> 0.65             1,208        <= 1: met
    mixtral-8x7b at 32K                              0.52 -> 0.36               580        <= 1: met
    cost_by_gpu("deepseek-v3"), whole catalogue      1.42 -> 1.06               605

The widgets' compute per move without drawing (--widgets mode, CPU ms, the better of two passes each side,
main then branch alternately, load 10 to 14): chapter 17 at a new model or context (a whole plan()):
Llama-3.1-405B at 128K 527 -> 283, at 64K 372 -> 309; Mixtral-8x7B at 128K 563 -> 394, at 32K 546 -> 338;
Qwen3-30B-A3B at 32K 1,429 -> 859, at 64K 1,435 -> 785. A move that keeps the memory coefficients (from
Mixtral at 32K / Qwen3 at 64K): GPU limit 16,384 -> 4,096 314 -> 160 / 589 -> 468; tokens per batch 16M -> 8M
212 -> 140 / 655 -> 410; GPU types + B200 429 -> 293 / 437 -> 176 (Qwen3: refused, more plans than plan()
prices). Chapter 18's move: 2-4 ms on both (one training_memory and one step_time). None of chapter 17's moves
is under 100 ms. Every MoE plan() timed here is under 1 s; the dense Llama-3.1-405B at 128K over
the catalogue (benchmarks/bench_planner.py) is not: 1.18 -> 1.18 s (608 training_memory calls, its pricing).

What changed: plan_memory.fitting_plans weighs each recomputation on all layouts' candidates at once (one
_total_bytes per recomputation over a table of their coefficients, a row per (layout, (cp, accumulation
class)), pieces a layout lacks padded with -inf; partial recomputation still layout by layout) instead of ~15
NumPy calls per layout and recomputation (Qwen3-30B-A3B at 64K weighs 676 layouts: 0.24 -> 0.11 s once its
coefficients are known, against this round's first commit); training_memory checks its arguments once and
calls the checked cores of optimizer_temporaries_bytes, zero3_gathered_bytes and stage_params
(memory._optimizer_temporaries, _zero3_gathered, _checked_stage_params); check_choice and check_bool answer
the common case first; and kernels.attention_efficiency is kept per (GPU, head_dim, seq, kernel). Left:
DeepSeek-V3 over the catalogue is the pricing (~0.3 s: 307 step_time, 1,606 rates, the dp collectives and
all-to-alls) plus the memory fit (~0.15 s, 300 training_memory calls); Qwen3-30B-A3B at 64K is its 1,208
training_memory calls (~0.4 s). The next step is the step model's per-(GPU, tp, cp, micro-batch,
recomputation) terms over NumPy arrays of GPUs.

Issue 35, fifth round (branch arrays35d, 2026-11-30): CPU seconds, best of 3 from scratch, main (0d84c92) and
this branch alternately, one process per side and round, four rounds, the best round of each side; the load
was 4 to 13 on the 2 cores (steal time too), so a figure moves by 20-40%. The frames are bit-identical: 18
searches (bench_planner's 14, Qwen3 FP8 on H100+B200, Mixtral with expert_tp, 70B with overlap=0.5,
DeepSeek-V3 at 32K with cp_comm="all_gather") against main with assert_frame_equal(check_exact=True), and
tests/test_planner_speed.py against tests/reference/plans.npz (not re-frozen).

    case (benchmarks/bench_planner.py)                    main -> branch (best of 4 rounds)   target
    llama-3.1-405b, whole catalogue                          0.39 -> 0.25                      <= 1
    llama-3.1-405b at 128K, whole catalogue                  0.93 -> 0.61                      <= 1
    llama-3.1-405b at 128K, 3 GPU types                      0.49 -> 0.36                      <= 1
    llama-3-70b, 4 GPU types                                 0.23 -> 0.14                      <= 1
    deepseek-v3, whole catalogue                             0.60 -> 0.37                      <= 0.3
    deepseek-v3 at 15,360 sequences                          0.65 -> 0.43                      <= 1
    mixtral-8x7b, whole catalogue                            0.65 -> 0.46                      <= 0.3
    qwen3-30b-a3b on H100s, <= 1,024                         0.45 -> 0.46                      <= 1
    qwen3-30b-a3b at 64K                                     0.82 -> 0.67                      <= 1
    mixtral-8x7b at 32K                                      0.33 -> 0.29                      <= 1

At a low load (1 to 4, before the last two commits): DeepSeek-V3 over the catalogue 0.45-0.54 -> 0.29-0.30
s; at loads of 6 to 13 main takes 0.60-0.76 s and the branch 0.37-0.42 s (x0.6). The 0.3 s target for an
MoE over the catalogue is met only on a quiet machine for DeepSeek-V3, and not for Mixtral-8x7B (0.46 s at
load 13: 43,567 plans, 412 training_memory calls).

What changed: the pricing's per-(GPU, tp, cp, micro-batch, ep, recomputation) terms come from the step model's
own pieces, not one whole step_time per key (plan_terms.layer_terms: communication, exposed_by_group and
_cp_attention_s, whose tp and cp entries do not depend on the compute; one communication per (tp and cp
links, tp, cp, micro, rc), shared by GPUs whose groups ride equal links; kernels.rates takes a tuple of ep and
answers every ep of a (GPU, tp, cp, micro) in one call); an MoE's data-parallel schedules on arrays of keys
(plan_terms.dp_unit_rows: ring_bytes and latency_steps once per (kind, group size, leaving the domain)
instead of one dp_schedule and ring_collective per key); kept layouts (parallel.kept_parallel) in the
pricing's communication and all-to-all calls, and ep_all_to_all works out each buffer's bytes once; the
Pareto front without a Python loop; plan() looks up each plan's MFU range factors by GPU index and copies the
table once. Left: the memory fit (plan_memory.fitting_plans, 300 training_memory calls for DeepSeek-V3, 1,208
for Qwen3-30B-A3B at 64K, ~40% of DeepSeek-V3's search and most of Qwen3's), the expert all-to-alls (692
ep_all_to_all calls, one per (GPU, tokens, etp, ep)) and the dense data-parallel collectives, still one call
per key.

Issue 35, sixth round (branch arrays35e, 2026-11-30): CPU seconds of one plan() from scratch, 8 runs per
process, main (d4c0f11) and this branch alternately, three rounds per case (the last four: one round of 3
runs), at a load of 3.7 to 4.6 on the 2 cores (steal time too: a single run moves by 30%, so the median is
given with the best). The frames are bit-identical: 9 searches (bench_planner's six MoE cases, Mixtral with
expert_tp, Qwen3 FP8 on H100+B200, DeepSeek-V3 at 32K with cp_comm="all_gather") against main with
assert_frame_equal(check_exact=True) and equal attrs, and tests/test_planner_speed.py (not re-frozen).

    case                              median per round, main -> branch        best run        all-to-all
    deepseek-v3, whole catalogue      0.454/0.415/0.417 -> 0.408/0.408/0.340  0.349 -> 0.252  ~46 -> ~37 ms
    mixtral-8x7b, whole catalogue     0.574/0.503/0.406 -> 0.505/0.472/0.356  0.344 -> 0.318  ~25 -> ~19 ms
    deepseek-v3 at 15,360 sequences   0.321 -> 0.375 (one round: noise)       0.283 -> 0.361
    qwen3-30b-a3b on H100s, <= 1,024  0.447 -> 0.458                          0.417 -> 0.374
    qwen3-30b-a3b at 64K              0.694 -> 0.540                          0.640 -> 0.508
    mixtral-8x7b at 32K               0.265 -> 0.211                          0.237 -> 0.208

What changed: Model.__hash__ is the dataclass's value worked out once per Model (kept in the instance, not
pickled): a search hashes the same Model ~6,000 times (5,854 for DeepSeek-V3, 6,302 for Mixtral, in the lru
keys of the memory and step model), at 6-8 us each for the dataclass's hash of every field against ~1 us
kept, i.e. 30-40 ms a search; and the expert all-to-alls once per (the links all_to_all_s reads, tokens,
etp, ep) instead of per (GPU, tokens, etp, ep), shared by GPUs whose all-to-all rides equal links
(all_to_all._links, which all_to_all_s itself prices on): 692 -> 489 ep_all_to_all calls for DeepSeek-V3,
375 -> 231 for Mixtral. The 0.3 s target for an MoE over the catalogue is met by DeepSeek-V3's best runs
only, not by Mixtral-8x7B. Left: the memory fit (300 / 412 training_memory calls, ~45% of the search), the
per-(links, tp, cp, micro, rc) communication of plan_terms.layer_terms, the dp collectives' NumPy over 43k
rows (Mixtral), and GPU and Node hashes in group_link's and kernels' lru keys (~6 ms).

Issue 35, seventh round (branch arrays35f, 2026-11-30): CPU seconds of one plan() from scratch, main (207b837)
and this branch in one process (main imported under another name), alternating run by run, 10 runs each,
garbage collection as usual, at a load of 6.5 to 9 on the 2 cores (a single run moves by 20-40%: the median
ratio branch / main over paired runs is the figure to read). Plans unchanged: tests/reference/plans.npz (not
re-frozen), and 20 whole searches (bench_planner's 14, Mixtral with expert_tp, Qwen3 FP8 on H100+B200,
DeepSeek-V3 at 32K with cp_comm="all_gather", Mixtral with a deadline and a budget, 70B with overlap=0.5 and
with partial recomputation) against main: every column exactly equal (rows, order, Pareto front) but
memory_per_gpu_bytes in five MoE searches, within 1.3e-14 relative (the A + B / ep reconstructions).

    case                                  best main -> branch  median main -> branch  ratio  training_memory
    deepseek-v3, whole catalogue              0.255 -> 0.236       0.380 -> 0.285       0.79      300 -> 201
    mixtral-8x7b, whole catalogue             0.376 -> 0.324       0.453 -> 0.421       0.92      412 -> 348
    qwen3-30b-a3b at 64K                      0.580 -> 0.583       0.820 -> 0.761       0.86    1,208 -> 931
    llama-3.1-405b at 128K, whole catalogue   0.663 -> 0.656       0.800 -> 0.758       0.98      608 -> 608

An earlier paired run at load 7-10 read 0.81, 0.82, 0.85 and 0.95. Also: deepseek-v3 at 15,360 221 -> 138
training_memory calls, qwen3-30b-a3b on H100s 886 -> 632, mixtral-8x7b at 32K 580 -> 516.

What changed: SearchMemory reads ZeRO-2's states of a mixture of experts (no pipeline, more than one
micro-batch, untied embeddings) as A + B / ep from the first two ep, like ZeRO-0/1 (no call), and for ZeRO-1
with a pipeline and ZeRO-2 with one micro-batch the unsharded part as A + B / ep and the sharded part from one
call at dp = a instead of two (what is not of that form, the foreach temporary split by stage and the LM
head's gradient, is all sharded); an MoE's dp collectives per distinct (GPU, tp, pp, ZeRO, ep, dp x cp)
(17,685 of Mixtral's 43,567 plans) with the keys as arrays (plan_pricing._group_columns, no tuples);
layer_terms shares the tp = cp = 1 communication (nothing sent) across GPUs and the exposed terms without cp;
resolve_parallel keeps its checks per (layout, model, seq) (~1,400 a search, a few hundred distinct); plan()
builds its frame once, in its final order, from arrays (no copy of the table per step). The targets:
DeepSeek-V3 over the catalogue is under 0.3 s in its median at this load (0.285); Mixtral-8x7B is not (0.42
median, 0.32 best): its time is spread over the memory fit (348 training_memory calls, ~0.08 s, and ~0.06 s
around them), the pricing (~0.12 s: layer_terms, dp collectives, all-to-alls) and the frame (~0.05 s: sorting
43k plans). Every single plan() timed here is under 1 s.

Issue 35, eighth round (branch arrays35g, 2026-11-30): the frame after the search, and the groups of the
pricing. CPU seconds of one plan() from scratch, main (a4690a7) and this branch in one process, alternating
run by run (the seventh round's method), at a load of 6.5 to 7; and the part of plan() after the search
(another token budget, the search kept: best of 10, one process per side, one after the other). Plans
unchanged: tests/reference/plans.npz (not re-frozen) and the seventh round's 20 whole searches against main,
every column (memory_per_gpu_bytes too) and attrs exactly equal.

    case                                  pairs  median main -> branch  ratio  after the search, main -> branch
    mixtral-8x7b, whole catalogue            20        0.264 -> 0.253     0.91        0.051 -> 0.029
    mixtral-8x7b, whole catalogue            10        0.306 -> 0.334     0.99
    deepseek-v3, whole catalogue             10        0.244 -> 0.235     0.95        0.028 -> 0.021
    qwen3-30b-a3b at 64K                     10        0.604 -> 0.556     0.94        0.016 -> 0.015
    llama-3.1-405b at 128K, whole catalogue  10        0.555 -> 0.524     0.97        0.023 -> 0.017

What changed: plan()'s two sorts (the Pareto sweep's lexsort of days, cost and memory, and the final order by
cost then days) rank each key once (one unstable float sort each, shared by both orders) and sort one packed
int64 of (ranks, row) per order: the same order as np.lexsort, which is kept for NaN, non-numeric keys or a
pack over 63 bits (planner._lex_orders; ~20 -> ~10 ms for Mixtral); the output frame keeps its fresh column
arrays instead of stacking them into blocks (DataFrame(copy=False), ~5 ms); plan_terms._group_columns (moved
from plan_pricing, which is 579 lines now) answers np.unique from a table of every key when the key is dense
(a few ms for Mixtral; its keys arrive nearly sorted, so np.unique was already cheap). Mixtral over the
catalogue now reads under 0.3 s in its median at this load, but so does main (0.26-0.31): the gain is ~5-10%,
within the load's noise on a single run; what is left is the memory fit and the pricing (seventh round).

Issue 35, ninth round (branch arrays35h, 2026-11-30): CPU seconds of one plan() from scratch (every kept
result cleared, the new ones too), main (379a7ce) and this branch in ONE process, alternating run by run, 9
runs a side (benchmarks/bench_ab.py, which this round adds): read the paired ratio (branch / main run by run);
a single median moves by 20-40% at these loads (other sessions' tests and benchmarks on the 2 cores). Left:
the final branch at a load of 4.6 to 5.7 (uptime before and after: 5.72 / 4.61; gpt-oss-120b and DeepSeek-V2
again with 15 runs a side at 4.5-4.7, as their 9-run ratios read 1.12 and 1.04); right: the branch before its
last two commits (ep_all_to_all's checked core, comm's import) at a load of 7.5 to 8 (uptime 7.47 / 7.98).
Plans unchanged: tests/reference/plans.npz (not re-frozen) and 21 whole searches (bench_planner's MoE and
dense cases, Mixtral with expert_tp and with a deadline and budget, Qwen3 FP8 on H100+B200, DeepSeek-V3 at 32K
with cp_comm="all_gather", Mixtral with overlap=0.5 and the for-loop optimizer, the other MoE models over the
catalogue, Qwen3-30B-A3B refused at 256) against main's frames with assert_frame_equal(check_exact=True) and
equal attrs: every column exactly equal.

    case (benchmarks/bench_planner.py)           load 4.6-5.7: median, ratio    load 7.5-8: median, ratio
    deepseek-v3, whole catalogue (1,920 seqs)      0.315 -> 0.268   0.87          0.338 -> 0.296   0.91
    mixtral-8x7b, whole catalogue (512)            0.243 -> 0.230   0.92          0.409 -> 0.386   0.92
    qwen3-30b-a3b, whole catalogue (64)            0.490 -> 0.385   0.80          0.521 -> 0.456   0.91
    qwen3-235b-a22b, whole catalogue (512)         0.306 -> 0.263   0.87          0.337 -> 0.307   0.92
    deepseek-v2, whole catalogue (512)             0.603 -> 0.615   0.91 (15)     0.758 -> 0.619   0.79
    gpt-oss-120b, whole catalogue (256)            0.539 -> 0.544   0.89 (15)     0.646 -> 0.622   0.93
    llama-4-scout, whole catalogue (512)           0.544 -> 0.455   0.88          0.541 -> 0.497   0.82
    deepseek-v3 at 15,360 sequences                0.333 -> 0.306   0.87          0.333 -> 0.320   0.88
    qwen3-30b-a3b on H100s, <= 1,024                                              0.404 -> 0.393   1.03
    qwen3-30b-a3b at 64K                                                          0.758 -> 0.690   0.87
    mixtral-8x7b at 32K                            0.354 -> 0.312   0.87          0.305 -> 0.312   0.92
    dense: llama-3.1-405b, whole catalogue         0.220 -> 0.208   0.95          0.295 -> 0.302   0.94
    dense: llama-3.1-405b at 128K, whole catalogue 0.589 -> 0.553   1.01          0.867 -> 0.740   0.89
    dense: llama-3.1-405b, 1 / 3 GPU types                                  0.192 / 0.182 -> 0.151 / 0.153
    dense: llama-3.1-405b at 128K, 1 / 3 GPU types                          0.384 / 0.410 -> 0.324 / 0.364
    dense: llama-3-70b, 4 GPU types                0.214 -> 0.141   0.88          0.197 -> 0.181   0.90
    dense: llama-3-8b, 9 GPU types                 0.258 -> 0.234   0.93          0.229 -> 0.233   1.01

The targets: NOT met. This round's goal was every MoE model of the catalogue over the whole GPU catalogue
under 0.2 s (margin under issue 35's 0.3 s): at these loads DeepSeek-V3 reads 0.27-0.30 s in its median
(0.24 best), Mixtral-8x7B 0.23-0.39 s, and the five models this round adds 0.26-0.62 s; DeepSeek-V2 (60
layers: 12 pipeline degrees, and 12 ep degrees of its 160 experts), gpt-oss-120b (49,837 plans), Llama 4
Scout and Qwen3-30B-A3B are over 0.3 s on every run. Every plan() timed stays under 1 s (the slowest, the
dense 405B at 128K over the catalogue: 0.55-0.74 s median, 0.59-0.87 s on main).
The gain is 5-20% (paired ratio 0.79-0.93 on the MoE searches, 0.77-1.01 on the dense ones; none slower
beyond the noise).

What changed: (1) plan_memory.fitting_plans stops weighing heavier recomputations on a GPU whose limit the
model states alone exceed (a candidate's total at a micro-batch of 0, plan_pricing._total_bytes of the same
coefficient table: what a micro-batch adds is bytes of activations, never negative, and floating-point
addition is monotone, so it is a floor under every recomputation's total; FLOOR_MARGIN 1e-9 covers rounding in
extrapolated coefficients): the selective and full rows fall from 3,634 to 2,077 candidates for Mixtral and
from 6,738 to 2,038 for DeepSeek-V3 (coefficient rows 263 -> 214 and 269 -> 152); (2) training_memory's
activations' side (no ZeRO stage, dp or ep in it) and model states' side (no micro-batch, recomputation or
sequence) are two helpers kept (lru) for the planner's private calls (_stages) only, the activations keyed by
the layout without dp, ZeRO, ep and offload (memory._act_layout): Mixtral's 348 calls hold 96 distinct
activations and 216 distinct layouts; public calls work everything out afresh, as before; (3) GPU, Node,
GroupLink and Parallel keep their hash once worked out (_compat.keep_hash, as Model does: a search hashes
them ~2,300 times in kept results' keys, 2-3 us each; the tuple is formed in _compat, so no module is
re-entered, test_layers); (4) plan_terms._group_columns ranks a column's values from a table of them when
the packed key would be sparse (ep and dp x cp made DeepSeek-V3's keys sparse: np.unique sorted 12k rows,
~3 -> ~1.3 ms a call); (5) moe_time.load_skew reads data/moe_load_skew.csv once per routing instead of once
per ep (nine reads a DeepSeek-V3 search), edge_params is kept per (model, tp, pp) (a walk of the model's
tensors per ep), _split builds its layout with kept_parallel, _pieces keeps heavy_stages per (model, pp), and
_candidates numbers its (cp, class) pairs with np.unique instead of a loop per candidate.

Left (pyinstrument, warm caches, this branch): DeepSeek-V3 over the catalogue is ~53% pricing (layer_terms
~19%: one comm.communication per (tp and cp links, tp, cp, micro, rc), ~10%; the expert all-to-alls ~17%,
489 ep_all_to_all calls of ~50 us, mostly argument checks and four Collective objects each; dp collectives
~8%) and ~39% memory fit (201 training_memory calls, whose misses of the states' side, 117 distinct layouts,
dominate); Mixtral ~41% / ~48%. DeepSeek-V2's search is ~62% memory fit: ZeRO-1 with a pipeline is not
A + B / ep (the foreach temporary split by stage), so each of its 12 pp x 10 ep degrees costs a call. The next
steps are array paths for all_to_all_s / collective_time_s over messages (one call per links and ep instead of
per token count) and for the tp and cp collectives of layer_terms (one communication per (tp, cp, micro, rc),
re-priced per link), and fewer state-side calls for ZeRO-1 with a pipeline.

The ninth round's "NOT met" is superseded: the later rounds (arrays35i onwards, benchmarks/bench_planner.py's
docstring, and the lead's run of 2026-12-01 00:40 UTC at a load of 0.1-0.4: 0.10-0.22 s CPU) brought every MoE
case under its target. Re-measured 2026-12-01 at 16:51 and 16:54 UTC (branch moe35x, base main 057d2ec; the
machine shared with other sessions at a load of 3.1 to 4.3 on its 2 cores, uptime before and after), this
script twice, CPU s of one plan() from scratch, best of 3, first run / second run:

    case                                          CPU s          target        plans
    deepseek-v3, whole catalogue                  0.06 / 0.07    <= 0.3: met   22,703
    deepseek-v3 at 15,360 sequences, <= 4,096     0.08 / 0.08    <= 1: met     34,662
    mixtral-8x7b, whole catalogue                 0.07 / 0.07    <= 0.3: met   43,567
    qwen3-30b-a3b, whole catalogue                0.09 / 0.09    <= 0.3: met   41,758
    qwen3-235b-a22b, whole catalogue              0.06 / 0.06    <= 0.3: met   17,219
    deepseek-v2, whole catalogue                  0.11 / 0.12    <= 0.3: met   51,698
    gpt-oss-120b, whole catalogue                 0.10 / 0.11    <= 0.3: met   49,837
    llama-4-scout, whole catalogue                0.10 / 0.11    <= 0.3: met   53,908
    qwen3-30b-a3b on H100s, <= 1,024              0.05 / 0.05    <= 1: met      5,593
    qwen3-30b-a3b at 64K on H100s                 0.07 / 0.07    <= 1: met     15,665
    mixtral-8x7b at 32K on H100s                  0.04 / 0.04    <= 1: met      4,563

cost_by_gpu("deepseek-v3") over the catalogue 0.37 / 0.36 s CPU. The widgets' compute per move: chapter 17's
new settings (a whole plan()) 46-101 ms, the slowest Qwen3-30B-A3B at 64K (100-101 ms) and at 32K (91 ms);
a move that keeps the memory coefficients 23-65 ms; chapter 18's 1-2 ms. The targets (the whole catalogue
<= 0.3 s for a mixture of experts, any plan() <= 1 s): met, with about 2.5x to spare on the slowest case.

With plan()'s MTP module and token dropping (issue 35, merge b4695ec: ``mtp_depth=``, ``capacity_factor=``;
a search with either skips the arrays prefetch and calls plan_moe.option_pieces once per entry). Measured
2026-12-01 at 18:39 and 18:40 UTC (branch cli39, base main b4695ec, load 2.3 to 4.1 on the 2 cores), this
script's cpu() (best of 3 from scratch) on bench_planner's cases, one process a run, first run / second run;
the figures of the mtpplan merge (b4695ec) agree within 0.02 s:

    case                                          defaults       mtp_depth=1    capacity_factor=1.25
    deepseek-v3, whole catalogue                  0.06 / 0.07    0.09 / 0.10    0.06 / 0.07
    deepseek-v3 at 15,360 sequences, <= 4,096     0.08 / 0.08    0.10 / 0.11    0.08 / 0.09
    mixtral-8x7b, whole catalogue                 0.08 / 0.09    0.12 / 0.15    0.08 / 0.09
    qwen3-30b-a3b at 64K on H100s                 0.07 / 0.08    0.21 / 0.22    0.09 / 0.10
    mixtral-8x7b at 32K on H100s                  0.04 / 0.04    0.11 / 0.12    0.05 / 0.05

cost_by_gpu("deepseek-v3") over the catalogue: 0.38 / 0.41 s CPU with the defaults, 0.49 / 0.52 s with
``mtp_depth=1``. Every case is under its target (the whole catalogue <= 0.3 s, any plan() <= 1 s); MTP costs
up to 3x on Qwen3-30B-A3B at 64K (0.07 -> 0.21 s); the step to take if a widget ever offers the options is
option_pieces on arrays.

Issue 35, fast10 (2026-12-01, base main dc37b66): chapter 10's chart (``--ch10``). Its 7 GPU counts each asked
stages.moe_default_layout, a plan() per count and, for a count no plan fills exactly, layouts.min_gpus over
every count (~35 ms for DeepSeek-V3 on the H100). Now one plan() per global batch answers every count that
shares it (searched up to gb, not up to n: its rows on n GPUs are those of the search up to n, bit for bit,
as plans_within relies on; at 8K tokens the counts 1-512 share gb = 512, 4 searches instead of 7), its
fastest plan per count is read once (stages._kept_fastest), min_gpus is searched up to the count asked
(only a fewest-GPU layout of at most n GPUs can divide n: DeepSeek-V3's three counts below its 244 GPUs
cost ~17 ms instead of ~35), min_gpus builds each MoE layout it weighs once, and plan() keeps its layout
list (planner._kept_layouts) and builds its frame once from arrays. Every answer is main's: 1,920
moe_default_layout calls (10 MoE models x 4 GPUs x 3 sequence lengths x 16 counts) equal in sorted,
shuffled and reversed order; plan() frames exactly equal on 29 searches (441,964 rows); freeze_plans
unchanged; the chart's PNG bytes equal on 6 settings. CPU ms, one move per process after a dense chart,
processes alternating main (``PYTHONPATH`` to a ``git archive`` of dc37b66) and branch, 21:02-21:04 UTC at a
load of 5 to 10 on the 2 shared cores (uptime before and after):

    move (1T tokens, 1,024 GPUs marked)           main              branch
    deepseek-v3 on H100 SXM at 8,192 (7 runs)     152-252 (188)     108-184 (117)
    deepseek-v3 on H100 SXM at 8,192 (--ch10)     251 151 152       113 118 125
    deepseek-v3 on H100 SXM at 2,048              160 110 130        85  77  78
    mixtral-8x7b on H100 SXM at 8,192             215 246 175       128  93 107
    qwen3-30b-a3b on H100 SXM at 4,096            311 390 276       204 180 178
    deepseek-v2 on A100 80GB at 8,192             610 743 548       277 279 267

Of the branch's DeepSeek-V3 move (~110-120 ms at that load): 4 searches ~60-70 (the first, with the model's
memory coefficients, ~25; in plan_tables.table_totals and moe_prefetch), min_gpus ~17-20, the chart and PNG
~25-30 (charts/, not touched). The bar (100 ms at a load of 2-3) could not be read at this load: main's move
read 118-155 ms at 2-3 (notes/w100.md) and the branch takes 0.6-0.65 of main's paired. DeepSeek-V2 on the
A100 is still ~270 ms (its first search ~110 ms, min_gpus up to 64 GPUs ~80 ms: 60 layers, 160 experts).

Then (f4e3bc5) min_gpus keeps an MoE layout's check_layout verdict per (tp, zero, ep) and builds its layouts
through kept_parallel: DeepSeek-V2 on the A100, min_gpus up to 1, 8 and 64 GPUs, 246 ms (main) -> 81 ms, the
same answers. --ch10 again, 3 pairs, 21:10-21:11 UTC, load 10 to 12, CPU ms main -> branch: DeepSeek-V3 at
8,192 180 141 143 -> 113 107 112, at 2,048 162 98 121 -> 72 88 91, Mixtral 183 152 163 -> 106 108 109,
Qwen3-30B-A3B 265 292 279 -> 191 169 208, DeepSeek-V2 on the A100 462 507 487 -> 223 232 225.

Final code (4b35fe9: _Fastest keeps each count's fastest row, not the table), the DeepSeek-V3 move (8,192
tokens, H100 SXM, one move per process after a dense chart), 7 pairs alternating, 21:18:51-21:19:17 UTC at a
load of 3.1 to 3.3, CPU ms: main 161 148 158 180 160 159 149 (median 159) -> branch 113 116 106 93 99 105 104
(median 105); wall 172-354 -> 94-214. At a load of 3 the branch's median move is 105 ms, not yet under 100:
about 60 ms of it is the 4 searches, 15 ms min_gpus, 25-30 ms the chart and its PNG (charts/).

Issue 35/38, fast10b (2026-12-01, base main 4839f4d): the same chart, two changes. (1) The search of each global
batch weighs and prices only the GPU counts that can ask for it (``plan(gpu_counts=)``; a count d asks for gb
only if d divides gb and d x ceil(4M tokens / (seq d)) = gb, ``stages._sharing``): the counts 4,096 and 32,768
are searched alone instead of with every count below them (Qwen3-30B-A3B at 4K: 685 rows priced instead of
8,453 and 13,204). (2) ``min_gpus`` weighs a mixture of experts' layouts of one (tp, pp), every ZeRO stage and
ep, in one table (``fewest_arrays``, on ``moe_prefetch._columns``' EpLayouts arrays) and builds a layout only
where the solved dp is within the limit: DeepSeek-V2 on the A100 up to 1, 8 and 64 GPUs makes no
training_memory call at all (main: 700). Every answer is main's: 1,920 moe_default_layout calls (10 MoE models
x H100/A100 80GB/H200/B200 x 2K/4K/8K x 16 counts 1-32,768), equal in sorted, shuffled and reversed order, each
order a fresh process; 479 min_gpus answers (8 MoE models, 2 GPUs, 2 lengths, 5 limits, 3 recipes; Plans and
messages) equal; tests/test_plan_gpu_counts.py and tests/test_fewest_arrays.py. CPU ms,
``benchmarks/bench_compare.py "ch10 MODEL GPU SEQ"`` (best of 3 from scratch, the dense chart before each, not
timed), main (``git archive`` of 4839f4d) and branch alternating, 3 pairs, 23:26-23:28 UTC at a load of 6.9 to
8.4 on the 2 shared cores:

    move (1T tokens, 1,024 GPUs marked)           main              branch
    deepseek-v3 on H100 SXM at 8,192              119 102 102        85  92  75
    deepseek-v3 on H100 SXM at 2,048              104 149  93        99  72  69
    mixtral-8x7b on H100 SXM at 8,192             114 119 128       112 108 120
    qwen3-30b-a3b on H100 SXM at 4,096            205 191 196       139 118 124
    deepseek-v2 on A100 80GB at 8,192             270 271 356       181 162 123

Left: each search still costs ~10-15 ms however few its rows (Mixtral's searches weigh few rows either way, so
it did not move): about 40% pricing (plan_pricing._price), 25% the memory fit's per-layout loop and table, the
rest plan()'s frames; min_gpus' EpLayouts state sides (~25 ms for DeepSeek-V2 up to 64 GPUs); the chart and
its PNG (~25 ms) and the seven training_time calls (~8 ms).

Issue 35, audit35 (2026-12-04, main 72ccaa7d, nothing changed in the library): the catalogue's three small
MoEs (Granite 3.0 1B-A400M and 3B-A800M, OLMoE-1B-7B) added to MOE and to bench_planner's cases, at 64
sequences (at 128-512 their searches over the GPU catalogue hold more than plan_space.MAX_MOE_PLANS = 60,000
plans and are refused, in 0.03-0.06 s). CPU s from scratch, best of 3, two runs of this script and one of
bench_planner.py, 10:24-10:31 UTC at a load of 1.0 to 2.1 on the 2 cores:

    case (whole GPU catalogue unless said)       CPU s          plans
    deepseek-v3                                   0.12-0.15     22,703
    mixtral-8x7b                                  0.15-0.21     43,567
    qwen3-30b-a3b                                 0.16-0.19     41,758
    qwen3-235b-a22b                               0.10-0.13     17,219
    deepseek-v2                                   0.20-0.27     51,698
    gpt-oss-120b                                  0.16-0.23     49,837
    llama-4-scout                                 0.16-0.22     53,908
    granite-3.0-1b-a400m (new case)               0.17          57,822
    granite-3.0-3b-a800m (new case)               0.11          36,205
    olmoe-1b-7b (new case)                        0.15          42,821
    deepseek-v3 at 15,360, <= 4,096 GPUs          0.14-0.21     34,662
    qwen3-30b-a3b at 64K on H100s                 0.11-0.17     15,665
    cost_by_gpu("deepseek-v3")                    0.31-0.49

Every case meets its target (0.3 s over the catalogue, 1 s otherwise). Chapter 17's new-setting plan() for
Qwen3-30B-A3B (32K, 64K) was 194-208 ms CPU before drawing; chapter 18's moves 2-5 ms of compute.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_planner  # noqa: E402

MOE = ("deepseek-v3", "mixtral-8x7b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v2", "gpt-oss-120b",
       "llama-4-scout", "granite-3.0-1b-a400m", "granite-3.0-3b-a800m", "olmoe-1b-7b")

#: Chapter 17's widget (long_context_widget) moves: the plan() each new setting runs (H100 SXM, 16M tokens per
#: batch, at most 16,384 GPUs, the ring), without drawing.
CH17_MOVES = (("llama-3.1-405b", 131072), ("llama-3.1-405b", 65536), ("mixtral-8x7b", 131072),
              ("mixtral-8x7b", 32768), ("qwen3-30b-a3b", 32768), ("qwen3-30b-a3b", 65536))

#: Chapter 18's widget (moe_layout_widget) moves: the memory and step of one layout (render_moe_layout's
#: training_memory and step_time), without drawing.
CH18_MOVES = (("mixtral-8x7b", dict(ep=8, tp=1, pp=1, dp=32, zero=1)),
              ("mixtral-8x7b", dict(ep=8, tp=1, pp=1, dp=8, zero=1)),
              ("mixtral-8x7b", dict(ep=4, tp=1, pp=1, dp=8, zero=1)),
              ("deepseek-v3", dict(ep=64, tp=1, pp=16, dp=64, zero=1)))


def clear() -> None:
    """Every kept result a search, a layout or cost_by_gpu leaves (so each figure is from scratch)."""
    from llmsizing import time_cost

    from llmsizing import stages

    for kept in bench_planner.kept():
        kept.cache_clear()
    time_cost._kept_moe_layout.cache_clear()
    for name in ("_kept_fewest", "_kept_fastest"):           # (absent before issue 38 / fast10)
        if hasattr(stages, name):
            getattr(stages, name).cache_clear()


def cpu(f) -> float:
    """CPU seconds of ``f()`` from scratch, the best of 3."""
    best = []
    for _ in range(3):
        clear()
        c0 = time.process_time()
        f()
        best.append(time.process_time() - c0)
    return min(best)


def widgets_and_cost() -> None:
    """cost_by_gpu("deepseek-v3") and the chapter 17 and 18 widgets' compute per move, CPU s, best of 3."""
    from llmsizing import catalog
    from llmsizing.layouts import step_time
    from llmsizing.memory import training_memory
    from llmsizing.parallel import Parallel
    from llmsizing.planner import plan
    from llmsizing.time_cost import cost_by_gpu
    from llmsizing.widgets.long_context import LONG_CONTEXT_TOKENS

    print(f"{'cost_by_gpu(deepseek-v3), whole catalogue':50s} "
          f"{cpu(lambda: cost_by_gpu('deepseek-v3', tokens=14.8e12, seq=4096)):6.2f} s CPU")
    for model, seq in CH17_MOVES:
        t = cpu(lambda: plan(model, tokens=LONG_CONTEXT_TOKENS, gpus=("H100 SXM",), seq=seq,
                             global_batch=max(2**24 // seq, 1), max_gpus=16384))
        print(f"{f'ch17 move: {model} at {seq:,}':50s} {t * 1e3:6.0f} ms CPU")
    for model, seq in (("mixtral-8x7b", 32768), ("qwen3-30b-a3b", 65536)):
        gb = 2**24 // seq
        for label, kw in (("GPU limit 16,384 -> 4,096", dict(global_batch=gb, max_gpus=4096)),
                          ("tokens/batch 16M -> 8M", dict(global_batch=gb // 2, max_gpus=16384)),
                          ("GPU types + B200",
                           dict(global_batch=gb, max_gpus=16384, gpus=("H100 SXM", "B200")))):
            best = []
            for _ in range(3):                 # after the setting the move leaves (what the widget had)
                clear()
                plan(model, tokens=LONG_CONTEXT_TOKENS, gpus=("H100 SXM",), seq=seq, global_batch=gb,
                     max_gpus=16384)
                c0 = time.process_time()
                try:
                    plan(model, tokens=LONG_CONTEXT_TOKENS, seq=seq, **{"gpus": ("H100 SXM",), **kw})
                except ValueError:             # (Qwen3 at 64K on two GPU types: more plans than it prices)
                    pass
                best.append(time.process_time() - c0)
            print(f"{f'ch17 move from {model} at {seq:,}: {label}':50s} {min(best) * 1e3:6.0f} ms CPU")
    for model, lay in CH18_MOVES:
        m, g = catalog.get_model(model), catalog.get_gpu("H100 SXM")
        par = Parallel(sp=lay["tp"] > 1, **lay)
        kw = dict(batch=1, seq=4096, grad_accum=8, recompute="full", precision="bf16-mixed")

        def move():
            training_memory(m, parallel=par, **kw)
            step_time(m, g, par, ep_overlap=0.0, max_nodes="model", **kw)

        print(f"{f'ch18 move: {model} {lay}':50s} {cpu(move) * 1e3:6.0f} ms CPU")


#: Chapter 10's widget (training_time_widget) moves of the model to a mixture of experts, from its default
#: (Llama 3 70B, 1T tokens, H100 SXM, 8,192 tokens, 1,024 GPUs marked): render_training_time asks
#: training_time at 7 GPU counts, each a stages.moe_default_layout.
CH10_MOVES = (("deepseek-v3", "H100 SXM", 8192), ("deepseek-v3", "H100 SXM", 2048),
              ("mixtral-8x7b", "H100 SXM", 8192), ("qwen3-30b-a3b", "H100 SXM", 4096),
              ("deepseek-v2", "A100 80GB", 8192))


def ch10_moves() -> None:
    """Chapter 10's chart (charts.render_training_time, with its PNG) at a move to a mixture of experts,
    CPU and wall ms, each in this process after one dense chart (the widget's first answer), the first move
    to each model (its searches, memory coefficients and fewest-GPU layout not kept yet). One process, one
    pass: run it a few times, alternating with another commit (``PYTHONPATH=<archive>/src``), to compare."""
    import matplotlib

    matplotlib.use("Agg")
    import pandas  # noqa: F401  (a chapter kernel has it: plan() imports it on its first call)

    from llmsizing.charts import render_training_time

    render_training_time("llama-3-70b", tokens=1e12, gpu="H100 SXM", seq=8192, n_gpus=1024)
    for model, gpu, seq in CH10_MOVES:
        c0, w0 = time.process_time(), time.perf_counter()
        render_training_time(model, tokens=1e12, gpu=gpu, seq=seq, n_gpus=1024)
        cpu_ms, wall_ms = (time.process_time() - c0) * 1e3, (time.perf_counter() - w0) * 1e3
        print(f"{f'ch10 move: {model} on {gpu} at {seq:,}':50s} {cpu_ms:6.0f} ms CPU {wall_ms:6.0f} ms wall")


#: plan(schedule="dualpipe") (issue 35, dual48; budget <= 1 s each): DeepSeek-V3 on H800s as DeepSeek ran it
#: (its batch, its recipe, at most its 2,048 GPUs) and Qwen3-30B-A3B at 4K on H100s.
DUALPIPE_CASES = (
    ("deepseek-v3 on H800s, 15,360 x 4K, <= 2,048, its recipe", "deepseek-v3",
     dict(tokens=14.8e12, gpus=("H800",), seq=4096, global_batch=15360, max_gpus=2048,
          precision="fp8-deepseek", comm_sms=20, mtp_depth=1)),
    ("qwen3-30b-a3b on H100s at 4K, <= 1,024", "qwen3-30b-a3b",
     dict(tokens=1e12, gpus=("H100 SXM",), seq=4096, global_batch=512, max_gpus=1024)),
)


def dualpipe() -> None:
    """CPU s of each DUALPIPE_CASES search, best of 3: from scratch (DualPipe's kept programs cleared too),
    then with the programs kept (a second search: another GPU type, recipe or model on the same (pp, m)), and
    the same search under 1F1B from scratch, with the load."""
    import os

    from llmsizing import parallel, plan_dualpipe
    from llmsizing.planner import plan

    print(f"load {os.getloadavg()[0]:.2f}")
    for label, model, kw in DUALPIPE_CASES:
        def scratch(**more):
            best = []
            for _ in range(3):
                clear()
                plan_dualpipe._program.cache_clear()
                parallel.uneven_split.cache_clear()
                c0 = time.process_time()
                df = plan(model, **kw, **more)
                best.append(time.process_time() - c0)
            return min(best), len(df)

        t_d, n_d = scratch(schedule="dualpipe")
        kept = []
        for _ in range(3):
            clear()
            c0 = time.process_time()
            plan(model, **kw, schedule="dualpipe")
            kept.append(time.process_time() - c0)
        t_1, n_1 = scratch()
        print(f"{label:56s} dualpipe {t_d:5.2f} s ({n_d:,} plans), programs kept {min(kept):5.2f} s; "
              f"1f1b {t_1:5.2f} s ({n_1:,} plans)")


#: min_gpus(schedule="dualpipe") (issue 35, dmin49): DUALPIPE_CASES' models, GPUs and recipes, at the
#: micro-batches that allow every pp (fewest_gpus.dualpipe_fewest_accum: 32 and 96).
FEWEST_DUALPIPE_CASES = (
    ("min_gpus deepseek-v3 on H800s, 4K, its recipe", "deepseek-v3",
     dict(gpu="H800", batch=1, seq=4096, grad_accum=32, precision="fp8-deepseek", comm_sms=20, mtp_depth=1)),
    ("min_gpus qwen3-30b-a3b on H100s at 4K", "qwen3-30b-a3b",
     dict(gpu="H100 SXM", batch=1, seq=4096, grad_accum=96)),
)


def fewest_dualpipe() -> None:
    """CPU s of min_gpus(schedule="dualpipe") on FEWEST_DUALPIPE_CASES and of cost_by_gpu for DeepSeek-V3 on
    the whole catalogue, each from scratch, best of 3, beside the same call under 1F1B, with the load."""
    import os

    from llmsizing.fewest_gpus import min_gpus
    from llmsizing.time_cost import cost_by_gpu

    print(f"load {os.getloadavg()[0]:.2f}")
    for label, model, kw in FEWEST_DUALPIPE_CASES:
        got = {s: min_gpus(model, **kw, schedule=s).gpus for s in ("1f1b", "dualpipe")}
        t = {s: cpu(lambda s=s: min_gpus(model, **kw, schedule=s)) for s in ("1f1b", "dualpipe")}
        print(f"{label:56s} dualpipe {t['dualpipe']:5.2f} s ({got['dualpipe']:,} GPUs); "
              f"1f1b {t['1f1b']:5.2f} s ({got['1f1b']:,} GPUs)")
    t = {s: cpu(lambda s=s: cost_by_gpu("deepseek-v3", tokens=14.8e12, seq=4096, schedule=s))
         for s in ("1f1b", "dualpipe")}
    print(f"{'cost_by_gpu deepseek-v3, every GPU type, 4K':56s} dualpipe {t['dualpipe']:5.2f} s; "
          f"1f1b {t['1f1b']:5.2f} s")


if __name__ == "__main__":
    if "--dualpipe" in sys.argv:
        dualpipe()
        sys.exit()
    if "--fewest-dualpipe" in sys.argv:
        fewest_dualpipe()
        sys.exit()
    bench_planner.CASES[:] = [c for c in bench_planner.CASES if c[1] in MOE]
    if "--accounted" in sys.argv:      # (moeapi42) the same cases with Megatron's accounted split searched too
        bench_planner.CASES[:] = [(label + ", accounted", model, {**kw, "accounted_split": True})
                                  for label, model, kw in bench_planner.CASES]
        bench_planner.main()
        sys.exit()
    if "--ch10" in sys.argv:
        ch10_moves()
        sys.exit()
    if "--widgets" not in sys.argv:
        bench_planner.main()
    widgets_and_cost()
