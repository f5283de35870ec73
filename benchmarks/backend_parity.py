"""Learning with the batched backend against learning with the PettingZoo backend.

    python benchmarks/backend_parity.py [--steps 120000] [--seeds 0,1,2] [--algo matd3]

Same config and seed, only ``env.backend`` differs (PettingZoo: mpe2 envs in a sync pool).
Both backends seed every env's episodes alike, so the runs should be the same run: the script
compares every generation's metrics (fitness of every member, training returns, losses, the
mutations chosen) at equal env steps and prints the largest difference and the speed of each.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from _common import Collect, machine, preset_config, run

SKIP = ("time/", "train/env_steps_per_s")  # the second: what older versions called the rate


def compare(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> tuple[float, int]:
    """(largest absolute difference of any numeric metric, number of metrics that differ)."""
    worst, differ = 0.0, 0
    for ra, rb in zip(a, b, strict=True):
        for k, va in ra.items():
            if k.startswith(SKIP):
                continue
            vb = rb.get(k)
            if isinstance(va, (int, float)) and isinstance(vb, (int, float)):
                d = abs(va - vb) if math.isfinite(va) and math.isfinite(vb) else float(va != vb)
                worst = max(worst, d)
                differ += d > 0
            elif va != vb:
                differ += 1
    return worst, differ


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=120_000)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--algo", default="matd3")
    ap.add_argument("--env", default="simple_speaker_listener")
    args = ap.parse_args()
    print(f"machine: {machine()}")
    print(f"{'seed':>5}{'gens':>6}{'best fitness (pz / batched)':>30}{'max |diff|':>12}"
          f"{'differ':>8}{'pz steps/s':>12}{'batched':>10}")
    for seed in (int(s) for s in args.seeds.split(",")):
        rows, rates = [], []
        for backend in ("pettingzoo", "batched"):
            cfg = preset_config(args.algo, args.env, {
                "steps": args.steps, "seed": seed, "torch_threads": 1,
                "env": {"backend": backend, "pool": "sync"}, "logging": {"console": False}})
            log = Collect(echo=False)
            summary = run(cfg, log)
            rows.append(log.rows)
            rates.append(summary["env_steps"] / summary["wall_s"])
        worst, differ = compare(rows[0], rows[1])
        best = [max(r["eval/best_fitness"] for r in rs) for rs in rows]
        print(f"{seed:>5}{len(rows[0]):>6}{best[0]:>15.3f} / {best[1]:<12.3f}{worst:>12.3g}"
              f"{differ:>8}{rates[0]:>12,.0f}{rates[1]:>10,.0f}", flush=True)


if __name__ == "__main__":
    main()
