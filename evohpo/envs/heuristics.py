"""Policies that need no training: a random policy, and the scripted heuristics of mpe2's
competitive envs (training opponents, and references to measure learned teams against).

:class:`RandomPolicy` acts uniformly at random in any env. The scripted heuristics play mpe2's
competitive envs from each agent's own observation, with mpe2's default (full) observability:

* simple_tag: adversaries chase the nearest good agent (aiming where it is heading); good agents
  flee the adversaries, weighted by closeness, and steer back before leaving the arena.
* simple_adversary: good agent k goes to landmark k mod N, so the good agents cover every
  landmark; the adversary goes to the landmark with the smallest summed distance to them.
* simple_push: the good agent goes to its goal; the adversary, which is not told the goal,
  takes the landmark nearest the good agent for it and goes there.

All follow :class:`evohpo.envs.spec.Policy` and act for every agent; a lineup picks the
agents each one drives. Movement uses mpe2's action semantics (see
``mpe2/_mpe_utils/simple_env.py``):
continuous actions are ``[no_action, -x, +x, -y, +y, (communication)]`` in [low, high], the
force being ``(a[2] - a[1], a[4] - a[3])``; discrete actions are the index (0 no-op, 1 -x,
2 +x, 3 -y, 4 +y), stored one-hot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from evohpo.envs.spec import AgentSpec, EnvSpec, Policy
from evohpo.errors import ConfigError

KINDS = ("random", "heuristic")
Actions = tuple[dict[str, np.ndarray], dict[str, np.ndarray]]
# one agent's rule: its observations [n, obs_dim] -> the force it wants [n, 2], each in [-1, 1]
Rule = Callable[[np.ndarray], np.ndarray]


def _rows(obs: dict[str, np.ndarray]) -> int:
    return int(next(iter(obs.values())).shape[0])


def _onehot(idx: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros((len(idx), size), np.float32)
    out[np.arange(len(idx)), idx] = 1.0
    return out


class RandomPolicy:
    """Uniform random actions for every agent, from its own generator (same seed, same
    actions)."""

    def __init__(self, spec: EnvSpec, seed: int):
        self.spec = spec
        self.rng = np.random.default_rng(seed)

    def reset(self, seed: int) -> None:
        """Start the stream again: the same episodes get the same actions."""
        self.rng = np.random.default_rng(seed)

    def act(self, obs: dict[str, np.ndarray], rng: np.random.Generator | None = None,
            ) -> Actions:
        n = _rows(obs)
        env_act: dict[str, np.ndarray] = {}
        store: dict[str, np.ndarray] = {}
        for a in self.spec.agents:
            if a not in obs:
                continue
            s = self.spec[a]
            if s.discrete:
                idx = self.rng.integers(0, s.act_dim, n)
                env_act[a], store[a] = idx.astype(np.float32)[:, None], _onehot(idx, s.act_dim)
            else:
                act = self.rng.uniform(s.low, s.high, (n, s.act_dim)).astype(np.float32)
                env_act[a], store[a] = act, act
        return env_act, store


def move(s: AgentSpec, force: np.ndarray, deadband: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Env and stored actions that push an agent with ``force`` [n, 2] (clipped to [-1, 1]).

    Continuous: the force exactly, communication entries at ``low``. Discrete: the direction of
    the force's larger coordinate, or no-op where the force is within ``deadband``.
    """
    f = np.clip(force, -1.0, 1.0)
    n = len(f)
    if s.discrete:
        x_axis = np.abs(f[:, 0]) >= np.abs(f[:, 1])
        idx = np.where(x_axis, np.where(f[:, 0] < 0, 1, 2), np.where(f[:, 1] < 0, 3, 4))
        idx = np.where(np.abs(f).max(axis=1) <= deadband, 0, idx)
        return idx.astype(np.float32)[:, None], _onehot(idx, s.act_dim)
    unit = np.zeros((n, s.act_dim))
    unit[:, 1], unit[:, 2] = np.maximum(-f[:, 0], 0), np.maximum(f[:, 0], 0)
    unit[:, 3], unit[:, 4] = np.maximum(-f[:, 1], 0), np.maximum(f[:, 1], 0)
    act = (s.low + (s.high - s.low) * unit).astype(np.float32)
    return act, act


def _toward(rel: np.ndarray, gain: float, vel: np.ndarray | None = None,
            damping: float = 0.0) -> np.ndarray:
    """A force to reach a point ``rel`` away (proportional, damped by the velocity if seen)."""
    force = gain * rel
    if vel is not None:
        force = force - damping * vel
    return force


def _full_speed(direction: np.ndarray) -> np.ndarray:
    """The direction scaled so that its larger coordinate is 1 (the strongest push)."""
    big = np.abs(direction).max(axis=-1, keepdims=True)
    return direction / np.maximum(big, 1e-9)


def _points(obs: np.ndarray, start: int, count: int) -> np.ndarray:
    """``count`` 2-d vectors from ``obs[:, start:]``: [n, count, 2]."""
    return obs[:, start:start + 2 * count].reshape(len(obs), count, 2)


def _nearest(points: np.ndarray) -> np.ndarray:
    """The nearest of ``points`` [n, k, 2] (relative positions) per row: [n, 2]."""
    k = np.linalg.norm(points, axis=2).argmin(axis=1)
    return points[np.arange(len(points)), k]


class Scripted:
    """A rule per agent, turned into actions; agents without a rule (or obs) are left out."""

    deadband = 0.1  # discrete: no-op under this force (settles instead of overshooting)

    def __init__(self, spec: EnvSpec, rules: dict[str, Rule]):
        self.spec, self.rules = spec, rules

    def act(self, obs: dict[str, np.ndarray], rng: np.random.Generator | None = None,
            ) -> Actions:
        env_act: dict[str, np.ndarray] = {}
        store: dict[str, np.ndarray] = {}
        for a, rule in self.rules.items():
            if a in obs:
                o = np.asarray(obs[a][:, :self.spec.frame_dim(a)], np.float64)  # the newest
                env_act[a], store[a] = move(self.spec[a], rule(o), self.deadband)
        return env_act, store


# ------------------------------------------------------------------------------------ the envs


def _tag(spec: EnvSpec, kw: dict[str, int]) -> dict[str, Rule]:
    """simple_tag: ``[vel, pos, obstacles, others' positions, good others' velocities]``, the
    others in env order (adversaries first) without the agent itself."""
    ng, na, nl = kw["num_good"], kw["num_adversaries"], kw["num_obstacles"]
    others = 4 + 2 * nl

    def chase(o: np.ndarray) -> np.ndarray:
        goods = _points(o, others + 2 * (na - 1), ng)
        vels = _points(o, others + 2 * (na + ng - 1), ng)
        k = np.linalg.norm(goods, axis=2).argmin(axis=1)
        rows = np.arange(len(o))
        target, dist = goods[rows, k], np.linalg.norm(goods[rows, k], axis=1, keepdims=True)
        # aim where the prey will be by the time we get there (at about our top speed, 1)
        return _full_speed(target + vels[rows, k] * np.minimum(dist, 0.5))

    def flee(o: np.ndarray) -> np.ndarray:
        pos = o[:, 2:4]
        chasers = _points(o, others, na)
        d2 = np.maximum((chasers ** 2).sum(axis=2, keepdims=True), 1e-4)
        away = -(chasers / d2 ** 1.5).sum(axis=1)  # the nearest ones count most
        away = away / np.maximum(np.linalg.norm(away, axis=1, keepdims=True), 1e-9)
        # mpe2 penalises |x| > 0.9: turn back well before, harder the further out
        back = -np.sign(pos) * np.clip((np.abs(pos) - 0.6) / 0.2, 0.0, None)
        return _full_speed(away + back)

    adversaries = [a for a in spec.agents if a.startswith("adversary_")]
    return {a: chase if a in adversaries else flee for a in spec.agents}


def _adversary(spec: EnvSpec, kw: dict[str, int]) -> dict[str, Rule]:
    """simple_adversary: good agents ``[goal, landmarks, others]`` (the adversary first), the
    adversary ``[landmarks, good agents]``; no velocities."""
    n = kw["N"]

    def cover(k: int) -> Rule:
        return lambda o: _toward(_points(o, 2, n)[:, k % n], 3.0)

    def guess(o: np.ndarray) -> np.ndarray:
        marks, goods = _points(o, 0, n), _points(o, 2 * n, n)
        spread = np.linalg.norm(marks[:, :, None] - goods[:, None], axis=3).sum(axis=2)
        # ties (good agents on every landmark) go to the nearer landmark: no dithering
        score = spread + 0.25 * np.linalg.norm(marks, axis=2)
        return _toward(marks[np.arange(len(o)), score.argmin(axis=1)], 3.0)

    goods = [a for a in spec.agents if a.startswith("agent_")]
    rules: dict[str, Rule] = {a: cover(i) for i, a in enumerate(goods)}
    rules.update({a: guess for a in spec.agents if a.startswith("adversary_")})
    return rules


def _push(spec: EnvSpec, kw: dict[str, int]) -> dict[str, Rule]:
    """simple_push: the good agent ``[vel, goal, colour, 2 landmarks, their colours, adversary]``,
    the adversary ``[vel, 2 landmarks, good agent]``."""

    def to_goal(o: np.ndarray) -> np.ndarray:
        return _toward(o[:, 2:4], 3.0, o[:, 0:2], 1.0)

    def guard(o: np.ndarray) -> np.ndarray:
        marks, good = _points(o, 2, 2), o[:, None, 6:8]
        goal = marks[np.arange(len(o)), np.linalg.norm(marks - good, axis=2).argmin(axis=1)]
        return _toward(goal, 3.0, o[:, 0:2], 1.0)

    return {"adversary_0": guard, "agent_0": to_goal}


# env -> (rules, {kwarg: default} the observation layout depends on)
HEURISTICS: dict[str, tuple[Callable[[EnvSpec, dict[str, int]], dict[str, Rule]],
                            dict[str, int]]] = {
    "simple_tag": (_tag, {"num_good": 1, "num_adversaries": 3, "num_obstacles": 2}),
    "simple_adversary": (_adversary, {"N": 2}),
    "simple_push": (_push, {}),
}
# kwargs under which an agent's observation no longer follows the layout the rules read
_PARTIAL = ("num_agent_neighbors", "num_landmark_neighbors")


def _layout(env_name: str, kw: dict[str, int]) -> dict[str, int]:
    """obs_dim per agent the rules expect for these kwargs."""
    if env_name == "simple_tag":
        ng, na, nl = kw["num_good"], kw["num_adversaries"], kw["num_obstacles"]
        adv, good = 4 + 2 * nl + 2 * (na + ng - 1) + 2 * ng, 4 + 2 * nl + 2 * (na + ng - 1)
        return {**{f"adversary_{i}": adv for i in range(na)},
                **{f"agent_{i}": good + 2 * (ng - 1) for i in range(ng)}}
    if env_name == "simple_adversary":
        n = kw["N"]
        return {"adversary_0": 4 * n, **{f"agent_{i}": 2 + 4 * n for i in range(n)}}
    return {"adversary_0": 8, "agent_0": 19}


def heuristic_available(env_name: str) -> bool:
    """Whether env ``env_name`` has a scripted heuristic."""
    return env_name in HEURISTICS


def heuristic_policy(spec: EnvSpec, env_name: str, env_kwargs: dict[str, Any],
                     what: str = "reference policy 'heuristic'",
                     instead: str = "use 'random'") -> Scripted:
    """The scripted policy of ``env_name``, checked to read ``spec``'s observations right;
    where it cannot, the error begins with ``what`` (who asked) and ends with ``instead``."""
    if not heuristic_available(env_name):
        raise ConfigError(f"{what}: env {env_name!r} has none; "
                          f"heuristics exist for {', '.join(HEURISTICS)}; {instead}")
    build, layout_kwargs = HEURISTICS[env_name]
    kw = readable_layout(spec, env_name, env_kwargs, layout_kwargs, what, instead)
    bad = [a for a in spec.agents if spec[a].act_dim < 5]
    if bad:
        raise ConfigError(f"{what}: agents {bad} of {env_name!r} have "
                          f"no movement actions; {instead}")
    return Scripted(spec, build(spec, kw))


def readable_layout(spec: EnvSpec, env_name: str, env_kwargs: dict[str, Any],
                    layout_kwargs: dict[str, int], what: str, instead: str) -> dict[str, int]:
    """The kwargs ``layout_kwargs`` (with their defaults) that the observation layout of
    ``env_name`` depends on, checked against ``spec``: full observability and the observation
    sizes the layout gives. Where they differ, the error begins with ``what``."""
    partial = {k: env_kwargs[k] for k in _PARTIAL if env_kwargs.get(k) is not None}
    kw = {k: int(env_kwargs.get(k, d)) for k, d in layout_kwargs.items()}
    expected = _layout(env_name, kw)
    found = {a: spec.frame_dim(a) for a in spec.agents}  # the newest of stacked observations
    if partial or expected != found:
        why = (f"partial observability ({partial})" if partial
               else f"observation sizes {found}, expected {expected}")
        raise ConfigError(f"{what} cannot read {env_name!r} with "
                          f"env.kwargs {env_kwargs}: {why}; {instead}")
    return kw


def reference_policy(kind: str, spec: EnvSpec, env_name: str, env_kwargs: dict[str, Any],
                     seed: int) -> Policy:
    """A reference policy for every agent of ``spec``: 'random' (seeded) or 'heuristic'."""
    if kind == "random":
        return RandomPolicy(spec, seed)
    if kind == "heuristic":
        return heuristic_policy(spec, env_name, env_kwargs)
    raise ConfigError(f"reference policy {kind!r} is not one of "
                      f"{', '.join(repr(k) for k in KINDS)}")


def fixed_references(spec: EnvSpec, env_name: str, env_kwargs: dict[str, Any],
                     seed: int) -> dict[str, Policy]:
    """The fixed opponents a game's champions are measured against: a random policy and,
    where the game has one, the scripted heuristic."""
    return {k: reference_policy(k, spec, env_name, env_kwargs, seed)
            for k in KINDS if k == "random" or heuristic_available(env_name)}
