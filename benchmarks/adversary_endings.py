"""Where simple_adversary's good agents end their episodes against the scripted adversary, or
against a run's champion adversary (``--adversary RUN``).

    python benchmarks/adversary_endings.py runs/competitive/simple_adversary-pbt-s0 \\
        runs/competitive/simple_adversary-teams-s0 --episodes 100

For each run directory's champions (``checkpoints/best.pt``), and for the scripted good agents,
plays ``--episodes`` mpe2 episodes (seeds 10**6, 10**6 + 1, ...) against that adversary
and prints, at each episode's last step: how often both good agents are nearest the goal
landmark, split between the landmarks, or neither is nearest the goal; the mean distance to the
goal of the nearer good agent, of the other one and of the adversary; and the good team's mean
return per episode (summed over its agents, as competitive.py counts it); every third step,
the mean distance to the goal and speed of the good agent then nearest it. The good agents'
reward each step is the adversary's distance to the goal minus the nearer good agent's.

Last, a scripted best response to the scripted adversary (``--offset``): the good agent nearer
the goal goes to a point ``offset`` from it towards the other landmark, the other good agent to
that landmark, so that the adversary, which takes the landmark with the smallest summed
distance to the good agents, goes to the decoy. It shows how far the heuristic pair is from the
best play against that adversary, that is, what beating the heuristic there asks for.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from competitive import load


def endings(good: Any, adversary: Any, episodes: int, max_cycles: int) -> str:
    from mpe2 import simple_adversary_v3

    from evohpo.envs.frames import Stacker
    from evohpo.play import fitted

    # the observations as the policy of the most stacked ones (env.frames) takes them; the other
    # reads the newest
    spec = max((good.spec, adversary.spec), key=lambda s: s.frames)

    counts = {"both at goal": 0, "split": 0, "neither": 0}
    dist, returns = [], []
    course = np.zeros((episodes, max_cycles, 2))  # nearer good agent: distance to goal, speed
    for ep in range(episodes):
        env = simple_adversary_v3.parallel_env(continuous_actions=True, max_cycles=max_cycles)
        obs, _ = env.reset(seed=10**6 + ep)
        stack = Stacker(spec, 1)
        stack.start({a: np.asarray(v, np.float32)[None] for a, v in obs.items()})
        world = env.unwrapped.world
        goal = next(a.goal_a for a in world.agents if not a.adversary).state.p_pos
        total = 0.0
        for t in range(max_cycles):
            act: dict[str, np.ndarray] = {}
            for policy, adv in ((good, False), (adversary, True)):
                env_act, _ = policy.act(fitted(policy, stack.view()), None)
                act.update({a: env_act[a][0] for a in env_act
                            if a.startswith("adversary_") == adv})
            obs, rew, *_ = env.step(act)
            stack.push({a: np.asarray(v, np.float32)[None] for a, v in obs.items()})
            total += sum(r for a, r in rew.items() if a.startswith("agent_"))
            near = min((a for a in world.agents if not a.adversary),
                       key=lambda a: np.linalg.norm(a.state.p_pos - goal))
            course[ep, t] = (np.linalg.norm(near.state.p_pos - goal),
                             np.linalg.norm(near.state.p_vel))
        returns.append(total)
        near_goal = []
        for a in world.agents:
            if not a.adversary:
                d = [np.linalg.norm(a.state.p_pos - m.state.p_pos) for m in world.landmarks]
                near_goal.append(world.landmarks[int(np.argmin(d))].state.p_pos is goal)
        counts["both at goal" if all(near_goal) else "split" if any(near_goal) else "neither"] += 1
        good_d = sorted(np.linalg.norm(a.state.p_pos - goal) for a in world.agents
                        if not a.adversary)
        adv_d = [np.linalg.norm(a.state.p_pos - goal) for a in world.agents if a.adversary]
        dist.append([good_d[0], good_d[-1], adv_d[0]])
        env.close()
    m, c = np.mean(dist, axis=0), course.mean(axis=0)
    steps = range(0, max_cycles, 3)
    return (" / ".join(f"{k} {v}" for k, v in counts.items())
            + f"; distance to the goal: nearer good {m[0]:.2f}, other good {m[1]:.2f}, "
              f"adversary {m[2]:.2f}; good team's return {np.mean(returns):.2f} +- "
              f"{np.std(returns) / np.sqrt(len(returns)):.2f} (standard error)\n"
              f"  the nearer good agent after steps {', '.join(str(t + 1) for t in steps)}: "
              f"distance to the goal {' '.join(f'{c[t, 0]:.2f}' for t in steps)}; "
              f"speed {' '.join(f'{c[t, 1]:.2f}' for t in steps)}")


def decoy_pair(spec: Any, offset: float) -> Any:
    """The scripted best response to the scripted adversary described above (two landmarks)."""
    from evohpo.references import Scripted, _points, _toward

    def rule(o: np.ndarray) -> np.ndarray:
        # a good agent's observation: goal, the 2 landmarks, the adversary, the other good agent
        goal, marks, other = o[:, 0:2], _points(o, 2, 2), o[:, 8:10]
        decoy = marks[np.arange(len(o)), np.linalg.norm(marks - goal[:, None], axis=2).argmax(1)]
        mine = np.linalg.norm(goal, axis=1) <= np.linalg.norm(goal - other, axis=1)
        away = decoy - goal
        away = away / np.maximum(np.linalg.norm(away, axis=1, keepdims=True), 1e-9)
        return _toward(np.where(mine[:, None], goal + offset * away, decoy), 3.0)

    return Scripted(spec, {a: rule for a in spec.agents if a.startswith("agent_")})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="run directories of simple_adversary")
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--adversary", metavar="RUN",
                    help="a simple_adversary run directory whose champion plays the adversary "
                         "(default: the scripted heuristic)")
    ap.add_argument("--offset", type=float, default=0.3,
                    help="the decoy pair's distance from the goal, towards the other landmark")
    args = ap.parse_args()
    from evohpo.envs import spec_for
    from evohpo.playback import run_config
    from evohpo.references import reference_policy

    for d in map(Path, args.runs):
        cfg = run_config(d)
        spec = spec_for(cfg.env)
        heuristic = reference_policy("heuristic", spec, cfg.env.name, cfg.env.kwargs, 0)
        cycles = int(cfg.env.kwargs.get("max_cycles", 25))
        opponent = heuristic if args.adversary is None else load(
            Path(args.adversary) / "checkpoints" / "best.pt", Path(args.adversary))
        champion = load(d / "checkpoints" / "best.pt", d)
        got = endings(champion, opponent, args.episodes, cycles)
        print(f"{d.name}, learned good agents: {got}")
    print(f"scripted good agents: {endings(heuristic, opponent, args.episodes, cycles)}")
    if int(cfg.env.kwargs.get("N", 2)) == 2:
        decoy = decoy_pair(spec, args.offset)
        print(f"decoy pair (offset {args.offset:g}): "
              f"{endings(decoy, opponent, args.episodes, cycles)}")


if __name__ == "__main__":
    main()
