"""Stacked observations (``env.frames``): each agent sees its last few observations side by side.

mpe2's simple_adversary tells its agents no velocity: from one observation a policy cannot
tell whether it is arriving at the goal or leaving it. With ``frames: k`` an
agent's observation is ``[o_t, o_t-1, ..., o_t-k+1]``, the current one first, so a policy or a
scripted rule that reads the first ``frame_dim`` columns reads the env's own observation.

At the start of an episode the earlier frames repeat the first observation (standing still).
A finished env's transition keeps its real final observation stacked on the ones before it
(``next_obs``); the new episode starts from its first observation repeated (``obs``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from evohpo.envs.pool import Seeds, StepResult, VectorPool
from evohpo.envs.spec import EnvSpec


class Stacker:
    """The last ``spec.frames`` observations of each agent in ``n`` envs."""

    def __init__(self, spec: EnvSpec, n: int):
        self.spec, self.k = spec, spec.frames
        self.hist = {a: np.zeros((n, self.k, spec.frame_dim(a)), np.float32)
                     for a in spec.agents}

    def start(self, obs: dict[str, np.ndarray], rows: slice | np.ndarray = slice(None)) -> None:
        """Envs ``rows`` begin an episode: every frame is its first observation."""
        for a, h in self.hist.items():
            h[rows] = np.asarray(obs[a], np.float32)[rows][:, None]

    def push(self, obs: dict[str, np.ndarray]) -> None:
        """One step: the new observation first, the oldest one dropped."""
        for a, h in self.hist.items():
            h[:, 1:] = h[:, :-1].copy()
            h[:, 0] = obs[a]

    def view(self) -> dict[str, np.ndarray]:
        """A copy of every agent's stack, ``[n, frames * frame_dim]``."""
        return {a: h.reshape(len(h), -1).copy() for a, h in self.hist.items()}


class FramePool(VectorPool):
    """A pool whose observations are stacked ``spec.frames`` deep over another pool's."""

    def __init__(self, inner: VectorPool, spec: EnvSpec):
        self.inner, self.spec, self.num_envs = inner, spec, inner.num_envs
        self.stack = Stacker(spec, inner.num_envs)

    def reset(self, seed: Seeds = None) -> dict[str, np.ndarray]:
        self.stack.start(self.inner.reset(seed=seed))
        return self.stack.view()

    def step_async(self, actions: dict[str, np.ndarray]) -> None:
        self.inner.step_async(actions)

    def step_wait(self) -> StepResult:
        res = self.inner.step_wait()
        self.stack.push(res.next_obs)
        next_obs = self.stack.view()
        if res.done.any():
            self.stack.start(res.obs, res.done)
            obs = self.stack.view()
        else:
            obs = {a: o.copy() for a, o in next_obs.items()}
        return res._replace(obs=obs, next_obs=next_obs)

    def get_state(self) -> list[dict[str, Any]]:
        states = self.inner.get_state()
        return [{**st, "frames": {a: h[i].copy() for a, h in self.stack.hist.items()}}
                for i, st in enumerate(states)]

    def set_state(self, states: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
        from evohpo.checkpoint import CheckpointError

        if len(states) != self.num_envs or any("frames" not in st for st in states):
            raise CheckpointError(f"the env pool's state has no stacked observations for "
                                  f"{self.num_envs} envs (env.frames: {self.spec.frames})")
        self.inner.set_state([{k: v for k, v in st.items() if k != "frames"} for st in states])
        for a, h in self.stack.hist.items():
            for i, st in enumerate(states):
                saved = np.asarray(st["frames"][a], np.float32)
                if saved.shape != h[i].shape:
                    raise CheckpointError(f"the env pool's stacked observations of {a!r} have "
                                          f"shape {saved.shape}, expected {h[i].shape}")
                h[i] = saved
        return self.stack.view()

    def close(self) -> None:
        self.inner.close()
