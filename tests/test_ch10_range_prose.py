"""Chapter 10's calibration section reads one band at a time (issue 38, read38b: its paragraphs alternated
between three range models with four to six glued numbers a sentence, and no table said which band was which).

The rule checked: from "What published runs imply" to "Outside the calibrated region", no sentence carries
more than two glued values ({eval} roles), and the section opens with one table of its four bands, each row
from ``data/intervals.csv``."""

from __future__ import annotations

import json
import re
from pathlib import Path

BOOK = Path(__file__).resolve().parents[1] / "book"
CH10 = BOOK / "10_flops_and_time.ipynb"


def _section():
    cells = json.loads(CH10.read_text())["cells"]
    text = ["".join(c["source"]) for c in cells]
    start = next(i for i, s in enumerate(text) if "## What published runs imply" in s)
    end = next(i for i, s in enumerate(text) if "### Outside the calibrated region" in s)
    return cells[start:end + 1], text[start:end + 1]


def _sentences(markdown: str):
    """Sentences of ``markdown``, cut at a full stop, semicolon, question or exclamation mark followed by
    a space or a line break, at a blank line and at a bullet: an over-count of the cuts, never an under."""
    body = markdown.split("### Outside the calibrated region")[0]
    return [s for s in re.split(r"(?<=[.;!?])\s+|\n\s*\n|\n\s*\* ", body) if s.strip()]


def test_no_sentence_of_the_calibration_section_carries_more_than_two_glued_values():
    cells, text = _section()
    heavy = [" ".join(s.split())[:120] for c, t in zip(cells, text) if c["cell_type"] == "markdown"
             for s in _sentences(t) if s.count("{eval}") > 2]
    assert not heavy, heavy


def test_the_section_opens_with_one_table_of_the_four_bands():
    cells, _ = _section()
    code = [c for c in cells if c["cell_type"] == "code"]
    first = "".join("".join(o.get("text", "")) for o in code[0]["outputs"]
                    if o.get("output_type") == "stream")
    header, *lines = [ln for ln in first.splitlines() if ln.strip()]
    rows = [ln[:header.index("what it is for")].strip() for ln in lines]
    assert rows == ["the estimate", "baseline", "layout", "layout + stack"], first
    # each band is named again, in bold, in the paragraph right after the table
    after = "".join(next(c for c in cells[cells.index(code[0]) + 1:]
                         if c["cell_type"] == "markdown")["source"])
    for name in ("**The estimate**", "**The baseline**", "**The layout band**",
                 "**The layout band with the stack named**"):
        assert name in after, name
