#!/usr/bin/env python3
"""Does the repository build with repo2docker as it stands? What can be shown without Docker.

    python3 tools/check_binder.py                       # chapter 12, 1, 2 and 4 participants
    python3 tools/check_binder.py --chapter 17 -n 1 2 --moves 4 --keep

BinderHub and Zero to JupyterHub images are built by repo2docker. This machine-independent check needs the
package registry (PyPI) and a few minutes, and NO Docker: it does not build an image. On a clean clone of the
committed HEAD (in a scratch folder under /tmp) it

1. installs jupyter-repo2docker into a scratch venv and runs ``repo2docker --no-build --debug`` (user jovyan,
   uid 1000, as BinderHub builds): it prints the Dockerfile repo2docker would build. The check reads from it
   the buildpack's choices: the Python of ``runtime.txt``, then ``pip install -r requirements.txt``, then
   ``pip install .``, then ``./postBuild``, in that order;
2. replays those steps outside Docker: a fresh venv with the ``runtime.txt`` Python (``pythonX.Y`` on PATH, or
   this Python if there is none: it says so), the image's base environment (jupyterlab, notebook,
   jupyter_server, ipykernel, ipywidgets, ... at the versions of repo2docker's conda lock file for that
   Python, installed with pip), then the three steps, with ``HOME`` the clone (the image's ``REPO_DIR`` is
   its home) and ``NB_PYTHON_PREFIX`` the venv. It checks that the library finds ``data/`` after postBuild;
3. starts ``jupyter lab`` from that venv with no ``--config`` (it reads what postBuild wrote) and checks,
   through the server's REST API, that the book's lab configuration is live: the "run the notebook" note in a
   chapter that has not run, the news pop-up's plugin disabled, every cell rendered (windowing "none"), the
   file browser folded on a first visit, the read-only extension manager, and a notebook saved back through
   the server keeping the repository's bytes;
4. runs ``tools/load_test.py --as-installed`` from that venv (N participants against one such server): the
   chapter runs, and kernel memory and redraw time as N grows.

What it cannot show: the image build itself (apt, conda, the Docker layers), conda's own packages (the venv
takes pip's wheels of the same versions), nor a hub's spawner and limits. pip's cache is used (the image build
passes ``--no-cache-dir``; what is installed is the same). Exit status 0 if every check passed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The image's base environment, by conda name -> pip name (repo2docker's environment.py-X.Y-linux-64.lock).
BASE_PACKAGES = {"pip": "pip", "setuptools": "setuptools", "jupyterlab": "jupyterlab", "notebook": "notebook",
                 "jupyter_server": "jupyter-server", "ipykernel": "ipykernel", "ipywidgets": "ipywidgets",
                 "jupyter-resource-usage": "jupyter-resource-usage",
                 "jupyter-offlinenotebook": "jupyter-offlinenotebook", "jupyterhub-base": "jupyterhub"}
#: The first words of the note tools/lab/jupyter_server_config.py puts under a chapter's title (RUN_HINT).
RUN_HINT_START = "The numbers in this chapter's text come from its code"
ANNOUNCEMENTS = "@jupyterlab/apputils-extension:announcements"


class Report:
    def __init__(self):
        self.failed = []

    def check(self, ok: bool, what: str, detail: str = "") -> bool:
        print(f"  [{'ok' if ok else 'FAIL'}] {what}{': ' + detail if detail else ''}", flush=True)
        if not ok:
            self.failed.append(what)
        return ok


def run(cmd, *, cwd=None, env=None, log: Path | None = None, timeout_s: float = 1200
        ) -> subprocess.CompletedProcess:
    """Run ``cmd``; its output goes to ``log`` (appended) if given, else is captured and returned."""
    print(f"$ {' '.join(str(c) for c in cmd)}", flush=True)
    if log is None:
        return subprocess.run(cmd, cwd=cwd, env=env, text=True, capture_output=True, timeout=timeout_s)
    with open(log, "a") as f:
        return subprocess.run(cmd, cwd=cwd, env=env, text=True, stdout=f, stderr=subprocess.STDOUT,
                              timeout=timeout_s)


def must(proc: subprocess.CompletedProcess, what: str, log: Path | None = None) -> None:
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed (status {proc.returncode}); see {log or proc.stderr[-2000:]}")


def dockerfile_steps(dockerfile: str, report: Report) -> None:
    """The order of the steps that read the repository: requirements.txt, the package, postBuild."""
    marks = {"requirements": 'pip install --no-cache-dir -r "requirements.txt"',
             "package": "pip install --no-cache-dir .\n", "postBuild": "RUN ./postBuild"}
    where = {k: dockerfile.find(v) for k, v in marks.items()}
    for k, i in where.items():
        report.check(i >= 0, f"the Dockerfile has the {k} step", marks[k].strip())
    if all(i >= 0 for i in where.values()):
        report.check(where["requirements"] < where["package"] < where["postBuild"],
                     "in the order requirements.txt, `pip install .`, postBuild")


def base_pins(r2d_python: Path, py_version: str) -> list[str]:
    """pip requirements ``name==version`` for BASE_PACKAGES, read from repo2docker's conda lock file."""
    code = "import repo2docker, os; print(os.path.dirname(repo2docker.__file__))"
    pkg = subprocess.run([r2d_python, "-c", code], text=True, capture_output=True, check=True).stdout.strip()
    lock = Path(pkg) / "buildpacks" / "conda" / f"environment.py-{py_version}-linux-64.lock"
    text = lock.read_text()
    pins = []
    for conda_name, pip_name in BASE_PACKAGES.items():
        m = re.search(rf"/{re.escape(conda_name)}-(\d[^-/]*)-[^-/]+\.(?:conda|tar\.bz2)", text)
        if m:
            pins.append(f"{pip_name}=={m.group(1)}")
    return pins


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lab_checks(env_python: Path, repo: Path, env: dict, chapter: Path, report: Report, log: Path) -> None:
    """``jupyter lab`` as the image starts it (no --config): is the book's configuration live?"""
    port, token = free_port(), secrets.token_hex(16)
    env = dict(env, JUPYTER_TOKEN=token)
    cmd = [str(env_python), "-m", "jupyterlab", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
           "--ServerApp.port_retries=0", "--ServerApp.open_browser=False", f"--ServerApp.root_dir={repo}"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    print(f"$ {' '.join(cmd)}", flush=True)
    base, auth = f"http://127.0.0.1:{port}", {"Authorization": f"token {token}"}

    def get(path: str) -> bytes:
        with urllib.request.urlopen(urllib.request.Request(base + path, headers=auth), timeout=30) as r:
            return r.read()

    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=f, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                get("/api/status")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"jupyter lab did not start; see {log}")
                time.sleep(0.5)
        rel = chapter.relative_to(repo).as_posix()
        model = json.loads(get(f"/api/contents/{rel}"))
        first = "".join(model["content"]["cells"][0]["source"])
        report.check(RUN_HINT_START in first, "the lab's contents manager adds the run-the-notebook note",
                     rel)
        page = get("/lab").decode()
        report.check(ANNOUNCEMENTS in page,
                     "the news pop-up's plugin is disabled (labconfig/page_config.json)")
        tracker = json.loads(get("/lab/api/settings/@jupyterlab/notebook-extension:tracker"))
        mode = tracker["schema"]["properties"]["windowingMode"].get("default")
        report.check(mode == "none", "every cell rendered (windowingMode default)", repr(mode))
        layout = json.loads(get("/lab/api/workspaces/lab")).get("data", {}).get("layout-restorer:data", {})
        folded = layout.get("left", {}).get("collapsed") is True
        report.check(folded, "a first visit's file browser is folded")
        body = json.dumps({"type": "notebook", "format": "json", "content": model["content"]}).encode()
        req = urllib.request.Request(f"{base}/api/contents/{rel}", data=body, method="PUT",
                                     headers=dict(auth, **{"Content-Type": "application/json"}))
        urllib.request.urlopen(req, timeout=60).read()
        diff = run(["git", "status", "--porcelain", "--", rel], cwd=repo).stdout.strip()
        report.check(diff == "", "a notebook saved through the server keeps the repository's bytes",
                     diff or "git status clean")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
    report.check("Extension Manager is 'readonly'" in log.read_text(), "the extension manager is read-only")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chapter", default="12",
                    help="the chapter of the load test and the lab checks (default 12)")
    ap.add_argument("-n", "--participants", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--moves", type=int, default=8)
    ap.add_argument("--repo2docker", default="jupyter-repo2docker", help="pip requirement (default: newest)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the scratch folder (default: only if a check failed)")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="check-binder-"))
    repo, logs = work / "repo", work / "logs"
    logs.mkdir()
    report = Report()
    head = run(["git", "rev-parse", "HEAD"], cwd=ROOT).stdout.strip()
    print(f"scratch folder {work}; committed HEAD {head[:12]} (uncommitted changes are not checked)",
          flush=True)
    must(run(["git", "clone", "-q", "--no-checkout", str(ROOT), str(repo)]), "git clone")
    must(run(["git", "checkout", "-q", head], cwd=repo), "git checkout")

    print("\n1. repo2docker --no-build", flush=True)
    r2d = work / "r2d-venv"
    must(run([sys.executable, "-m", "venv", str(r2d)]), "venv")
    must(run([r2d / "bin" / "pip", "install", "-q", args.repo2docker], log=logs / "r2d-pip.log"),
         "pip install jupyter-repo2docker", logs / "r2d-pip.log")
    version = run([r2d / "bin" / "repo2docker", "--version"]).stdout.strip()
    r2d_run = run([r2d / "bin" / "repo2docker", "--no-build", "--debug", "--user-id", "1000", "--user-name",
                   "jovyan", str(repo)], cwd=work)
    must(r2d_run, "repo2docker --no-build")
    (work / "Dockerfile").write_text(r2d_run.stdout)
    (logs / "repo2docker.log").write_text(r2d_run.stderr)
    print(f"  repo2docker {version}; Dockerfile: {work / 'Dockerfile'}", flush=True)
    runtime = (repo / "runtime.txt").read_text().strip()
    want = runtime.removeprefix("python-")
    said = re.search(r"Building conda environment for python=(\S+)", r2d_run.stdout + r2d_run.stderr)
    report.check(said is not None and said.group(1) == want, "the Python of runtime.txt",
                 f"{runtime} -> {said.group(0) if said else 'no conda environment line'}")
    dockerfile_steps(r2d_run.stdout, report)
    report.check("FROM " in r2d_run.stdout, "a Dockerfile was rendered",
                 next((x for x in r2d_run.stdout.splitlines() if x.startswith("FROM ")), ""))

    print("\n2. the Dockerfile's steps, replayed in a venv", flush=True)
    python = shutil.which(f"python{want}")
    if python is None:
        python = sys.executable
        print(f"  no python{want} on PATH: using {sys.version.split()[0]} ({python})", flush=True)
    env_dir = work / "env"
    must(run([python, "-m", "venv", str(env_dir)]), "venv")
    env_python, pip = env_dir / "bin" / "python", env_dir / "bin" / "pip"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "VIRTUAL_ENV", "MPLBACKEND"))}
    env.update(PATH=f"{env_dir / 'bin'}:{env['PATH']}", HOME=str(repo), NB_PYTHON_PREFIX=str(env_dir))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    pins = base_pins(r2d / "bin" / "python", want)
    print(f"  Python {run([env_python, '-V']).stdout.strip()}; base environment: {' '.join(pins)}",
          flush=True)
    steps = [("base environment", [pip, "install", *pins]),
             ("requirements.txt", [pip, "install", "-r", "requirements.txt"]),
             ("pip install .", [pip, "install", "."])]
    for i, (what, cmd) in enumerate(steps):
        log = logs / f"step{i}.log"
        must(run(cmd, cwd=repo, env=env, log=log), what, log)
    probe = ["-c", "import llmsizing.catalog as c, llmsizing; print(c.DATA_DIR.is_dir(), c.DATA_DIR)"]
    before = run([env_python, *probe], cwd=work, env=env)
    print(f"  after `pip install .`: import llmsizing -> "
          f"{(before.stdout.strip() or before.stderr.strip().splitlines()[-1])}", flush=True)
    (repo / "postBuild").chmod(0o755)
    log = logs / "postBuild.log"
    must(run(["./postBuild"], cwd=repo, env=env, log=log, timeout_s=300), "postBuild", log)
    written = env_dir / "etc" / "jupyter" / "jupyter_server_config.py"
    try:
        compile(written.read_text(), str(written), "exec")
        report.check(True, "postBuild wrote a server config that is valid Python", str(written))
    except (OSError, SyntaxError) as e:
        report.check(False, "postBuild wrote a server config that is valid Python", repr(e))
    after = run([env_python, *probe], cwd=work, env=env)
    report.check(after.stdout.startswith(f"True {repo / 'data'}"),
                 "after postBuild the library finds its data",
                 after.stdout.strip() or after.stderr.strip()[-300:])

    print("\n3. jupyter lab with the configuration postBuild wrote", flush=True)
    chapters = sorted((repo / "book").glob(f"{args.chapter}*.ipynb"))
    if len(chapters) != 1:
        raise SystemExit(f"--chapter {args.chapter!r} matches {len(chapters)} notebooks in book/")
    lab_checks(env_python, repo, env, chapters[0], report, logs / "lab.log")

    print("\n4. tools/load_test.py --as-installed", flush=True)
    load = run([env_python, "tools/load_test.py", "--as-installed", "--chapter", args.chapter, "-n",
                *map(str, args.participants), "--moves", str(args.moves)], cwd=repo, env=env)
    print(load.stdout + load.stderr, flush=True)
    report.check(load.returncode == 0, "the chapter runs and its widget redraws for every participant")

    print(f"\n{len(report.failed)} check(s) failed" + (f": {report.failed}" if report.failed else ""))
    if report.failed or args.keep:
        print(f"scratch folder kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
