"""Train each algorithm on simple_speaker_listener and print fitness per generation.

    python benchmarks/learn_speaker_listener.py [--steps 2000000] [--algos matd3,maddpg] [--seed 0]

Fitness is the evaluation return summed over both agents (8 noise-free episodes). For scale:
a random policy scores about -85, a no-op policy -68, and a listener that ignores the speaker
and parks at the landmarks' centroid about -31.5; beating -30 means the agents communicate.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from _common import Collect, machine, preset_config, run

THRESHOLDS = (-30.0, -25.0, -22.0, -20.0)


def first_reach(rows: list[dict[str, Any]], level: float) -> str:
    for r in rows:
        if r["eval/best_fitness"] >= level:
            return f"{r['env_steps']:,} steps / {r['time/elapsed_s']:.0f}s"
    return "not reached"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=2_000_000)
    ap.add_argument("--algos", default="matd3,maddpg")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", action="append", default=[], help="config override key=value (repeatable)")
    ap.add_argument("--json", help="also write the per-generation rows to this file")
    args = ap.parse_args()
    from evohpo.config import parse_override

    print(f"machine: {machine()}")
    results = {}
    for algo in args.algos.split(","):
        over = [parse_override(s) for s in args.set]
        cfg = preset_config(algo, "simple_speaker_listener", {"steps": args.steps, "seed": args.seed,
                                                              "logging": {"console": False}}, *over)
        log = Collect(label=algo)
        summary = run(cfg, log)
        results[algo] = log.rows
        best = max(r["eval/best_fitness"] for r in log.rows)
        mean = max(r["eval/mean_fitness"] for r in log.rows)
        print(f"\n{algo}: best fitness {best:.2f}, best population mean {mean:.2f}, "
              f"{summary['env_steps']:,} env steps in {summary['wall_s']:.0f}s "
              f"({summary['env_steps'] / summary['wall_s']:,.0f} steps/s)")
        for level in THRESHOLDS:
            print(f"    best >= {level:g}: {first_reach(log.rows, level)}")
        print(flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    main()
