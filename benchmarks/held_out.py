"""Head to head against opponents that neither run trained against: each seed's two runs play
each seat against the other team(s) of every other seed's runs.

    python benchmarks/held_out.py --env simple_adversary --out runs/competitive600k \\
        --modes framed_wide,framed_wide_joint --seeds 0,1,2,3,4,5,6,7

competitive.py's head to head puts run A's champion and run B's (the same seed) in a seat
against both runs' other team, so each meets, in one of the two matches, the very opponent it
trained beside: an opponent that has adapted to it (or, for a run scored on the all-agent sum,
one selected for being weak). Here, for seed s and seat t, A_s's policy and B_s's each play
against the other team of every run of every other seed, both modes (2 x (seeds - 1)
opponents, none of which either policy has met), on the same ``--episodes`` fresh episodes
(seed 10**6 + s, as in competitive.py); the table gives A_s's mean return minus B_s's over
those opponents, beside how many of the opponents A_s does better against, and beside it the
same split by the opponents' mode and competitive.py's own figure (against the seed's own
two runs) on the same episodes. Mean over seeds with a 95% t interval; seeds share opponents,
so the interval treats as independent what is only partly so.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from competitive import MARKS, Arena, champion, interval, load, run_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="simple_adversary")
    ap.add_argument("--out", default="runs/competitive600k", help="competitive.py's --out")
    ap.add_argument("--modes", default="framed_wide,framed_wide_joint",
                    help="two modes of competitive.py: A,B (A minus B)")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--episodes", type=int, default=200, help="fresh episodes per pairing")
    ap.add_argument("--at", type=int, choices=[int(100 * m) for m in MARKS if m],
                    help="play each run's champion kept this %% into the run instead of its last "
                         "(as competitive.py --at): the runs of 2M env steps at 50 are the runs "
                         "of 1M")
    args = ap.parse_args()
    out, seeds = Path(args.out), [int(s) for s in args.seeds.split(",")]
    modes = args.modes.split(",")
    if len(modes) != 2 or len(seeds) < 2:
        raise SystemExit("--modes takes two modes (A,B) and --seeds at least two seeds")
    dirs = {(m, s): run_dir(out, args.env, m, s) for m in modes for s in seeds}
    paths = {k: champion(d, args.at) for k, d in dirs.items()}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        raise SystemExit("no champion: " + ", ".join(missing)
                         + "; train the runs with benchmarks/competitive.py")
    champs = {k: load(paths[k], d) for k, d in dirs.items()}
    arena = Arena(dirs[modes[0], seeds[0]], args.episodes, 0)
    a, b = modes
    at = "" if args.at is None else f" (the champions kept {args.at}% into each run)"
    print(f"{args.env}, {a} champion minus {b} champion of the same seed{at}, per seat, "
          f"{args.episodes} episodes per pairing")
    for t, (team, _) in enumerate(arena.teams):
        print(f"\n{team}\n\n| seed | against the other seeds' runs | does better against | "
              f"against other seeds' {a} runs | against other seeds' {b} runs | against its "
              "own two runs |\n|---|---|---|---|---|---|")
        held: list[float] = []
        split: dict[str, list[float]] = {m: [] for m in modes}
        own: list[float] = []
        for s in seeds:
            arena.seed = 10**6 + s  # the episodes competitive.py plays for this seed
            deltas: dict[tuple[str, int], float] = {}
            for key, opp in champs.items():
                deltas[key] = float(arena.seat(champs[a, s], t, opp).mean()
                                    - arena.seat(champs[b, s], t, opp).mean())
            others = {k: v for k, v in deltas.items() if k[1] != s}
            held.append(float(np.mean(list(others.values()))))
            for m in modes:
                split[m].append(float(np.mean([v for k, v in others.items() if k[0] == m])))
            own.append(float(np.mean([deltas[m, s] for m in modes])))
            wins = sum(v > 0 for v in others.values())
            print(f"| {s} | {held[-1]:+.2f} | {wins} of {len(others)} | {split[a][-1]:+.2f} | "
                  f"{split[b][-1]:+.2f} | {own[-1]:+.2f} |")
        print(f"| mean [95% CI] | {interval(np.array(held))} | | {interval(np.array(split[a]))} "
              f"| {interval(np.array(split[b]))} | {interval(np.array(own))} |")


if __name__ == "__main__":
    main()
