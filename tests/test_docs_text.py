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


# a duration as prose writes one: "6 to 8 minutes", "584 s", "1.5 h"
DURATION = re.compile(r"\b\d+(?:[.,]\d+)?(?:\s*(?:to|-|\u2013)\s*\d+(?:[.,]\d+)?)?\s*"
                      r"(?:minutes?|mins?|seconds?|secs?|hours?|h|s)\b", re.I)
README_LINES = 200  # the front door


def test_the_readme_is_short_and_types_no_timing_by_hand() -> None:
    """Measured figures come from data files, into the generated block only: a duration typed
    by hand (how long the suite runs, say) goes stale with the machine and the code."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_LINES
    start, end = "<!-- presets:start -->", "<!-- presets:end -->"
    assert DURATION.search(readme.split(start)[1].split(end)[0])  # the pattern finds "10 min"
    by_hand = readme.split(start)[0] + readme.split(end)[1]
    found = [m[0] for m in DURATION.finditer(by_hand)]
    assert not found, f"durations typed by hand in README.md: {found}"


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
