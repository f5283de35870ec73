"""What the rest of the package uses of an algorithm: the :class:`Algorithm` protocol.

Trainer, evolution, checkpoints, playback and distributed training hold members' algorithms
as :class:`Algorithm` and build or restore them through :mod:`evohpo.algos.registry`, never by
naming a class. This module imports nothing else of :mod:`evohpo.algos`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from evohpo.algos.buffer import Batch
from evohpo.algos.networks import MLP
from evohpo.config import AlgoConfig, ArchSpace
from evohpo.envs.spec import EnvSpec
from evohpo.evolve.lineage import MutationRecord

Actions = tuple[dict[str, np.ndarray], dict[str, np.ndarray]]  # (for the env, for the buffer)


@dataclass
class Hyperparams:
    """The hyperparameters a member owns and evolution may change."""

    lr_actor: float
    lr_critic: float
    batch_size: int
    learn_step: int
    tau: float
    expl_noise: float
    # the fewest gradient steps per env step of the member's own (algo.min_updates_per_step
    # at the start; evolvable where mutation.bounds.min_updates_per_step.mutate is on)
    min_updates_per_step: float = AlgoConfig.min_updates_per_step


@dataclass
class OnPolicyHyperparams:
    """The hyperparameters an on-policy member (IPPO, MAPPO) owns and evolution may change."""

    lr_actor: float
    lr_critic: float
    rollout: int        # vector steps of its envs between updates
    epochs: int
    minibatches: int
    clip: float
    ent_coef: float
    gae_lambda: float


class Algorithm(Protocol):
    """One member's learner: decentralised actors (one per agent) and whatever trains them."""

    spec: EnvSpec
    agents: tuple[str, ...]
    # the agents it trains (and mutates): every agent, or on a game of several teams with
    # games.opponent_actions: played, its own team's
    learners: tuple[str, ...]
    hp: Any                          # Hyperparams, or OnPolicyHyperparams where on_policy
    device: torch.device
    gen: torch.Generator             # its own random stream (saved with its state)
    # True: it learns from rollouts of its own (:class:`OnPolicy`), not from the replay memory
    on_policy: bool
    actors: dict[str, MLP]           # per agent; acting reads their weights
    critics: dict[str, list[MLP]]    # per agent
    # moves whenever the actors' weights change in place (learning, loading, weight noise)
    actor_version: int

    def act(self, obs: dict[str, np.ndarray], rng: np.random.Generator | None,
            done: np.ndarray | None = None) -> Actions:
        """Actions for a batch of envs; ``rng=None``: the deterministic policy."""
        ...

    def policy_output(self, agent: str, obs: np.ndarray) -> np.ndarray:
        """An actor's raw output (pre-squash, or logits) for a batch of observations."""
        ...

    def noise(self, agent: str, n: int, dim: int, rng: np.random.Generator,
              done: np.ndarray | None) -> np.ndarray:
        """Exploration noise for ``n`` rows of one agent's continuous actions."""
        ...

    def learn(self, batch: Batch) -> dict[str, float]:
        """One gradient step on a batch of transitions; returns its losses by name."""
        ...

    def set_hyperparams(self, **changes: Any) -> None:
        ...

    def arch(self) -> dict[str, Any]:
        """Per agent: the networks' hidden widths and activation."""
        ...

    def num_params(self) -> int:
        ...

    def state_dict(self) -> dict[str, Any]:
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        ...

    def clone(self, seed: int) -> Algorithm:
        """An independent copy with its own random stream."""
        ...

    def take_agents(self, other: Algorithm, agents: tuple[str, ...]) -> None:
        """Copy ``other``'s networks (and their optimizer state) for ``agents`` into this one."""
        ...

    # mutations that only the algorithm knows how to make; each returns ``rec`` (same
    # generation and member) saying what it did, kind "none" with a note if nothing applied
    def mutate_architecture(self, space: ArchSpace, rng: np.random.Generator,
                            rec: MutationRecord) -> MutationRecord:
        ...

    def mutate_activation(self, space: ArchSpace, rng: np.random.Generator,
                          rec: MutationRecord) -> MutationRecord:
        ...


class Learner(Protocol):
    """What architecture mutations need of a learner: per agent, its networks, their target
    copies (empty for a learner without targets, as PPO) and their optimizers."""

    learners: tuple[str, ...]  # the agents it trains (and mutates)
    actors: dict[str, MLP]
    actor_targets: dict[str, MLP]
    critics: dict[str, list[MLP]]
    critic_targets: dict[str, list[MLP]]
    actor_opts: dict[str, torch.optim.Adam]
    critic_opts: dict[str, torch.optim.Adam]

    def leaders(self) -> list[str]:
        """The learners whose networks are their own (those sharing another's follow it)."""
        ...

    def follow_edits(self, agent: str, which: str, edits: list[Any]) -> None:
        """Make the agents that share ``agent``'s edited networks follow the edit."""
        ...
