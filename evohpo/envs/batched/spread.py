"""Batched cooperative navigation: simple_spread, simple_formation and simple_line (mpe2)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from evohpo.envs.batched.core import (
    Scenario,
    World,
    agent,
    dist,
    draw,
    landmark,
    nearest_per_agent,
    others_index,
    relative,
    split,
)


def matched_distances(d: np.ndarray) -> np.ndarray:
    """The distances of the assignment of agents to targets that minimises their sum.

    ``d`` is [n, agents, targets]; returns [n, agents] in agent order, as mpe2's
    ``dists[linear_sum_assignment(dists)]``. Small teams try every permutation at once.
    """
    n, k = d.shape[:2]
    if k <= 6:
        perms = np.array(list(itertools.permutations(range(k))), dtype=np.intp)
        cost = d[:, np.arange(k), perms]  # [n, perms, agents]
        best = np.argmin(cost.sum(axis=2), axis=1)
        return cost[np.arange(n), best]
    from scipy.optimize import linear_sum_assignment

    out = np.empty((n, k))
    for i in range(n):
        r, c = linear_sum_assignment(d[i])
        out[i] = d[i][r, c]
    return out


class Spread(Scenario):
    """N agents cover N landmarks; collisions between agents are penalised."""

    mpe2_module = "mpe2.simple_spread_v3"
    params = {"N": 3, "local_ratio": 0.5, "curriculum": False, "terminate_on_success": False,
              "num_agent_neighbors": None, "num_landmark_neighbors": None}

    def build(self, kw: dict[str, Any]) -> None:
        n_agents = int(kw["N"])
        self.local_ratio = float(kw["local_ratio"])
        # the pool never advances mpe2's curriculum, so a curriculum env stays in stage 0:
        # no collision penalty
        self.penalise = not kw["curriculum"]
        self.terminate = bool(kw["terminate_on_success"])
        self.k_agents, self.k_landmarks = kw["num_agent_neighbors"], kw["num_landmark_neighbors"]
        self.agents = tuple(f"agent_{i}" for i in range(n_agents))
        self.world = World(self.n, [agent(size=0.15, silent=True)] * n_agents,
                           [landmark(collide=False)] * n_agents, dim_c=2)
        self.others = others_index(n_agents)

    def reset(self, idx: np.ndarray, gens: Sequence[np.random.Generator]) -> None:
        w = self.world
        w.pos[idx] = draw(gens, lambda g: g.uniform(-1, 1, (w.num_agents + w.num_landmarks, 2)))
        w.vel[idx] = 0.0
        w.c[idx] = 0.0

    def observe(self) -> dict[str, np.ndarray]:
        w = self.world
        na = w.num_agents
        p, v = w.pos[:, :na], w.vel[:, :na]
        rel_lm = relative(p, w.pos[:, na:])
        rel_ag = relative(p, p)[:, np.arange(na)[:, None], self.others]  # [n, agents, others, 2]
        comm = w.c[:, self.others]
        if self.k_landmarks is not None:
            (rel_lm,) = nearest_per_agent(rel_lm, self.k_landmarks)
        if self.k_agents is not None:
            rel_ag, comm = nearest_per_agent(rel_ag, self.k_agents, comm)
        n = self.n
        parts = [v, p, rel_lm.reshape(n, na, -1), rel_ag.reshape(n, na, -1),
                 comm.reshape(n, na, -1)]
        return split(np.concatenate(parts, axis=2), self.agents)

    def _cover(self) -> np.ndarray:
        """[n, landmarks]: the distance from each landmark to its closest agent."""
        w = self.world
        na = w.num_agents
        return dist(w.pos[:, :na, None], w.pos[:, None, na:]).min(axis=1)

    def rewards(self) -> dict[str, np.ndarray]:
        w = self.world
        na = w.num_agents
        glob = np.zeros(self.n)
        for m in self._cover().T:  # mpe2 subtracts one landmark after another
            glob -= m
        if self.penalise:
            d = dist(w.pos[:, :na, None], w.pos[:, None, :na])
            hits = (d < 2 * 0.15) & ~np.eye(na, dtype=bool)
            own = -hits.sum(axis=2).astype(float)
        else:
            own = np.zeros((self.n, na))
        lr = self.local_ratio
        return {a: glob * (1 - lr) + own[:, j] * lr for j, a in enumerate(self.agents)}

    def terminal(self) -> np.ndarray | None:
        if not self.terminate:
            return None
        return np.all(self._cover() < 0.1, axis=1)


class _Shape(Scenario):
    """Shared by formation and line: a joint reward from the best assignment to target points."""

    params = {"N": 4, "terminate_on_success": False}
    delta: np.ndarray  # [n, agents]: the matched distances of the last step

    def shape_reward(self, targets: np.ndarray) -> dict[str, np.ndarray]:
        na = self.world.num_agents
        d = dist(self.world.pos[:, :na, None], targets[:, None, :])
        self.delta = matched_distances(d)
        joint = -np.mean(np.clip(self.delta, 0, 2), axis=1)
        return {a: joint.copy() for a in self.agents}  # local_ratio 0: the joint reward only

    def terminal(self) -> np.ndarray | None:
        if not self.kw["terminate_on_success"]:
            return None
        return np.all(self.delta < 0.05, axis=1)  # rewards() computed delta for this step

    def observe(self) -> dict[str, np.ndarray]:
        w = self.world
        na = w.num_agents
        p, v = w.pos[:, :na], w.vel[:, :na]
        rel = relative(p, w.pos[:, na:]).reshape(self.n, na, -1)
        return split(np.concatenate([v, p, rel], axis=2), self.agents)


class Formation(_Shape):
    """N agents form a circle of radius 0.5 around the landmark."""

    mpe2_module = "mpe2.simple_formation_v1"

    def build(self, kw: dict[str, Any]) -> None:
        n_agents = int(kw["N"])
        self.agents = tuple(f"agent_{i}" for i in range(n_agents))
        self.world = World(self.n, [agent(size=0.05, silent=True)] * n_agents,
                           [landmark(collide=False, size=0.03)], dim_c=0)

    def reset(self, idx: np.ndarray, gens: Sequence[np.random.Generator]) -> None:
        w = self.world
        w.pos[idx, :w.num_agents] = draw(gens, lambda g: g.uniform(-1, 1, (w.num_agents, 2)))
        w.pos[idx, w.num_agents] = draw(gens, lambda g: g.uniform(-0.5, 0.5, 2))
        w.vel[idx] = 0.0

    def rewards(self) -> dict[str, np.ndarray]:
        w = self.world
        na = w.num_agents
        lm = w.pos[:, na]
        rel = w.pos[:, :na] - lm[:, None]
        angle = np.arctan2(rel[..., 1], rel[..., 0])
        angle = np.where(angle < 0, angle + 2 * np.pi, angle)
        theta = angle.min(axis=1)[:, None] + np.arange(na) * ((2 * np.pi) / na)
        targets = lm[:, None] + 0.5 * np.stack([np.cos(theta), np.sin(theta)], axis=2)
        return self.shape_reward(targets)


class Line(_Shape):
    """N agents spread evenly on the segment between two landmarks."""

    mpe2_module = "mpe2.simple_line_v1"
    state_arrays = ("targets",)
    SEP = 1.25

    def build(self, kw: dict[str, Any]) -> None:
        n_agents = int(kw["N"])
        self.agents = tuple(f"agent_{i}" for i in range(n_agents))
        self.world = World(self.n, [agent(size=0.03, silent=True)] * n_agents,
                           [landmark(collide=False, size=0.02)] * 2, dim_c=0)
        self.targets = np.zeros((self.n, n_agents, 2))

    def reset(self, idx: np.ndarray, gens: Sequence[np.random.Generator]) -> None:
        w = self.world
        na = w.num_agents
        w.pos[idx, :na] = draw(gens, lambda g: g.uniform(-1, 1, (na, 2)))
        lm0 = draw(gens, lambda g: g.uniform(-0.25, 0.25, 2))
        theta = draw(gens, lambda g: g.uniform(0, 2 * np.pi))
        # mpe2 turns the direction by 5 degrees until the second landmark lies inside [-1, 1]^2
        while True:
            direction = np.stack([np.cos(theta), np.sin(theta)], axis=1)
            loc = lm0 + self.SEP * direction
            out = ~((np.abs(loc[:, 0]) < 1.0) & (np.abs(loc[:, 1]) < 1.0))
            if not out.any():
                break
            theta = np.where(out, theta + np.radians(5), theta)
        w.pos[idx, na] = lm0
        w.pos[idx, na + 1] = loc
        w.vel[idx] = 0.0
        sep = self.SEP / (na - 1) if na > 1 else 0.0
        self.targets[idx] = lm0[:, None] + (np.arange(na) * sep)[None, :, None] * direction[:, None]

    def rewards(self) -> dict[str, np.ndarray]:
        return self.shape_reward(self.targets)

    def write_mpe2(self, i: int, env: Any) -> None:
        super().write_mpe2(i, env)
        env.scenario._expected_positions = [t.copy() for t in self.targets[i]]
