"""Train each algorithm on simple_speaker_listener and print fitness per generation.

    python benchmarks/learn_speaker_listener.py [--steps 2000000] [--algos matd3,maddpg] [--seed 0]
        [--run-dir runs/bench]   # also write config.yaml, metrics.jsonl, lineage.jsonl
                                 # to <run-dir>/<algo>/

Fitness is the evaluation return summed over both agents (8 noise-free episodes). For scale:
a random policy scores about -85, a no-op policy -68, and a listener that ignores the speaker
and parks at the landmarks' centroid about -31.5; beating -30 means the agents communicate.
The presets mutate architectures and activations too (mutation.architecture, mutation.activation);
turn that off with --set mutation.architecture=0 --set mutation.activation=0 to compare.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from _common import Collect, machine, preset_config, run

from evohpo import config as C
from evohpo.logs.loggers import JsonlLogger, Logger, Loggers

THRESHOLDS = (-30.0, -25.0, -22.0, -20.0)


def first_reach(rows: list[dict[str, Any]], level: float) -> str:
    for r in rows:
        if r["eval/best_fitness"] >= level:
            return f"{r['env_steps']:,} steps / {r['time/elapsed_s']:.0f}s"
    return "not reached"


def jsonl_logger(run_dir: Path, cfg: C.Config) -> JsonlLogger:
    if (run_dir / "metrics.jsonl").exists() or (run_dir / "lineage.jsonl").exists():
        raise SystemExit(f"{run_dir} already holds a run; pick another --run-dir")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(C.dump(cfg))
    return JsonlLogger(run_dir)


def best_arch(row: dict[str, Any]) -> str:
    """The best member's hidden widths and activation per agent, from the trainer's
    member/<id>/ metrics."""
    pre = f"member/{row['eval/best_member']}/"
    agents = sorted({k.split("/")[3] for k in row if k.startswith(pre + "hidden/")})
    return "; ".join(f"{a}: actor {row[f'{pre}hidden/{a}/actor']}, "
                     f"critic {row[f'{pre}hidden/{a}/critic']}, "
                     f"{row[f'{pre}activation/{a}']}" for a in agents)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=2_000_000)
    ap.add_argument("--algos", default="matd3,maddpg")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", action="append", default=[],
                    help="config override key=value (repeatable)")
    ap.add_argument("--json", help="also write the per-generation rows to this file")
    ap.add_argument("--run-dir", type=Path,
                    help="also write config.yaml, metrics.jsonl and lineage.jsonl "
                         "to <run-dir>/<algo>/")
    args = ap.parse_args()
    from evohpo.config import parse_override

    print(f"machine: {machine()}")
    results = {}
    for algo in args.algos.split(","):
        over = [parse_override(s) for s in args.set]
        cfg = preset_config(algo, "simple_speaker_listener",
                            {"steps": args.steps, "seed": args.seed,
                             "logging": {"console": False}}, *over)
        log = Collect(label=algo)
        logger: Logger = log
        if args.run_dir is not None:
            logger = Loggers([log, jsonl_logger(args.run_dir / algo, cfg)])
        try:
            summary = run(cfg, logger)
        finally:
            logger.close()
        results[algo] = log.rows
        best = max(r["eval/best_fitness"] for r in log.rows)
        mean = max(r["eval/mean_fitness"] for r in log.rows)
        print(f"\n{algo}: best fitness {best:.2f}, best population mean {mean:.2f}, "
              f"{summary['env_steps']:,} env steps in {summary['wall_s']:.0f}s "
              f"({summary['env_steps'] / summary['wall_s']:,.0f} steps/s)")
        for level in THRESHOLDS:
            print(f"    best >= {level:g}: {first_reach(log.rows, level)}")
        print(f"    final best member's architecture: {best_arch(log.rows[-1])}")
        print(flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    main()
