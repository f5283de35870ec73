"""Batched predator-prey: simple_tag and simple_world_comm (mpe2)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from evohpo.envs.batched.core import (
    Scenario,
    World,
    agent,
    bound_penalty,
    dist,
    draw,
    landmark,
    nearest_per_agent,
    others_index,
    relative,
    split,
)


def _bound(own: np.ndarray, pos: np.ndarray, weight: float) -> np.ndarray:
    """mpe2's ``for p in range(dim_p): rew -= weight * bound(abs(x))``, coordinate by coordinate."""
    for d in range(2):
        own = own - weight * bound_penalty(np.abs(pos[..., d]))
    return own


class Tag(Scenario):
    """Slower adversaries chase faster prey among obstacles."""

    mpe2_module = "mpe2.simple_tag_v3"
    params = {"num_good": 1, "num_adversaries": 3, "num_obstacles": 2, "curriculum": False,
              "terminate_on_success": False, "num_agent_neighbors": None,
              "num_landmark_neighbors": None}

    def build(self, kw: dict[str, Any]) -> None:
        ng, na, no = int(kw["num_good"]), int(kw["num_adversaries"]), int(kw["num_obstacles"])
        self.ng, self.na = ng, na
        self.terminate = bool(kw["terminate_on_success"])
        self.k_agents, self.k_landmarks = kw["num_agent_neighbors"], kw["num_landmark_neighbors"]
        # the pool never advances mpe2's curriculum: a curriculum env keeps stage 0's slow prey
        factor = 0.5 if kw["curriculum"] else 1.0
        prey = agent(size=0.05, silent=True, accel=4.0 * factor, max_speed=1.3 * factor)
        chaser = agent(size=0.075, silent=True, accel=3.0, max_speed=1.0)
        self.agents = (*(f"adversary_{i}" for i in range(na)), *(f"agent_{i}" for i in range(ng)))
        self.world = World(self.n, [chaser] * na + [prey] * ng, [landmark(size=0.2)] * no, dim_c=2)
        self.others = others_index(na + ng)
        self.good_other = self.others >= na  # [agents, others]: that other is prey

    def reset(self, idx: np.ndarray, gens: Sequence[np.random.Generator]) -> None:
        w = self.world
        w.pos[idx, :w.num_agents] = draw(gens, lambda g: g.uniform(-1, 1, (w.num_agents, 2)))
        w.pos[idx, w.num_agents:] = draw(gens, lambda g: g.uniform(-0.9, 0.9, (w.num_landmarks, 2)))
        w.vel[idx] = 0.0

    def observe(self) -> dict[str, np.ndarray]:
        w, n = self.world, self.n
        A = w.num_agents
        p, v = w.pos[:, :A], w.vel[:, :A]
        rel_lm = relative(p, w.pos[:, A:])
        if self.k_landmarks is not None:
            (rel_lm,) = nearest_per_agent(rel_lm, self.k_landmarks)
        rel_ag = relative(p, p)[:, np.arange(A)[:, None], self.others]
        vel = v[:, self.others]  # [n, agents, others, 2]
        if self.k_agents is not None:  # prey velocities only; adversaries' slots are zeros
            vel = np.where(self.good_other[None, :, :, None], vel, 0.0)
            rel_ag, vel = nearest_per_agent(rel_ag, self.k_agents, vel)
            groups = [(slice(0, A), vel.reshape(n, A, -1))]
        else:  # only the prey among the others, in order
            groups = [(slice(0, self.na), vel[:, :self.na, self.na - 1:].reshape(n, self.na, -1)),
                      (slice(self.na, A), vel[:, self.na:, self.na:].reshape(n, self.ng, -1))]
        base = np.concatenate([v, p, rel_lm.reshape(n, A, -1), rel_ag.reshape(n, A, -1)], axis=2)
        out: dict[str, np.ndarray] = {}
        for sl, other_vel in groups:
            out.update(split(np.concatenate([base[:, sl], other_vel], axis=2), self.agents[sl]))
        return out

    def _caught(self) -> np.ndarray:
        """[n, adversaries, prey]: which adversary touches which prey."""
        w, na = self.world, self.na
        d = dist(w.pos[:, :na, None], w.pos[:, None, na:w.num_agents])
        return d < w.size[:na, None] + w.size[None, na:w.num_agents]

    def rewards(self) -> dict[str, np.ndarray]:
        caught = self._caught()
        adv = 10.0 * caught.sum(axis=(1, 2))
        prey = _bound(-10.0 * caught.sum(axis=1), self.world.pos[:, self.na:self.world.num_agents],
                      1.0)
        out = {a: adv.copy() for a in self.agents[:self.na]}
        out.update({a: prey[:, j] for j, a in enumerate(self.agents[self.na:])})
        return out

    def terminal(self) -> np.ndarray | None:
        if not self.terminate:
            return None
        return np.all(self._caught().any(axis=1), axis=1)


class WorldComm(Scenario):
    """simple_tag with food, forests that hide whoever is inside, and a leader who speaks."""

    mpe2_module = "mpe2.simple_world_comm_v3"
    params = {"num_good": 2, "num_adversaries": 4, "num_obstacles": 1, "num_food": 2,
              "num_forests": 2}

    def build(self, kw: dict[str, Any]) -> None:
        ng, na = int(kw["num_good"]), int(kw["num_adversaries"])
        no, nf, nfo = int(kw["num_obstacles"]), int(kw["num_food"]), int(kw["num_forests"])
        self.ng, self.na, self.nf, self.nfo = ng, na, nf, nfo
        bodies = []
        names = []
        for i in range(na + ng):
            adv = i < na
            bodies.append(agent(size=0.075 if adv else 0.045, accel=3.0 if adv else 4.0,
                                max_speed=1.0 if adv else 1.3, silent=i > 0))
            idx = max(i - 1, 0) if adv else i - na
            names.append(f"{'leadadversary' if i == 0 else 'adversary' if adv else 'agent'}_{idx}")
        self.agents = tuple(names)
        lms = ([landmark(size=0.2)] * no + [landmark(collide=False, size=0.03)] * nf
               + [landmark(collide=False, size=0.3)] * nfo)
        self.world = World(self.n, bodies, lms, dim_c=4)
        self.food = slice(na + ng + no, na + ng + no + nf)
        self.forests = slice(na + ng + no + nf, na + ng + no + nf + nfo)
        self.others = others_index(na + ng)

    def reset(self, idx: np.ndarray, gens: Sequence[np.random.Generator]) -> None:
        w = self.world
        A = w.num_agents
        w.pos[idx, :A] = draw(gens, lambda g: g.uniform(-1, 1, (A, 2)))
        # mpe2 places every landmark, then the food and the forests once more
        w.pos[idx, A:] = draw(gens, lambda g: g.uniform(-0.9, 0.9, (w.num_landmarks, 2)))
        w.pos[idx, self.food] = draw(gens, lambda g: g.uniform(-0.9, 0.9, (self.nf, 2)))
        w.pos[idx, self.forests] = draw(gens, lambda g: g.uniform(-0.9, 0.9, (self.nfo, 2)))
        w.vel[idx] = 0.0
        w.c[idx] = 0.0

    def _touch(self, a: slice, b: slice) -> np.ndarray:
        """[n, |a|, |b|]: which entities of ``a`` overlap which of ``b`` (mpe2's is_collision)."""
        w = self.world
        return np.asarray(dist(w.pos[:, a, None], w.pos[:, None, b])
                          < w.size[a, None] + w.size[None, b])

    def observe(self) -> dict[str, np.ndarray]:
        w, n = self.world, self.n
        A, na = w.num_agents, self.na
        p, v = w.pos[:, :A], w.vel[:, :A]
        rel_lm = relative(p, w.pos[:, A:]).reshape(n, A, -1)
        inf = self._touch(slice(0, A), self.forests)  # [n, agents, forests]
        # another agent is seen when both share a forest, when neither is in one, or by the leader
        shared = np.any(inf[:, :, None, :] & inf[:, self.others, :], axis=3)
        out_j = ~np.any(inf, axis=2)
        seen = shared | (out_j[:, :, None] & out_j[:, self.others])
        seen[:, 0] = True
        rel_ag = np.where(seen[..., None], relative(p, p)[:, np.arange(A)[:, None], self.others],
                          0.0)
        vel = np.where(seen[..., None], v[:, self.others], 0.0)
        forest = np.where(inf, 1.0, -1.0)
        comm = np.broadcast_to(w.c[:, None, 0], (n, A, w.dim_c))
        base = np.concatenate([v, p, rel_lm, rel_ag.reshape(n, A, -1)], axis=2)
        adv_vel = vel[:, :na, na - 1:].reshape(n, na, -1)
        good_vel = vel[:, na:, na:].reshape(n, self.ng, -1)
        out = split(np.concatenate([base[:, :na], adv_vel, forest[:, :na], comm[:, :na]], axis=2),
                    self.agents[:na])
        out.update(split(np.concatenate([base[:, na:], forest[:, na:], good_vel], axis=2),
                         self.agents[na:]))
        return out

    def rewards(self) -> dict[str, np.ndarray]:
        w, na = self.world, self.na
        A = w.num_agents
        good = slice(na, A)
        caught = self._touch(slice(0, na), good)  # [n, adversaries, prey]
        own = _bound(-5.0 * caught.sum(axis=1), w.pos[:, good], 2.0)
        ate = self._touch(good, self.food)  # [n, prey, food]
        for f in range(self.nf):
            own = np.where(ate[:, :, f], own + 2, own)
        own = own - 0.05 * dist(w.pos[:, good, None], w.pos[:, None, self.food]).min(axis=2)
        adv = -0.1 * dist(w.pos[:, None, good], w.pos[:, :na, None]).min(axis=2)  # [n, adversaries]
        count = caught.sum(axis=(1, 2))
        for k in range(na * self.ng):  # += 5 per touching (prey, adversary) pair, one at a time
            adv = np.where((count > k)[:, None], adv + 5, adv)
        out = {a: adv[:, j] for j, a in enumerate(self.agents[:na])}
        out.update({a: own[:, j] for j, a in enumerate(self.agents[na:])})
        return out
