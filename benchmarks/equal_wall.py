"""What a population buys: a shipped preset against one member trained alone, at equal wall time.

    python benchmarks/equal_wall.py --algo maddpg --env simple_speaker_listener --seeds 0,1,2,3,4 \\
        [--alone benchmarks/overlays/alone/maddpg_speaker_listener.yaml] [--minutes M] \\
        [--set key=value ...] [--out runs/equal_wall] \\
        [--jsonl benchmarks/results/equal_wall.jsonl]

For each seed, two trainings start together, side by side, one process and one torch thread
each (on a 2-core machine each keeps a core):

- the population: the algorithm's shipped preset for the env, as ``evohpo train --algo A --env E
  --seed S`` runs it;
- one member alone: the same preset with ``--alone`` overlay files laid over it (by default
  ``benchmarks/overlays/alone/<algo>_<env>.yaml``: population 1 on the share of the pool one
  member has, no evolution) and ``--set`` overrides; it trains until the population is done.

Without ``--minutes`` the population trains its whole budget; with it, both stop at the first
generation after which one more window, 10% longer than the last, would end past ``M`` minutes.
Each arm stops at a generation's end, so the member alone ends within one of its windows of the
population. Then each run's kept member (``checkpoints/best.pt``, what ``evohpo eval`` and
``export`` use) is played on 100 fresh episodes (seeds from 10**6), noise-free, and one JSONL row
per seed records both. Printed: per seed, then each arm's mean and worst seed and the paired
difference (population minus alone) with its 95% t interval.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from _common import machine
from results_tables import interval

EPISODES, EVAL_SEED = 100, 10**6
OVERLAYS = Path(__file__).parent / "overlays" / "alone"


def train_arm(role: str, algo: str, env: str, seed: int, overlays: list[str], sets: list[str],
              minutes: float | None, run_dir: str, done: Any) -> dict[str, Any]:
    """One arm's training; ``done`` is set when the population has finished and stops the
    member alone at its next generation's end."""
    import torch

    from evohpo import api
    from evohpo import config as C

    torch.set_num_threads(1)
    limit = None if minutes is None else 60.0 * minutes
    t0 = time.perf_counter()
    last = [t0]

    def stop(info: api.GenerationInfo) -> bool:
        now = time.perf_counter()
        window, last[0] = now - last[0], now
        if limit is not None and now - t0 + 1.1 * window > limit:
            return True  # the next window could end past the budget
        return role == "alone" and done.is_set()

    layers: list[Any] = [C.read_yaml(api.preset_path(algo, env))]
    layers += [C.read_yaml(Path(p)) for p in overlays]
    cfg = C.load([*layers, {"seed": seed}, *(C.parse_override(s) for s in sets)], inherited=1)
    try:
        res = api.train(cfg, run_dir=run_dir, overwrite=True, callbacks=[stop])
    finally:
        if role == "population":
            done.set()
    return {"wall_s": round(time.perf_counter() - t0, 1),
            "env_steps": int(res.summary["env_steps"]),
            "generations": int(res.summary["generations"])}


def kept_return(run_dir: str) -> dict[str, float]:
    """The kept member on the fresh episodes: mean and standard error of the team-sum return."""
    import numpy as np

    from evohpo.playback.run import load_run

    returns = load_run(run_dir).evaluate("best", episodes=EPISODES, seed=EVAL_SEED)
    total = np.sum([np.asarray(r, np.float64) for r in returns.values()], axis=0)
    return {"kept_return": round(float(total.mean()), 3),
            "kept_se": round(float(total.std(ddof=1) / math.sqrt(len(total))), 3)}


def pair(args: argparse.Namespace, seed: int, overlays: list[str]) -> dict[str, Any]:
    """One seed: both arms side by side, then their kept members on the fresh episodes."""
    ctx = get_context("spawn")  # fresh interpreters: no torch state shared with this one
    base = Path(args.out) / f"{args.env}-{args.algo}-{seed}"
    dirs = {"population": str(base / "population"), "alone": str(base / "alone")}
    with ctx.Manager() as manager, ProcessPoolExecutor(2, mp_context=ctx) as pool:
        done = manager.Event()
        jobs = {role: pool.submit(train_arm, role, args.algo, args.env, seed,
                                  overlays if role == "alone" else [],
                                  args.sets if role == "alone" else [], args.minutes,
                                  dirs[role], done)
                for role in ("population", "alone")}
        arms = {role: job.result() for role, job in jobs.items()}
    for role, d in dirs.items():
        arms[role].update(kept_return(d))
    return {"algo": args.algo, "env": args.env, "seed": seed, "minutes": args.minutes,
            "alone": [str(Path(p).as_posix()) for p in overlays], "alone_sets": args.sets,
            **{f"{role}_{k}": v for role, arm in arms.items() for k, v in arm.items()},
            "episodes": EPISODES}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--algo", required=True)
    ap.add_argument("--env", required=True)
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--alone", action="append", default=[],
                    help="overlay file laid over the preset for the member alone (repeatable; "
                         "default benchmarks/overlays/alone/<algo>_<env>.yaml)")
    ap.add_argument("--set", dest="sets", action="append", default=[],
                    help="override for the member alone (repeatable)")
    ap.add_argument("--minutes", type=float, default=None,
                    help="stop both arms within this wall time (default: the preset's budget)")
    ap.add_argument("--out", default="runs/equal_wall")
    ap.add_argument("--jsonl", default=None, help="append one row per seed")
    args = ap.parse_args()
    import torch

    overlays = args.alone or [str(OVERLAYS / f"{args.algo}_{args.env.removeprefix('simple_')}"
                                             ".yaml")]
    overlays = [str(Path(p).resolve().relative_to(Path.cwd().resolve()))
                if Path(p).resolve().is_relative_to(Path.cwd().resolve()) else p for p in overlays]
    print(f"machine: {machine()}; two runs at once, 1 torch thread each; alone: "
          f"{' + '.join(overlays)} {' '.join(args.sets)}")
    rows = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        row = pair(args, seed, overlays)
        row.update(machine=machine().replace(f"({torch.get_num_threads()} threads)",
                                             "(1 thread per run)"),
                   date=time.strftime("%Y-%m-%d"), parallel=2)
        rows.append(row)
        print(f"seed {seed}: population {row['population_kept_return']:8.2f} "
              f"({row['population_env_steps']:,} env steps in {row['population_wall_s']:.0f}s), "
              f"alone {row['alone_kept_return']:8.2f} ({row['alone_env_steps']:,} in "
              f"{row['alone_wall_s']:.0f}s)", flush=True)
        if args.jsonl:
            with open(args.jsonl, "a") as f:
                f.write(json.dumps(row) + "\n")
    pop = [r["population_kept_return"] for r in rows]
    alone = [r["alone_kept_return"] for r in rows]
    print(f"\n{args.algo} {args.env}, kept member on {EPISODES} fresh episodes:")
    for name, xs in (("population", pop), ("alone", alone)):
        print(f"  {name:<10} mean {statistics.fmean(xs):8.2f}  worst {min(xs):8.2f}")
    print(f"  population - alone: {interval([p - a for p, a in zip(pop, alone, strict=True)])} "
          "(paired over seeds)")


if __name__ == "__main__":
    main()
