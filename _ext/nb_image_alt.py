"""Sphinx extension: alt text for notebook figures from the output's own metadata.

IPython's ``Image(..., alt="...")`` stores the alt text in the display output's metadata
(``{"image/png": {"alt": "..."}}``), which JupyterLab and nbconvert read. myst-nb 1.x keeps only
``width``/``height`` from that metadata (``NbElementRenderer.render_image``), so every figure on the
site got Sphinx's fallback alt, the image's file name. This extension wraps ``render_image`` to copy
the output's ``alt`` onto the image node, unless the cell's own metadata (``mystnb: image: alt``)
already set one. ``llmsizing.charts.base.show`` sets the alt text of every figure in the book.

Checked by tools/check_site.py (``make check-site`` fails on a figure without alt text).
"""

from __future__ import annotations

from docutils import nodes
from sphinx.errors import ExtensionError

try:
    from myst_nb.core.render import NbElementRenderer
except ImportError as exc:  # pragma: no cover - the book always builds with myst-nb
    raise ExtensionError(f"nb_image_alt needs myst-nb: {exc}") from exc

_WRAPPED = "_llmsizing_alt_wrapped"


def _wrap_render_image() -> None:
    original = getattr(NbElementRenderer, "render_image", None)
    if original is None:
        raise ExtensionError("nb_image_alt: myst-nb has no NbElementRenderer.render_image any more")
    if getattr(original, _WRAPPED, False):
        return

    def render_image(self, data):
        result = original(self, data)
        meta = (data.output_metadata or {}).get(data.mime_type) or {}
        alt = meta.get("alt") if isinstance(meta, dict) else None
        if alt:
            for node in result:
                if isinstance(node, nodes.image) and not node.get("alt"):
                    node["alt"] = str(alt)
        return result

    setattr(render_image, _WRAPPED, True)
    NbElementRenderer.render_image = render_image


def setup(app):
    _wrap_render_image()
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
