"""Potential-based reward shaping of the training rewards (``env.shaping``).

Some games pay a team only on rare events: simple_tag's predators get +10 when one of them
touches a prey, nothing otherwise. Against a prey that flees well, a learner that has not yet
caught anything sees no reward at all and learns nothing. Shaping adds a dense term to that
team's rewards in the replay memory:

    F(s, s') = c * (gamma * Phi(s') - Phi(s))       (Phi(s') = 0 where the episode terminated)

with ``Phi`` a potential of the team's situation, read from its agents' observations. A term of
this form leaves the best policies of the game unchanged (Ng, Harada and Russell, ICML 1999):
it tells the learner sooner what the game pays for later. Only what the members learn from
changes; fitness, evaluation, the references and every logged return use the env's own
rewards.

The potentials are those mpe2 writes in its own optional (disabled) shaping terms:

* simple_tag, ``adversaries``: minus each adversary's distance to its nearest good agent,
  summed over the adversaries (closing in pays).
* simple_tag, ``good``: each good agent's distance to every adversary, summed (getting away
  pays).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from evohpo.config.schema import Config
from evohpo.envs.heuristics import HEURISTICS, _points, readable_layout
from evohpo.envs.spec import EnvSpec
from evohpo.errors import ConfigError

# a team's potential: every agent's observations [n, obs_dim] -> one value per env [n]
Potential = Callable[[dict[str, np.ndarray]], np.ndarray]


def _distances(obs: np.ndarray, start: int, count: int) -> np.ndarray:
    """Lengths of ``count`` relative positions stored from ``obs[:, start:]``: [n, count]."""
    rel = _points(obs, start, count)
    return np.sqrt(np.einsum("nkd,nkd->nk", rel, rel))


def _tag(spec: EnvSpec, kw: dict[str, int]) -> dict[str, tuple[Potential, tuple[str, ...]]]:
    """simple_tag: ``[vel, pos, obstacles, others' positions, good others' velocities]``, the
    others in env order (adversaries first) without the agent itself."""
    ng, na, nl = kw["num_good"], kw["num_adversaries"], kw["num_obstacles"]
    others = 4 + 2 * nl
    chasers = [a for a in spec.agents if a.startswith("adversary_")]
    prey = [a for a in spec.agents if not a.startswith("adversary_")]

    def close_in(obs: dict[str, np.ndarray]) -> np.ndarray:
        return -sum(_distances(obs[a], others + 2 * (na - 1), ng).min(axis=1) for a in chasers)

    def get_away(obs: dict[str, np.ndarray]) -> np.ndarray:
        return sum(_distances(obs[a], others, na).sum(axis=1) for a in prey)

    return {"adversaries": (close_in, tuple(chasers)), "good": (get_away, tuple(prey))}


# env -> (team -> (potential, agents it shapes)); the observation layout is the one the env's
# heuristic reads (evohpo/envs/heuristics.py), checked the same way
POTENTIALS: dict[str, Callable[[EnvSpec, dict[str, int]],
                               dict[str, tuple[Potential, tuple[str, ...]]]]] = {
    "simple_tag": _tag,
}


class Shaping:
    """Adds ``c * (gamma * Phi(s') - Phi(s))`` to the rewards of each shaped team's agents."""

    def __init__(self, spec: EnvSpec, env_name: str, env_kwargs: dict[str, Any],
                 coefs: dict[str, float], gamma: float):
        what = f"config key 'env.shaping' ({coefs})"
        if env_name not in POTENTIALS:
            raise ConfigError(f"{what}: env {env_name!r} has no shaping potentials; they exist "
                              f"for {', '.join(POTENTIALS)}; set env.shaping: {{}}")
        wrong = {t: c for t, c in coefs.items() if not (np.isfinite(c) and c >= 0)}
        if wrong:
            raise ConfigError(f"{what}: coefficients must be finite and at least 0, not {wrong}")
        kw = readable_layout(spec, env_name, env_kwargs, HEURISTICS[env_name][1], what,
                             "set env.shaping: {}")
        potentials = POTENTIALS[env_name](spec, kw)  # team -> (potential, agents it shapes)
        bad = [t for t in coefs if t not in potentials]
        if bad:
            raise ConfigError(f"{what}: {', '.join(map(repr, bad))} is not a team of "
                              f"{env_name!r} with a potential; allowed: {', '.join(potentials)}")
        self.gamma = gamma
        self.terms = [(float(c), *potentials[t]) for t, c in coefs.items() if c]

    def __call__(self, obs: dict[str, np.ndarray], rewards: dict[str, np.ndarray],
                 next_obs: dict[str, np.ndarray], terminated: dict[str, np.ndarray],
                 ) -> dict[str, np.ndarray]:
        """The rewards of one vector step with each shaped team's term added (a new dict; the
        env's own arrays are left as they are). ``Phi(s')`` is 0 where an agent terminated."""
        out = dict(rewards)
        for c, phi, agents in self.terms:
            before, after = phi(obs), self.gamma * phi(next_obs)
            for a in agents:
                bonus = c * (np.where(terminated[a], 0.0, after) - before)
                out[a] = (rewards[a] + bonus).astype(rewards[a].dtype, copy=False)
        return out


def make_shaping(cfg: Config, spec: EnvSpec) -> Shaping | None:
    """The run's shaping (None where ``env.shaping`` shapes no team)."""
    coefs = cfg.env.shaping
    if not coefs:
        return None
    return Shaping(spec, cfg.env.name, cfg.env.kwargs, dict(coefs), cfg.algo.gamma)
