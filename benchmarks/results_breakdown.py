"""The results page's time breakdown: where a preset's wall time goes (breakdown.jsonl).

One table per preset and budget, a column per measured run (its commit and date), so that a run
before a change and one after it read side by side.
"""

from __future__ import annotations

from typing import Any

from results_tables import DATA, budget, group, jsonl, table

# the loop's phases in the order a window goes through them (evohpo.runtime.phases), then what
# no phase claims
ORDER = ("collect", "act", "scripted", "store", "learn", "score", "confirm", "evolve",
         "checkpoint", "log", "other", "setup")


def phase_order(rows: list[dict[str, Any]]) -> list[str]:
    """Every phase the rows hold: the loop's in order, each team's learning after learn."""
    seen = {k for r in rows for k in r["seconds"]}
    out: list[str] = []
    for name in ORDER:
        if name in seen:
            out.append(name)
        if name == "learn":
            out += sorted(k for k in seen if k.startswith("learn/"))
    return out + sorted(seen - set(out))


def cell(r: dict[str, Any], name: str) -> str:
    s = r["seconds"].get(name)
    return "" if s is None else f"{s:,.1f} ({r['share'][name]:.1%})"


def breakdown_table(rows: list[dict[str, Any]]) -> str:
    names = phase_order(rows)
    body = [[f"{'- ' if n.startswith('learn/') else ''}{n}", *(cell(r, n) for r in rows)]
            for n in names]
    body.append(["**wall**", *(f"{r['wall_s']:,.1f}" for r in rows)])
    return table(["phase: seconds (share of wall)", *(column(r) for r in rows)], body)


def column(r: dict[str, Any]) -> str:
    """A run's column: its commit and date, and how busy the machine was as it started."""
    load = f", load {r['load_before']:g}" if "load_before" in r else ""
    return f"{r['commit']} ({r['date']}{load})"


def breakdown_section() -> str:
    if not (DATA / "breakdown.jsonl").exists():
        return ""
    out = ["## Where the time goes\n",
           "A shipped preset trained once (its own pool, one torch thread, checkpoints and logs "
           "written), its wall time summed phase by phase over its generations (the "
           "`time/phase/*` metrics): `collect` the env pool's steps (waiting for async workers "
           "included), `act` the members' policies choosing actions (exploration included), "
           "`scripted` scripted opponents acting, `store` the replay memory or rollouts taking "
           "the step, `learn` gradient steps (`- learn/<team>`: a team's members' part of it), "
           "`score` members' evaluation (cross-play matches and the champions against the "
           "references included), `confirm` the kept member on fresh episodes, `evolve` "
           "selection and mutation, `checkpoint`, `log`; `other` what no phase of a window "
           "claims, `setup` the wall time outside every window (the process starting, the "
           "envs and the population built, closing). A column's load is the machine's 1-minute "
           "load average as its run started (other work on the machine slows every phase).\n"]
    for (env, algo, steps), rs in group(jsonl("breakdown.jsonl"),
                                        lambda r: (r["env"], r["algo"], r["steps"])).items():
        machines = sorted({r["machine"] for r in rs})
        out.append(f"### {env}, {algo}, {budget(steps)} env steps\n\n`python benchmarks/"
                   f"breakdown.py --algo {algo} --env {env} --steps {steps} --seed "
                   f"{rs[0]['seed']}` ({'; '.join(machines)})\n")
        out.append(breakdown_table(rs))
    return "\n".join(out)
