"""The population's members: identity, lineage, algorithm, counters and fitness history."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from evohpo.algos import Algorithm, Hyperparams, build_algo
from evohpo.checkpoint import rng_from, rng_state
from evohpo.config import Config
from evohpo.envs.registry import EnvSpec
from evohpo.evolve import space
from evohpo.evolve.evolution import MutationRecord, child_seed


@dataclass
class Member:
    id: int
    parent_id: int | None
    algo: Algorithm
    rng: np.random.Generator          # exploration noise and batch sampling
    born: int = 0                     # generation it was created (or explored in place) in
    steps: int = 0                    # env steps its lineage has collected
    learn_acc: int = 0                # env steps since it last learned
    fitness: list[float] = field(default_factory=list)
    diverged: bool = False            # NaN/inf losses or weights: stops learning, loses selection
    diverged_why: str = ""
    team: str | None = None           # on games of several teams, the team it plays for
    rating: float = 1000.0            # its Elo rating from cross-play (teams only)

    @property
    def hp(self) -> Hyperparams:
        return self.algo.hp


def make_population(cfg: Config, spec: EnvSpec, rng: np.random.Generator, device: torch.device,
                    teams: list[str] | None = None) -> tuple[list[Member], list[MutationRecord]]:
    """The first generation (``population.init``: the preset, or a sample of the search space)
    and a ``birth`` record per member with its starting hyperparameters and hidden sizes.

    With ``teams``, ``population.size`` members per team, team after team (ids go on counting).
    """
    members: list[Member] = []
    records: list[MutationRecord] = []
    team_names: list[str | None] = list(teams) if teams else [None]
    for team in team_names:
        _add_team(cfg, spec, rng, device, team, members, records)
    return members, records


def _add_team(cfg: Config, spec: EnvSpec, rng: np.random.Generator, device: torch.device,
              team: str | None, members: list[Member], records: list[MutationRecord]) -> None:
    for start in space.starts(cfg, rng):
        i = len(members)
        seed = child_seed(rng)
        own = dataclasses.replace(cfg, algo=dataclasses.replace(
            cfg.algo, hidden=start.hidden, **start.hyperparams)) if start.sampled else cfg
        algo = build_algo(own, spec, seed, device)
        if team is not None and cfg.games.opponent_actions == "played":
            # the other teams' next actions as played: it trains its own team's agents only
            algo.learners = tuple(spec.teams[team])
        members.append(Member(id=i, parent_id=None, algo=algo, rng=np.random.default_rng(seed),
                              team=team))
        records.append(MutationRecord(0, i, None, "birth", target="hyperparameters",
                                      after={**start.hyperparams, "hidden": start.hidden},
                                      op="sample" if start.sampled else "preset", team=team))


# ----------------------------------------------------------------------------- the one serialiser

def member_meta(m: Member) -> dict[str, Any]:
    """A member as JSON-safe data, without its algorithm (its state dict travels as tensors)."""
    meta: dict[str, Any] = {"id": m.id, "parent_id": m.parent_id, "born": m.born, "steps": m.steps,
            "learn_acc": m.learn_acc, "fitness": m.fitness, "diverged": m.diverged,
            "diverged_why": m.diverged_why, "rng": rng_state(m.rng)}
    if m.team is not None:
        meta.update(team=m.team, rating=m.rating)
    return meta


def member_from(meta: dict[str, Any], algo: Any) -> Member:
    """The member :func:`member_meta` described, around ``algo`` (already holding its state)."""
    return Member(id=meta["id"], parent_id=meta["parent_id"], algo=algo, rng=rng_from(meta["rng"]),
                  born=meta["born"], steps=meta["steps"], learn_acc=meta["learn_acc"],
                  fitness=list(meta.get("fitness", [])), diverged=meta["diverged"],
                  diverged_why=meta.get("diverged_why", ""), team=meta.get("team"),
                  rating=meta.get("rating", 1000.0))
