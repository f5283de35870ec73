"""Batched simple_adversary and simple_push (mpe2): a hidden goal landmark, one adversary."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from evohpo.envs.batched.core import (
    Scenario,
    World,
    agent,
    dist,
    draw,
    flat,
    landmark,
    nearest_per_agent,
    others_index,
    relative,
    split,
)


class Adversary(Scenario):
    """N good agents know the goal landmark; the adversary must guess it from their moves."""

    mpe2_module = "mpe2.simple_adversary_v3"
    params = {"N": 2, "num_agent_neighbors": None, "num_landmark_neighbors": None}
    state_arrays = ("goal",)

    def build(self, kw: dict[str, Any]) -> None:
        n_good = int(kw["N"])
        self.k_agents, self.k_landmarks = kw["num_agent_neighbors"], kw["num_landmark_neighbors"]
        self.agents = ("adversary_0", *(f"agent_{i}" for i in range(n_good)))
        self.world = World(self.n, [agent(collide=False, silent=True, size=0.15)] * (n_good + 1),
                           [landmark(collide=False, size=0.08)] * n_good, dim_c=2)
        self.goal = np.zeros(self.n, np.int64)
        self.others = others_index(n_good + 1)

    def reset(self, idx: np.ndarray, gens: Sequence[np.random.Generator]) -> None:
        w = self.world
        self.goal[idx] = draw(gens, lambda g: g.integers(w.num_landmarks))
        w.pos[idx] = draw(gens, lambda g: g.uniform(-1, 1, (w.num_agents + w.num_landmarks, 2)))
        w.vel[idx] = 0.0

    def _goal_pos(self) -> np.ndarray:
        return self.world.pos[np.arange(self.n), self.world.num_agents + self.goal]

    def observe(self) -> dict[str, np.ndarray]:
        w, n = self.world, self.n
        na = w.num_agents
        p = w.pos[:, :na]
        rel_lm = relative(p, w.pos[:, na:])
        rel_ag = relative(p, p)[:, np.arange(na)[:, None], self.others]
        if self.k_landmarks is not None:
            (rel_lm,) = nearest_per_agent(rel_lm, self.k_landmarks)
        if self.k_agents is not None:
            (rel_ag,) = nearest_per_agent(rel_ag, self.k_agents)
        seen = np.concatenate([rel_lm.reshape(n, na, -1), rel_ag.reshape(n, na, -1)], axis=2)
        goal = self._goal_pos()[:, None] - p[:, 1:]  # good agents also see the goal (private)
        out = split(np.concatenate([goal, seen[:, 1:]], axis=2), self.agents[1:])
        return {self.agents[0]: seen[:, 0].astype(np.float32), **out}

    def rewards(self) -> dict[str, np.ndarray]:
        w = self.world
        d = dist(w.pos[:, :w.num_agents], self._goal_pos()[:, None])
        good = -d[:, 1:].min(axis=1) + d[:, 0]
        return {self.agents[0]: -d[:, 0], **{a: good.copy() for a in self.agents[1:]}}

    def write_mpe2(self, i: int, env: Any) -> None:
        super().write_mpe2(i, env)
        w = env.world
        goal = w.landmarks[int(self.goal[i])]
        for lm in w.landmarks:
            lm.color = np.array([0.15, 0.15, 0.15])
        goal.color = np.array([0.15, 0.65, 0.15])
        for a in w.agents:
            a.goal_a = goal


def _push_colors() -> np.ndarray:
    colors = []
    for i in range(2):  # as mpe2: [0.1, 0.1, 0.1], then channel i + 1 raised by 0.8
        c = np.array([0.1, 0.1, 0.1])
        c[i + 1] += 0.8
        colors.append(c)
    return np.array(colors)


def _agent_colors() -> np.ndarray:
    colors = []
    for g in range(2):  # the good agent's colour shows its goal: channel goal + 1 raised by 0.5
        c = np.array([0.25, 0.25, 0.25])
        c[g + 1] += 0.5
        colors.append(c)
    return np.array(colors)


PUSH_LANDMARK_COLORS = _push_colors()
PUSH_AGENT_COLORS = _agent_colors()


class Push(Scenario):
    """The good agent goes to its goal landmark; the adversary pushes it away."""

    mpe2_module = "mpe2.simple_push_v3"
    state_arrays = ("goal",)

    def build(self, kw: dict[str, Any]) -> None:
        self.agents = ("adversary_0", "agent_0")
        self.world = World(self.n, [agent(silent=True)] * 2, [landmark(collide=False)] * 2, dim_c=2)
        self.goal = np.zeros(self.n, np.int64)

    def reset(self, idx: np.ndarray, gens: Sequence[np.random.Generator]) -> None:
        w = self.world
        self.goal[idx] = draw(gens, lambda g: g.integers(2))
        w.pos[idx] = draw(gens, lambda g: g.uniform(-1, 1, (4, 2)))
        w.vel[idx] = 0.0

    def observe(self) -> dict[str, np.ndarray]:
        p, v, n = self.world.pos, self.world.vel, self.n
        goal = p[np.arange(n), 2 + self.goal]
        lm_colors = np.broadcast_to(PUSH_LANDMARK_COLORS.reshape(1, -1), (n, 6))
        good = np.concatenate([v[:, 1], goal - p[:, 1], PUSH_AGENT_COLORS[self.goal],
                               flat(p[:, 2:] - p[:, 1:2]), lm_colors, p[:, 0] - p[:, 1]],
                              axis=1, dtype=np.float32)
        adv = np.concatenate([v[:, 0], flat(p[:, 2:] - p[:, 0:1]), p[:, 1] - p[:, 0]], axis=1,
                             dtype=np.float32)
        return {"adversary_0": adv, "agent_0": good}

    def rewards(self) -> dict[str, np.ndarray]:
        p = self.world.pos
        goal = p[np.arange(self.n), 2 + self.goal]
        good = dist(p[:, 1], goal)
        return {"adversary_0": good - dist(goal, p[:, 0]), "agent_0": -good}

    def write_mpe2(self, i: int, env: Any) -> None:
        super().write_mpe2(i, env)
        w = env.world
        goal = w.landmarks[int(self.goal[i])]
        for a in w.agents:
            a.goal_a = goal
        w.agents[0].color = np.array([0.75, 0.25, 0.25])
        w.agents[1].color = PUSH_AGENT_COLORS[int(self.goal[i])].copy()
