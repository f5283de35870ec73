"""The pages say what the code does: the files they name exist, the quickstart's flags list every
algorithm, and the presets table says at which budget each figure was measured."""

from __future__ import annotations

import re

import yaml

from evohpo.algos.registry import algo_names
from evohpo.config.presets import PRESETS_DIR
from tests.doc_commands import ROOT, pages

# a path in the repository, as the pages and the shipped YAML files write one
REPO_PATH = re.compile(r"\b(?:configs|evohpo|benchmarks|tests|docs)/[\w./-]+?"
                       r"\.(?:yaml|yml|py|json|jsonl|sh|md)\b")


def texts() -> dict[str, str]:
    files = [*pages(), ROOT / "CONTRIBUTING.md", ROOT / "benchmarks" / "README.md",
             *sorted((ROOT / "configs").rglob("*.yaml")), *sorted(PRESETS_DIR.glob("*.yaml"))]
    return {str(f.relative_to(ROOT)): f.read_text() for f in files}


def test_every_repository_file_the_pages_name_exists() -> None:
    named = {(where, m[0]) for where, text in texts().items() for m in REPO_PATH.finditer(text)}
    assert len(named) > 20  # the pattern finds what they name
    missing = sorted((where, path) for where, path in named if not (ROOT / path).exists())
    assert not missing, f"files the pages name that do not exist: {missing}"


def test_the_quickstarts_algo_flag_lists_every_algorithm() -> None:
    text = (ROOT / "docs" / "quickstart.md").read_text()
    row = re.search(r"^\| `--algo ([^`]+)` \|", text, re.M)
    assert row, "the quickstart's table of train flags has no --algo row"
    assert tuple(row[1].replace("\\|", "|").split("|")) == algo_names()


def test_the_presets_table_says_the_budget_each_figure_was_measured_at() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- presets:start -->")[1].split("<!-- presets:end -->")[0]
    rows = [[c.strip() for c in line.strip("|").split("|")]
            for line in block.splitlines() if line.startswith("| `")]
    assert rows
    for name, _, measured, *_ in rows:
        own = yaml.safe_load((PRESETS_DIR / f"{name.strip('`')}.yaml").read_text())["steps"]
        own_text = f"{own / 1e6:g}M" if own >= 1_000_000 else f"{own // 1000}k"
        at = re.search(r"(?:\(|^)([\d.]+[Mk])\)?", measured)
        assert at, measured
        if at[1] != own_text:  # measured below (or above) the preset's own budget: say so
            assert measured.endswith(f"the preset runs {own_text}"), (name, measured)
