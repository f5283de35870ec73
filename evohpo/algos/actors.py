"""What MATD3 and PPO share as learners holding an actor per agent: the actor's raw output, a
copy with its own random stream, and taking another learner's networks for some agents."""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from typing import Any, TypeVar

import numpy as np
import torch

from evohpo.algos.networks import MLP

L = TypeVar("L", bound="PerAgent")


class PerAgent(ABC):
    """A learner with ``actors`` per agent on ``device``, a generator ``gen`` and a state dict
    whose per-agent entries are named in ``PER_AGENT``."""

    PER_AGENT: tuple[str, ...] = ()
    learners: tuple[str, ...]
    actors: dict[str, MLP]
    device: torch.device
    gen: torch.Generator

    def policy_output(self, agent: str, obs: np.ndarray) -> np.ndarray:
        """The actor's raw output (pre-squash, or logits) for a batch of observations."""
        if self.device.type == "cpu":
            return self.actors[agent].forward_numpy(np.asarray(obs, np.float32))
        with torch.inference_mode():
            return self.actors[agent](torch.from_numpy(obs).to(self.device)).float().cpu().numpy()

    def clone(self: L, seed: int) -> L:
        """An independent copy (weights, optimizer and every other state); its own stream."""
        other = copy.deepcopy(self)  # one memo: the copied optimizers point at the copied weights
        other.gen.manual_seed(seed)
        return other

    def leaders(self) -> list[str]:
        """The learners whose networks architecture mutations may change: all of them, where no
        agent shares another's networks."""
        return list(self.learners)

    def follow_edits(self, agent: str, which: str, edits: list[Any]) -> None:
        """After ``agent``'s actor or critics were edited: the agents sharing them follow (none)."""
        return None

    def take_agents(self, other: Any, agents: tuple[str, ...]) -> None:
        """``other``'s networks and their state (every ``PER_AGENT`` entry) for ``agents``."""
        state, theirs = self.state_dict(), other.state_dict()
        for key in self.PER_AGENT:
            state[key].update({a: copy.deepcopy(v) for a, v in theirs[key].items() if a in agents})
        self.load_state_dict(state)

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Everything it holds, per agent under the ``PER_AGENT`` keys."""

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Hold ``state`` (as :meth:`state_dict` gave it)."""
