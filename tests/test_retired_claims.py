"""Claims a read found wrong and fixed in one chapter must not survive in another (review26 H1: ch3 still said
Megatron-LM refuses tp > KV heads after ch8 was fixed). Each entry: a phrase, and the fix that retired it."""

import json
import re
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parents[1] / "book"

RETIRED = {
    # read26b H2: Megatron-LM allows tp > kv_heads since f7dfb99 (2025-12-06), sharing each KV head
    r"Megatron-LM refuses such a layout": "Megatron-LM allows tp > KV heads since December 2025 (chapter 8)",
    # read26b H1: Megatron-LM asserts the stages divide the layers unless each stage's layers are given, so a
    # split that gives the first stages one layer more is the library's (an even split where they divide is not)
    r"Megatron(?:-LM)?'s (?:even )?split (?:gives|puts) the first": "the remainder-first split is the library's",
    # read26d H1: recomputation changes HFU, not MFU (training_time's docstring, chapter 10)
    r"at equal MFU the step is 33% slower|slows a step by 33% at equal MFU": "33% slower at equal HFU",
    # review26 M3: DeepSeek's routing limit is 4 of 8 groups; 4 nodes only where a group fills a node
    r"experts on at most 4 nodes": "group-limited routing (all_to_all.route_max_nodes)",
    # lows27b: DeepSeek-V3's 36.7B is one vocabulary matrix short of its note (chapter 1 derives its figures)
    r"gap stays recorded, not explained|we cannot say where the difference lies":
        "the 36.7B holds one vocabulary matrix, not two (chapter 1)",
    # lows28: NVIDIA's Blackwell datasheet gives an HGX B200 7.7 TB/s; 8 TB/s is the DGX B200's per-GPU share
    r"NVIDIA still quotes|not NVIDIA's figure|NVIDIA's per-GPU share":
        "NVIDIA gives two B200 bandwidths, DGX 8 TB/s and HGX 7.7 TB/s (chapter 6)",
    # review28a #14 (fix28a): the HGX B200's 7.7 TB/s rests on a reproduction of NVIDIA's datasheet (a Verda
    # blog post, data/gpus.csv), not on the PDF: the prose says "as reproduced by" wherever it cites it
    r"Blackwell datasheet(?!, as reproduced by)":
        "NVIDIA's Blackwell datasheet, as reproduced by a Verda blog post (chapter 6)",
    # lows28: the book has no sourced spot interruption rate (chapter 11)
    r"lose much of their time to it": "no sourced spot rate; AWS publishes bands only (chapter 11)",
}


def _markdown(path: Path) -> str:
    nb = json.loads(path.read_text())
    return " ".join(" ".join("".join(c["source"]).split()) for c in nb["cells"] if c["cell_type"] == "markdown")


@pytest.mark.parametrize("path", sorted(BOOK.glob("*.ipynb")), ids=lambda p: p.name)
def test_no_chapter_repeats_a_retired_claim(path):
    text = _markdown(path)
    found = [f"{pat!r} ({why})" for pat, why in RETIRED.items() if re.search(pat, text)]
    assert not found, f"{path.name} repeats: {'; '.join(found)}"


def test_the_check_finds_a_retired_claim():
    assert re.search(list(RETIRED)[0], "past it, vLLM replicates; Megatron-LM refuses such a layout.")
