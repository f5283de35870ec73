"""Write the results pages from the data in benchmarks/results/.

    python benchmarks/results_page.py           # docs/results.md, docs/snippets/hpo_table.md and
                                                # the README's presets block
    python benchmarks/results_page.py --check   # exit 1 naming the first stale file

Every figure comes from a data file; nothing here is typed by hand but the section titles.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

import yaml
from results_breakdown import breakdown_section
from results_control import control_section
from results_population import population_section
from results_tables import DATA, ROOT, budget, data, group, interval, jsonl, mean_sd, paired, table

START, END = "<!-- presets:start -->", "<!-- presets:end -->"


# ----------------------------------------------------------------------------- presets

def preset_reach(p: dict[str, Any], readme: bool) -> list[str]:
    """What one preset reaches: one line per team (and reference), over its seeds."""
    rows = p["rows"]
    n = len({r["seed"] for r in rows})
    if rows[0]["against"] is None:
        return [f"{mean_sd([r['mean'] for r in rows])} over {n} seeds"]
    out = []
    for (team, against), rs in group(rows, lambda r: (r["team"], r["against"])).items():
        beats = sum(r["ci95_low"] > 0 for r in rs)
        d = [r["diff"] for r in rs]
        spread = (f"{mean_sd(d)} over {n} seeds" if readme else interval(d))
        out.append(f"{team} vs {against}: {spread} above it, ahead in {beats} of {len(rs)}")
    return out


def preset_scale(p: dict[str, Any]) -> str:
    rows = p["rows"]
    if rows[0]["against"] is None:
        return str(p["reference_scale"])
    refs = group(rows, lambda r: (r["team"], r["against"]))
    return "; ".join(f"{t} {a} {statistics.fmean(r['reference_mean'] for r in rs):.1f}"
                     for (t, a), rs in refs.items() if a == "heuristic")


def measured_at(p: dict[str, Any]) -> str:
    """The budget a preset's figure was measured at, and the preset's own where it differs."""
    from evohpo.config.presets import PRESETS_DIR

    spent = budget(p["steps"])
    if "wall_minutes" in p:
        spent = f"{p['wall_minutes']:g} min ({spent})"
    own = yaml.safe_load((PRESETS_DIR / f"{p['preset']}.yaml").read_text())["steps"]
    return spent if own == p["steps"] else f"{spent}; the preset runs {budget(own)}"


def presets_table(readme: bool) -> str:
    rows = []
    for p in [*data("presets.json"), *wall_presets()]:
        reach = "<br>".join(preset_reach(p, readme))
        rows.append([f"`{p['preset']}`", p["env"], measured_at(p), reach, preset_scale(p),
                     f"`{p['command']}`"])
    return table(["preset", "env", "measured at", "what it reaches", "reference scale",
                  "command"], rows)


def wall_command(rs: list[dict[str, Any]]) -> str:
    """The wall_budget.py command of a group of rows (every algo and override in it)."""
    algos = ",".join(dict.fromkeys(r["algo"] for r in rs))
    sets = "".join(f" --set {s}" for s in dict.fromkeys(s for r in rs for s in r["overrides"]))
    return (f"python benchmarks/wall_budget.py --env {rs[0]['env']} --algos {algos} --minutes "
            f"{rs[0]['minutes']:g} --parallel {rs[0]['parallel']}{sets}")


def wall_presets() -> list[dict[str, Any]]:
    """The presets measured only at equal wall time (wall_budget.jsonl), in presets.json's shape:
    the ones presets.json does not list."""
    from evohpo.config.presets import preset_path

    listed = {p["preset"] for p in data("presets.json")}
    scales = {p["env"]: p["reference_scale"] for p in data("presets.json")}
    out = []
    rows = jsonl("wall_budget.jsonl") if (DATA / "wall_budget.jsonl").exists() else []
    for (env, minutes), rs in group(rows, lambda r: (r["env"], r["minutes"])).items():
        for algo, xs in group(rs, lambda r: r["algo"]).items():
            name = preset_path(algo, env).stem
            if name in listed:
                continue
            out.append({"preset": name, "env": env, "algo": algo, "wall_minutes": minutes,
                        "steps": round(statistics.fmean(r["env_steps"] for r in xs), -5),
                        "reference_scale": scales[env], "command": wall_command(rs),
                        "rows": [{"seed": r["seed"], "against": None, "mean": r["kept_return"]}
                                 for r in sorted(xs, key=lambda r: r["seed"])]})
    return out


# ----------------------------------------------------------------------------- hpo value

def hpo_cells(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[int, float]]:
    return {k: {r["seed"]: r["mean"] for r in rs}
            for k, rs in group(rows, lambda r: (r["start"], r["variant"])).items()}


def hpo_snippet() -> str:
    rows = [r for r in jsonl("hpo_value.jsonl") if (r["env"], r["algo"], r["steps"])
            == ("simple_speaker_listener", "matd3", 2_000_000)]
    cells = hpo_cells(rows)
    pbt = cells[("sample", "explore")]
    names = [("PBT as shipped, from a sampled start", ("sample", "explore")),
             ("fixed hyperparameters: the preset", ("preset", "fixed")),
             ("random search over the same sample", ("sample", "fixed"))]
    body = [[name, len(cells[c]), mean_sd(list(cells[c].values())),
             "" if c == ("sample", "explore") else paired(pbt, cells[c])] for name, c in names]
    return ("MATD3 on simple_speaker_listener, 2M env steps, population 4: the best.pt member "
            f"on {rows[0]['episodes']} fresh episodes per run (return summed over agents).\n\n"
            + table(["run", "seeds", "mean +- sd", "PBT minus it, paired [95% CI]"], body))


def hpo_section() -> str:
    rows = jsonl("hpo_value.jsonl")
    out = ["## What evolution buys\n", "Each run's best.pt member on fresh episodes, summed "
           "over agents; paired differences against `fixed` from the same start, per seed, "
           "with a 95% t interval.\n"]
    for (env, algo, steps), rs in group(rows, lambda r: (r["env"], r["algo"], r["steps"])).items():
        cells = hpo_cells(rs)
        eps = sorted({r["episodes"] for r in rs})
        out.append(f"### {env}, {algo}, {budget(steps)} env steps\n\n`python benchmarks/"
                   f"hpo_value.py --env {env} --algo {algo} --steps {steps} --cells START/VARIANT"
                   f"` (episodes per run: {', '.join(map(str, eps))})\n")
        body = [[s, v, len(c), mean_sd(list(c.values())),
                 "" if v == "fixed" else paired(c, cells.get((s, "fixed"), {}))]
                for (s, v), c in cells.items()]
        out.append(table(["start", "variant", "seeds", "mean +- sd", "minus fixed [95% CI]"],
                         body))
    return "\n".join(out)


# ----------------------------------------------------------------------------- competitive

def current(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if not r.get("superseded")]


def competitive_section() -> str:
    rows = current(jsonl("competitive.jsonl"))
    out = ["## Competitive games\n", "`python benchmarks/competitive.py --env ENV --steps N "
           "--seeds S --variants preset,joint` (rows are appended to "
           "benchmarks/results/competitive.jsonl). Per seed, a paired difference over 200 fresh "
           "episodes; below, its mean over seeds with a 95% t interval, and the seeds whose own "
           "interval is above zero. Variants marked adopted are what the preset ships.\n",
           "### Head to head\n", "Per seat, the variant's champion minus the other run's, each "
           "against both runs' other team.\n"]
    h2h = group([r for r in rows if r["measurement"] == "head_to_head"],
                lambda r: (r["env"], r["steps"], r["variant"], r["against"], r["team"]))
    out.append(table(["env", "steps", "variant", "against", "team", "per seed", "mean [95% CI]",
                      "adopted"],
                     [[e, budget(s), v, a, t, ", ".join(f"{r['diff']:+.2f}" for r in rs),
                       interval([r["diff"] for r in rs]), "yes" if rs[0]["adopted"] else ""]
                      for (e, s, v, a, t), rs in h2h.items()]))
    for against in ("heuristic", "random"):
        out.append(f"### Champions against the {against}\n")
        ref = group([r for r in rows if r["measurement"] == "vs_reference"
                     and r["against"] == against],
                    lambda r: (r["env"], r["steps"], r["variant"], r["team"]))
        out.append(table(["env", "steps", "variant", "team", "seeds", "champion minus "
                          "reference [95% CI]", "seeds ahead", "adopted"],
                         [[e, budget(s), v, t, len(rs), interval([r["diff"] for r in rs]),
                           sum(r["ci95_low"] > 0 for r in rs), "yes" if rs[0]["adopted"] else ""]
                          for (e, s, v, t), rs in ref.items()]))
    return "\n".join(out)


# ----------------------------------------------------------------------------- speed

def speed_sections() -> str:
    t, lr, g, ag, ray = (data(f) for f in ("throughput.json", "learner.json",
                                            "gpu_crossover_h200.json", "agilerl.json",
                                            "ray_scaling.json"))
    out = [f"## Env throughput\n\n`{t['command']}` ({t['machine']}, {t['date']}; {t['unit']})\n",
           table(["env", "backend", "pool", "envs", "env steps/s"],
                 [[r["env"], r["backend"], r["pool"] or "", r["envs"],
                   f"{r['env_steps_per_s']:,}"] for r in t["pools"]]),
           f"The whole loop ({t['loop']['note']}):\n",
           table(["backend", "pool", "env steps/s"],
                 [[r["backend"], r["pool"] or "", f"{r['env_steps_per_s']:,}"]
                  for r in t["loop"]["rows"]]),
           f"## Learning update\n\n`{lr['command']}` ({lr['machine']}, {lr['date']}; "
           f"{lr['unit']}; before: commit {lr['rows'][0]['before_commit']})\n",
           table(["env", "algo", "before", "after"],
                 [[r["env"], r["algo"], "-".join(f"{x:,}" for x in r["before"]),
                   "-".join(f"{x:,}" for x in r["after"])] for r in lr["rows"]]),
           f"## GPU or CPU\n\n`{g['command']}` ({g['machine']}, {g['date']}; learn us per "
           "update)\n"]
    cells = group(g["rows"], lambda r: (r["env"], r["hidden"][0], r["batch"]))
    out.append(table(["env", "hidden", "batch", "cuda", "cpu", "cpu / cuda"],
                     [[e, w, b, f"{d['cuda']:,.0f}", f"{d['cpu']:,.0f}",
                       f"{d['cpu'] / d['cuda']:.2f}"]
                      for (e, w, b), rs in sorted(cells.items())
                      for d in [{r["device"]: r["learn_us"] for r in rs}]]))
    out.append(f"Whole loop, `{g['loop_command']}`:\n")
    out.append(table(["hidden", "device", "seconds"],
                     [[r["hidden"][0], r["device"], r["train_s"]] for r in g["loop"]]))
    out.append(f"## Side by side with AgileRL {ag['agilerl_version']}\n\n`{ag['command']}` "
               f"({ag['machine']}, {ag['date']}; {ag['env']}, {ag['algo']}; fitness: "
               f"{ag['fitness']})\n")
    out.append(table(["measured", "AgileRL threads", "our envs", "AgileRL env steps/s",
                      "evohpo env steps/s", "ratio", "fitness at AgileRL's end: AgileRL / evohpo"],
                     [[r["when"], r["agilerl_threads"], r["our_envs"],
                       f"{r['agilerl_env_steps_per_s']:,}", f"{r['evohpo_env_steps_per_s']:,}",
                       f"{r['evohpo_env_steps_per_s'] / r['agilerl_env_steps_per_s']:.1f}x",
                       f"{r['agilerl_fitness']} / {r['evohpo_fitness_at_wall']}"]
                      for r in ag["rows"]]))
    out.append(f"## Ray\n\n`{ray['command']}` ({ray['machine']}, {ray['date']}; "
               f"{ray['setup']})\n")
    base = ray["rows"][0]["env_steps_per_s"]
    out.append(table(["run", "actors", "members", "envs", "env steps/s", "vs local"],
                     [[r["run"], r["actors"], r["members"], r["envs"],
                       f"{r['env_steps_per_s']:,}", f"{r['env_steps_per_s'] / base:.2f}x"]
                      for r in ray["rows"]]))
    return "\n".join(out)


def learner_sections() -> str:
    """The population learner: one update of a whole population, fused against one by one; and
    the main command end to end before and after it."""
    lp = data("learner_population.json")
    out = [f"## Population learner\n\n`{lp['command']}` ({lp['machine']}, {lp['date']}; "
           f"{lp['unit']})\n",
           table(["env", "hidden", "torch threads", "members", "one by one (ms)", "fused (ms)",
                  "speed-up"],
                 [[r["env"], r["hidden"][0], r["threads"], r["members"], r["one_by_one_ms"],
                   r["fused_ms"], f"{r['speedup']:.2f}x"] for r in lp["rows"]])]
    pc = data("population_cost.json")
    out.append(f"### Larger populations\n\n`{pc['command']}` ({pc['machine']}, {pc['date']}; "
               f"before: commit {pc['before_commit']}; {pc['note']})\n")
    out.append(table(["members", "before (s)", "after (s)", "after / before",
                      "after, s per 100k env steps"],
                     [[r["members"], r["before_s"], r["after_s"],
                       f"{r['after_s'] / r['before_s']:.2f}", f"{r['after_s'] / 2:.1f}"]
                      for r in pc["rows"]]))
    th = data("torch_threads.json")
    out.append(f"### Torch threads\n\n`{th['command']}` ({th['machine']}, {th['date']}; "
               f"{th['note']})\n")
    out.append(table(["torch_threads", "wall (s)"],
                     [[r["torch_threads"], r["wall_s"]] for r in th["rows"]]))
    path = DATA / "end_to_end.json"
    if path.exists():
        e = data("end_to_end.json")
        out.append(f"### End to end\n\n`{e['command']}` ({e['machine']}, {e['date']}; before: "
                   f"commit {e['before_commit']}; {e['note']})\n")
        runs = group(e["rows"], lambda r: (r["preset"], r["seed"]))
        out.append(table(["preset", "seed", "wall before (s)", "wall after (s)", "after / before",
                          "return before", "return after"],
                         [[p, s, d["before"]["wall_s"], d["after"]["wall_s"],
                           f"{d['after']['wall_s'] / d['before']['wall_s']:.2f}",
                           *("" if d[c]["return_100"] is None else d[c]["return_100"]
                             for c in ("before", "after"))]
                          for (p, s), rs in runs.items()
                          for d in [{r["code"]: r for r in rs}]]))
        for preset in dict.fromkeys(p for p, _ in runs):
            diffs = [d["after"]["return_100"] - d["before"]["return_100"]
                     for (p, _), rs in runs.items() if p == preset
                     for d in [{r["code"]: r for r in rs}] if len(d) == 2
                     and None not in (d["before"]["return_100"], d["after"]["return_100"])]
            if len(diffs) > 1:
                out.append(f"{preset}: return after minus before, paired by seed "
                           f"({len(diffs)} seeds): {interval(diffs)}.\n")
    return "\n".join(out)


# ----------------------------------------------------------------------------- wall budget

def wall_section() -> str:
    """The presets at equal wall time (wall_budget.jsonl): the kept member's return on 100 fresh
    episodes per algorithm, and each pair's paired difference over the same seeds."""
    path = DATA / "wall_budget.jsonl"
    if not path.exists():
        return ""
    out = ["## Equal wall time\n\nEach algorithm's shipped preset, stopped within the same "
           "wall-time budget; the kept member (`checkpoints/best.pt`) on 100 fresh episodes, "
           "return summed over agents.\n"]
    for (env, minutes), rs in group(jsonl("wall_budget.jsonl"),
                                    lambda r: (r["env"], r["minutes"])).items():
        by = group(rs, lambda r: r["algo"])
        dates = sorted({r["date"] for r in rs})
        out.append(f"### {env}, {minutes:g} minutes\n\n`{wall_command(rs)}` ({rs[0]['machine']}, "
                   f"{' and '.join(dates)})\n")
        out.append(table(["algo", "seeds", "kept member: mean +- sd", "per seed", "env steps",
                          "wall (s)"],
                         [[a, len(x), mean_sd([r["kept_return"] for r in x]),
                           ", ".join(f"{r['kept_return']:.1f}" for r in sorted(
                               x, key=lambda r: r["seed"])),
                           f"{statistics.fmean(r['env_steps'] for r in x):,.0f}",
                           f"{statistics.fmean(r['wall_s'] for r in x):.0f}"]
                          for a, x in by.items()]))
        names = list(by)
        pairs = [[f"{a} - {b}", paired({r["seed"]: r["kept_return"] for r in by[a]},
                                       {r["seed"]: r["kept_return"] for r in by[b]})]
                 for i, a in enumerate(names) for b in names[i + 1:]]
        if pairs:
            out.append(table(["paired by seed", "difference [95% CI]"], pairs))
    return "\n".join(out)


# ----------------------------------------------------------------------------- pages

def results_page() -> str:
    head = ("# Results\n\nGenerated by `python benchmarks/results_page.py` from the data in "
            "benchmarks/results/; do not edit by hand.\n\n## What the presets reach\n\n")
    return "\n".join([head + presets_table(readme=False), hpo_section(), control_section(),
                      competitive_section(), wall_section(), population_section(),
                      speed_sections(), learner_sections(), breakdown_section()])


def readme_block(text: str) -> str | None:
    """README.md with its presets block rewritten; None where it has no such block."""
    if START not in text or END not in text:
        return None
    before, rest = text.split(START, 1)
    after = rest.split(END, 1)[1]
    body = ("\n" + presets_table(readme=True) + "\nFull results: [docs/results.md]"
            "(docs/results.md).\n")
    return before + START + body + END + after


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if a page is stale")
    args = ap.parse_args()
    pages = {ROOT / "docs" / "results.md": results_page(),
             ROOT / "docs" / "snippets" / "hpo_table.md": hpo_snippet()}
    readme = ROOT / "README.md"
    block = readme_block(readme.read_text()) if readme.exists() else None
    if block is None:
        print("README.md has no presets block; left alone", file=sys.stderr)
    else:
        pages[readme] = block
    for path, text in pages.items():
        old = path.read_text() if path.exists() else None
        if args.check:
            if old != text:
                print(f"stale: {path.relative_to(ROOT)}")
                raise SystemExit(1)
        elif old != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
