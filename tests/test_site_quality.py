"""Issue 12, quality of the static site: figures' alt text, footer licence, console-error config.

Expected values are written by hand from the inputs (titles, labels, summaries chosen here), not copied from
the code's output.
"""

from __future__ import annotations

import base64
import importlib.util
import sys
import tomllib
from pathlib import Path
from unittest import mock

import pytest
import yaml

from llmsizing import charts

ROOT = Path(__file__).resolve().parent.parent


def _view(summary: str, *, title="", xlabel="", ylabel="", ncols=1, suptitle=""):
    fig, axes = charts.new_figure(ncols=ncols)
    axes = list(axes) if ncols > 1 else [axes]
    axes[0].set_title(title)
    axes[0].set_xlabel(xlabel)
    axes[0].set_ylabel(ylabel)
    if suptitle:
        fig.suptitle(suptitle)
    return charts.View(fig, summary), axes


def test_alt_text_reads_title_axes_and_summary_line():
    view, _ = _view("llama-3-8b: 16 GiB:\nsecond line", title="Memory by batch", xlabel="batch", ylabel="GiB")
    assert charts.figure_alt_text(view) == "Memory by batch; GiB against batch. llama-3-8b: 16 GiB"


def test_alt_text_skips_a_table_header_and_numbers_panels():
    view, axes = _view("GPU      memory   price\nH100     80       2.99", title="left one", suptitle="Overall",
                       ncols=2)
    axes[1].set_title("right one")
    axes[1].set_ylabel("USD")
    assert charts.figure_alt_text(view) == "Overall. panel 1: left one; panel 2: right one; USD"


def test_alt_text_is_bounded():
    view, _ = _view("x" * 1000, title="t")
    alt = charts.figure_alt_text(view, limit=50)
    assert len(alt) == 50 and alt.endswith("…")


def test_show_attaches_alt_and_keeps_text_output(capsys):
    view, _ = _view("summary line", title="A title")
    shown = []
    with mock.patch("IPython.display.display", side_effect=lambda obj, **kw: shown.append(obj)):
        charts.show(view)
    assert capsys.readouterr().out == "summary line\n"  # the printed text is unchanged
    (image,) = shown
    data, metadata = image._repr_png_()
    assert base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n"
    assert metadata == {"alt": "A title. summary line"}
    assert image.__repr__() == "<IPython.core.display.Image object>"  # text/plain as before


def _load_ext():
    spec = importlib.util.spec_from_file_location("nb_image_alt", ROOT / "_ext" / "nb_image_alt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sphinx_extension_copies_output_alt_onto_the_image_node(tmp_path):
    pytest.importorskip("myst_nb")
    from docutils import nodes
    from myst_nb.core.render import MimeData, NbElementRenderer

    original = NbElementRenderer.render_image
    try:
        _load_ext().setup(None)
        png = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
        self = mock.MagicMock()
        self.write_file.return_value = str(tmp_path / "x.png")
        for cell_options, out_meta, expected in [
            ({}, {"image/png": {"alt": "from output"}}, "from output"),
            ({"alt": "from cell"}, {"image/png": {"alt": "from output"}}, "from cell"),  # cell metadata wins
            ({}, {}, None),  # nothing to copy: Sphinx falls back to the uri as before
        ]:
            self.renderer.get_cell_level_config.return_value = dict(cell_options)
            data = MimeData("image/png", png, output_metadata=out_meta)
            (node,) = NbElementRenderer.render_image(self, data)
            assert isinstance(node, nodes.image)
            assert node.get("alt") == expected
    finally:
        NbElementRenderer.render_image = original


def test_config_footer_licence_theme_mode_and_css():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert cfg["copyright"] == "2026"
    opts = cfg["sphinx"]["config"]["html_theme_options"]
    # unset -> "Got invalid theme mode" console error on every page
    assert cfg["sphinx"]["config"]["html_context"]["default_mode"] in ("light", "dark", "auto")
    assert "MIT License" in opts["extra_footer"]
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    conf = cfg["sphinx"]["config"]
    assert "nb_image_alt" in conf["extensions"] and cfg["sphinx"]["local_extensions"]["nb_image_alt"] == "_ext"
    assert "_assets" in conf["html_static_path"] and conf["html_css_files"] == ["book.css"]
    assert "white-space: pre-wrap" in (ROOT / "_assets" / "book.css").read_text()
    # a root _static/ makes jupyter-book add every .js under html_static_path (all of MathJax) to every page
    assert not (ROOT / "_static").exists()


def test_static_check_flags_sphinx_fallback_alt():
    sys.path.insert(0, str(ROOT / "tools"))
    import check_site

    assert not check_site._has_description("../_images/abc.png", "../_images/abc.png")
    assert not check_site._has_description("", "x.png")
    assert not check_site._has_description(None, "x.png")
    assert check_site._has_description("Memory by batch", "../_images/abc.png")


def test_no_dollar_amount_is_typeset_as_math():
    """With myst's dollarmath, "$2.69 per hour ... $18,907" becomes one inline-math span (prose in italics, a
    MathJax error on the page). Currency dollars are escaped as \\$; an inline-math span that holds a markdown
    role, bold, or a plain word of 4+ letters (outside \\text{...}, commands and sub/superscripts) is prose."""
    import json
    import re

    markdown_it = pytest.importorskip("markdown_it")
    dollarmath = pytest.importorskip("mdit_py_plugins.dollarmath")
    md = markdown_it.MarkdownIt().use(dollarmath.dollarmath_plugin, allow_digits=True, allow_space=True)

    def inline_math(tokens):
        for t in tokens:
            if t.type == "math_inline":
                yield t.content
            yield from inline_math(t.children or [])

    bad = []
    for nb_path in sorted((ROOT / "book").glob("*.ipynb")):
        for cell in json.loads(nb_path.read_text())["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            for math in inline_math(md.parse("".join(cell["source"]))):
                tex = re.sub(r"[_^]\{[^{}]*\}", "", re.sub(r"\\[A-Za-z]+\*?(\{[^{}]*\})?", "", math))
                if re.search(r"`|\*\*|[A-Za-z]{4,}", tex):
                    bad.append(f"{nb_path.name}: ${math[:60]}$")
    assert not bad, "escape currency as \\$:\n" + "\n".join(bad)
