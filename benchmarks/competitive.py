"""Competitive games: what a team preset's champions reach, and how its variants compare.

    python benchmarks/competitive.py --env simple_tag --steps 2000000 --seeds 0,1,2 \\
        --variants preset,joint --jobs 2 --out runs/competitive

Each variant is an overlay file, ``benchmarks/overlays/competitive/<variant>.yaml`` (nested
YAML, as a config file), laid over the env's shipped MATD3 preset; ``--set KEY=VALUE`` goes on
top of every run. A run keeps the champions of generation 0 and of 25% and 50% of the run
(``champions/atN.pt``). Then, on ``--episodes`` fresh episodes (seed 10**6 + run seed):

- *vs_reference*: each team's final champion in its seat against a random policy and the
  scripted heuristic, beside the reference's own return there (a paired difference);
- *vs_earlier*: the final champion minus each earlier one, in its seat, each against the
  earlier one's other team and against the champion's own (the mean of the two per episode);
- *head_to_head*: for every two variants, per seat, the first one's champion minus the
  second's, each against both runs' other team (mean of the two).

Rows go to ``--results`` (JSONL, one per seed x team x measurement; benchmarks/results_page.py
reads them). Finished runs are skipped; a run stopped part way goes on from its checkpoint.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shutil
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

OVERLAYS = Path(__file__).parent / "overlays" / "competitive"
RESULTS = Path(__file__).parent / "results" / "competitive.jsonl"
MARKS = (0.0, 0.25, 0.5)  # the fractions of the run whose champions are kept


def config(env: str, variant: str, steps: int, seed: int, extra: list[str]) -> Any:
    """The shipped MATD3 preset for ``env`` < the variant's overlay < ``extra`` overrides."""
    from evohpo import config as C
    from evohpo.api import preset_path

    layers = [C.read_yaml(preset_path("matd3", env)), C.read_yaml(OVERLAYS / f"{variant}.yaml"),
              {"env": {"pool": "sync"}}, *(C.parse_override(t) for t in extra),
              {"steps": steps, "seed": seed}]
    return C.load(layers)


def run_dir(out: Path, env: str, variant: str, seed: int) -> Path:
    return out / f"{env}-{variant}-s{seed}"


def train(env: str, variant: str, seed: int, steps: int, out: Path, extra: list[str]) -> str:
    """One run (resumed from its last checkpoint when it holds this very run)."""
    from evohpo import api, checkpoint
    from evohpo.playback.load import run_config

    cfg = config(env, variant, steps, seed, extra)
    d = run_dir(out, env, variant, seed)
    windows = max(1, math.ceil(steps / (cfg.evolution.evo_steps * cfg.population.size)))
    marks = {round(f * (windows - 1)): int(100 * f) for f in MARKS}

    def keep(info: Any) -> None:
        if (pct := marks.get(info.generation)) is not None:
            (d / "champions").mkdir(exist_ok=True)
            shutil.copy(d / "checkpoints" / "best.pt", d / "champions" / f"at{pct}.pt")

    if (d / "checkpoints" / "latest.pt").is_file() and run_config(d) == cfg:
        if checkpoint.load_latest(d)[0]["env_steps"] < steps:
            api.resume(d, callbacks=[keep])
    else:
        api.train(cfg, run_dir=d, overwrite=True, callbacks=[keep])
    return d.name


def load(path: Path, d: Path) -> Any:
    """The algorithm in a best.pt-like file of run ``d``."""
    from evohpo import checkpoint
    from evohpo.algos import restore_algo
    from evohpo.envs import spec_for
    from evohpo.playback.load import run_config

    cfg = run_config(d)
    return restore_algo(cfg, spec_for(cfg.env), checkpoint.load(path)[1]["algo"], "cpu")


class Arena:
    """Matches on one env: each team's return per episode, on the same episodes."""

    def __init__(self, d: Path, episodes: int, seed: int):
        from evohpo.envs import spec_for
        from evohpo.playback.load import run_config
        from evohpo.runtime.evaluate import eval_pool

        self.cfg = run_config(d)
        self.spec = spec_for(self.cfg.env)
        self.teams = self.spec.team_list()
        self.pool = eval_pool(self.cfg, self.spec, episodes)
        self.seed = seed

    def play(self, seats: list[Any]) -> list[np.ndarray]:
        """Each team's per-episode return, team ``t`` played by ``seats[t]``."""
        from evohpo.runtime.evaluate import team_returns

        return team_returns(seats, self.teams, self.pool, self.seed)

    def swap(self, lineup: list[Any], t: int, policy: Any) -> np.ndarray:
        """Team ``t``'s per-episode return with ``policy`` in its seat, ``lineup`` elsewhere."""
        seats = list(lineup)
        seats[t] = policy
        return self.play(seats)[t]

    def meet(self, a: Any, b: Any) -> list[np.ndarray]:
        """Per seat: ``a`` minus ``b`` in the seat, each against ``a``'s other seats and against
        ``b``'s, the two paired differences averaged per episode."""
        n = len(self.teams)
        home, away = self.play([a] * n), self.play([b] * n)
        return [((home[t] - self.swap([a] * n, t, b)) + (self.swap([b] * n, t, a) - away[t])) / 2
                for t in range(n)]

    def reference(self, kind: str) -> Any:
        from evohpo.envs.heuristics import reference_policy

        e = self.cfg.env
        return reference_policy(kind, self.spec, e.name, e.kwargs, self.seed)


def interval(d: np.ndarray) -> tuple[float, float]:
    """The 95% interval of the mean of many episodes' paired differences."""
    half = 1.96 * float(d.std(ddof=1)) / math.sqrt(len(d))
    return float(d.mean()) - half, float(d.mean()) + half


def diff_row(key: dict[str, Any], d: np.ndarray) -> dict[str, Any]:
    lo, hi = interval(d)
    return {**key, "diff": round(float(d.mean()), 4), "ci95_low": round(lo, 4),
            "ci95_high": round(hi, 4)}


def vs_references(arena: Arena, champ: Any, key: dict[str, Any]) -> list[dict[str, Any]]:
    """Each seat of ``champ`` against random play and the heuristic, beside the reference."""
    from evohpo.envs.heuristics import heuristic_available

    kinds = ["random"] + (["heuristic"] if heuristic_available(arena.cfg.env.name) else [])
    rows = []
    for kind in kinds:
        ref = [arena.reference(kind)] * len(arena.teams)
        bars = arena.play(ref)
        for t, (team, _) in enumerate(arena.teams):
            got = arena.swap(ref, t, champ)
            rows.append(diff_row({**key, "team": team, "measurement": "vs_reference",
                                  "against": kind, "mean": round(float(got.mean()), 4),
                                  "sd": round(float(got.std()), 4),
                                  "reference_mean": round(float(bars[t].mean()), 4),
                                  "reference_sd": round(float(bars[t].std()), 4)},
                                 got - bars[t]))
    return rows


def vs_earlier(arena: Arena, champ: Any, d: Path, key: dict[str, Any]) -> list[dict[str, Any]]:
    """``champ`` head to head with each champion the run kept earlier."""
    rows = []
    for p in sorted((d / "champions").glob("at*.pt"), key=lambda p: int(p.stem[2:])):
        diffs = arena.meet(champ, load(p, d))
        rows += [diff_row({**key, "team": team, "measurement": "vs_earlier",
                           "against": f"gen {p.stem[2:]}%"}, x)
                 for (team, _), x in zip(arena.teams, diffs, strict=True)]
    return rows


def evaluate(out: Path, env: str, variants: list[str], seed: int, steps: int,
             episodes: int) -> list[dict[str, Any]]:
    """Every measurement of one env and seed."""
    base = {"bench": "competitive", "env": env, "steps": steps, "episodes": episodes,
            "seed": seed, "set": out.name}
    dirs = {v: run_dir(out, env, v, seed) for v in variants}
    champs = {v: load(d / "checkpoints" / "best.pt", d) for v, d in dirs.items()}
    arena = Arena(dirs[variants[0]], episodes, 10**6 + seed)
    rows = []
    for v in variants:
        key = {**base, "variant": v, "adopted": v == "preset"}
        rows += vs_references(arena, champs[v], key) + vs_earlier(arena, champs[v], dirs[v], key)
    for a, b in itertools.combinations(variants, 2):
        key = {**base, "variant": a, "adopted": a == "preset", "measurement": "head_to_head",
               "against": b}
        rows += [diff_row({**key, "team": team}, x)
                 for (team, _), x in zip(arena.teams, arena.meet(champs[a], champs[b]),
                                         strict=True)]
    return rows


def summary(rows: list[dict[str, Any]]) -> None:
    """Per variant, team and measurement: the mean difference per seed."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for r in rows:
        k = tuple(str(r[f]) for f in ("env", "variant", "team", "measurement", "against"))
        groups.setdefault(k, []).append(f"{r['diff']:+.2f}")
    print("| env | variant | team | measurement | against | per seed |\n|---|---|---|---|---|---|")
    for k, v in groups.items():
        print(f"| {' | '.join(k)} | {', '.join(v)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="simple_tag", help="comma-separated envs")
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--variants", default="preset,joint",
                    help="comma-separated overlay names, of: "
                         + ", ".join(sorted(p.stem for p in OVERLAYS.glob("*.yaml"))))
    ap.add_argument("--episodes", type=int, default=200, help="fresh episodes per pairing")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an override for every run (repeatable)")
    ap.add_argument("--out", default="runs/competitive")
    ap.add_argument("--results", default=str(RESULTS), help="JSONL the rows are appended to")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    envs, variants = args.env.split(","), args.variants.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    for v in variants:
        if not (OVERLAYS / f"{v}.yaml").is_file():
            raise SystemExit(f"no overlay {OVERLAYS / v}.yaml")
    os.environ.setdefault("WANDB_MODE", "disabled")
    jobs = [(e, v, s) for e in envs for s in seeds for v in variants]
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(train, e, v, s, args.steps, out, args.set) for e, v, s in jobs]
        for f in futures:
            print(f"{f.result()}: done", flush=True)
    rows = [r for e in envs for s in seeds
            for r in evaluate(out, e, variants, s, args.steps, args.episodes)]
    with open(args.results, "a") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    summary(rows)
    print(f"\n{len(rows)} rows appended to {args.results}")


if __name__ == "__main__":
    main()
