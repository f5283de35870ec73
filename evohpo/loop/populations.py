"""What the loop evolves, behind one interface: one population, or a league of populations.

The trainer (:mod:`evohpo.loop.trainer`) asks the same questions of both: make the first
members, place them into the runtime's slots, score them, keep the member users get, make the
next generation, and say what the generation's metrics and checkpoint hold. One population
(:class:`OnePopulation`) is scored by the runtime and selected as a whole; a league
(:class:`evohpo.games.league.League`, on games of several teams) is scored by cross-play and
selected team by team. :func:`populations` picks one from the run's team plan.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch

from evohpo.algos import Algorithm
from evohpo.config import Config, EvolutionConfig, MutationConfig
from evohpo.envs.spec import EnvSpec
from evohpo.evolve.evolution import next_generation
from evohpo.evolve.lineage import MutationRecord
from evohpo.evolve.member import Member
from evohpo.evolve.population import make_population
from evohpo.evolve.strategies import Offspring
from evohpo.logs.loggers import Logger
from evohpo.loop.best import BestKeeper
from evohpo.loop.metrics import best_index
from evohpo.runtime import Runtime
from evohpo.runtime.evaluate import Score

# what the member users get is, after a generation: (its fitness, its record, its algorithm)
Kept = tuple[float, dict[str, Any], Algorithm]


class Populations(Protocol):
    """One population, or a league of them: what the loop needs of either."""

    def first_generation(self, cfg: Config, rng: np.random.Generator,
                         device: torch.device) -> tuple[list[Member], list[MutationRecord]]:
        """The first members and a ``birth`` record each."""

    def describe(self) -> str:
        """What evolves, in a few words for the log."""

    def place(self, members: list[Member], generation: int) -> None:
        """The members into the runtime's slots for window ``generation``."""

    def evaluate(self, members: list[Member], seed: int) -> list[Score]:
        """Every member's score on the episodes of ``seed``."""

    def keep(self, members: list[Member], scores: list[Score], generation: int, env_steps: int,
             seed: int, best_ever: float) -> Kept | None:
        """The member users get after this generation, or None when nothing is to be saved."""

    def next_generation(self, members: list[Member], scores: list[Score], generation: int,
                        next_id: int, ev: EvolutionConfig, mut: MutationConfig,
                        rng: np.random.Generator) -> Offspring:
        """Selection and mutation."""

    def window_metrics(self, members: list[Member], scores: list[Score], generation: int,
                       log: Logger) -> dict[str, Any]:
        """Metrics beyond :func:`evohpo.loop.metrics.generation_metrics`'s own."""

    def confirmed(self) -> Score | None:
        """The kept member's score on fresh episodes, where it is confirmed on them."""

    def progress(self, scores: list[Score], metrics: dict[str, Any]) -> dict[str, str]:
        """What the progress bar shows of a generation."""

    def summary(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """What the run's summary adds, from the last generation's metrics."""

    def state_dict(self) -> tuple[dict[str, Any], dict[str, Any]]: ...

    def load_state_dict(self, meta: dict[str, Any], tensors: dict[str, Any],
                        device: torch.device) -> None: ...

    def close(self) -> None: ...


class OnePopulation:
    """One population whose members drive every agent, scored by the runtime and selected as a
    whole; the member users get is kept by :class:`~evohpo.loop.best.BestKeeper`."""

    def __init__(self, cfg: Config, spec: EnvSpec, runtime: Runtime, agents: list[str]):
        self.cfg, self.spec, self.runtime = cfg, spec, runtime
        self.keeper = BestKeeper(cfg, spec, agents, runtime)

    def first_generation(self, cfg: Config, rng: np.random.Generator,
                         device: torch.device) -> tuple[list[Member], list[MutationRecord]]:
        return make_population(cfg, self.spec, rng, device)

    def describe(self) -> str:
        return f"population: {self.cfg.population.size} members"

    def place(self, members: list[Member], generation: int) -> None:
        self.runtime.place(members)

    def evaluate(self, members: list[Member], seed: int) -> list[Score]:
        return self.runtime.evaluate(seed)

    def keep(self, members: list[Member], scores: list[Score], generation: int, env_steps: int,
             seed: int, best_ever: float) -> Kept | None:
        fitness = [sc.fitness for sc in scores]
        b = best_index(fitness)
        return self.keeper.keep(members[b], scores[b], generation, env_steps, seed, best_ever)

    def next_generation(self, members: list[Member], scores: list[Score], generation: int,
                        next_id: int, ev: EvolutionConfig, mut: MutationConfig,
                        rng: np.random.Generator) -> Offspring:
        return next_generation(members, [sc.fitness for sc in scores],
                               [sc.std_error for sc in scores], generation, next_id, ev, mut, rng)

    def window_metrics(self, members: list[Member], scores: list[Score], generation: int,
                       log: Logger) -> dict[str, Any]:
        return {}

    def confirmed(self) -> Score | None:
        return self.keeper.score if self.cfg.eval.confirm_episodes else None

    def progress(self, scores: list[Score], metrics: dict[str, Any]) -> dict[str, str]:
        fitness = [sc.fitness for sc in scores]
        return {"best": f"{fitness[best_index(fitness)]:.2f}", "mean": f"{np.mean(fitness):.2f}"}

    def summary(self, metrics: dict[str, Any]) -> dict[str, Any]:
        return {}

    def state_dict(self) -> tuple[dict[str, Any], dict[str, Any]]:
        return self.keeper.state_dict()

    def load_state_dict(self, meta: dict[str, Any], tensors: dict[str, Any],
                        device: torch.device) -> None:
        self.keeper.load_state_dict(meta, tensors, device)

    def close(self) -> None:
        self.keeper.close()


def populations(cfg: Config, spec: EnvSpec, runtime: Runtime, agents: list[str]) -> Populations:
    """A league of one population per team where the run's team plan (resolved once, by
    :func:`evohpo.config.checks.playing_teams`, and held by the runtime) has several teams, else
    one population."""
    if runtime.teams:
        from evohpo.games.league import League

        return League(cfg, spec, runtime.teams, runtime)
    return OnePopulation(cfg, spec, runtime, agents)
