#!/usr/bin/env python3
"""Fetch the JavaScript the built site needs, so it makes no network requests.

Downloads the pinned MathJax 3 tarball from the npm registry (stdlib urllib;
falls back to `npm pack` if urllib cannot reach the registry), checks its
sha512 against the pinned npm integrity hash, and unpacks only the parts the
site uses into

    _vendor_cache/static/vendor/mathjax/      (-> _build/html/_static/vendor/mathjax/)
    _vendor_cache/static/vendor/thebe/        (-> _build/html/_static/vendor/thebe/)
    _vendor_cache/static/vendor/requirejs/    (-> _build/html/_static/vendor/requirejs/)

thebe 0.9.x (the bundle with codemirror, @jupyterlab/services and the ipywidgets 8 widget manager) is used
only by the "Live code" button of `make serve-live` (_assets/live-code.js loads it on demand, against a
Jupyter server on 127.0.0.1); the static site never requests it. Its source maps and TypeScript sources are
not copied.

_config.yml lists _vendor_cache/static in html_static_path and points
mathjax_path at vendor/mathjax/tex-chtml.js. _vendor_cache/ is git-ignored;
`make clean` removes it. Idempotent: does nothing when the right version is
already unpacked.

No widget manager / require.js is loaded by the static pages: widget cells are tagged
remove-output, so no widget view is rendered on the static site and
_config.yml sets nb_ipywidgets_js to {}.
"""

from __future__ import annotations

import base64
import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "_vendor_cache"
STATIC = CACHE / "static"

PACKAGES = {
    "mathjax": {
        "version": "3.2.2",
        "integrity": "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw==",
        "dest": STATIC / "vendor" / "mathjax",
        # paths inside the tarball's package/es5/ that are copied; the rest
        # (SVG output, *-full bundles, node entry points) is not needed.
        "strip": "package/es5/",
        "keep": (
            "tex-chtml.js",
            "input/",
            "output/chtml",
            "ui/",
            "a11y/",
            "sre/",
            "adaptors/",
            "core.js",
            "startup.js",
            "loader.js",
        ),
    },
    "thebe": {
        "version": "0.9.3",
        "integrity": "sha512-Rb/7kVhtlffXra3kIe7OuIGE7awsm2/fGWxw21DiNfnWLnUQiDl9AWqYdshPwZPG/5DzLpsJRPix2xtCPtJmQQ==",
        "dest": STATIC / "vendor" / "thebe",
        # lib/index.js loads its numbered chunks (lib/NNNN.index.js) from its own folder
        "strip": "package/lib/",
        "keep": ("index.js", "thebe.css", *(f"{d}" for d in "0123456789")),
        "drop": (".map", ".d.ts"),
        "extra": {"package/LICENSE": "LICENSE", "package/package.json": "package.json"},
    },
    # thebe-core's widget manager fetch()es require.js 2.3.6 from cdnjs before it renders any widget (even
    # the built-in ipywidgets); _assets/live-code.js answers that one fetch with this local copy.
    "requirejs": {
        "version": "2.3.6",
        "integrity": "sha512-ipEzlWQe6RK3jkzikgCupiTbTvm4S0/CAU5GlgptkN5SO6F3u0UD0K18wy6ErDqiCyP4J4YYe1HuAShvsxePLg==",
        "dest": STATIC / "vendor" / "requirejs",
        "strip": "package/",
        "keep": ("require.js", "package.json"),
    },
}
REGISTRY = "https://registry.npmjs.org"


def _check(data: bytes, integrity: str) -> None:
    algo, _, expected = integrity.partition("-")
    got = base64.b64encode(hashlib.new(algo, data).digest()).decode()
    if got != expected:
        raise SystemExit(f"integrity mismatch: expected {integrity}, got {algo}-{got}")


def _download(name: str, version: str) -> bytes:
    url = f"{REGISTRY}/{name}/-/{name}-{version}.tgz"
    try:
        with urllib.request.urlopen(url, timeout=120) as r:
            return r.read()
    except Exception as exc:  # no direct route: let npm (and its config) try
        print(f"urllib failed ({exc}); trying npm pack", file=sys.stderr)
        npm = shutil.which("npm")
        if not npm:
            raise SystemExit(f"cannot download {name}: no route to the npm registry and no npm")
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(
                [npm, "pack", f"{name}@{version}", "--pack-destination", tmp, "--silent"],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            return (Path(tmp) / f"{name}-{version}.tgz").read_bytes()


def fetch(name: str, spec: dict) -> None:
    dest: Path = spec["dest"]
    stamp = dest / ".version"
    if stamp.exists() and stamp.read_text().strip() == spec["version"]:
        stamp.touch()  # keep make's timestamp check quiet
        return
    data = _download(name, spec["version"])
    _check(data, spec["integrity"])
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    n = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for m in tar.getmembers():
            if m.isfile() and m.name in spec.get("extra", {}):
                out = dest / spec["extra"][m.name]
                out.write_bytes(tar.extractfile(m).read())
                n += 1
                continue
            if not m.isfile() or not m.name.startswith(spec["strip"]):
                continue
            rel = m.name[len(spec["strip"]):]
            if not rel.startswith(spec["keep"]) or rel.endswith(spec.get("drop", ())) or ".." in Path(rel).parts:
                continue
            out = dest / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(tar.extractfile(m).read())
            n += 1
    stamp.write_text(spec["version"] + "\n")
    print(f"fetched {name}@{spec['version']}: {n} files -> {dest.relative_to(ROOT)}")


def main() -> int:
    for name, spec in PACKAGES.items():
        fetch(name, spec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
