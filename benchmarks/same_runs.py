"""Same config and seed, same run: a refactor's check that behaviour did not change.

Trains every shipped preset at a short budget with the synchronous pool, then compares two such
sets of runs: ``metrics.jsonl`` (timing fields aside) and ``lineage.jsonl`` line by line.

    python benchmarks/same_runs.py run --out runs/before      # on the old code
    python benchmarks/same_runs.py run --out runs/after       # on the new code
    python benchmarks/same_runs.py compare runs/before runs/after
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

PRESETS = ("matd3_speaker_listener", "maddpg_speaker_listener", "matd3_spread", "maddpg_spread",
           "matd3_tag", "matd3_adversary", "matd3_push")
# short: a few windows with learning, selection and mutation in each preset
SHORT = ["env.pool=sync", "evolution.evo_steps=300", "evolution.learning_delay=400",
         "evolution.ready=2", "eval.episodes=4", "eval.confirm_episodes=8",
         "games.reference_episodes=4"]
# wall-clock fields: the only ones allowed to differ
TIMING = ("time/", "wall_s", "_per_s")


def timing(key: str) -> bool:
    return key.startswith("time/") or key.endswith(TIMING[1:])


def run(out: Path, steps: int) -> None:
    for preset in PRESETS:
        algo, env = preset.split("_", 1)
        cmd = [sys.executable, "-m", "evohpo", "train", "--algo", algo, "--env", f"simple_{env}",
               "--steps", str(steps), "--seed", "3", "--quiet", "--overwrite",
               "--run-dir", str(out / preset)]
        for s in SHORT:
            cmd += ["--set", s]
        print(preset, flush=True)
        subprocess.run(cmd, check=True)


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def rel(x: object, y: object) -> float:
    """|x - y| / |x| for two numbers; inf for anything else that differs."""
    if isinstance(x, float | int) and isinstance(y, float | int):
        return abs(x - y) / max(abs(x), 1e-12)
    return float("inf")


def compare(a: Path, b: Path) -> int:
    bad = 0
    for preset in PRESETS:
        for name in ("metrics.jsonl", "lineage.jsonl", "league.jsonl"):
            if not (a / preset / name).exists():
                continue
            la, lb = lines(a / preset / name), lines(b / preset / name)
            if len(la) != len(lb):
                print(f"{preset}/{name}: {len(la)} lines against {len(lb)}")
                bad += 1
                continue
            diffs = [(i, k) for i, (x, y) in enumerate(zip(la, lb, strict=True))
                     for k in sorted(set(x) | set(y))
                     if not timing(k) and x.get(k) != y.get(k)]
            gen0 = [rel(la[0].get(k), lb[0].get(k)) for i, k in diffs if i == 0]
            print(f"{preset}/{name}: {len(la)} lines, "
                  + ("same" if not diffs else f"{len(diffs)} differences, first {diffs[:5]}")
                  + (f"; largest relative difference on line 1: {max(gen0):.1e}" if gen0 else ""))
            bad += bool(diffs)
    return 1 if bad else 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--steps", type=int, default=6000)
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = p.parse_args()
    if args.cmd == "run":
        run(args.out, args.steps)
    else:
        sys.exit(compare(args.a, args.b))


if __name__ == "__main__":
    main()
