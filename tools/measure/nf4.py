"""Sub-command ``nf4``: the bytes bitsandbytes' NF4 storage takes for one linear layer's weight (CPU).

It writes data/nf4_storage.csv: what bitsandbytes stores for one linear layer's weight in
4-bit NF4 (QLoRA, Dettmers et al. 2023), one row per (shape, double quantisation on/off). The weight is a
random bf16 (out, in) matrix made a ``bnb.nn.Params4bit`` and moved to the CPU, which quantises it (the path
transformers' BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4") takes). Columns::

  layer, out_features, in_features, n_params   the shape (catalogue projections, a small one, a ragged one)
  source_dtype, quant_type, blocksize, double_quant, nested_blocksize   bf16 in; nf4; 64; compress_statistics
  weight_bytes              the packed uint8 weight (two 4-bit codes per byte)
  n_blocks, absmax_dtype, absmax_bytes   one absmax per block of 64 weights (uint8 if double-quantised,
                            else fp32)
  n_nested_blocks, nested_absmax_bytes, nested_offset_bytes   double quantisation: an fp32 absmax per 256
                            first-level constants, plus an fp32 offset (their mean, subtracted before quantising)
  quant_map_bytes, nested_quant_map_bytes   the 16-entry NF4 code and the 256-entry 8-bit code (fp32 tables)
  total_bytes               everything above; bits_per_param = 8 * total / n_params;
  bits_per_param_no_maps    the same without the two code tables (which a whole model could share)
  bf16_bytes                2 * n_params, for comparison; dequant_rel_err: mean |W - dequant(W)| / mean |W|
  bitsandbytes_version, torch_version, measured_on
"""

from __future__ import annotations

import itertools

import torch

from .core import date_today, dtype_name, write_csv

NF4_SHAPES = [("llama-2-7b q_proj", 4096, 4096), ("llama-2-7b gate_proj", 11008, 4096),
              ("llama-2-7b down_proj", 4096, 11008), ("llama-3-8b k_proj", 1024, 4096),
              ("llama-3-8b gate_proj", 14336, 4096), ("lora-llama-256 gate_proj", 688, 256),
              ("ragged", 1000, 333)]


def cmd_nf4(args):
    """Sub-command ``nf4``: bytes bitsandbytes' NF4 storage takes for one linear layer's weight, on the CPU."""
    import bitsandbytes as bnb
    import bitsandbytes.functional as bnbF
    today = date_today()
    rows = []
    shapes = NF4_SHAPES[-2:] if args.quick else NF4_SHAPES
    for (layer, out_f, in_f), dq in itertools.product(shapes, (True, False)):
        torch.manual_seed(0)
        w = (torch.randn(out_f, in_f) * 0.02).to(torch.bfloat16)
        p = bnb.nn.Params4bit(w.clone(), requires_grad=False, quant_type="nf4", blocksize=64,
                              compress_statistics=dq).to("cpu")
        qs = p.quant_state
        if not getattr(p, "bnb_quantized", False) or qs is None:
            raise SystemExit("bitsandbytes did not quantise on the CPU")
        nb = lambda t: t.untyped_storage().nbytes() if torch.is_tensor(t) else 0  # noqa: E731
        s2 = qs.state2 if qs.nested else None
        row = {"layer": layer, "out_features": out_f, "in_features": in_f, "n_params": out_f * in_f,
               "source_dtype": dtype_name(w.dtype), "quant_type": qs.quant_type, "blocksize": qs.blocksize,
               "double_quant": bool(qs.nested), "nested_blocksize": s2.blocksize if s2 else "",
               "weight_bytes": nb(p.data), "n_blocks": qs.absmax.numel(), "absmax_dtype": dtype_name(qs.absmax.dtype),
               "absmax_bytes": nb(qs.absmax), "n_nested_blocks": s2.absmax.numel() if s2 else 0,
               "nested_absmax_bytes": nb(s2.absmax) if s2 else 0,
               "nested_offset_bytes": nb(qs.offset) if s2 else 0,
               "quant_map_bytes": nb(qs.code), "nested_quant_map_bytes": nb(s2.code) if s2 else 0}
        row["total_bytes"] = sum(row[k] for k in ("weight_bytes", "absmax_bytes", "nested_absmax_bytes",
                                                  "nested_offset_bytes", "quant_map_bytes",
                                                  "nested_quant_map_bytes"))
        row["bits_per_param"] = round(8 * row["total_bytes"] / row["n_params"], 5)
        maps = row["quant_map_bytes"] + row["nested_quant_map_bytes"]
        row["bits_per_param_no_maps"] = round(8 * (row["total_bytes"] - maps) / row["n_params"], 5)
        row["bf16_bytes"] = 2 * row["n_params"]
        wd = bnbF.dequantize_4bit(p.data, qs).float()
        row["dequant_rel_err"] = round(((wd - w.float()).abs().mean() / w.float().abs().mean()).item(), 4)
        row.update(bitsandbytes_version=bnb.__version__, torch_version=torch.__version__, measured_on=today)
        rows.append(row)
        print(f"{layer:26s} {out_f:5d}x{in_f:5d} dq={dq!s:5s} total={row['total_bytes']:>11,} B "
              f"({row['bits_per_param']:.4f} bits/param) err={row['dequant_rel_err']}", flush=True)
    write_csv(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")
