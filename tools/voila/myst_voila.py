"""The book's MyST prose in Voila (``make app``): numbers from the kernel, no raw roles, labels or directives.

jupyter-book (myst-nb) and JupyterLab (jupyterlab-myst) read the chapters' markdown as MyST. Voila renders
markdown cells with nbconvert's plain Markdown renderer, and jupyterlab-myst cannot load inside Voila's page,
so without this module a chapter as an app shows ``{eval}`ch12_cheap_cost```, ``{ref}`ch7``` and ``(ch12)=``
as written, and its admonitions and exercises as code blocks.

:func:`prelaunch_hook` (set as ``VoilaConfiguration.prelaunch_hook`` by ``tools/voila/config/voila.py``) rewrites
the notebook Voila is about to run, in memory (the file on disk is untouched):

* every markdown cell becomes plain Markdown (:func:`myst_to_markdown`): MyST target labels ``(label)=`` are
  dropped; ``{ref}`` and ``{doc}`` roles become links to the chapter file with the target's title, as on the
  site (Voila serves book/, so ``07_data_parallelism.ipynb`` opens that chapter as an app too); admonitions,
  notes and exercises become boxes; solutions become folded ``<details>`` boxes. A solution written as
  ``{solution-start}`` ... ``{solution-end}`` across several cells is marked here and folded in the page by the
  ``book`` template;
* a markdown cell that quotes numbers (``{eval}`name```) becomes a code cell, run in its place in the
  kernel's order, whose output is the same Markdown with each name replaced by the kernel's own text for it:
  the request jupyterlab-myst sends (IPython's ``user_expressions``, whose ``text/plain`` is what it shows).
  So the numbers come from the code the app has just run, exactly as in the lab: nothing is copied into
  the notebook and nothing can drift. A name the kernel cannot evaluate shows as ``{eval}`name` (NameError)``
  in a red box, which the browser test catches, instead of stopping the app;
* a first hidden code cell defines the helper those cells call (``__book_prose__``).
"""

from __future__ import annotations

import html
import json
import re
from functools import lru_cache
from pathlib import Path

import nbformat

BOOK = Path(__file__).resolve().parents[2] / "book"

LABEL_LINE = re.compile(r"^[ \t]*\(([^()\s]+)\)=[ \t]*\n?", re.M)
EVAL_ROLE = re.compile(r"\{eval\}`([^`]*)`")
XREF_ROLE = re.compile(r"\{(ref|doc|numref)\}`([^`]*)`")
FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|:{3,})(?P<info>.*)$")
DIRECTIVE = re.compile(r"^\{(?P<name>[A-Za-z0-9_:-]+)\}[ \t]*(?P<arg>.*)$")
OPTION = re.compile(r"^[ \t]*:([A-Za-z0-9_-]+):[ \t]*(.*)$")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)

ADMONITIONS = {"note", "tip", "hint", "important", "warning", "caution", "attention", "danger", "error",
               "seealso"}

#: The kernel-side helper (first, hidden code cell). It asks IPython for each name's ``text/plain`` the way
#: jupyterlab-myst's execute request does (``user_expressions``) and shows the Markdown with the values in.
#: The values are HTML character references inside a span, so a "$" in "$1.2 million" never opens maths and
#: a "*" never starts emphasis.
KERNEL_HELPER = r'''def __book_prose__(parts):
    """Voila (tools/voila/myst_voila.py): show a markdown cell with its {eval} roles evaluated here."""
    from IPython import get_ipython
    from IPython.display import display
    names = parts[1::2]
    found = get_ipython().user_expressions({str(i): n for i, n in enumerate(names)})
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            out.append(part)
            continue
        r = found[str((i - 1) // 2)]
        if r.get("status") == "ok":
            text = r.get("data", {}).get("text/plain", "")
            safe = "".join(c if c.isalnum() or c in " .,-" else "&#%d;" % ord(c) for c in text)
            out.append('<span class="book-eval">' + safe + "</span>")
        else:
            out.append('<span class="book-eval-error">{eval}`' + part + "` (" + str(r.get("ename")) + ")</span>")
    display({"text/markdown": "".join(out)}, raw=True)
'''


# --------------------------------------------------------------------------- what the roles point to
def _cells_markdown(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "markdown"]


def _exercise_labels(sources: list[str]) -> dict[str, int]:
    """``{exercise}`` labels in document order -> their number (1, 2, ...), as sphinx-exercise numbers them."""
    numbers: dict[str, int] = {}
    for source in sources:
        lines = source.splitlines()
        for i, line in enumerate(lines):
            m = FENCE_OPEN.match(line)
            d = DIRECTIVE.match(m.group("info").strip()) if m else None
            if d and d.group("name") == "exercise":
                n = len(numbers) + 1
                label = None
                for opt in lines[i + 1:]:
                    o = OPTION.match(opt)
                    if not o:
                        break
                    if o.group(1) == "label":
                        label = o.group(2).strip()
                numbers[label or f"_exercise{n}"] = n
    return numbers


@lru_cache(maxsize=4)
def book_targets(book: Path = BOOK) -> dict[str, tuple[str, str, str]]:
    """Every target the chapters can reference: label or doc name -> (file, anchor, title).

    A ``(label)=`` line followed by a heading targets that heading (its text is the link text, as on the
    site); an exercise's ``:label:`` targets "Exercise N"; a chapter's file stem (``{doc}`07_...```)
    targets its first heading."""
    targets: dict[str, tuple[str, str, str]] = {}
    for path in sorted(Path(book).glob("*.ipynb")):
        sources = _cells_markdown(path)
        text = "\n\n".join(sources)
        first = HEADING.search(text)
        targets[path.stem] = (path.name, "", _plain(first.group(1)) if first else path.stem)
        for m in LABEL_LINE.finditer(text):
            heading = HEADING.match(text[m.end():].lstrip("\n"))
            title = _plain(heading.group(1)) if heading else m.group(1)
            targets[m.group(1)] = (path.name, _slug(title) if heading else "", title)
        for label, n in _exercise_labels(sources).items():
            targets[label] = (path.name, "", f"Exercise {n}")
    return targets


def _plain(title: str) -> str:
    return re.sub(r"[*_`]", "", title).strip()


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def _xref(kind: str, body: str, here: str, targets: dict) -> str:
    m = re.fullmatch(r"\s*(.*?)\s*<([^<>]+)>\s*", body, re.S)
    text, target = (m.group(1), m.group(2).strip()) if m else (None, body.strip())
    if kind == "doc":
        target = Path(target).stem
    found = targets.get(target)
    if found is None:
        return text or target          # an unknown target: its words, never the raw role
    file, anchor, title = found
    href = ("" if file == here else file) + (f"#{anchor}" if anchor else "")
    return f"[{text or title}]({href or '#'})"


# --------------------------------------------------------------------------- MyST -> Markdown
def _box(kind: str, title: str, inner: str, folded: bool) -> str:
    title = html.escape(title)
    if folded:
        return (f'<details class="book-admonition {kind}"><summary class="admonition-title">{title}</summary>\n\n'
                f"{inner.strip()}\n\n</details>")
    return (f'<div class="book-admonition {kind}"><p class="admonition-title">{title}</p>\n\n'
            f"{inner.strip()}\n\n</div>")


def _directive(name: str, arg: str, options: dict, inner: str, targets: dict) -> str:
    classes = options.get("class", "").split()
    folded = "dropdown" in classes
    if name == "admonition":
        kind = next((c for c in classes if c in ADMONITIONS), "note")
        return _box(kind, arg or "Note", inner, folded)
    if name in ADMONITIONS:
        return _box(name, arg or name.capitalize(), inner, folded)
    if name == "exercise":
        label = options.get("label", "")
        title = targets.get(label, ("", "", "Exercise"))[2] + (f": {arg}" if arg else "")
        return _box("exercise", title, inner, folded)
    if name in ("solution", "solution-start"):
        title = "Solution to " + targets.get(arg.strip(), ("", "", "the exercise"))[2]
        if name == "solution":
            return _box("solution", title, inner, True)
        # the solution goes on in the next cells: the template folds everything up to the solution-end
        return (f'<div class="book-solution-start" data-title="{html.escape(title)}"></div>\n\n'
                f"{inner.strip()}").strip()
    if name == "solution-end":
        return '<div class="book-solution-end"></div>'
    if name in ("math",):
        return f"$$\n{inner.strip()}\n$$"
    if name in ("code-cell", "code-block", "code"):
        return f"```{arg}\n{inner}\n```"
    # any other directive: its content, never the raw fence
    return inner


def myst_to_markdown(source: str, here: str = "", targets: dict | None = None) -> str:
    """One markdown cell's MyST as plain Markdown (+ HTML boxes), ``{eval}`` roles left as they are.

    ``here`` is the notebook's file name (links to its own labels stay in the page); ``targets`` defaults to
    :func:`book_targets`."""
    targets = book_targets() if targets is None else targets
    lines = source.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        fence, info = m.group("fence"), m.group("info").strip()
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            j += 1
        body = lines[i + 1:j]
        d = DIRECTIVE.match(info)
        if d is None:                                 # a plain code block: verbatim
            out.extend(lines[i:j + 1])
        else:
            options = {}
            while body and OPTION.match(body[0]):
                o = OPTION.match(body[0])
                options[o.group(1)] = o.group(2).strip()
                body = body[1:]
            inner = myst_to_markdown("\n".join(body), here, targets)
            out.append(_directive(d.group("name"), d.group("arg").strip(), options, inner, targets))
        i = j + 1
    text = LABEL_LINE.sub("", "\n".join(out))
    return _outside_code(text, lambda t: XREF_ROLE.sub(lambda r: _xref(r.group(1), r.group(2), here, targets), t))


def _outside_code(text: str, fn) -> str:
    """Apply ``fn`` to the text outside fenced code blocks (roles in a code listing stay as written)."""
    parts = re.split(r"(^```[^\n]*\n.*?^```[ \t]*$)", text, flags=re.M | re.S)
    return "".join(p if i % 2 else fn(p) for i, p in enumerate(parts))


# --------------------------------------------------------------------------- the notebook Voila runs
#: The cell metadata key by which the ``book`` template (tools/voila/voila/templates/book/index.html.j2) folds a
#: solution that spans cells: ``{"start": title}`` on its first cell, ``{"end": True}`` on its last (both on a
#: one-cell solution). The template puts it on the cell's wrapper as ``data-book-solution`` and
#: ``data-book-solution-title``, which exist as soon as the page arrives; the markers inside the cells
#: (``.book-solution-start``) do not when the cell is prose with numbers, whose Markdown the page draws later
#: from the kernel's output. (Folding by those markers let a box whose end was not drawn yet swallow every
#: later cell, so solution 2 sat inside solution 1: issue 38.)
SOLUTION_KEY = "book_solution"
_SOLUTION_START = re.compile(r'<div class="book-solution-start" data-title="([^"]*)"></div>')


def _solution_marks(markdown: str) -> dict:
    """``{"start": title, "end": True}`` (either or both) for a cell's converted Markdown, or ``{}``."""
    marks: dict = {}
    start = _SOLUTION_START.search(markdown)
    if start:
        marks["start"] = html.unescape(start.group(1))
    if '<div class="book-solution-end"></div>' in markdown:
        marks["end"] = True
    return marks


def voila_notebook(nb: nbformat.NotebookNode, name: str = "", targets: dict | None = None
                   ) -> nbformat.NotebookNode:
    """The notebook as Voila should run it (a copy; see the module docstring)."""
    targets = book_targets() if targets is None else targets
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))   # a deep copy: the caller's notebook stays as it is
    cells = []
    quoted = False
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            cells.append(cell)
            continue
        text = myst_to_markdown(cell.source, name, targets)
        marks = _solution_marks(text)
        if EVAL_ROLE.search(text):
            quoted = True
            parts = EVAL_ROLE.split(text)
            code = nbformat.v4.new_code_cell(f"__book_prose__({parts!r})")
            code.metadata = {"tags": ["book-prose"], "jupyter": {"source_hidden": True}}
            cell = code
        else:
            cell.source = text
        if marks:
            cell.metadata[SOLUTION_KEY] = marks
        cells.append(cell)
    if quoted:
        helper = nbformat.v4.new_code_cell(KERNEL_HELPER)
        helper.metadata = {"tags": ["book-prose"], "jupyter": {"source_hidden": True}}
        cells.insert(0, helper)
    nb.cells = cells
    return nb


def prelaunch_hook(req=None, notebook=None, cwd=None):
    """``VoilaConfiguration.prelaunch_hook``: the notebook Voila is about to run -> :func:`voila_notebook`."""
    name = ""
    path = getattr(req, "path", None) or ""
    if path.endswith(".ipynb"):
        name = path.rsplit("/", 1)[-1]
    return voila_notebook(notebook, name)
