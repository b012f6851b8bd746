"""Issue 25: the chapters' MyST prose in Voila (``make app``), tools/voila/myst_voila.py.

Voila rendered the markdown as plain Markdown, so chapter 12 as an app showed 97 raw ``{eval}``/``{ref}`` roles
and a "(ch12)=" label. These tests check the conversion on small hand-written cases, on every chapter of the
book (no raw MyST left, every ``{eval}`` role kept for the kernel), and in a real kernel: the value shown is
the kernel's own text for the name, evaluated after the cells above it ran (no copy, so no drift), and an
unbound name is shown as an error instead of stopping the app. The browser test is
tests/browser/test_live_routes.py::test_voila_prose_shows_numbers_not_myst.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("myst_voila", ROOT / "tools" / "voila" / "myst_voila.py")
mv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mv)

NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
TARGETS = {
    "ch7": ("07_dp.ipynb", "data-parallelism", "Data parallelism"),
    "ch12": ("12_gpus.ipynb", "how-many", "How many GPUs?"),
    "ch12-ex1": ("12_gpus.ipynb", "", "Exercise 1"),
    "07_dp": ("07_dp.ipynb", "", "Data parallelism"),
}
RAW = re.compile(r"\{(?:ref|doc|numref|glue)[:}]|^\s*\([\w.-]+\)=\s*$|^\s*(?:```|:::)\{|^\s*:(?:class|label):", re.M)


def md(source: str, here: str = "12_gpus.ipynb") -> str:
    return mv.myst_to_markdown(source, here, TARGETS)


# --------------------------------------------------------------------------- MyST -> Markdown, by hand
def test_labels_are_dropped_and_references_become_links_with_the_target_title():
    out = md("(ch12)=\n# How many GPUs?\n\nSee {ref}`ch7`, {ref}`the first one <ch12-ex1>` and {doc}`07_dp`.")
    assert "(ch12)=" not in out and out.startswith("# How many GPUs?")
    assert "[Data parallelism](07_dp.ipynb#data-parallelism)" in out
    assert "[the first one](#)" in out                                  # same page: no file in the link
    assert "[Data parallelism](07_dp.ipynb)" in out


def test_an_unknown_target_shows_its_words_not_the_role():
    assert md("as in {ref}`nowhere` and {ref}`these words <nowhere>`") == "as in nowhere and these words"


def test_eval_roles_are_left_for_the_kernel():
    assert md("costs {eval}`ch12_cost` on {eval}`ch12_n` GPUs") == "costs {eval}`ch12_cost` on {eval}`ch12_n` GPUs"


def test_admonitions_exercises_and_solutions_become_boxes():
    out = md("```{admonition} Takeaway\n:class: tip\nThe **front**, {eval}`x`.\n```")
    assert out.startswith('<div class="book-admonition tip"><p class="admonition-title">Takeaway</p>')
    assert "The **front**, {eval}`x`." in out and out.rstrip().endswith("</div>")
    assert '<p class="admonition-title">Note</p>' in md("```{note}\nA note.\n```")
    ex = md("```{exercise}\n:label: ch12-ex1\nDouble the batch.\n```")
    assert '<div class="book-admonition exercise"><p class="admonition-title">Exercise 1</p>' in ex
    assert ":label:" not in ex
    sol = md("````{solution} ch12-ex1\n:class: dropdown\nText.\n```python\nx = 1\n```\n````")
    assert sol.startswith('<details class="book-admonition solution"><summary class="admonition-title">'
                          "Solution to Exercise 1</summary>")
    assert "```python\nx = 1\n```" in sol and sol.endswith("</details>")


def test_a_solution_over_several_cells_is_marked_at_both_ends():
    start = md("```{solution-start} ch12-ex1\n:class: dropdown\n```\n\nThe answer.")
    assert start.startswith('<div class="book-solution-start" data-title="Solution to Exercise 1"></div>')
    assert start.endswith("The answer.")
    assert md("More.\n\n```{solution-end}\n```") == 'More.\n\n<div class="book-solution-end"></div>'


def test_code_blocks_stay_verbatim():
    src = "```text\nllmsizing plan {ref}`ch7` (ch1)=\n```\n\n````{note}\n```python\n{doc}`x`\n```\n````"
    out = md(src)
    assert "```text\nllmsizing plan {ref}`ch7` (ch1)=\n```" in out
    assert "```python\n{doc}`x`\n```" in out


def test_book_targets_read_the_chapters(tmp_path):
    """Labels before headings, exercise labels and file stems, read from a small book of two notebooks."""
    for name, cells in {
        "01_a.ipynb": ["(ch1)=\n# Parameters\n\nText.", "(sec-x)=\n## A *section*\n",
                       "```{exercise}\n:label: ch1-ex1\nQ.\n```", "```{exercise}\n:label: ch1-ex2\nQ.\n```"],
        "02_b.ipynb": ["# Bytes\n\nNo label."],
    }.items():
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_markdown_cell(c) for c in cells]
        nbformat.write(nb, tmp_path / name)
    targets = mv.book_targets(tmp_path)
    assert targets["ch1"] == ("01_a.ipynb", "parameters", "Parameters")
    assert targets["sec-x"] == ("01_a.ipynb", "a-section", "A section")
    assert targets["ch1-ex2"] == ("01_a.ipynb", "", "Exercise 2")
    assert targets["02_b"] == ("02_b.ipynb", "", "Bytes")
    # the real book: every chapter is a target under its file stem, titled by its first heading
    book = mv.book_targets()
    nb = nbformat.read(ROOT / "book" / "07_data_parallelism.ipynb", as_version=4)
    first_heading = next(line for c in nb.cells if c.cell_type == "markdown" for line in c.source.splitlines()
                         if line.startswith("# "))
    assert book["07_data_parallelism"] == ("07_data_parallelism.ipynb", "", first_heading[2:].strip())


# --------------------------------------------------------------------------- every chapter
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_chapter_converts_with_no_raw_myst_and_every_number_kept(path):
    nb = nbformat.read(path, as_version=4)
    roles = [n for c in nb.cells if c.cell_type == "markdown" for n in mv.EVAL_ROLE.findall(c.source)]
    out = mv.voila_notebook(nb, path.name)
    raw = [f"cell {i}: {m.group(0)!r}" for i, c in enumerate(out.cells) if c.cell_type == "markdown"
           for m in RAW.finditer(c.source)]
    assert not raw, raw[:10]
    prose = [c for c in out.cells if "book-prose" in c.metadata.get("tags", [])]
    shown = []
    for cell in prose[1:]:                                     # prose[0] defines the helper
        call = re.fullmatch(r"__book_prose__\((.*)\)", cell.source, re.S)
        parts = eval(call.group(1), {})                         # a list literal written by voila_notebook
        shown += parts[1::2]
        assert not any(RAW.search(p) for p in parts[0::2])
    assert shown == roles
    assert bool(prose) == bool(roles)                          # no helper cell in a chapter without numbers
    if prose:
        assert prose[0].source == mv.KERNEL_HELPER and out.cells[0] is prose[0]
    assert nb == nbformat.read(path, as_version=4)             # the notebook itself is not changed


# --------------------------------------------------------------------------- in a real kernel
def test_the_kernel_fills_in_its_own_values_in_order(tmp_path):
    """The numbers come from the code cells above, evaluated when the prose cell runs: a value glued again
    later does not leak backwards, "$" and "*" stay text (not maths, not emphasis), and an unbound name shows
    as an error box rather than stopping the notebook."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("from llmsizing.prose import inline_glue\nglue = inline_glue(globals())\n"
                                  "glue('ch0_cost', f\"${1234567 / 1e6:,.2f} million\")\nn = 3 * 7"),
        nbformat.v4.new_markdown_cell("(ch0)=\n# T\n\nIt costs {eval}`ch0_cost` on {eval}`n` *GPUs*; "
                                      "{eval}`nowhere`."),
        nbformat.v4.new_code_cell("glue('ch0_cost', 'changed')"),
    ]
    run = mv.voila_notebook(nb, "x.ipynb", targets={})
    NotebookClient(run, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    (out,) = run.cells[2].outputs
    text = out["data"]["text/markdown"]
    assert text.startswith("# T\n\nIt costs ")
    assert '<span class="book-eval">&#36;1.23 million</span>' in text     # the kernel's text, $ as a reference
    assert '<span class="book-eval">21</span>' in text
    assert " *GPUs*; " in text                                            # the author's markdown is untouched
    assert '<span class="book-eval-error">{eval}`nowhere` (NameError)</span>' in text
    assert "changed" not in json.dumps(run.cells[2].outputs)


_SOL = re.compile(r"^\s*(?:`{3,}|:{3,})\s*\{solution(-start|-end)?\}", re.M)


@pytest.mark.parametrize("path", sorted((ROOT / "book").glob("*.ipynb")), ids=lambda p: p.stem)
def test_every_solution_is_marked_on_its_cells_start_then_end(path):
    """Issue 38 (solution 2 inside solution 1 in Voila): the template folds a solution by the marks on its
    cells (``metadata.book_solution``), which the page has as soon as it arrives. Every solution of the source
    has one start and then one end, in order, never two starts in a row; a one-cell solution is marked on
    its one cell with both."""
    nb = nbformat.read(path, as_version=4)
    expected = []                    # from the source: one (start, end) per solution
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for m in _SOL.finditer(cell.source):
            expected.append({None: "whole", "-start": "start", "-end": "end"}[m.group(1)])
    marks = []
    for cell in mv.voila_notebook(nb, path.name).cells:
        mark = cell.metadata.get(mv.SOLUTION_KEY, {})
        if "start" in mark:
            assert mark["start"].startswith("Solution to "), mark
            marks.append("start")
        if mark.get("end"):
            marks.append("end")
    assert marks == [m for m in expected if m != "whole"], path.name
    assert all(a != b for a, b in zip(marks, marks[1:])), f"{path.name}: two starts or ends in a row: {marks}"
