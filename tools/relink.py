"""Rewrite the book's cross-reference roles into relative Markdown links (issue 25, item 4).

``{ref}`ch12```, ``{ref}`text <label>```, ``{doc}`12_how_many_gpus``` and ``{numref}`` roles resolve only in
Sphinx. JupyterLab and JupyterLite (jupyterlab-myst) show them as orange "Cross Reference Not Found" warnings,
and Voila shows them raw. A relative link to the chapter file works on every route:

* ``[chapter 12](12_how_many_gpus.ipynb)``: myst-parser turns a link to a source file into a link to its page
  (``render_link_unknown``/``resolve_myst_ref_doc`` in myst_parser 3); jupyterlab-myst hands it to JupyterLab's
  link handler, which opens the notebook; JupyterLite does the same with its own contents.
* ``[Units](00_introduction.ipynb#units)``: myst-parser resolves the fragment only against the target page's
  heading slugs (``myst_slugs``, filled when ``myst_heading_anchors`` in ``_config.yml`` reaches the heading's
  level); an explicit ``(label)=`` is *not* accepted there. jupyterlab-myst gives a heading the id
  ``createHtmlId(normalizeLabel(text))`` (myst-transforms' ``headingLabelTransform``), but only when the heading
  has no explicit label: a ``(units)=`` above it makes the id ``units``. So the anchor is the heading slug, the
  tool checks that myst-parser's slug (GitHub style, ``-1`` suffixes for repeats) and mystmd's id agree, and it
  drops the ``(label)=`` lines once no role uses them. Where the two disagree, the link goes to the file only.
* ``[exercise 3](#ch16-ex3)`` inside the same notebook: sphinx-exercise registers the ``:label:`` as an explicit
  target of the page and myst renders the directive with that id.

Which file and heading a label belongs to comes from the ``(label)=`` lines in the notebooks; labels already
dropped are found in :data:`KNOWN` (section labels) or by the chapter rule ``chN`` -> ``book/NN_*.ipynb``, so
the tool can be re-run after merging a branch that still writes roles.

    python tools/relink.py            # rewrite book/*.ipynb in place (idempotent)
    python tools/relink.py --check    # exit 1 and list what would change
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"

#: the ``myst_heading_anchors`` depth set in _config.yml: headings up to this level get slugs in Sphinx
HEADING_ANCHORS = 3

ROLE = re.compile(r"\{(ref|doc|numref)\}`([^`]*)`")
EXPLICIT = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.S)
LABEL_LINE = re.compile(r"^\((?P<label>[^()\s]+)\)=[ \t]*(?:\n|$)", re.M)
HEADING = re.compile(r"^(?P<hashes>#{1,6})[ \t]+(?P<title>.+?)[ \t]*#*[ \t]*$", re.M)
EXERCISE = re.compile(r"^```+\{exercise\}[^\n]*\n(?P<opts>(?::[^\n]*\n)*)", re.M)
CHAPTER_FILE = re.compile(r"^(?P<num>\d\d)_[a-z0-9_]+\.ipynb$")

#: section labels that the notebooks no longer carry: label -> (file, heading title)
KNOWN: dict[str, tuple[str, str | None]] = {
    "notation": ("00_introduction.ipynb", "Notation"),
    "units": ("00_introduction.ipynb", "Units"),
    "gpu-catalogue": ("00_introduction.ipynb", "The GPU catalogue"),
    "testing": ("00_introduction.ipynb", "How the book is tested"),
    "ch15-moe": ("15_serving.ipynb", "Serving a mixture of experts"),
    "ch15-published": ("15_serving.ipynb", "Checked against published figures"),
    "ch16-time": ("16_finetuning.ipynb", "Time and cost of a fine-tune"),
    "formula-summary": ("90_formula_summary.ipynb", None),
}


# --------------------------------------------------------------------------- slugs
def myst_parser_slug(title: str) -> str:
    """myst_parser.mdit_to_docutils.base.default_slugify (GitHub style), on the heading's text and code."""
    text = re.sub(r"`([^`]*)`", r"\1", title)
    return re.sub(r"[^\w\u4e00-\u9fff\- ]", "", text.lower().replace(" ", "-"))


def mystmd_html_id(title: str) -> str:
    """myst-common's ``createHtmlId(normalizeLabel(toText(heading)).identifier)``, as jupyterlab-myst renders it."""
    text = re.sub(r"`([^`]*)`", r"\1", title)
    ident = re.sub(r"['‘’\"“”]+", "", re.sub(r"[\t\n\r ]+", " ", text)).strip().lower()
    out = re.sub(r"[^a-z0-9-]", "-", ident)
    out = re.sub(r"^([0-9-])", r"id-\1", out)
    out = re.sub(r"-[-]+", "-", out)
    return re.sub(r"(?:^[-]+)|(?:[-]+$)", "", out)


def _strip_fences(md: str) -> str:
    return re.sub(r"^```[^\n]*\n.*?^```[ \t]*$", "", md, flags=re.M | re.S)


def headings(cells: list[str]) -> list[tuple[int, str, str, str]]:
    """(level, title, sphinx slug, lab id) of every heading, in order; sphinx slugs made unique as myst-parser does."""
    out, seen = [], set()
    for md in cells:
        for m in HEADING.finditer(_strip_fences(md)):
            level, title = len(m["hashes"]), m["title"]
            slug = ""
            if level <= HEADING_ANCHORS:
                slug, base, i = myst_parser_slug(title), myst_parser_slug(title), 1
                while slug in seen:
                    slug, i = f"{base}-{i}", i + 1
                seen.add(slug)
            out.append((level, title, slug, mystmd_html_id(title)))
    return out


# --------------------------------------------------------------------------- targets
class Book:
    def __init__(self, files: dict[str, list[str]]):
        """``files``: notebook file name -> its markdown cells' sources."""
        self.files = files
        self.labels: dict[str, tuple[str, str | None]] = dict(KNOWN)
        self.exercises: dict[str, tuple[str, int]] = {}
        self.headings = {name: headings(cells) for name, cells in files.items()}
        for name, cells in files.items():
            k = 0
            for md in cells:
                for m in LABEL_LINE.finditer(md):
                    after = md[m.end():].lstrip("\n")
                    h = HEADING.match(after)
                    title = h["title"] if h and len(h["hashes"]) > 1 else None   # a level-1 heading is the page
                    self.labels[m["label"]] = (name, title)
                for m in EXERCISE.finditer(md):
                    k += 1
                    lab = re.search(r"^:label:\s*(\S+)", m["opts"], re.M)
                    if lab:
                        self.exercises[lab[1]] = (name, k)

    def chapter_file(self, label: str) -> str | None:
        m = re.fullmatch(r"ch(\d{1,2})", label)
        if not m:
            return None
        hits = [f for f in self.files if f.startswith(f"{int(m[1]):02d}_")]
        return hits[0] if len(hits) == 1 else None

    def page_text(self, name: str) -> str:
        m = CHAPTER_FILE.match(name)
        num = int(m["num"]) if m else -1
        if num == 0:
            return "the introduction"
        if num >= 90:
            return "the formula summary"
        return f"chapter {num}"

    def anchor(self, name: str, title: str) -> str | None:
        """The fragment both Sphinx and jupyterlab-myst give the heading ``title`` of ``name``, or None."""
        for level, t, slug, html_id in self.headings.get(name, []):
            if t == title:
                return slug if slug and slug == html_id else None
        return None

    def resolve(self, kind: str, target: str, here: str) -> tuple[str, str, str]:
        """(href, default text, word the text starts with) for a role in notebook ``here``."""
        if kind == "doc":
            name = target if target.endswith(".ipynb") else f"{target}.ipynb"
            name = Path(name).name
            if name not in self.files:
                raise KeyError(f"{here}: {{doc}}`{target}`: no book/{name}")
            return name, self.page_text(name), "chapter"
        if target in self.exercises:
            name, k = self.exercises[target]
            href = f"#{target}" if name == here else name
            return href, f"exercise {k}", "exercise"
        if target in self.labels:
            name, title = self.labels[target]
        elif self.chapter_file(target):
            name, title = self.chapter_file(target), None
        else:
            raise KeyError(f"{here}: {{{kind}}}`{target}`: no such label in the notebooks or in relink.KNOWN")
        if name not in self.files:
            raise KeyError(f"{here}: label {target!r} points at book/{name}, which does not exist")
        if title is None:
            return ("#" if name == here else name), self.page_text(name), "chapter"
        frag = self.anchor(name, title)
        if frag is None:
            return name, title, ""
        # a heading of the same notebook is linked through its file too: jupyterlab-myst logs a console error
        # ("Linking ... to an implicit heading reference") for a bare #slug (issue 25: no console error)
        return f"{name}#{frag}", title, ""


def _sentence_start(before: str) -> bool:
    b = before.rstrip(" \t")
    if not b or b.endswith("\n\n"):
        return True
    b = b.rstrip()
    if not b:
        return True
    if re.search(r"(^|\n)\s*([*+-]|\d+\.|\|)$", b):   # a list item or a table cell starts here
        return True
    return b[-1] in ".!?" or b.endswith((".*", ".**", ":**"))


def relink_markdown(md: str, here: str, book: Book) -> tuple[str, int]:
    """``md`` with every role replaced by a link; and the number of roles replaced."""
    out, pos, n = [], 0, 0
    for m in ROLE.finditer(md):
        kind, body = m[1], m[2]
        e = EXPLICIT.match(body)
        target = (e["target"] if e else body).strip()
        href, text, word = book.resolve(kind, target, here)
        before = md[pos:m.start()]
        if e:
            text = e["text"]
        elif word:
            # "chapter {ref}`ch10`" / "exercise {ref}`ch16-ex3`": the word is in the link text already
            w = re.search(rf"\b({word})\s+$", before, re.I)
            if w:
                before = before[: w.start()]
                text = w[1] + text[len(word):]
            elif _sentence_start("".join(out) + before):
                text = text[0].upper() + text[1:]
        out.append(before + f"[{text}]({href})")
        pos, n = m.end(), n + 1
    out.append(md[pos:])
    return "".join(out), n


def drop_labels(md: str, keep: set[str]) -> str:
    return LABEL_LINE.sub(lambda m: m[0] if m["label"] in keep else "", md)


def load() -> dict[str, nbformat.NotebookNode]:
    return {p.name: nbformat.read(p, as_version=4) for p in sorted(BOOK.glob("*.ipynb"))}


def run(check: bool = False) -> tuple[dict[str, int], list[str]]:
    """Relink every notebook; returns (roles converted per file, files changed)."""
    nbs = load()
    book = Book({name: [c.source for c in nb.cells if c.cell_type == "markdown"] for name, nb in nbs.items()})
    converted: dict[str, int] = {}
    new_sources: dict[str, list[str | None]] = {}
    for name, nb in nbs.items():
        srcs: list[str | None] = []
        for c in nb.cells:
            if c.cell_type != "markdown":
                srcs.append(None)
                continue
            s, k = relink_markdown(c.source, name, book)
            converted[name] = converted.get(name, 0) + k
            srcs.append(s)
        new_sources[name] = srcs
    # every role is a link now (resolve raises otherwise), so no label line is needed any more
    still: set[str] = set()
    changed = []
    for name, nb in nbs.items():
        dirty = False
        for c, s in zip(nb.cells, new_sources[name]):
            if s is None:
                continue
            s = drop_labels(s, still)
            if s != c.source:
                c.source, dirty = s, True
        if dirty:
            changed.append(name)
            if not check:
                nbformat.write(nb, BOOK / name)
    return converted, changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a notebook would change")
    args = ap.parse_args(argv)
    converted, changed = run(check=args.check)
    total = sum(converted.values())
    for name in changed:
        print(f"{'would change' if args.check else 'relinked'} book/{name}: {converted.get(name, 0)} role(s)")
    print(f"{total} role(s) converted, {len(changed)} notebook(s) {'to change' if args.check else 'changed'}")
    return 1 if (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
