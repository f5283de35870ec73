"""The results page's section on what a population buys (equal_wall.jsonl): each shipped preset
against one member trained alone with its per-member settings, side by side on the same seed
and stopped at the same wall time.
"""

from __future__ import annotations

import statistics
from typing import Any

from results_tables import DATA, group, interval, jsonl, mean_sd, table

FILE = "equal_wall.jsonl"


def command(r: dict[str, Any], seeds: list[int]) -> str:
    alone = "".join(f" --alone {p}" for p in r["alone"])
    sets = "".join(f" --set {s}" for s in r["alone_sets"])
    minutes = "" if r["minutes"] is None else f" --minutes {r['minutes']:g}"
    return (f"python benchmarks/equal_wall.py --algo {r['algo']} --env {r['env']} --seeds "
            f"{','.join(str(s) for s in seeds)}{alone}{sets}{minutes}")


def budget(r: dict[str, Any]) -> str:
    return ("the preset's whole budget" if r["minutes"] is None
            else f"{r['minutes']:g} minutes")


def comparison(rows: list[dict[str, Any]]) -> str:
    rows = sorted(rows, key=lambda r: r["seed"])
    seeds = [r["seed"] for r in rows]
    first = rows[0]
    dates = " and ".join(sorted({r["date"] for r in rows}))
    out = [f"### {first['algo']} on {first['env']}, {budget(first)}: alone as "
           f"{' + '.join(p.rsplit('/', 1)[-1] for p in first['alone'])}"
           f"{' ' + ' '.join(first['alone_sets']) if first['alone_sets'] else ''}\n",
           f"`{command(first, seeds)}` ({first['machine']}, {dates})\n"]
    out.append(table(
        ["seed", "population", "alone", "population - alone", "population: env steps in s",
         "alone: env steps in s"],
        [[r["seed"], f"{r['population_kept_return']:.2f}", f"{r['alone_kept_return']:.2f}",
          f"{r['population_kept_return'] - r['alone_kept_return']:+.2f}",
          f"{r['population_env_steps']:,} in {r['population_wall_s']:.0f}",
          f"{r['alone_env_steps']:,} in {r['alone_wall_s']:.0f}"] for r in rows]))
    pop = [r["population_kept_return"] for r in rows]
    alone = [r["alone_kept_return"] for r in rows]
    out.append(table(["", "seeds", "kept: mean +- sd", "worst seed"],
                     [["population", len(pop), mean_sd(pop), f"{min(pop):.2f}"],
                      ["alone", len(alone), mean_sd(alone), f"{min(alone):.2f}"]]))
    out.append(f"Population minus alone, paired over seeds: "
               f"{interval([p - a for p, a in zip(pop, alone, strict=True)])}; mean wall time "
               f"{statistics.fmean(r['population_wall_s'] for r in rows):.0f} s against "
               f"{statistics.fmean(r['alone_wall_s'] for r in rows):.0f} s.\n")
    return "\n".join(out)


def arms(r: dict[str, Any]) -> tuple[Any, ...]:
    """What one comparison holds fixed: the preset, the budget and the member alone's recipe."""
    return (r["algo"], r["env"], r["minutes"] or 0, tuple(r["alone"]), tuple(r["alone_sets"]))


def population_section() -> str:
    if not (DATA / FILE).exists():
        return ""
    out = ["## A population against one member alone\n",
           "What the population buys at equal wall time. On each seed the shipped preset and "
           "one member trained alone with the same per-member settings (population 1 on the "
           "share of the pool one member has, no evolution, trained until the population is "
           "done) run side by side, one process and one torch thread each; each run's kept "
           "member (`checkpoints/best.pt`) on 100 fresh episodes, return summed over agents.\n"]
    out += [comparison(rs) for rs in group(jsonl(FILE), arms).values()]
    return "\n".join(out)
