"""README.md and benchmarks/README.md against what they describe (issue 38, readme39: the README read as a new
engineer would read it). Each statement checked here could drift silently: the layer table against the
import-linter contract layer by layer, the module count against src/, the book's parts against _toc.yml, the
``make`` commands against the Makefile, the catalogue counts against data/, and the benchmarks' index against
the scripts in benchmarks/. The expected values are read from those files, never from llmsizing."""
import csv
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
CHANGES = (ROOT / "CHANGES.md").read_text()   # the API changes, moved out of README.md by issue


def _contract_lines():
    """{layer number: [set of modules of one contract line, ...]} from pyproject.toml's layers contract,
    lowest line first; the comment lines ``# N. name`` open each of the seven layers (tomllib drops
    comments, so the text is read)."""
    text = (ROOT / "pyproject.toml").read_text()
    block = text[text.index("layers = ["):]
    block = block[:block.index("\n]")]
    layer, out = None, {}
    for line in block.splitlines()[1:]:
        line = line.strip()
        heading = re.match(r"#\s*(\d)\.", line)
        if heading:
            layer = int(heading.group(1))
        elif line.startswith('"'):
            assert layer is not None, line
            out.setdefault(layer, []).insert(0, {n.strip() for n in re.split(r"[|:]", line.strip('",'))})
    return out


def _readme_table():
    """{layer number: [set of modules, ...]} of README's "The library's layers" table: a row's modules in
    groups separated by ``;`` (one contract line each, lowest first)."""
    table = README[README.index("## The library's layers"):]
    table = table[:table.index("\n\n", table.index("| 7. presentation"))]
    rows = {}
    for line in table.splitlines():
        m = re.match(r"\| (\d)\. [^|]+\| ([^|]+)\|", line)
        if m:
            assert int(m.group(1)) not in rows, line
            rows[int(m.group(1))] = [[n.rstrip("/") for n in re.findall(r"`([a-z_0-9]+/?)`", group)]
                                     for group in m.group(2).split(";")]
    return rows


def test_the_layer_table_puts_each_module_once_in_its_contract_layer():
    """Every module of the contract appears exactly once in README's table, in the row of the layer the
    contract's comment puts it in, and each ``;``-group of a row is one line of the contract, in the
    contract's order from the ground up (test_layers.py checks only that the two name the same set). On
    main before session 39 the five one-module lines hf_types ... hf_ssm, and rl_phases, rl and rl_split,
    were written as one group each."""
    contract = _contract_lines()
    rows = _readme_table()
    assert sorted(rows) == sorted(contract) == [1, 2, 3, 4, 5, 6, 7]
    listed = [m for groups in rows.values() for g in groups for m in g]
    assert sorted(m for m in set(listed) if listed.count(m) > 1) == []
    for layer, groups in rows.items():
        assert [set(g) for g in groups] == contract[layer], f"layer {layer}"


def _modules():
    """(top-level modules, packages, the packages' modules) of src/llmsizing; __init__, __main__ left out."""
    src = ROOT / "src" / "llmsizing"
    top = [p for p in src.glob("*.py") if p.stem not in ("__init__", "__main__")]
    packages = [d for d in src.iterdir() if (d / "__init__.py").exists()]
    inner = [p for d in packages for p in d.glob("*.py") if p.stem != "__init__"]
    return top, packages, inner


def test_the_readme_counts_the_library_modules_as_they_are():
    """"The library is N modules (A at the top, B in the chart and widget packages)": A and B counted in src/
    (session 39: it said 157 = 126 + 31 while src/ held 133 + 33)."""
    top, packages, inner = _modules()
    assert sorted(p.name for p in packages) == ["charts", "widgets"]
    m = re.search(r"The library is (\d+) modules \((\d+) at the top, (\d+) in the chart and widget "
                  r"packages\)", README)
    assert m, "README no longer states the module count in the form this test reads"
    assert (int(m.group(2)), int(m.group(3))) == (len(top), len(inner))
    assert int(m.group(1)) == len(top) + len(inner)


def test_the_readme_names_the_books_parts_as_the_toc_does():
    """README's "**I · One GPU**, ..." list against _toc.yml's numbered captions ("Part I · One GPU"), and the
    number of parts it states; the appendix is named too."""
    captions = re.findall(r'caption: "Part ([IVX]+) · ([^"]+)"', (ROOT / "_toc.yml").read_text())
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}
    assert f"The book has {words[len(captions)]} parts" in README
    named = re.findall(r"\*\*([IVX]+) · ([^*]+)\*\*", README[:README.index("## Reading the site")])
    assert [(n, " ".join(t.split())) for n, t in named] == captions
    assert 'caption: "Appendix"' in (ROOT / "_toc.yml").read_text() and "appendix" in README[:3000].lower()


@pytest.mark.parametrize("text", [README, CHANGES], ids=["README.md", "CHANGES.md"])
def test_every_make_command_in_the_readme_is_a_makefile_target(text):
    targets = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), flags=re.M))
    used = set(re.findall(r"`(?:[A-Z_]+=\S+ )*make ([a-z][a-z-]*)", text))
    used |= set(re.findall(r"^make ([a-z][a-z-]*)", text, flags=re.M))
    assert used, "no make command found: the pattern no longer reads the file"
    assert sorted(used - targets) == []


def _rows(name):
    with open(ROOT / "data" / name, newline="") as fh:
        return list(csv.DictReader(fh))


def test_the_changes_count_published_runs_and_gpus_as_data_holds_them():
    """"data/published_runs.csv: N runs, F fitted and H held out" (the ``calibration`` column, yes / no) and
    "GPUs: N in the catalogue" (rows of data/gpus.csv), in CHANGES.md's issue-21 entry (in README.md before
    the API changes moved out of it)."""
    runs = _rows("published_runs.csv")
    m = re.search(r"`data/published_runs\.csv`: (\d+) runs, (\d+) fitted\s+and (\d+) held out", CHANGES)
    assert m
    fitted = sum(r["calibration"] == "yes" for r in runs)
    assert tuple(map(int, m.groups())) == (len(runs), fitted, len(runs) - fitted)
    m = re.search(r"\*\*GPUs\*\*: (\d+) in the catalogue", CHANGES)
    assert m and int(m.group(1)) == len(_rows("gpus.csv"))


def test_the_changes_fine_tuning_range_is_the_one_in_intervals_csv():
    """The fine-tuning paragraph's "against 81.4% and 2.36x" (79.7% before ft43) is data/intervals.csv's
    fine-tuning row (CHANGES.md, issue 22)."""
    row = next(r for r in _rows("intervals.csv") if r["area"] == "fine-tuning" and r["group"] == "all")
    stated = f"against {100 * float(row['measured_coverage']):.1f}% and {float(row['median_width']):.2f}x"
    assert stated in " ".join(CHANGES.split())


def test_the_changes_fine_tuning_ranges_per_base_are_the_ones_stored():
    """Session 43: the paragraph's "83.9% held at a median 2.26x wide (QLoRA 83.1% at 2.17x, stated 0.71-1.44;
    LoRA ..." is data/intervals.csv's fine-tuning-base rows and data/finetune_model.csv's ranges (CHANGES.md,
    issue 22)."""
    iv = {r["group"]: r for r in _rows("intervals.csv") if r["area"] == "fine-tuning-base"}
    fit = {r["constant"]: float(r["value"]) for r in _rows("finetune_model.csv")}
    text = " ".join(CHANGES.split())
    a = iv["all"]
    held_all = round(float(a["measured_coverage"]) * int(a["n_rows"]))     # 98 of 118: 83.05%, printed 83.1%
    assert (f"{100 * held_all / int(a['n_rows']):.1f}% held at a median "
            f"{float(a['median_width']):.2f}x wide") in text
    for group, step, key in (("quantised", "QLoRA", "quantised"), ("bf16-base", "LoRA", "bf16_base")):
        r = iv[group]
        n = int(r["n_rows"])
        held = round(float(r["measured_coverage"]) * n)                    # 49 of 59: 83.05%, printed 83.1%
        assert (f"{step} {100 * held / n:.1f}% at {float(r['median_width']):.2f}x, stated "
                f"{fit['range_low_' + key]:.2f}-{fit['range_high_' + key]:.2f}") in text


def test_the_readme_local_versions_satisfy_requirements_txt():
    """The Pyodide table's local `.venv` column names versions requirements.txt allows (session 39: it said
    matplotlib 3.11.2 while requirements.txt keeps matplotlib below 3.11 and .venv held 3.10.9)."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    reqs = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            req = Requirement(line)
            reqs[req.name.lower()] = req.specifier
    checked = 0
    for name in ("numpy", "pandas", "matplotlib", "ipywidgets"):
        row = re.search(rf"^\| {name} \| [^|]+ \| ([^|]+) \|", README, re.M)
        assert row, f"README: no version row for {name}"
        local = re.match(r"\d+(\.\d+)+", row.group(1).strip())
        assert local, row.group(0)
        assert Version(local.group(0)) in reqs[name], (name, local.group(0), str(reqs[name]))
        checked += 1
    assert checked == 4


def test_the_readme_command_line_examples_use_flags_the_cli_has():
    """Each ``llmsizing SUB ...`` example in "The command line" uses only subcommands and options that
    llmsizing.cli's parser defines (a renamed flag fails here, not in a reader's terminal)."""
    import argparse

    from llmsizing import cli

    ap = cli.parser()
    subs = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction)).choices
    block = README[README.index("## The command line"):README.index("## Tests")]
    examples = re.findall(r"^llmsizing (\S+)(.*)$", block, re.M)
    assert len(examples) >= 10
    for sub, rest in examples:
        assert sub in subs, sub
        known = {o for a in subs[sub]._actions for o in a.option_strings}
        flags = re.findall(r"(?<!\S)(--[a-z][a-z-]*)", rest.split("#")[0])
        assert sorted(set(flags) - known) == [], (sub, rest)


def _outside_code(text):
    """The text with fenced blocks and inline code spans blanked (links shown as examples are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


@pytest.mark.parametrize("name", ["README.md", "CHANGES.md"])
def test_the_readme_and_changes_name_only_files_that_exist(name):
    """Each relative link and each backticked repository path (``tools/...``, ``data/*.csv``, globs allowed)
    of README.md and CHANGES.md names a file of the repository; README links to CHANGES.md, which holds the
    API changes that moved out of it (session 45)."""
    text = (ROOT / name).read_text()
    links = [t for t in re.findall(r"\]\(([^)\s]+)\)", _outside_code(text)) if not re.match(r"[a-z]+:", t)]
    for target in links:
        assert (ROOT / target.split("#")[0]).exists(), (name, target)
    top = r"(?:book|src|tests|tools|data|benchmarks|_assets|\.ci)"
    paths = set(re.findall(rf"`({top}/[A-Za-z0-9_./*-]+)`", text))
    assert len(paths) >= 30, "the pattern no longer reads the file's paths"
    assert sorted(p for p in paths if not list(ROOT.glob(p.rstrip("/")))) == [], name
    if name == "README.md":
        assert "CHANGES.md" in links


# a helper's name is letters and the session number ("churn35", "review24c"); the unit-like words are not
_HELPER = re.compile(r"\b(?!(?:bf|fp|acc|int|x|p|sm|gfx|h|a|b|mi|tp|pp|dp|cp|ep)\d)[a-z]+\d{2}[a-z]?\b")


@pytest.mark.parametrize("name", ["README.md", "CHANGES.md"])
def test_the_readme_and_changes_name_no_session_or_helper(name):
    """A reader cannot look up "session 35, churn35": the text says the issue, or the date where a "before"
    matters. On main before session 45 README.md named sessions 19 times and helpers 28 times ("moeapi42")."""
    text = (ROOT / name).read_text()
    found = re.findall(r"\b[Ss]essions? \d+", text) + _HELPER.findall(text)
    assert found == [], (name, found)


BENCH = ROOT / "benchmarks"


@pytest.fixture(scope="module")
def bench_index():
    """{script: its line} of benchmarks/README.md's index: lines ``- `name.py`: ...``."""
    text = (BENCH / "README.md").read_text()
    names = re.findall(r"^- `([a-z0-9_]+\.py)`", text, flags=re.M)
    assert len(names) == len(set(names)), "a script listed twice"
    return text, names


def test_the_benchmarks_index_lists_every_script_once(bench_index):
    """A script added to benchmarks/ without a line in its README (what it measures, its issue, current proof
    or historical A/B) fails here; so does a line for a script that is gone."""
    _, names = bench_index
    assert sorted(names) == sorted(p.name for p in BENCH.glob("*.py"))


def test_the_benchmarks_targets_name_existing_proofs(bench_index):
    """Each target of the targets table names at least one script or tool that exists."""
    text, _ = bench_index
    table = text[text.index("## Targets"):]
    table = table[:table.index("\n\n", table.index("|---"))]
    rows = [line for line in table.splitlines() if line.startswith("|")][2:]
    assert len(rows) >= 4
    for line in rows:
        paths = re.findall(r"`((?:benchmarks|tests/browser|tools|tests)/[a-z0-9_/]+\.py)", line)
        assert paths, line
        for p in paths:
            assert (ROOT / p).exists(), p
