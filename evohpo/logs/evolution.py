"""One console line per generation on what evolution did: who copied whom, what was explored.

Read from the generation's lineage records (as ``lineage.jsonl`` holds them), so the line says
what the records say. A copy is a new member with the next free id: ids count on past the
population size, and a copy's record names the member whose slot it took.
"""

from __future__ import annotations

import re
from typing import Any

# kinds that change the population; elite (kept), birth, diverged and restored records do not
ACTS = ("none", "hyperparameters", "weights", "architecture", "activation")
IDS = ("a copy takes the next free id, so member ids count on past the population size; "
       "lineage.jsonl has every record")


def value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, list):
        return "-".join(map(str, v))
    return str(v)


def change(r: dict[str, Any]) -> str:
    """What a record's mutation changed, in a few words ('' where nothing did)."""
    kind, before, after = r["kind"], r.get("before"), r.get("after")
    if kind == "hyperparameters":
        if not isinstance(after, dict):  # one hyperparameter, by a factor
            return f"{r['target']} {value(before)} -> {value(after)}"
        if len(after) == 1:
            (k, v), = after.items()
            return f"{k} {value((before or {}).get(k))} -> {value(v)}"
        # PBT's explore moves every mutable one: their names would fill the line
        return ", ".join(after) if len(after) == 2 else f"{len(after)} hyperparameters"
    if kind == "weights":
        return "actor weights perturbed"
    if kind == "architecture":  # target: agent/network/layerN
        return f"{r['target'].rpartition('/')[0]} {value(before)} -> {value(after)}"
    if kind == "activation":
        return f"{r['target'].partition('/')[0]} activation {before} -> {after}"
    return ""


def member(r: dict[str, Any]) -> str:
    return (f"{r['team']} " if r.get("team") else "") + f"member {r['member_id']}"


def item(r: dict[str, Any]) -> str:
    note, what = r.get("note") or "", change(r)
    if note.startswith("explores in place"):
        return f"{member(r)} explores in place ({what or 'nothing moved'})"
    out = f"{member(r)} copies {r['parent_id']}"
    if m := re.search(r"replaces (?:diverged )?member (\d+)", note):
        out += f" in place of {m.group(1)}"
    return out + (f" ({what})" if what else "")


def evolution_line(records: list[dict[str, Any]]) -> str | None:
    """The generation's line, or None where evolution changed no member."""
    acted = [r for r in records if r.get("kind") in ACTS]
    if not acted:
        return None
    kept = [(f"{r['team']} " if r.get("team") else "") + str(r["member_id"])
            for r in records if r.get("kind") == "elite"]
    parts = [item(r) for r in acted] + ([f"kept {', '.join(kept)}"] if kept else [])
    return f"gen {acted[0]['generation']:>4}  evolution: " + "; ".join(parts)


def new_ids(records: list[dict[str, Any]]) -> bool:
    """Whether a record is a copy (a new id)."""
    return any(r.get("kind") in ACTS and not (r.get("note") or "").startswith("explores in place")
               for r in records)
