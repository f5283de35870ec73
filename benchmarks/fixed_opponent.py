"""One team of a competitive mpe2 game (simple_tag, simple_adversary, simple_push: those with a
scripted heuristic) learning alone against the scripted heuristic playing the other team.

    python benchmarks/fixed_opponent.py --steps 300000 --seeds 0 --shaping 0,1 \\
        --out runs/fixed_opponent
    python benchmarks/fixed_opponent.py --env simple_adversary --learn good --steps 600000 \\
        --seeds 0,1,2 --shaping 0 --out runs/fixed_opponent

The other team's agents are played inside the env (``make``: a PettingZoo ParallelEnv whose
agents are the learning team only), so evohpo trains a one-team population of the env's MATD3
preset (with one gradient step per learn unless ``--set algo.gradient_steps=N``, and the
preset's ``env.frames``) against a fixed opponent. It separates "can the learner play this seat
at all" from the league: in a league the opponents change as they learn. ``--shaping c`` adds
the learning team's potential-based shaping of ``env.shaping`` (:class:`evohpo.shaping.Shaping`,
the same code; simple_tag only) inside the env with coefficient ``c``; every run's champion is
then scored on the env's own rewards, on ``--episodes`` fresh episodes, beside the heuristic in
the same seat.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from pettingzoo.utils.env import ParallelEnv

from evohpo.references import HEURISTICS

sys.path.insert(0, str(Path(__file__).parent))
from competitive import paired_half, span

KW = {"continuous_actions": True, "max_cycles": 25}
ENVS = tuple(HEURISTICS)  # the envs with a scripted heuristic


class FixedOpponent(ParallelEnv):
    """``env`` (one of ``ENVS``) whose other team is played by the scripted heuristic."""

    metadata = {"name": "vs_heuristic", "render_modes": []}

    def __init__(self, learn: str = "adversaries", shaping: float = 0.0, gamma: float = 0.95,
                 env: str = "simple_tag"):
        from evohpo.envs.registry import factory_of, probe
        from evohpo.references import heuristic_policy
        from evohpo.shaping import Shaping

        if env not in ENVS:
            raise ValueError(f"env: {env!r} is not one of {', '.join(ENVS)}")
        self.env = factory_of(env)(**KW)
        spec = probe(env, KW)
        self.heuristic = heuristic_policy(spec, env, KW)
        teams = dict(spec.teams)
        if learn not in teams:
            raise ValueError(f"learn: {learn!r} is not one of {sorted(teams)}")
        self.learners = list(teams[learn])
        self.fixed = [a for a in spec.agents if a not in self.learners]
        self.shaping = (Shaping(spec, env, KW, {learn: shaping}, gamma) if shaping else None)
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


def make(learn: str = "adversaries", shaping: float = 0.0, env: str = "simple_tag",
         ) -> FixedOpponent:
    return FixedOpponent(learn, shaping, env=env)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="simple_tag", choices=ENVS)
    ap.add_argument("--learn", default="adversaries", choices=("adversaries", "good"),
                    help="the team that learns")
    ap.add_argument("--steps", type=int, default=300_000)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--shaping", help="comma-separated coefficients (default: 0,1 where the "
                    "env has shaping potentials, else 0)")
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--out", default="runs/fixed_opponent")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a key of the preset (repeatable), as `evohpo train --set`")
    ap.add_argument("--tag", default="", help="suffix of the run directories (for --set runs)")
    ap.add_argument("--extend", metavar="DIR",
                    help="a --out of shorter runs (same --tag): each run is that run copied and "
                         "resumed up to --steps (the same run, as it resumes exactly)")
    args = ap.parse_args()
    from evohpo.shaping import POTENTIALS

    args.shaping = args.shaping or ("0,1" if args.env in POTENTIALS else "0")
    if args.env not in POTENTIALS and any(float(c) for c in args.shaping.split(",")):
        ap.error(f"--shaping {args.shaping}: {args.env} has no shaping potentials (they exist "
                 f"for {', '.join(POTENTIALS)}); use --shaping 0")
    os.environ.setdefault("WANDB_MODE", "disabled")
    from evohpo import api
    from evohpo import config as C
    from evohpo.api import preset_path

    print(f"{args.env}, {args.learn} learning against the heuristic, MATD3 preset"
          f"{' with ' + ', '.join(args.set) if args.set else ''}, "
          f"{args.steps:,} env steps, {args.episodes} fresh episodes\n\n| seed | shaping | "
          "champion (mean +- sd) | heuristic in the seat | champion minus heuristic [95% CI] | "
          "wall s |\n|---|---|---|---|---|---|")
    for seed in (int(s) for s in args.seeds.split(",")):
        for c in (float(x) for x in args.shaping.split(",")):
            prefix = "" if args.env == "simple_tag" else f"{args.env}-"
            d = Path(args.out) / f"{prefix}{args.learn}-c{c:g}{args.tag}-s{seed}"
            t0 = time.perf_counter()
            if steps_done(d) >= args.steps:
                pass  # finished: scored again
            elif args.extend:
                shutil.rmtree(d, ignore_errors=True)
                shutil.copytree(Path(args.extend) / d.name, d)
                api.resume(d, steps=args.steps)
            else:
                cfg = C.read_yaml(preset_path("matd3", args.env))  # all but the env name
                # one gradient step per learn, as measured before the simple_tag preset took
                # five
                cfg["algo"] = {**cfg["algo"], "gradient_steps": 1}
                # one team learns here: no other team's targets to take (the simple_adversary
                # preset's learned ones included)
                cfg["population"] = {**cfg["population"], "scripted_opponents": 0.0,
                                     "opponent_actions": "played"}
                # the heuristic and any shaping are the env's own here
                cfg["env"] = {**cfg["env"], "name": "fixed_opponent:make", "pool": "sync",
                              "shaping": {},
                              "kwargs": {"learn": args.learn, "shaping": c,
                                         "env": args.env}}
                api.train(cfg, steps=args.steps, seed=seed, run_dir=d, overwrite=True,
                          overrides=args.set)
            mine, ref = evaluate(d, args.env, args.learn, args.episodes, 10**6 + seed)
            diff = mine - ref  # the same episodes: a paired difference
            print(f"| {seed} | {c:g} | {mine.mean():.2f} +- {mine.std(ddof=1):.2f} | "
                  f"{ref.mean():.2f} | {span(diff.mean(), paired_half(diff))} | "
                  f"{time.perf_counter() - t0:.0f} |", flush=True)


def steps_done(d: Path) -> int:
    """The env steps run ``d`` has trained (0: none)."""
    m = d / "metrics.jsonl"
    if not (d / "checkpoints" / "best.pt").exists() or not m.exists():
        return 0
    lines = m.read_text().splitlines()
    return int(json.loads(lines[-1])["env_steps"]) if lines else 0


def evaluate(d: Path, env: str, learn: str, episodes: int, seed: int,
             ) -> tuple[np.ndarray, np.ndarray]:
    """The champion of run ``d`` and the heuristic, each in the ``learn`` seat against the
    heuristic, on the same fresh episodes of the plain game (no shaping): each one's team return
    per episode."""
    from evohpo import checkpoint
    from evohpo.algos import restore_algo
    from evohpo.envs import spec_for
    from evohpo.play import episode_returns, episode_totals, eval_pool
    from evohpo.playback import run_config
    from evohpo.references import heuristic_policy

    cfg = run_config(d)
    _, tensors = checkpoint.load(d / "checkpoints" / "best.pt")
    champ = restore_algo(cfg, spec_for(cfg.env), tensors["algo"], "cpu")
    plain = api_config(cfg, env)
    spec = spec_for(plain.env)  # the plain game, its observations stacked as the run's
    heuristic = heuristic_policy(spec, env, KW)
    pool = eval_pool(plain, spec, episodes)
    agents = tuple(spec.teams[learn])
    others = tuple(a for a in spec.agents if a not in agents)
    mine = episode_totals(episode_returns([(champ, agents), (heuristic, others)], pool, seed),
                          agents)
    ref = episode_totals(episode_returns([(heuristic, agents), (heuristic, others)], pool, seed),
                         agents)
    pool.close()
    return mine, ref


def api_config(cfg: Any, env: str) -> Any:
    """``cfg`` on the plain ``env`` (what the champion is scored on)."""
    from evohpo import config as C

    d = C.to_dict(cfg)
    d["env"] = {**d["env"], "name": env, "kwargs": dict(KW)}
    return C.load([d])


if __name__ == "__main__":
    main()
