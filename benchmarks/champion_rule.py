"""Which champion should a team run hand over? Two rules, played over the champions a run of
competitive.py kept every generation, without training anything.

    python benchmarks/champion_rule.py --env simple_tag --mode updates_shaped --seeds 0,1 \\
        --archive runs/competitive3M_fresh_tag,runs/competitive3M_tag --last 74

- ``current`` (what ``checkpoints/best.pt`` holds): each team's champion is the member with the
  highest cross-play fitness in the last generation. Cross-play fitness is relative to the
  other team's members of the moment, so a later champion is never compared with an earlier
  one on common ground.
- ``hill`` (``eval.champion: hill``, :mod:`evohpo.hill`): a kept champion per team, which a
  generation's champion replaces only when it does at least as well, on the same episodes,
  against a bench: the other teams' champions of that generation and the scripted heuristic
  where the game has one. The bench's episodes are the ones a run with ``eval.champion:
  hill`` would play (``eval.champion_episodes`` of them, from the run's seed), none of the
  evaluation's.

The champion plays no part in training (with ``population.past_opponents`` off, which this
script checks), so each rule's pick at every generation is what a run using it keeps (checked
on a small simple_tag run: the kept generations equal those a run with ``eval.champion: hill``
logs). The run's generation ``g`` champion is read from ``champions/generations/g{g}.pt`` of the
first ``--archive`` directory holding it (a run retrained from scratch is the same run, so
its archive fills the generations a longer extended run did not keep); ``--last`` is the run's
last generation: a run of ``(last + 1) * evo_steps * population.size`` env steps.

Then, as competitive.py does and on its episodes (``--episodes`` fresh ones, seed
10**6 + run seed), each rule's final champions play each seat against the random policy and
the heuristic, paired with the reference's own return in the seat, and meet that rule's own
champions of 0, 25 and 50% of the run head to head (against the earlier champion's other team
and against their own, the mean of the two); and the two rules' final champions meet head to head
(hill's policy minus current's in each seat, against both rules' other team). With ``--versus
OUT:MODE`` each rule's final champions also meet, the same way, the last champion of another
competitive.py run of the seed (the all-agent sum's, ``updates_shaped_joint``, for the issue's
head to head).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from competitive import MARKS, Arena, generation, interval, load, paired_half, run_dir

RULES = ("current", "hill")


class Archive:
    """A run's generation champions, loaded once each."""

    def __init__(self, dirs: list[Path], last: int):
        self.paths: dict[int, tuple[Path, Path]] = {}
        for g in range(last + 1):
            for d in dirs:
                if generation(d, g).is_file():
                    self.paths[g] = (generation(d, g), d)
                    break
        missing = [g for g in range(last + 1) if g not in self.paths]
        if missing:
            raise SystemExit(f"no champion of generation(s) {missing} in "
                             f"{', '.join(str(d) for d in dirs)}")
        self.loaded: dict[int, Any] = {}

    def __getitem__(self, g: int) -> Any:
        if g not in self.loaded:
            self.loaded[g] = load(*self.paths[g])
        return self.loaded[g]


def hill(arc: Archive, last: int, d: Path) -> list[tuple[int, ...]]:
    """Each generation's kept champions under ``hill``, as :class:`evohpo.hill.Hill` keeps them
    in a run of ``d``'s config: ``picks[g][t]`` is the generation whose team-``t`` champion is
    kept after generation ``g``."""
    from evohpo.envs import spec_for
    from evohpo.hill import Hill
    from evohpo.play import playing_teams
    from evohpo.playback import run_config

    cfg = run_config(d)
    spec = spec_for(cfg.env)
    teams = playing_teams(cfg, spec)
    assert teams is not None
    keeper = Hill(cfg, spec, teams)
    picks = []
    try:
        for g in range(last + 1):
            keeper.offer(arc[g], {team: {"id": g} for team, _ in teams}, g)
            picks.append(tuple(r["generation"] for r in keeper.records))
    finally:
        keeper.close()
    return picks


def evaluate(arc: Archive, picks: list[tuple[int, ...]], marks: dict[int, int], arena: Arena,
             refs: dict[str, Any]) -> list[dict[str, Any]]:
    """A rule's final champions against the references and its own earlier champions."""
    T, last = len(arena.teams), len(picks) - 1
    final = [arc[picks[last][t]] for t in range(T)]
    diffs: dict[str, list[np.ndarray]] = {  # a reference in the seat against its own kind
        k: [got - bar for got, bar in arena.against(final, [p] * T)] for k, p in refs.items()}
    for pct, g in marks.items():  # an earlier champion head to head, as in competitive.py
        earlier = [arc[picks[g][t]] for t in range(T)]
        diffs[f"gen {pct}%"] = [(home + away) / 2 for home, away in arena.meet(final, earlier)]
    return [{"team": arena.teams[t][0], "reference": name, "diff": float(d.mean()),
             "half": paired_half(d), "gen": picks[last][t]}
            for name, per_seat in diffs.items() for t, d in enumerate(per_seat)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="simple_tag")
    ap.add_argument("--mode", default="updates_shaped", help="competitive.py's teams mode")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--archive", required=True,
                    help="competitive.py --out directories, in the order they are read")
    ap.add_argument("--last", type=int, required=True, help="the run's last generation")
    ap.add_argument("--episodes", type=int, default=200, help="fresh episodes per pairing")
    ap.add_argument("--versus", metavar="OUT:MODE",
                    help="also meet, head to head, the last champion of this competitive.py "
                         "run of each seed (e.g. runs/competitive2M_tag:updates_shaped_joint)")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    marks = {round(100 * f): round(f * args.last) for f in MARKS}
    from evohpo.playback import run_config
    from evohpo.references import heuristic_available

    per_seed: dict[int, dict[str, list[dict[str, Any]]]] = {}
    h2h: dict[int, list[float]] = {}
    versus: dict[tuple[str, int], list[float]] = {}
    if args.versus:  # before anything is played
        out, mode = args.versus.rsplit(":", 1)
        for s in seeds:
            best = run_dir(Path(out), args.env, mode, s) / "checkpoints" / "best.pt"
            if not best.is_file():
                raise SystemExit(f"--versus: no champion {best}")
    for s in seeds:
        dirs = [run_dir(Path(o), args.env, args.mode, s) for o in args.archive.split(",")]
        cfg = run_config(next(d for d in dirs if (d / "config.yaml").is_file()))
        if cfg.population.past_opponents:
            raise SystemExit(f"seed {s}: population.past_opponents is "
                             f"{cfg.population.past_opponents}; the champions train against "
                             "each other there, so another rule changes the run")
        arc = Archive(dirs, args.last)
        d0 = arc.paths[0][1]
        arena = Arena(d0, args.episodes, 10**6 + s)
        picks = {"current": [(g,) * len(arena.teams) for g in range(args.last + 1)],
                 "hill": hill(arc, args.last, d0)}
        refs = {"random": arena.reference("random")}
        if heuristic_available(args.env):
            refs["heuristic"] = arena.reference("heuristic")
        per_seed[s] = {r: evaluate(arc, picks[r], marks, arena, refs) for r in RULES}
        a = [arc[picks["hill"][-1][t]] for t in range(len(arena.teams))]
        b = [arc[picks["current"][-1][t]] for t in range(len(arena.teams))]
        h2h[s] = [float(np.mean(d)) for d in arena.meet(a, b)]
        if args.versus:
            dv = run_dir(Path(out), args.env, mode, s)
            other = [load(dv / "checkpoints" / "best.pt", dv)] * len(arena.teams)
            for r, final in (("hill", a), ("current", b)):
                versus[r, s] = [float(np.mean(d)) for d in arena.meet(final, other)]
        kept = {g: picks["hill"][g] for g in marks.values()}
        print(f"seed {s}: hill keeps, by team, the champions of generations "
              + ", ".join(f"{kept[g]} at {g}" for g in sorted(kept))
              + f"; {picks['hill'][-1]} at the end (current: generation {args.last})",
              flush=True)

    teams = [r["team"] for r in per_seed[seeds[0]]["current"] if r["reference"] == "random"]
    names = list(dict.fromkeys(r["reference"] for r in per_seed[seeds[0]]["current"]))
    print(f"\n{args.env}, {args.mode}, generations 0-{args.last}; champion minus reference, "
          f"{args.episodes} episodes per pairing, per seed (seeds {args.seeds}); each rule "
          "head to head with its own earlier champions (gen N%)\n")
    print("| team | reference | " + " | ".join(f"{r} per seed | {r} mean" for r in RULES) + " |")
    print("|---|---|" + "---|---|" * len(RULES))
    for team in teams:
        for name in names:
            cells = []
            for r in RULES:
                row = [next(x for x in per_seed[s][r] if x["team"] == team
                            and x["reference"] == name) for s in seeds]
                cells.append(", ".join(f"{x['diff']:+.1f}" + ("" if abs(x["diff"]) > x["half"]
                                                              else "~") for x in row))
                d = np.array([x["diff"] for x in row])
                cells.append(interval(d) if len(d) > 1 else f"{d[0]:+.2f}")
            print(f"| {team} | {name} | " + " | ".join(cells) + " |")
    print("\n(~: within noise, the pairing's 95% interval crosses zero)\n")
    print("Head to head, hill's final champion minus current's in each seat, against both "
          "rules' other team:\n")
    for t, team in enumerate(teams):
        d = np.array([h2h[s][t] for s in seeds])
        print(f"- {team}: " + ", ".join(f"{x:+.2f}" for x in d)
              + (f": {interval(d)}" if len(d) > 1 else ""))
    if args.versus:
        print(f"\nHead to head against {args.versus}'s last champion, each rule's final "
              "champion minus it in each seat, against both runs' other team:\n")
        for r in RULES:
            for t, team in enumerate(teams):
                d = np.array([versus[r, s][t] for s in seeds])
                print(f"- {r}, {team}: " + ", ".join(f"{x:+.2f}" for x in d)
                      + (f": {interval(d)}" if len(d) > 1 else ""))


if __name__ == "__main__":
    main()
