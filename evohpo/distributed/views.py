"""The driver's views of what the actors hold: their envs as one pool, their replay copies as one.

They let :mod:`evohpo.checkpoint` save and restore a Ray run exactly as it does a local one: the
pool's ``get_state`` / ``set_state`` / ``reset`` and the buffer's ``state_dict`` /
``load_state_dict`` go to the actors, laid out as the local trainer lays out its pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from evohpo.buffer import ReplayBuffer
from evohpo.distributed import require_ray
from evohpo.envs import StepResult, VectorPool

if TYPE_CHECKING:
    from evohpo.distributed.driver import RayTrainer


def writable(obj: Any) -> Any:
    """Copies of the read-only arrays Ray hands out (zero-copy views of its object store)."""
    if isinstance(obj, np.ndarray):
        return obj if obj.flags.writeable else obj.copy()
    if isinstance(obj, dict):
        return {k: writable(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [writable(v) for v in obj]
    return obj


class ActorPool(VectorPool):
    """The driver's view of the actors' envs, laid out as one local pool (for checkpoints)."""

    def __init__(self, trainer: RayTrainer):
        self.t = trainer
        self.spec = trainer.spec
        self.num_envs = trainer.cfg.env.num_envs

    def _obs(self, parts: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        return {a: np.concatenate([p[a] for p in parts]) for a in self.spec.agents}

    def reset(self, seed: int | None = None) -> dict[str, np.ndarray]:
        e = self.t.envs_per_actor  # env i of the pool gets seed + i, as in a local pool
        return self._obs(self.t.call_all("reset", lambda g: (None if seed is None else seed + g * e,)))

    def step_async(self, actions: dict[str, np.ndarray]) -> None:
        raise RuntimeError("the driver does not step the actors' envs: each actor steps its own")

    def step_wait(self) -> StepResult:
        raise RuntimeError("the driver does not step the actors' envs: each actor steps its own")

    def get_state(self) -> list[dict[str, Any]]:
        return [writable(st) for part in self.t.call_all("pool_state") for st in part]

    def set_state(self, states: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
        e = self.t.envs_per_actor
        return self._obs(self.t.call_all("set_pool_state", lambda g: (list(states[g * e:(g + 1) * e]),)))

    def close(self) -> None:
        self.t.stop_actors()


class SharedReplay:
    """The driver's view of the replay memory: every actor holds a copy with the same transitions."""

    def __init__(self, trainer: RayTrainer):
        self.t = trainer
        self.capacity = trainer.cfg.buffer.capacity
        self.nbytes = ReplayBuffer.bytes_for(trainer.spec, self.capacity)

    def state_dict(self) -> dict[str, Any]:
        """Actor 0's copy (the others hold the same rows, in another order within each window)."""
        return writable(self.t.call_all("buffer_state", only=[0])[0])

    def load_state_dict(self, state: dict[str, Any]) -> None:
        ray = require_ray()
        ref = ray.put(state)  # stored once, read by every actor
        self.t.call_all("load_buffer", lambda g: (ref,))
