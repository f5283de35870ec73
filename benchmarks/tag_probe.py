"""What a run's simple_tag predators do against prey that they never met in training.

    python benchmarks/tag_probe.py runs/competitive/simple_tag-teams-s0 [RUN ...]

For each run, its champion predators (``checkpoints/best.pt``) and the scripted heuristic
predators each play ``--episodes`` fresh episodes against three kinds of prey: one that never
moves (``still``), a random one and the heuristic prey; the table gives both predator teams'
mean return per episode on the same episodes. Against the still prey it also gives each
predator's distance to the prey at the end of the episode (mean over episodes, predators in
order): a predator that goes to the prey and stays there ends near 0.1 (they touch below 0.125).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from competitive import Arena, load


class Still:
    """Every agent it plays sends the no-op action (the lowest value everywhere)."""

    def __init__(self, spec: Any):
        self.spec = spec

    def act(self, obs: dict[str, np.ndarray], rng: Any = None) -> Any:
        out = {a: np.full((len(o), self.spec[a].act_dim), self.spec[a].low, np.float32)
               for a, o in obs.items()}
        return out, out


def end_distances(champ: Any, episodes: int, seed: int) -> list[float]:
    """Each predator's distance to a still prey after the last step, mean over episodes."""
    from mpe2 import simple_tag_v3

    env = simple_tag_v3.parallel_env(continuous_actions=True, max_cycles=25)
    total = None
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed + ep)
        while env.agents:
            act, _ = champ.act({a: np.asarray(v, np.float32)[None] for a, v in obs.items()},
                               None)
            moves = {a: (act[a][0] if a.startswith("adversary_") else np.zeros(5, np.float32))
                     for a in env.agents}
            obs, *_ = env.step(moves)
        w = env.unwrapped.world
        prey = next(x for x in w.agents if not x.adversary)
        d = np.array([np.linalg.norm(x.state.p_pos - prey.state.p_pos)
                      for x in w.agents if x.adversary])
        total = d if total is None else total + d
    env.close()
    assert total is not None
    return list(total / episodes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--seed", type=int, default=4242)
    args = ap.parse_args()
    print("| run | prey | champion predators | heuristic predators |\n|---|---|---|---|")
    for d in args.runs:
        arena = Arena(d, args.episodes, args.seed)
        champ = load(d / "checkpoints" / "best.pt", d)
        heuristic = arena.reference("heuristic")
        for name, prey in (("still", Still(arena.spec)), ("random", arena.reference("random")),
                           ("heuristic", heuristic)):
            mine, ref = arena.play([champ, prey])[0], arena.play([heuristic, prey])[0]
            print(f"| {d.name} | {name} | {mine.mean():.1f} | {ref.mean():.1f} |", flush=True)
        dist = end_distances(champ, min(args.episodes, 20), args.seed)
        print(f"| {d.name} | still: distances at the end | "
              f"{', '.join(f'{x:.2f}' for x in dist)} | |", flush=True)


if __name__ == "__main__":
    main()
