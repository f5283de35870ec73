"""A fixed recipe's learning curve: one config trained to a step budget, no evolution needed.

    python benchmarks/control.py --algo mappo --env simple_spread \\
        --config benchmarks/overlays/spread/control.yaml --steps 20000000 \\
        [--seeds 0,1,2] [--parallel 2] [--out runs/control] \\
        [--jsonl benchmarks/results/control.jsonl] [--set key=value ...]

Each seed trains ``evohpo train --algo A --env E --config C --steps N --seed S`` (one torch
thread per run; ``--parallel 2`` runs two at once) into ``OUT/<name>-<seed>`` (``--name``, by
default the config's file name); a finished run already there is only evaluated. Recorded per
run: the kept member (``checkpoints/best.pt``) played on 100 fresh episodes (seeds drawn from
10**6), and the curve of every generation's best fitness against env steps, with the wall time.
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


def one(algo: str, env: str, config: str, steps: int, seed: int, out: str,
        sets: list[str], name: str) -> dict[str, Any]:
    import torch

    from evohpo import api
    from evohpo.playback.run import load_run
    from evohpo.report.data import read_jsonl

    torch.set_num_threads(1)
    run_dir = Path(out) / f"{name}-{seed}"
    metrics_file = run_dir / "metrics.jsonl"
    done = metrics_file.is_file() and read_jsonl(metrics_file)[-1]["env_steps"] >= steps - 10**4
    if not done:
        api.train(algo=algo, env=env, config=config, steps=steps, seed=seed, overrides=sets,
                  run_dir=run_dir, overwrite=True)
    metrics = read_jsonl(metrics_file)
    returns = load_run(run_dir).evaluate("best", episodes=EPISODES, seed=EVAL_SEED)
    total = np.sum([np.asarray(r, np.float64) for r in returns.values()], axis=0)
    curve = [[int(m["env_steps"]), round(float(m["eval/best_fitness"]), 2)] for m in metrics]
    return {"name": name, "algo": algo, "env": env, "config": config, "overrides": sets,
            "seed": seed,
            "env_steps": curve[-1][0], "wall_s": round(float(metrics[-1]["time/elapsed_s"]), 1),
            "kept_return": round(float(total.mean()), 3),
            "kept_se": round(float(total.std(ddof=1) / math.sqrt(len(total))), 3),
            "episodes": EPISODES, "curve": curve}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--algo", required=True)
    ap.add_argument("--env", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--out", default="runs/control")
    ap.add_argument("--jsonl", default=None, help="append one row per run")
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--name", default=None, help="the variant's name (default: the config's)")
    args = ap.parse_args()
    name = args.name or Path(args.config).stem
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"machine: {machine()}; {args.parallel} run(s) at once, 1 torch thread each")
    jobs = [(args.algo, args.env, args.config, args.steps, s, args.out, args.sets, name)
            for s in seeds]
    with ProcessPoolExecutor(max_workers=args.parallel) as pool:
        for row in pool.map(one, *zip(*jobs, strict=True)):
            row["machine"] = machine().split(" (")[0] + " (1 torch thread per run)"
            row["date"] = time.strftime("%Y-%m-%d")
            row["parallel"] = args.parallel
            print(f"seed {row['seed']}: kept {row['kept_return']:8.2f} (se {row['kept_se']:.2f})"
                  f" after {row['env_steps']:,} env steps in {row['wall_s']:.0f}s", flush=True)
            if args.jsonl:
                with open(args.jsonl, "a") as f:
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
