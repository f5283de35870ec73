"""One team of simple_tag learning alone against the scripted heuristic playing the other team.

    python benchmarks/fixed_opponent.py --steps 300000 --seeds 0 --shaping 0,1 \\
        --out runs/fixed_opponent

The other team's agents are played inside the env (``make``: a PettingZoo ParallelEnv whose
agents are the learning team only), so evohpo trains a one-team population of the preset's
MATD3 (with one gradient step per learn unless ``--set algo.gradient_steps=N``) against a fixed
opponent. It separates "can the learner play this seat at all" from the
league: in a league the opponents change as they learn. ``--shaping c`` adds the learning
team's potential-based shaping of ``env.shaping`` (:class:`evohpo.shaping.Shaping`, the same
code) inside the env with coefficient ``c``; every run's champion is then scored on the env's
own rewards, on ``--episodes`` fresh episodes, beside the heuristic in the same seat.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
from pettingzoo.utils.env import ParallelEnv

KW = {"continuous_actions": True, "max_cycles": 25}


class FixedOpponent(ParallelEnv):
    """simple_tag whose ``fixed`` team is played by the scripted heuristic."""

    metadata = {"name": "simple_tag_vs_heuristic", "render_modes": []}

    def __init__(self, learn: str = "adversaries", shaping: float = 0.0, gamma: float = 0.95):
        from mpe2 import simple_tag_v3

        from evohpo.envs.registry import probe
        from evohpo.references import heuristic_policy
        from evohpo.shaping import Shaping

        self.env = simple_tag_v3.parallel_env(**KW)
        spec = probe("simple_tag", KW)
        self.heuristic = heuristic_policy(spec, "simple_tag", KW)
        teams = dict(spec.teams)
        if learn not in teams:
            raise ValueError(f"learn: {learn!r} is not one of {sorted(teams)}")
        self.learners = list(teams[learn])
        self.fixed = [a for a in spec.agents if a not in self.learners]
        self.shaping = (Shaping(spec, "simple_tag", KW, {learn: shaping}, gamma)
                        if shaping else None)
        self.possible_agents = list(self.learners)
        self.agents: list[str] = []
        self.obs: dict[str, np.ndarray] = {}

    def observation_space(self, agent: str) -> Any:
        return self.env.observation_space(agent)

    def action_space(self, agent: str) -> Any:
        return self.env.action_space(agent)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        obs, info = self.env.reset(seed=seed, options=options)
        self.obs = obs
        self.agents = list(self.learners)
        return {a: obs[a] for a in self.learners}, {a: info.get(a, {}) for a in self.learners}

    def step(self, actions: dict[str, np.ndarray]) -> Any:
        fixed, _ = self.heuristic.act({a: np.asarray(self.obs[a])[None] for a in self.fixed})
        before = self.obs
        obs, rew, term, trunc, info = self.env.step(
            {**actions, **{a: fixed[a][0] for a in self.fixed}})
        if self.shaping is not None and rew:
            rows = {a: np.asarray(rew[a], np.float32)[None] for a in rew}
            shaped = self.shaping({a: np.asarray(o, np.float32)[None] for a, o in before.items()},
                                  rows, {a: np.asarray(o, np.float32)[None]
                                         for a, o in obs.items()},
                                  {a: np.array([term[a]]) for a in rew})
            rew = {a: float(shaped[a][0]) for a in rew}
        self.obs = obs
        keep = [a for a in self.learners if a in rew]
        self.agents = [a for a in self.learners if a in self.env.agents]
        return ({a: obs[a] for a in keep}, {a: rew[a] for a in keep},
                {a: term[a] for a in keep}, {a: trunc[a] for a in keep},
                {a: info.get(a, {}) for a in keep})

    def close(self) -> None:
        self.env.close()


def make(learn: str = "adversaries", shaping: float = 0.0) -> FixedOpponent:
    return FixedOpponent(learn, shaping)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--learn", default="adversaries", help="the team that learns")
    ap.add_argument("--steps", type=int, default=300_000)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--shaping", default="0,1", help="comma-separated coefficients")
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--out", default="runs/fixed_opponent")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a key of the preset (repeatable), as `evohpo train --set`")
    ap.add_argument("--tag", default="", help="suffix of the run directories (for --set runs)")
    ap.add_argument("--extend", metavar="DIR",
                    help="a --out of shorter runs (same --tag): each run is that run copied and "
                         "resumed up to --steps (the same run, as it resumes exactly)")
    args = ap.parse_args()
    os.environ.setdefault("WANDB_MODE", "disabled")
    from evohpo import api
    from evohpo import config as C
    from evohpo.api import preset_path

    print(f"simple_tag, {args.learn} learning against the heuristic, MATD3 preset"
          f"{' with ' + ', '.join(args.set) if args.set else ''}, "
          f"{args.steps:,} env steps, {args.episodes} fresh episodes\n\n| seed | shaping | "
          "champion (mean +- sd) | heuristic in the seat | wall s |\n|---|---|---|---|---|")
    for seed in (int(s) for s in args.seeds.split(",")):
        for c in (float(x) for x in args.shaping.split(",")):
            d = Path(args.out) / f"{args.learn}-c{c:g}{args.tag}-s{seed}"
            t0 = time.perf_counter()
            if steps_done(d) >= args.steps:
                pass  # finished: scored again
            elif args.extend:
                shutil.rmtree(d, ignore_errors=True)
                shutil.copytree(Path(args.extend) / d.name, d)
                api.resume(d, steps=args.steps)
            else:
                cfg = C.read_yaml(preset_path("matd3", "simple_tag"))  # all but the env
                # one gradient step per learn, as measured before the preset took five; the
                # heuristic opponent is the env's own here
                cfg["algo"] = {**cfg["algo"], "gradient_steps": 1}
                cfg["population"] = {**cfg["population"], "scripted_opponents": 0.0}
                cfg["env"] = {**cfg["env"], "name": "fixed_opponent:make", "pool": "sync",
                              "kwargs": {"learn": args.learn, "shaping": c}}
                api.train(cfg, steps=args.steps, seed=seed, run_dir=d, overwrite=True,
                          overrides=args.set)
            champ, sd, ref = evaluate(d, args.learn, args.episodes, 10**6 + seed)
            print(f"| {seed} | {c:g} | {champ:.1f} +- {sd:.1f} | {ref:.1f} | "
                  f"{time.perf_counter() - t0:.0f} |", flush=True)


def steps_done(d: Path) -> int:
    """The env steps run ``d`` has trained (0: none)."""
    m = d / "metrics.jsonl"
    if not (d / "checkpoints" / "best.pt").exists() or not m.exists():
        return 0
    lines = m.read_text().splitlines()
    return int(json.loads(lines[-1])["env_steps"]) if lines else 0


def evaluate(d: Path, learn: str, episodes: int, seed: int) -> tuple[float, float, float]:
    """The champion of run ``d`` and the heuristic, each in the ``learn`` seat against the
    heuristic, on the same fresh episodes of the plain game (no shaping)."""
    from evohpo import checkpoint
    from evohpo.algos import restore_algo
    from evohpo.envs import spec_for
    from evohpo.envs.registry import probe
    from evohpo.play import episode_returns, episode_totals, eval_pool
    from evohpo.playback import run_config
    from evohpo.references import heuristic_policy

    cfg = run_config(d)
    _, tensors = checkpoint.load(d / "checkpoints" / "best.pt")
    champ = restore_algo(cfg, spec_for(cfg.env), tensors["algo"], "cpu")
    spec = probe("simple_tag", KW)
    heuristic = heuristic_policy(spec, "simple_tag", KW)
    plain = api_config(cfg)
    pool = eval_pool(plain, spec, episodes)
    agents = tuple(spec.teams[learn])
    others = tuple(a for a in spec.agents if a not in agents)
    mine = episode_totals(episode_returns([(champ, agents), (heuristic, others)], pool, seed),
                          agents)
    ref = episode_totals(episode_returns([(heuristic, agents), (heuristic, others)], pool, seed),
                         agents)
    pool.close()
    return float(mine.mean()), float(mine.std(ddof=1)), float(ref.mean())


def api_config(cfg: Any) -> Any:
    """``cfg`` on the plain simple_tag (what the champion is scored on)."""
    from evohpo import config as C

    d = C.to_dict(cfg)
    d["env"] = {**d["env"], "name": "simple_tag", "kwargs": dict(KW)}
    return C.load([d])


if __name__ == "__main__":
    main()
