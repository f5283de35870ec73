"""Where a run's wall time goes: a shipped preset trained once, its time summed phase by phase.

    python benchmarks/breakdown.py --algo matd3 --env simple_tag --steps 100000 --seed 0
    python benchmarks/breakdown.py --algo maddpg --env simple_speaker_listener --steps 200000

Trains the preset as ``evohpo train`` does (its own pool, one torch thread, checkpoints and
logs written) in a fresh process, timed from start to exit, and adds up the ``time/phase/*``
seconds of its generations (:mod:`evohpo.runtime.phases`). Appends one row to
``benchmarks/results/breakdown.jsonl``: the run (algo, env, steps, seed), the commit, machine
and date, ``wall_s``, and per phase its seconds (``seconds``) and share of ``wall_s``
(``share``). Besides the loop's phases: ``other`` (what no phase of a window claims) and
``setup`` (what no window holds: starting the process, building the envs and the population
before the first window, closing after the last). ``learn/<team>`` are parts of ``learn``.
``load_before``: the machine's 1-minute load average as the run started (other work slows
every phase).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from _common import machine
from results_tables import DATA, ROOT

OUT = DATA / "breakdown.jsonl"
PREFIX, SUFFIX = "time/phase/", "_s"


def train(algo: str, env: str, steps: int, seed: int, run_dir: Path) -> float:
    """Wall seconds of ``evohpo train`` on the preset, in a process of its own."""
    cmd = [sys.executable, "-m", "evohpo", "train", "--algo", algo, "--env", env, "--steps",
           str(steps), "--seed", str(seed), "--quiet", "--overwrite", "--run-dir", str(run_dir),
           "--set", "torch_threads=1"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    return time.perf_counter() - t0


def phases(rows: list[dict[str, Any]], wall_s: float) -> dict[str, float]:
    """Seconds per phase over the run's generations, with ``setup``: the wall time outside
    every window."""
    out: dict[str, float] = {}
    for r in rows:
        for k, v in r.items():
            if k.startswith(PREFIX) and k.endswith(SUFFIX):
                name = k[len(PREFIX):-len(SUFFIX)]
                out[name] = out.get(name, 0.0) + float(v)
    out["setup"] = max(wall_s - sum(float(r["time/window_s"]) for r in rows), 0.0)
    return out


def commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--algo", required=True)
    ap.add_argument("--env", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT, help="the JSONL file to append the row to")
    args = ap.parse_args()
    torch.set_num_threads(1)  # what the run uses, as machine() reports it
    load = os.getloadavg()[0]  # other work on the machine slows every phase
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        wall = train(args.algo, args.env, args.steps, args.seed, run_dir)
        rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    seconds = phases(rows, wall)
    row = {"algo": args.algo, "env": args.env, "steps": args.steps, "seed": args.seed,
           "commit": commit(), "machine": machine(), "date": time.strftime("%Y-%m-%d"),
           "load_before": round(load, 2), "env_steps": rows[-1]["env_steps"],
           "generations": len(rows), "wall_s": round(wall, 1),
           "seconds": {k: round(v, 2) for k, v in seconds.items()},
           "share": {k: round(v / wall, 4) for k, v in seconds.items()}}
    with open(args.out, "a") as f:
        f.write(json.dumps(row) + "\n")
    width = max(map(len, seconds))
    print(f"{args.algo} {args.env} {args.steps:,} env steps: {wall:.1f} s")
    for k, v in sorted(seconds.items(), key=lambda kv: -kv[1]):
        print(f"  {k:<{width}} {v:9.1f} s {v / wall:6.1%}")


if __name__ == "__main__":
    main()
