"""Shipped presets at equal wall time: what the member a user gets scores after N minutes.

    python benchmarks/wall_budget.py --env simple_spread --algos mappo,ippo,matd3 \\
        [--seeds 0,1,2] [--minutes 10] [--parallel 1] [--out runs/wall] \\
        [--jsonl benchmarks/results/wall_budget.jsonl] [--set key=value ...]

Each (algo, seed) trains the algorithm's shipped preset for the env (``evohpo train --algo A
--env E --seed S``) and stops at the first generation after which one more window, 10% longer
than the last, would end past the wall-time budget. The kept member (``checkpoints/best.pt``,
what ``evohpo eval`` and ``export`` use) is then played on 100 fresh episodes (seeds 10**6 + k),
noise-free, and its return summed over agents is recorded with the run's env steps and wall
time. ``--parallel 2`` runs two trainings at once: each run is one Python process with one torch
thread, so on a 2-core machine two runs side by side each keep a core (the wall times printed
say what they got).

Printed: per run, then per algorithm the mean and spread over seeds, and each pair of algorithms'
paired difference over the same seeds with a 95% t interval.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from _common import machine

EPISODES, EVAL_SEED = 100, 10**6
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}


def one(algo: str, env: str, seed: int, minutes: float, out: str,
        sets: list[str]) -> dict[str, Any]:
    import torch

    from evohpo import api
    from evohpo.playback.run import load_run

    torch.set_num_threads(1)
    limit = 60.0 * minutes
    t0 = time.perf_counter()
    last = [t0]

    def stop(info: api.GenerationInfo) -> bool:
        now = time.perf_counter()
        window, last[0] = now - last[0], now
        return now - t0 + 1.1 * window > limit  # the next window could end past the budget

    run_dir = Path(out) / f"{env}-{algo}-{seed}"
    res = api.train(algo=algo, env=env, seed=seed, overrides=sets, run_dir=run_dir,
                    overwrite=True, callbacks=[stop])
    wall = time.perf_counter() - t0
    returns = load_run(run_dir).evaluate("best", episodes=EPISODES, seed=EVAL_SEED)
    total = np.sum([np.asarray(r, np.float64) for r in returns.values()], axis=0)
    return {"algo": algo, "env": env, "seed": seed, "minutes": minutes, "wall_s": round(wall, 1),
            "env_steps": int(res.summary["env_steps"]), "generations": res.summary["generations"],
            "kept_return": round(float(total.mean()), 3),
            "kept_se": round(float(total.std(ddof=1) / math.sqrt(len(total))), 3),
            "episodes": EPISODES, "overrides": sets}


def interval(d: np.ndarray) -> str:
    n = len(d)
    if n < 2:
        return f"{d.mean():+.2f}"
    half = T95.get(n - 1, 1.96) * d.std(ddof=1) / math.sqrt(n)
    return f"{d.mean():+.2f} [{d.mean() - half:+.2f}, {d.mean() + half:+.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", required=True)
    ap.add_argument("--algos", default="mappo,ippo,matd3")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--out", default="runs/wall")
    ap.add_argument("--jsonl", default=None, help="append one row per run")
    ap.add_argument("--set", dest="sets", action="append", default=[])
    args = ap.parse_args()
    algos = args.algos.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    import torch

    torch_threads = torch.get_num_threads()
    print(f"machine: {machine()}; {args.parallel} run(s) at once, 1 torch thread each")
    jobs = [(a, args.env, s, args.minutes, args.out, args.sets) for s in seeds for a in algos]
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=args.parallel) as pool:
        for row in pool.map(one, *zip(*jobs, strict=True)):
            row["machine"] = machine().replace(f"({torch_threads} threads)", "(1 thread per run)")
            row["date"] = time.strftime("%Y-%m-%d")
            row["parallel"] = args.parallel
            rows.append(row)
            print(f"{row['algo']:<6} seed {row['seed']}: {row['kept_return']:8.2f} "
                  f"(se {row['kept_se']:.2f}) after {row['env_steps']:,} env steps in "
                  f"{row['wall_s']:.0f}s", flush=True)
            if args.jsonl:
                with open(args.jsonl, "a") as f:
                    f.write(json.dumps(row) + "\n")
    by = {a: np.array([r["kept_return"] for s in seeds for r in rows
                       if r["algo"] == a and r["seed"] == s]) for a in algos}
    print(f"\n{args.env}, {args.minutes:g} minutes, kept member on {EPISODES} fresh episodes:")
    for a, x in by.items():
        print(f"  {a:<6} mean {x.mean():8.2f}  min {x.min():8.2f}  max {x.max():8.2f}")
    for i, a in enumerate(algos):
        for b in algos[i + 1:]:
            print(f"  {a} - {b}: {interval(by[a] - by[b])} (paired over seeds)")


if __name__ == "__main__":
    main()
