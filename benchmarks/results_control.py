"""The results page's control section: fixed recipes at population 1 (control.jsonl).

Each variant is a config file and its overrides; the variant named ``control`` with no overrides
is the reference recipe, and every other variant is compared with it on the same seeds at the
same budget.
"""

from __future__ import annotations

from typing import Any

from results_tables import DATA, budget, group, jsonl, mean_sd, paired, table

REFERENCE = "control"
CURVE_EVERY = 1_000_000  # env steps between the curve table's columns


def steps_of(r: dict[str, Any]) -> int:
    """A run's env steps to the nearest 10k (it stops at its last whole vector step)."""
    return round(r["env_steps"], -4)


def variant(r: dict[str, Any]) -> str:
    sets = " ".join(f"`{s}`" for s in r["overrides"])
    return f"{r['name']} ({r['config'].rsplit('/', 1)[-1]}{', ' + sets if sets else ''})"


def is_reference(r: dict[str, Any]) -> bool:
    return r["name"] == REFERENCE and not r["overrides"]


def curve_at(curve: list[list[float]], steps: int) -> float | None:
    """The last generation's fitness at or before ``steps``."""
    seen = [y for x, y in curve if x <= steps]
    return seen[-1] if seen else None


def curve_table(rows: list[dict[str, Any]]) -> str:
    top = max(r["env_steps"] for r in rows)
    cols = list(range(CURVE_EVERY, top + 1, CURVE_EVERY))
    body = []
    for r in sorted(rows, key=lambda r: r["seed"]):
        cells = [curve_at(r["curve"], c) for c in cols]
        body.append([f"seed {r['seed']}", *("" if v is None else f"{v:.1f}" for v in cells)])
    return table(["", *(budget(c) for c in cols)], body)


def variants_table(rows: list[dict[str, Any]]) -> str:
    ref = {(steps_of(r), r["seed"]): r["kept_return"] for r in rows if is_reference(r)}
    body = []
    for (steps, name), rs in group(rows, lambda r: (steps_of(r), variant(r))).items():
        mine = {r["seed"]: r["kept_return"] for r in rs}
        base = {s: ref[(steps, s)] for s in mine if (steps, s) in ref}
        body.append([budget(steps), name, len(rs), mean_sd(list(mine.values())),
                     ", ".join(f"{mine[s]:.1f}" for s in sorted(mine)),
                     "" if is_reference(rs[0]) or not base else paired(mine, base)])
    return table(["env steps", "variant", "seeds", "kept: mean +- sd", "per seed",
                  "minus control [95% CI]"], body)


def control_section() -> str:
    if not (DATA / "control.jsonl").exists():
        return ""
    by_env = group(jsonl("control.jsonl"), lambda r: r["env"])
    out = ["## Fixed recipes at population 1\n",
           "One member trained alone with no evolution: what the learner reaches on its own, "
           "apart from the search. Each run's kept member (`checkpoints/best.pt`) on 100 fresh "
           "episodes, return summed over agents; a variant against the control on the same "
           "seeds at the same budget, paired.\n",
           "`python benchmarks/control.py --algo ALGO --env ENV --config CONFIG --steps N "
           "--seeds S [--set KEY=VALUE] [--name NAME]`\n"]
    spread = by_env.pop("simple_spread", [])
    if spread:
        out.append("### simple_spread: the reference recipe\n\nMAPPO with the MAPPO paper's "
                   "MPE update settings as far as the learner's keys reach (`benchmarks/"
                   "overlays/spread/control.yaml`): the control that says whether the learner, "
                   "not the search, limits what the presets reach.\n")
        out.append(variants_table(spread))
        longest = [r for r in spread if is_reference(r)
                   and steps_of(r) == max(steps_of(x) for x in spread if is_reference(x))]
        if longest:
            out.append(f"The control's learning curve at {budget(steps_of(longest[0]))} env "
                       "steps: the best member's fitness at each generation (on "
                       "`eval.episodes` episodes, the score that picks the kept member), every "
                       f"{budget(CURVE_EVERY)} env steps.\n")
            out.append(curve_table(longest))
    for env, rows in by_env.items():
        out.append(f"### {env}\n")
        out.append(variants_table(rows))
    return "\n".join(out)
