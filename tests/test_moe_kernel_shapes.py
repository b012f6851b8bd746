"""Issue 35 (smallmoe40): the small-MoE runs' own MoE kernels (ScatterMoE for Granite 3.0, MegaBlocks for
JetMoE-8B) at the runs' own layer shapes, against the library's price of the same layer.

PRE-REGISTERED (Dec 4 2026, written and committed before any range was looked at):
- Evidence: published throughput of whole MoE layers or expert GEMMs (ScatterMoE, Tan et al. 2024,
  arXiv:2403.08245; MegaBlocks, Gale et al. 2022, arXiv:2211.15841; SonicMoE, Guo et al. 2025, arXiv:2512.14080,
  Fig. 14, already in data/moe_layer_kernels.csv), each with shape, GPU, dtype, source and as-of, compared with
  llmsizing.moe_evidence.moe_layer_tflops at the same shape. NVIDIA NeMo / Megatron-Bridge tables stay out.
- "Slower than priced" means: at a shape near a run's (same expert width, hidden within 0.5-2x of the run's,
  same GPU generation), the measured TFLOP/s plus its reading error (+10 TFLOP/s for a bar read off a figure)
  is below the library's price, in the forward or the backward.
- If so, and only then, I adopt: a column `moe_kernel` in data/moe_published_runs.csv (the stack's MoE kernel as
  its source names it) and a per-kernel table in data/ of measured/priced at the measured shapes; the routed
  experts' GEMM seconds of a run are divided by that ratio (the nearest measured shape, no fit, never > 1 as a
  speed-up), for every row whose kernel has a measured row, never by a model's name. Then calibrate.py (+ --check)
  and freeze_plans.py are run and every area is reported before -> after; no re-fit on a miss, no row dropped.
- If the measured layers run at or above the price at the runs' shapes, nothing is priced: the data and a test
  that holds the library against them are committed, and the gap is said to lie elsewhere.
"""
