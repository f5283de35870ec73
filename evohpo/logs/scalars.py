"""The numbers a generation charts, the same on W&B and TensorBoard.

Everything the trainer logs that is a number (bools as 0/1), hidden-layer specs such as
``"64-64"`` as ``.../units`` and ``.../layers``, the best member's values as ``best/<key>``, and
selection's verdict on each way a member was made (``evo/survived``, ``evo/survived/<kind>``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

MEMBER_KEY = re.compile(r"member/([^/]+)/(.+)")
LAYERS = re.compile(r"\d+(-\d+)*")          # a hidden-layer spec such as "64-64"


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def chartable(metrics: dict[str, Any]) -> dict[str, Any]:
    """The metrics that chart: numbers (bools as 0/1), hidden-layer specs as units and layers.

    Other strings (activations) and None are left to W&B's tables: a history key that is
    sometimes a string does not chart.
    """
    out: dict[str, Any] = {}
    for k, v in metrics.items():
        if isinstance(v, bool):
            out[k] = int(v)
        elif is_number(v):
            out[k] = v
        elif isinstance(v, str) and LAYERS.fullmatch(v):
            widths = [int(w) for w in v.split("-")]
            out[k + "/units"], out[k + "/layers"] = sum(widths), len(widths)
    return out


def member_fields(metrics: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{member id: {field: value}} from ``member/<id>/<field>`` keys, in the order logged
    (= slots)."""
    out: dict[str, dict[str, Any]] = {}
    for k, v in metrics.items():
        m = MEMBER_KEY.fullmatch(k)
        if m:
            out.setdefault(m.group(1), {})[m.group(2)] = v
    return out


def generation_scalars(metrics: dict[str, Any],
                       members: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A generation's chartable metrics, with the best member's (of ``members``, its
    :func:`member_fields`) as ``best/<key>``."""
    out = chartable(metrics)
    best = metrics.get("eval/best_member")
    for k, v in chartable(members.get(str(best), {})).items():
        out[f"best/{k}"] = v
    return out


def add_selection(row: dict[str, Any], members: Iterable[str], made_by: Mapping[str, str],
                  records: list[dict[str, Any]]) -> set[str]:
    """Add to a generation's ``row`` what the selection after it did with its ``members`` (ids,
    each made as ``made_by`` says): ``evo/survived`` (members chosen as a parent or kept as the
    elite), ``evo/survived/<kind>`` (those among them made that way) and ``evo/<kind>`` (records
    of each kind, where the trainer did not count them). Returns the chosen ids."""
    chosen = {str(r["member_id"] if r["kind"] == "elite" else r["parent_id"]) for r in records}
    counts: dict[str, int] = {}
    for mid in members:
        kind = made_by[mid]
        counts[kind] = counts.get(kind, 0) + (mid in chosen)
    row["evo/survived"] = sum(counts.values())
    for kind, n in counts.items():
        row[f"evo/survived/{kind}"] = n
    for r in records:  # a kind the trainer does not count yet still shows
        row.setdefault(f"evo/{r['kind']}", sum(x["kind"] == r["kind"] for x in records))
    return chosen
