"""One notation for the whole book (issue 26): the retired uses of a symbol do not come back.

The notation table of the introduction gives every symbol one meaning. Before issue 26 five symbols had two or
three: $N$ was also a ring's size (and a count of recomputed layers), $d$ also the data-parallel degree (and a
discount), $B$ a batch (it is bytes), $p$ a price (it is the pipeline degree), and $W$ a bandwidth and a
weight's bytes as well as a weight matrix. This test reads the maths of every markdown cell of every notebook
and fails on those uses, each found by its shape (``N_d``, ``(N-1)/N``, ``t \\cdot p \\cdot d``, a bare ``B``)
or by the words next to it ("GPUs", "ring", "price", "bandwidth"). The rules are tested on sentences that the
book used to contain, so that they can fail.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))

MATH = re.compile(r"\$\$(?P<d>.+?)\$\$|(?<![\\$])\$(?P<i>(?:[^$\n]|\n(?![ \t]*\n))+?)(?<!\\)\$", re.S)


def _strip(md: str) -> str:
    """Markdown without code: fenced code blocks (not directives) and inline code."""
    md = re.sub(r"^(```+)(?![`{])[^\n]*\n.*?^\1[ \t]*$", "", md, flags=re.M | re.S)
    return re.sub(r"``[^`]+``|`[^`\n]+`", "``", md)


def _symbols(tex: str) -> str:
    """The maths with upright text (``\\text{...}``, ``\\mathrm{...}``, ``\\operatorname{...}``) blanked out and
    subscripts kept (``B_\\text{kv}`` stays ``B_``), so a bare letter is a letter with nothing attached."""
    return re.sub(r"\\(?:text|mathrm|operatorname|textrm|mbox)\{[^{}]*\}", "□", tex)


def bare(letter: str, tex: str) -> bool:
    """``letter`` stands alone in ``tex`` (not part of a word or command, and without a subscript)."""
    return re.search(rf"(?<![A-Za-z\\]){letter}(?![A-Za-z_])", _symbols(tex)) is not None


WORDS = {
    "gpus": re.compile(r"\bGPUs?\b|\branks?\b|\bring\b|\bnodes?\b|\breplicas?\b|\bdata[- ]parallel", re.I),
    "layers": re.compile(r"\brecompute|\blayers\b", re.I),
    "price": re.compile(r"\bprices?\b|\bUSD\b|GPU-hour|\bdollars?\b|\\\$|\bdiscount", re.I),
    "bandwidth": re.compile(r"bandwidth|bytes/s|GB/s|TB/s", re.I),
    "batch": re.compile(r"\bbatch", re.I),
}


def problems(md: str) -> list[str]:
    """The retired uses in one markdown cell, as readable strings."""
    out = []
    text = _strip(md)
    for m in MATH.finditer(text):
        tex = m["d"] if m["d"] is not None else m["i"]
        sym = _symbols(tex)
        before = text[max(0, m.start() - 90):m.start()]
        before = re.split(r"\n\s*\n|\n\|", before)[-1]          # the same paragraph or table row
        near = before + tex + text[m.end():m.end() + 20]
        say = lambda why: out.append(f"{why}: ${tex.strip()[:80]}$  (…{before[-50:]!r})")  # noqa: E731

        # N: the parameter count only
        if re.search(r"N_d\b|N_\{d\}|\(N\s*-\s*1\)|N\s*-\s*1\b|(?<!D)/\s*N\b(?!\s*\^)|\\log_2\s*N\b", sym):
            say("N as a GPU count (ring size / data-parallel degree): use n, n_dp")
        elif re.fullmatch(r"\s*N\s*(=.*)?", sym, re.S) and (
                re.match(r"\s*(\w+\s+)?(GPUs?|ranks?|nodes?|layers?)\b", text[m.end():m.end() + 30])
                or re.search(r"\b(ring|ranks|GPUs|recompute\w*|least|fewest)\b[^.]{0,20}$", before)):
            say("N next to GPUs/ranks/layers: N is the parameter count only")
        if "\\Psi" in tex:
            say("Ψ for the parameter count: the book writes N")

        # d: the head dimension only
        if re.search(r"(?<![A-Za-z\\])d_\{?(?:\\text\{)?(?:in|out|0)\b", tex):
            say("d_in/d_out/d_0 are not head dimensions: use h_in/h_out, or words")
        elif bare("d", tex) and (re.search(r"1\s*-\s*d\b|p\s*\\cdot\s*d\b|m\s*\\?,?\s*d\b|\bm\s+d\b|\bb\s*\\,\s*m\s*\\,\s*d", sym)
                                 or re.search(r"data-parallel|replicas|discount", before[-80:], re.I)):
            say("d as a data-parallel degree or a discount: d is the head dimension only (n_dp, δ)")
        if re.search(r"(?<![_{])\\text\{(?:dp|pp|tp|cp|ep)\}(?![^{}]*\\\})", tex) and not re.search(
                r"\\in\b.*?\\\{", tex):
            say("a parallel degree written \\text{dp}: use n_dp, p, t, n_cp, n_ep")

        # B: bytes only (always with a subscript), never a batch or a bandwidth
        if bare("B", tex):
            say("bare B: B_x is bytes per element; a batch is b, a bandwidth BW")

        # p: the pipeline degree only
        if re.search(r"(?<![A-Za-z\\])p_(?:\\text\{eff\}|\{?eff|A|B)\b|1\s*-\s*p\b", sym):
            say("p as a price or a probability: p is the pipeline degree only (c_h for a price)")
        elif bare("p", tex) and WORDS["price"].search(near):
            say("p next to a price: the price per GPU-hour is c_h")

        # W: a weight matrix only
        if bare("W", tex) and (re.search(r"/\s*W\b|W\s*/|I\s*\\cdot\s*W", sym) or WORDS["bandwidth"].search(before[-80:])):
            say("W as a bandwidth or a weight's bytes: W is a weight matrix only (BW for a bandwidth)")
    return out


def markdown_cells():
    for path in NOTEBOOKS:
        for i, c in enumerate(nbformat.read(path, as_version=4).cells):
            if c.cell_type == "markdown":
                yield path.name, i, c.source


# sentences the book contained before issue 26, and what the rules must say about them
RETIRED = [
    "each GPU ends with one fully summed piece and has sent $(N-1)/N \\cdot S$ bytes",
    "split the model states over the $N_d$ GPUs of the data-parallel group",
    "NCCL's tree all-reduce takes $2\\log_2 N$ steps instead of the ring's $2(N-1)$",
    "The fewest recomputed layers that fit is $N = $ 4",
    "reruns the first $N$ layers of every model chunk",
    "| 1 | optimizer states | $2\\Psi + 2\\Psi + K\\Psi/N_d$ |",
    "times the $d$ data-parallel replicas, **are** the global batch, $B = m\\,b\\,d$.",
    "the smallest $t \\cdot p \\cdot d$ whose layout fits",
    "One *used* GPU-hour then costs $$p_\\text{eff} = \\frac{p\\,(1-d)}{u},$$",
    "for a plan on $n$ GPUs with price $p$ per GPU-hour",
    "filled with $0$ or $1/(1-p)$",
    "a batch of $B$ tokens",
    "the expected count is $128\\,(1 - (15/16)^B)$",
    "A GPU with peak $P$ FLOP/s and memory bandwidth $W$ bytes/s can do at most $\\min(P,\\, I \\cdot W)$",
    "for DDP about $\\tfrac{2}{3}\\,P\\,\\text{MFU}/W$ tokens",
    "with $A$ of shape $r \\times d_\\text{in}$",
    "the compute per GPU per step shrinks in proportion to $1/\\text{dp}$",
    "reserved at $p(1-d)/u$",
    "prices a collective of $S$ bytes over $n$ ranks as $t = \\text{steps}(n)\\,\\alpha + f(n)\\,S / B$",
]
ALLOWED = [
    "the cost of a training step is about $6N$ FLOPs per token",
    "split the model states over the data-parallel GPUs in three stages. With $N$ parameters",
    "shared terms for model size $N$, sequence length $s$",
    "$N_\\text{total} = N_\\text{rest} + L_\\text{MoE}\\,E\\,m h f_e$",
    "a ring of $n$ GPUs sends $2\\frac{n-1}{n}S$ bytes",
    "ZeRO-3 divides by $n_\\text{dp}$, the data-parallel degree",
    "$b_\\text{global} = m\\,b\\,n_\\text{dp}$ sequences",
    "Pipeline parallelism gives each of $p$ GPUs a contiguous block of about $L/p$ layers; the bubble is $(p-1)/m$",
    "with $d = h/a$ the head dimension, $2\\,h\\,d\\,(a + g)$",
    "$\\text{KV bytes per token} = 2 \\cdot L \\cdot g \\cdot d \\cdot B_\\text{kv}$",
    "At a price $c_h$ per GPU-hour: $\\text{cost} = \\text{GPU-hours} \\times c_h$",
    "LoRA replaces $W x$ by $W x + \\frac{\\alpha}{r} W_\\text{up} W_\\text{down} x$",
    "memory bandwidth $\\text{BW}_\\text{mem}$ bytes/s",
    "$t_\\text{step} = t_\\text{compute} + \\sum_{g\\,\\in\\,\\{\\text{tp},\\,\\text{pp},\\,\\text{dp}\\}} t_g$",
    "The H100 at \\$2.69 per GPU-hour and $6N$ FLOPs per token",
    "`B = 1` in code is not maths",
]


@pytest.mark.parametrize("md", RETIRED)
def test_each_retired_use_is_caught(md):
    assert problems(md), md


@pytest.mark.parametrize("md", ALLOWED)
def test_the_notation_itself_passes(md):
    assert problems(md) == [], problems(md)


def test_no_retired_notation_in_the_book():
    bad = [(f, i, p) for f, i, md in markdown_cells() for p in problems(md)]
    assert not bad, "\n".join(f"{f} cell {i}: {p}" for f, i, p in bad)


def test_the_introduction_defines_every_symbol_once():
    """Each symbol the rules protect is in the notation table of chapter 0, with one row."""
    intro = next(c.source for c in nbformat.read(ROOT / "book" / "00_introduction.ipynb", 4).cells
                 if c.cell_type == "markdown" and "| Symbol | Meaning |" in c.source)
    rows = [r.split("|")[1].strip() for r in intro.splitlines() if r.startswith("| $")]
    for sym in ["$N$", "$n$", "$n_\\text{dp}$", "$t$", "$p$", "$d$", "$B_x$", "$b$", "$D$", "$C$", "$c_h$", "$W$"]:
        assert rows.count(sym) == 1, (sym, rows.count(sym))
