"""Batched simple, simple_speaker_listener, simple_reference and simple_crypto (mpe2).

Goals are integer indices per env; the colours that encode them in observations are looked up
from the same constants mpe2's ``reset_world`` assigns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from evohpo.envs.batched.core import Scenario, World, agent, dist, draw, flat, landmark


def _zero_motion(w: World, idx: np.ndarray) -> None:
    w.vel[idx] = 0.0
    w.c[idx] = 0.0


class Simple(Scenario):
    """One agent, one landmark: reward -squared distance."""

    mpe2_module = "mpe2.simple_v3"

    def build(self, kw: dict[str, Any]) -> None:
        self.agents = ("agent_0",)
        self.world = World(self.n, [agent(collide=False, silent=True)], [landmark(collide=False)],
                           dim_c=0)

    def reset(self, idx: np.ndarray, gens: Sequence[np.random.Generator]) -> None:
        self.world.pos[idx] = draw(gens, lambda g: g.uniform(-1, 1, (2, 2)))
        _zero_motion(self.world, idx)

    def observe(self) -> dict[str, np.ndarray]:
        p, v = self.world.pos, self.world.vel
        return {"agent_0": np.concatenate([v[:, 0], p[:, 1] - p[:, 0]], axis=1, dtype=np.float32)}

    def rewards(self) -> dict[str, np.ndarray]:
        d = self.world.pos[:, 0] - self.world.pos[:, 1]
        return {"agent_0": -(np.square(d[:, 0]) + np.square(d[:, 1]))}


SL_COLORS = np.array([[0.65, 0.15, 0.15], [0.15, 0.65, 0.15], [0.15, 0.15, 0.65]])
SPEAKER = agent(movable=False, collide=False, size=0.075)
LISTENER = agent(collide=False, size=0.075, silent=True)


class SpeakerListener(Scenario):
    """The speaker sees the goal landmark's colour and speaks; the listener moves to the goal."""

    mpe2_module = "mpe2.simple_speaker_listener_v4"
    state_arrays = ("goal",)

    def build(self, kw: dict[str, Any]) -> None:
        self.agents = ("speaker_0", "listener_0")
        self.world = World(self.n, [SPEAKER, LISTENER], [landmark(collide=False, size=0.04)] * 3,
                           dim_c=3)
        self.goal = np.zeros(self.n, np.int64)

    def reset(self, idx: np.ndarray, gens: Sequence[np.random.Generator]) -> None:
        self.goal[idx] = draw(gens, lambda g: g.integers(3))
        self.world.pos[idx] = draw(gens, lambda g: g.uniform(-1, 1, (5, 2)))
        _zero_motion(self.world, idx)

    def observe(self) -> dict[str, np.ndarray]:
        p, v, c = self.world.pos, self.world.vel, self.world.c
        listener = np.concatenate([v[:, 1], flat(p[:, 2:] - p[:, 1:2]), c[:, 0]], axis=1,
                                  dtype=np.float32)
        return {"speaker_0": SL_COLORS[self.goal].astype(np.float32), "listener_0": listener}

    def rewards(self) -> dict[str, np.ndarray]:
        p = self.world.pos
        d = p[:, 1] - p[np.arange(self.n), 2 + self.goal]
        r = -(np.square(d[:, 0]) + np.square(d[:, 1]))
        return {"speaker_0": r, "listener_0": r.copy()}

    def write_mpe2(self, i: int, env: Any) -> None:
        super().write_mpe2(i, env)
        w = env.world
        speaker, listener = w.agents
        speaker.goal_a, speaker.goal_b = listener, w.landmarks[int(self.goal[i])]
        listener.goal_a = listener.goal_b = None
        listener.color = speaker.goal_b.color + np.array([0.45, 0.45, 0.45])

REF_COLORS = np.array([[0.75, 0.25, 0.25], [0.25, 0.75, 0.25], [0.25, 0.25, 0.75]])


class Reference(Scenario):
    """Two agents that move and speak; each knows the other's goal landmark."""

    mpe2_module = "mpe2.simple_reference_v3"
    params = {"local_ratio": 0.5}
    state_arrays = ("goal",)

    def build(self, kw: dict[str, Any]) -> None:
        self.local_ratio = float(kw["local_ratio"])
        self.agents = ("agent_0", "agent_1")
        self.world = World(self.n, [agent(collide=False)] * 2, [landmark(collide=False)] * 3,
                           dim_c=10)
        # goal[:, j]: where agent j wants the other to go
        self.goal = np.zeros((self.n, 2), np.int64)

    def reset(self, idx: np.ndarray, gens: Sequence[np.random.Generator]) -> None:
        self.goal[idx] = draw(gens, lambda g: [g.integers(3), g.integers(3)])
        self.world.pos[idx] = draw(gens, lambda g: g.uniform(-1, 1, (5, 2)))
        _zero_motion(self.world, idx)

    def observe(self) -> dict[str, np.ndarray]:
        p, v, c = self.world.pos, self.world.vel, self.world.c
        out = {}
        for j, a in enumerate(self.agents):
            out[a] = np.concatenate([v[:, j], flat(p[:, 2:] - p[:, j:j + 1]),
                                     REF_COLORS[self.goal[:, j]], c[:, 1 - j]],
                                    axis=1, dtype=np.float32)
        return out

    def rewards(self) -> dict[str, np.ndarray]:
        p, rows = self.world.pos, np.arange(self.n)
        own = [-dist(p[:, 1 - j], p[rows, 2 + self.goal[:, j]]) for j in range(2)]
        glob = (own[0] + own[1]) / 2
        lr = self.local_ratio
        return {a: glob * (1 - lr) + own[j] * lr for j, a in enumerate(self.agents)}

    def write_mpe2(self, i: int, env: Any) -> None:
        super().write_mpe2(i, env)
        w = env.world
        for j, a in enumerate(w.agents):
            a.goal_a, a.goal_b = w.agents[1 - j], w.landmarks[int(self.goal[i, j])]
        for a in w.agents:
            a.goal_a.color = a.goal_b.color


class Crypto(Scenario):
    """Alice encrypts the goal with a key Bob shares; Eve listens in. Nobody moves."""

    mpe2_module = "mpe2.simple_crypto_v3"
    state_arrays = ("goal", "key")

    def build(self, kw: dict[str, Any]) -> None:
        self.agents = ("eve_0", "bob_0", "alice_0")
        self.world = World(self.n, [agent(movable=False, collide=False)] * 3,
                           [landmark(collide=False)] * 2, dim_c=4)
        self.goal = np.zeros(self.n, np.int64)
        self.key = np.zeros(self.n, np.int64)
        self.colors = np.eye(4)[:2]  # landmark i's colour: one-hot i over dim_c

    def reset(self, idx: np.ndarray, gens: Sequence[np.random.Generator]) -> None:
        self.goal[idx] = draw(gens, lambda g: g.integers(2))
        self.key[idx] = draw(gens, lambda g: g.integers(2))
        self.world.pos[idx] = draw(gens, lambda g: g.uniform(-1, 1, (5, 2)))
        _zero_motion(self.world, idx)

    def observe(self) -> dict[str, np.ndarray]:
        c = self.world.c
        key = self.colors[self.key]
        return {"eve_0": c[:, 2].astype(np.float32),
                "bob_0": np.concatenate([key, c[:, 2]], axis=1, dtype=np.float32),
                "alice_0": np.concatenate([self.colors[self.goal], key], axis=1, dtype=np.float32)}

    def rewards(self) -> dict[str, np.ndarray]:
        c, goal = self.world.c, self.colors[self.goal]
        spoke = np.any(c != 0, axis=2)  # mpe2 ignores a listener that said nothing (all zeros)
        err = np.sum(np.square(c - goal[:, None]), axis=2)
        eve = np.where(spoke[:, 0], err[:, 0], 0.0)
        good = np.where(spoke[:, 1], eve - err[:, 1], eve)
        return {"eve_0": -eve, "bob_0": good, "alice_0": good.copy()}

    def write_mpe2(self, i: int, env: Any) -> None:
        super().write_mpe2(i, env)
        w = env.world
        goal = w.landmarks[int(self.goal[i])]
        for a in w.agents:
            a.goal_a = goal
        w.agents[1].color = goal.color
        w.agents[2].key = w.landmarks[int(self.key[i])].color
