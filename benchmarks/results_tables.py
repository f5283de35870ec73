"""What the results pages' sections share: the data files in benchmarks/results/ and the ways
they are written out (tables, means, paired 95% intervals, budgets). The page
(results_page.py) and each of its sections import from here; no section imports the page.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "results"
# two-sided 95% t quantiles by degrees of freedom (1.96 past the table)
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
       2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086]


def jsonl(name: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (DATA / name).read_text().splitlines() if x.strip()]


def data(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def table(head: list[str], rows: Iterable[Iterable[Any]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def mean_sd(xs: list[float], digits: int = 2) -> str:
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{statistics.fmean(xs):.{digits}f} +- {sd:.{digits}f}"


def interval(xs: list[float]) -> str:
    """Mean of per-seed paired differences with its 95% t interval."""
    m = statistics.fmean(xs)
    if len(xs) < 2:
        return f"{m:+.2f} (1 seed)"
    half = (T95[len(xs) - 2] if len(xs) - 1 <= len(T95) else 1.96) * statistics.stdev(xs) \
        / math.sqrt(len(xs))
    return f"{m:+.2f} [{m - half:+.2f}, {m + half:+.2f}]"


def paired(a: dict[int, float], b: dict[int, float]) -> str:
    """``a`` minus ``b`` on the seeds both have: the mean difference with its 95% interval."""
    common = sorted(set(a) & set(b))
    return f"{interval([a[s] - b[s] for s in common])} (n={len(common)})" if common else ""


def group(rows: Iterable[dict[str, Any]], key: Callable[[dict[str, Any]], Any]
          ) -> dict[Any, list[dict[str, Any]]]:
    out: dict[Any, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(key(r), []).append(r)
    return dict(sorted(out.items(), key=lambda kv: str(kv[0])))


def budget(steps: int) -> str:
    return f"{steps / 1e6:g}M" if steps >= 1_000_000 else f"{steps // 1000}k"
