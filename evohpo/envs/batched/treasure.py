"""Batched collect_treasure (mpe2): collectors pick up treasures and deliver them to deposits."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from evohpo.envs.batched.core import Scenario, World, agent, dist, landmark, others_index

BOUND = 0.95  # treasures appear in [-BOUND, BOUND]^2


class CollectTreasure(Scenario):
    """Treasure of type k pays when picked up and again when delivered to deposit k.

    A treasure picked up leaves the world (to [-999, -999]) and reappears at a random place
    in the next step (mpe2's respawn probability is 1). As in mpe2, the respawns of an episode
    draw from a copy of the generator the episode was reset with, taken before the reset drew.
    """

    mpe2_module = "mpe2.collect_treasure_v1"
    params = {"num_collectors": 6, "num_deposits": 2, "num_treasures": 6}
    state_arrays = ("holding", "kind", "alive")
    state_lists = ("world_rngs",)

    def build(self, kw: dict[str, Any]) -> None:
        nc, nd, nt = int(kw["num_collectors"]), int(kw["num_deposits"]), int(kw["num_treasures"])
        if min(nc, nd, nt) < 1 or nd > 6:
            raise ValueError("collect_treasure needs at least one collector, deposit and treasure, "
                             "and at most 6 deposits")
        self.nc, self.nd, self.nt = nc, nd, nt
        collector = agent(collide=False, silent=True, size=0.05, accel=1.5, max_speed=1.0, mass=1.0)
        deposit = agent(collide=False, silent=True, size=0.075, accel=1.5, max_speed=1.0, mass=2.25)
        self.agents = (*(f"collector_{i}" for i in range(nc)), *(f"deposit_{i}" for i in range(nd)))
        self.world = World(self.n, [collector] * nc + [deposit] * nd,
                           [landmark(collide=False, size=0.025)] * nt, dim_c=2)
        self.holding = np.full((self.n, nc), -1, np.int64)  # treasure type carried, -1: none
        self.kind = np.zeros((self.n, nt), np.int64)
        self.alive = np.ones((self.n, nt), bool)
        self.others = others_index(nc + nd)
        self.onehot = np.vstack([np.eye(nd), np.zeros((1, nd))])  # row -1 (none): zeros
        self.found = np.zeros(self.n)      # this step's rewards for pickups and deliveries
        self.delivered = np.zeros(self.n)
        self.respawned = np.zeros((self.n, nt), bool)  # which treasures reappeared this step
        self.world_rngs: list[np.random.Generator | None] = [None] * self.n  # for respawns

    def reset(self, idx: np.ndarray, gens: Sequence[np.random.Generator]) -> None:
        w = self.world
        A = w.num_agents
        for i, g in zip(idx, gens, strict=True):
            self.world_rngs[i] = copy.deepcopy(g)
            w.pos[i, :A] = g.uniform(-1.0, 1.0, (A, 2))
            for t in range(self.nt):  # mpe2 draws each treasure's type, then its place
                self.kind[i, t] = g.integers(0, self.nd)
                w.pos[i, A + t] = g.uniform(-BOUND, BOUND, 2)
        w.vel[idx] = 0.0
        self.holding[idx] = -1
        self.alive[idx] = True

    def post_step(self) -> None:
        """Pickups, deliveries and respawns, in mpe2's order (before rewards)."""
        w, nc = self.world, self.nc
        A = w.num_agents
        self.respawned = ~self.alive
        self.found = np.zeros(self.n)
        # [n, treasures, collectors]
        near = dist(w.pos[:, A:, None], w.pos[:, None, :nc]) < 0.025 + 0.05
        rows_all = np.arange(self.n)
        for t in range(self.nt):  # a collector carries one treasure: the first free one takes it
            free = near[:, t] & (self.holding < 0) & self.alive[:, t, None]
            rows = np.flatnonzero(free.any(axis=1))
            if rows.size:
                first = free[rows].argmax(axis=1)
                self.found[rows] += 5.0
                self.alive[rows, t] = False
                self.holding[rows, first] = self.kind[rows, t]
                w.pos[rows, A + t] = -999.0
        for i, t in zip(*np.nonzero(self.respawned), strict=True):
            g = self.world_rngs[i]
            assert g is not None
            g.uniform()  # mpe2: respawn if uniform() <= respawn_prob (1.0): always, but it draws
            w.pos[i, A + t] = g.uniform(-BOUND, BOUND, 2)
            self.kind[i, t] = g.integers(0, self.nd)
            self.alive[i, t] = True
        carrying = self.holding >= 0
        target = w.pos[rows_all[:, None], nc + np.maximum(self.holding, 0)]
        home = carrying & (dist(w.pos[:, :nc], target) < 0.05 + 0.075)
        self.delivered = 5.0 * home.sum(axis=1)
        self.holding[home] = -1

    def rewards(self) -> dict[str, np.ndarray]:
        w, nc = self.world, self.nc
        A = w.num_agents
        glob = self.found + self.delivered
        pc = w.pos[:, :nc]
        crowd = dist(pc[:, :, None], pc[:, None, :]) < 0.05 + 0.05
        col = -5.0 * (crowd & ~np.eye(nc, dtype=bool)).sum(axis=2)
        to_treasure = np.where(self.alive[:, None, :], dist(w.pos[:, A:][:, None], pc[:, :, None]),
                               np.inf)
        nearest = to_treasure.min(axis=2)
        carrying = self.holding >= 0
        target = w.pos[np.arange(self.n)[:, None], nc + np.maximum(self.holding, 0)]
        shaping = np.where(carrying, dist(target, pc), np.where(np.isinf(nearest), 0.0, nearest))
        col = np.where(carrying | ~np.isinf(nearest), col - 0.1 * shaping, col)
        out = {a: col[:, j] + glob for j, a in enumerate(self.agents[:nc])}
        pd = w.pos[:, nc:A]
        # [n, deposits, collectors]
        to_carrier = np.where((self.holding[:, None, :] == np.arange(self.nd)[None, :, None]),
                              dist(pc[:, None], pd[:, :, None]), np.inf)
        closest = to_carrier.min(axis=2)
        centroid = pc.mean(axis=1)
        dep = np.where(np.isinf(closest), dist(centroid[:, None], pd), closest)
        for j, a in enumerate(self.agents[nc:]):
            out[a] = -0.1 * dep[:, j] + glob
        return out

    def _encoding(self) -> np.ndarray:
        """[n, agents, 2 * deposits]: [deposit type | type held] of every agent."""
        nd = self.nd
        held = self.onehot[self.holding]  # -1 -> the zero row
        coll = np.concatenate([np.zeros(held.shape), held], axis=2)
        dep = np.broadcast_to(np.hstack([np.eye(nd), np.zeros((nd, nd))]), (self.n, nd, 2 * nd))
        return np.concatenate([coll, dep], axis=1)

    def observe(self) -> dict[str, np.ndarray]:
        w, n, nc, nd = self.world, self.n, self.nc, self.nd
        A, T = w.num_agents, self.nt
        p, v = w.pos[:, :A], w.vel[:, :A]
        base = (np.arange(n) * A)[:, None, None]
        # other agents, closest first: a stable sort with oneself last (as Python's sorted over
        # the others in order), then one gather of [position, velocity, encoding]
        key = dist(p[:, None], p[:, :, None])
        key[:, np.arange(A), np.arange(A)] = np.inf
        order = np.argsort(key, axis=2, kind="stable")[:, :, :A - 1]
        feats = np.concatenate([p, v, self._encoding()], axis=2).reshape(n * A, -1)
        other = np.take(feats, base + order, axis=0)  # [n, agents, others, 4 + 2 nd]
        other[..., :2] -= p[:, :, None]
        # treasures: the alive ones closest first, then zeros for the ones just picked up
        tp = w.pos[:, A:]
        key = np.where(self.alive[:, None, :], dist(tp[:, None], p[:, :, None]), 1e6)
        order = np.argsort(key, axis=2, kind="stable")
        feats = np.concatenate([tp, np.eye(nd)[self.kind], self.alive[..., None]],
                               axis=2).reshape(n * T, -1)
        treasure = np.take(feats, (np.arange(n) * T)[:, None, None] + order, axis=0)
        treasure[..., :2] -= p[:, :, None]
        treasure = np.where(treasure[..., -1:] > 0, treasure[..., :-1], 0.0)  # dead: zeros
        tail = np.concatenate([other.reshape(n, A, -1), treasure.reshape(n, A, -1)], axis=2)
        held = self.onehot[self.holding]
        out = {}
        for j, a in enumerate(self.agents):
            parts = [p[:, j], v[:, j], *([held[:, j]] if j < nc else []), tail[:, j]]
            out[a] = np.concatenate(parts, axis=1, dtype=np.float32)
        return out

    def write_mpe2(self, i: int, env: Any) -> None:
        super().write_mpe2(i, env)
        w = env.world
        for j, a in enumerate(w.agents[:self.nc]):
            h = int(self.holding[i, j])
            a.holding = None if h < 0 else h
        for t, lm in enumerate(w.landmarks):
            lm.type = int(self.kind[i, t])
            lm.alive = bool(self.alive[i, t])
            lm.color = w.treasure_colors[lm.type].copy()
