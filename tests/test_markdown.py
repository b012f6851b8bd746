"""The book's markdown renders on every route (issue 25, items 3 and 4).

* **Links.** No ``{ref}``/``{doc}``/``{numref}`` role and no ``(label)=`` line is left (JupyterLab and
  JupyterLite show roles as "Cross Reference Not Found", Voila shows them raw); every relative link points at an
  existing notebook, and its ``#fragment`` at a heading whose Sphinx slug and jupyterlab-myst id agree (or at an
  exercise label of the same notebook). ``tools/relink.py`` writes the links; its slug functions are checked
  here against myst-parser's own and against hand-derived mystmd ids.
* **Lone dollars.** An escaped dollar next to a maths dollar (``\\$6ND$``) makes the rest of a paragraph italic
  maths in the lab and on the site; so does an odd number of maths dollars in a paragraph.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
NOTEBOOKS = sorted(BOOK.glob("*.ipynb"))

_spec = importlib.util.spec_from_file_location("relink", ROOT / "tools" / "relink.py")
relink = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(relink)


def markdown_cells():
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for i, c in enumerate(nb.cells):
            if c.cell_type == "markdown":
                yield path.name, i, c.source


def without_code(md: str) -> str:
    """The markdown with fenced blocks' *code* and inline code removed (directive bodies are kept: they are prose)."""
    md = re.sub(r"^(```+)(?![`{])[^\n]*\n.*?^\1[ \t]*$", "", md, flags=re.M | re.S)
    return re.sub(r"``[^`]+``|`[^`\n]+`", "", md)


# --------------------------------------------------------------------------- links
ROLES = re.compile(r"\{(ref|doc|numref|eq|any)\}`")
LINK = re.compile(r"\]\((?P<href>[^)\s]+)\)")


def test_no_cross_reference_roles_or_labels_remain():
    found = [(f, i, m.group(0)) for f, i, md in markdown_cells() for m in ROLES.finditer(md)]
    labels = [(f, i, m.group(0).strip()) for f, i, md in markdown_cells() for m in relink.LABEL_LINE.finditer(md)]
    assert not found, f"roles JupyterLab cannot resolve (run tools/relink.py): {found[:10]}"
    assert not labels, f"(label)= lines nothing uses any more (run tools/relink.py): {labels[:10]}"


def test_relink_check_finds_nothing_to_do():
    converted, changed = relink.run(check=True)
    assert changed == [] and sum(converted.values()) == 0


def _targets():
    book = relink.Book({p.name: [c.source for c in nbformat.read(p, 4).cells if c.cell_type == "markdown"]
                        for p in NOTEBOOKS})
    return book


def test_every_relative_link_resolves():
    book = _targets()
    bad, n = [], 0
    for f, i, md in markdown_cells():
        for m in LINK.finditer(without_code(md)):
            href = m["href"]
            if re.match(r"^[a-z]+:", href):          # http:, https:, mailto:
                continue
            n += 1
            path, _, frag = href.partition("#")
            name = path or f
            if path and (not path.endswith(".ipynb") or "/" in path or not (BOOK / path).exists()):
                bad.append((f, i, href, "no such notebook in book/"))
                continue
            if not frag:
                continue
            anchors = {slug for _, _, slug, html_id in book.headings[name] if slug and slug == html_id}
            exercises = {lab for lab, (nb, _) in book.exercises.items() if nb == name} if not path else set()
            if frag not in anchors | exercises:
                bad.append((f, i, href, "no heading with that slug (or slug != jupyterlab-myst id)"))
    assert n > 100, f"only {n} relative links found: did the link pattern break?"
    assert not bad, bad


def test_heading_anchor_depth_reaches_the_linked_headings():
    conf = yaml.safe_load((ROOT / "_config.yml").read_text())
    depth = conf["sphinx"]["config"]["myst_heading_anchors"]
    assert depth == relink.HEADING_ANCHORS
    book = _targets()
    for f, i, md in markdown_cells():
        for m in LINK.finditer(without_code(md)):
            path, _, frag = m["href"].partition("#")
            if frag and path.endswith(".ipynb"):
                levels = [lv for lv, _, slug, _ in book.headings[path] if slug == frag]
                assert levels and levels[0] <= depth, (f, m["href"])


# ------------------------------------------------------------- relink's pieces, against independent sources
@pytest.mark.parametrize("title", ["Notation", "Time and cost of a fine-tune", "Serving a mixture of experts",
                                   "The peak of a step", "What `plan()` returns", "FLOPs, MFU: 6N?"])
def test_sphinx_slug_is_myst_parser_s(title):
    from markdown_it import MarkdownIt
    from myst_parser.mdit_to_docutils.base import compute_unique_slug
    from markdown_it.tree import SyntaxTreeNode

    tree = SyntaxTreeNode(MarkdownIt().parse(f"## {title}\n"))
    assert relink.myst_parser_slug(title) == compute_unique_slug(tree.children[0], set())


@pytest.mark.parametrize("title, html_id", [
    # by hand from myst-common's createHtmlId: lower-case, every char outside [a-z0-9-] -> "-", "id-" before a
    # leading digit, runs of "-" collapsed, "-" trimmed; normalizeLabel drops quotes first
    ("Time and cost of a fine-tune", "time-and-cost-of-a-fine-tune"),
    ("2. Test", "id-2-test"),
    ("The seeds' numbers", "the-seeds-numbers"),
    ("FLOPs, MFU and training time", "flops-mfu-and-training-time"),
    ("What `plan()` returns", "what-plan-returns"),
])
def test_lab_heading_id(title, html_id):
    assert relink.mystmd_html_id(title) == html_id


def test_the_two_slugs_disagree_where_expected():
    # Sphinx keeps the punctuation-free run "flops-mfu" with no comma but jupyterlab-myst's would be the same;
    # parentheses differ: myst-parser deletes them, mystmd turns them into "-" and then trims/collapses
    assert relink.myst_parser_slug("What `plan()` returns") == "what-plan-returns"
    assert relink.myst_parser_slug("A -- B") == "a----b" != relink.mystmd_html_id("A -- B") == "a-b"


def _book():
    return relink.Book({
        "01_a.ipynb": ["(ch1)=\n# A\n\ntext", "(sec-x)=\n## Section X\n", "## Dup\n", "## Dup\n",
                       "```{exercise}\n:label: ex-a\nQ?\n```", "```{exercise}\n:label: ex-b\nQ?\n```"],
        "10_b.ipynb": ["# B\n"],
        "90_c.ipynb": ["# C\n"],
    })


@pytest.mark.parametrize("md, here, want", [
    ("{ref}`ch10` turned", "01_a.ipynb", "[Chapter 10](10_b.ipynb) turned"),
    ("as ({ref}`ch10`).", "01_a.ipynb", "as ([chapter 10](10_b.ipynb))."),
    ("Done. {ref}`ch1` counts", "10_b.ipynb", "Done. [Chapter 1](01_a.ipynb) counts"),
    ("chapter {ref}`ch10` now", "01_a.ipynb", "[chapter 10](10_b.ipynb) now"),
    ("see {doc}`90_c`", "01_a.ipynb", "see [the formula summary](90_c.ipynb)"),
    ("see {ref}`sec-x`", "10_b.ipynb", "see [Section X](01_a.ipynb#section-x)"),
    ("see {ref}`sec-x`", "01_a.ipynb", "see [Section X](01_a.ipynb#section-x)"),
    ("see {ref}`this one <sec-x>`", "10_b.ipynb", "see [this one](01_a.ipynb#section-x)"),
    ("exercise {ref}`ex-b` asks", "01_a.ipynb", "[exercise 2](#ex-b) asks"),
    ("* {numref}`ch1` first", "10_b.ipynb", "* [Chapter 1](01_a.ipynb) first"),
    ("no roles here", "01_a.ipynb", "no roles here"),
])
def test_relink_markdown(md, here, want):
    out, n = relink.relink_markdown(md, here, _book())
    assert out == want and n == md.count("}`")
    assert relink.relink_markdown(out, here, _book()) == (out, 0)          # idempotent


def test_relink_refuses_unknown_labels_and_files():
    with pytest.raises(KeyError, match="nope"):
        relink.relink_markdown("{ref}`nope`", "01_a.ipynb", _book())
    with pytest.raises(KeyError, match="99_gone"):
        relink.relink_markdown("{doc}`99_gone`", "01_a.ipynb", _book())


def test_a_repeated_heading_gets_no_anchor():
    """Sphinx calls the second "Dup" dup-1, jupyterlab-myst calls it dup: the tool must not pick either."""
    book = _book()
    assert [s for _, t, s, _ in book.headings["01_a.ipynb"] if t == "Dup"] == ["dup", "dup-1"]


def test_drop_labels():
    assert relink.drop_labels("(ch1)=\n# A\n", set()) == "# A\n"
    assert relink.drop_labels("(ch1)=\n# A\n", {"ch1"}) == "(ch1)=\n# A\n"


# --------------------------------------------------------------------------- lone dollars
ESCAPED_NEXT_TO_MATHS = re.compile(r"\\\$[^\s$]*(?<!\\)\$(?!\$)|(?<![\\$])\$\\\$")


def maths_dollars(paragraph: str) -> int:
    """Unescaped single dollars (``$$`` display delimiters and ``\\$`` excluded)."""
    p = re.sub(r"\$\$", "", paragraph)
    return len(re.findall(r"(?<!\\)\$", p))


def paragraphs(md: str):
    md = re.sub(r"\$\$.*?\$\$", "", without_code(md), flags=re.S)       # display maths may span blank lines
    return [p for p in re.split(r"\n[ \t]*\n", md) if p.strip()]


def lone_dollar_problems(md: str) -> list[str]:
    out = []
    for p in paragraphs(md):
        for m in ESCAPED_NEXT_TO_MATHS.finditer(p):
            out.append(f"escaped dollar next to a maths dollar: {m.group(0)!r}")
        if maths_dollars(p) % 2:
            out.append(f"odd number of maths dollars in: {p.strip()[:120]!r}")
    return out


@pytest.mark.parametrize("md, n", [
    ("Job cost = GPU-hours × price = \\$6ND$ (plus attention) / (peak × MFU) × price.", 2),
    ("costs \\$2.69 per hour and $6N$ FLOPs per token", 0),
    ("\\$64 × 3 days = \\$192", 0),
    ("$6N$ and $2N$", 0),
    ("a lone $x here", 1),
    ("$$\nA = B\n$$\n\nthen $a$", 0),
    ("`$` in code is fine, and so is ``$a``", 0),
    ("```python\nprint('$')\n```\n", 0),
    ("at $n$\\$ per GPU", 1),
])
def test_the_lone_dollar_check_can_fail(md, n):
    assert len(lone_dollar_problems(md)) == n, lone_dollar_problems(md)


def test_no_lone_dollars_in_the_book():
    bad = [(f, i, p) for f, i, md in markdown_cells() for p in lone_dollar_problems(md)]
    assert not bad, bad


def test_no_label_is_defined_twice_in_the_book():
    """Sphinx warns on a duplicate label, and `make book` turns warnings into a failure (session 17: the
    readers of chapters 4 and 4b each added an exercise labelled ``ch4-ex3``). Exercise and solution labels and
    ``(name)=`` targets must be unique over every notebook."""
    import json
    from collections import Counter

    seen = Counter()
    for nb in sorted((Path(__file__).resolve().parents[1] / "book").glob("*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                text = "".join(cell["source"])
                seen.update(re.findall(r"^:label:\s*(\S+)", text, re.M))
                seen.update(re.findall(r"^\(([\w-]+)\)=\s*$", text, re.M))
    assert seen, "the book defines labels"
    assert not [k for k, n in seen.items() if n > 1], [k for k, n in seen.items() if n > 1]


def test_no_control_character_in_the_prose():
    """No markdown cell holds a control character but the newline (session 36: a ``\\text`` and a ``\\ast``
    written through a Python string became a tab and a BEL in chapter 7, and MathJax failed on the page; only
    the browser checks of `make check-live` saw it)."""
    bad = [(name, i, repr(ch)) for name, i, source in markdown_cells()
           for ch in sorted(set(source)) if ord(ch) < 32 and ch != "\n" or ord(ch) == 127]
    assert not bad, bad
