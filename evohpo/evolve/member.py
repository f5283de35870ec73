"""A population's member (identity, lineage, algorithm, counters and fitness history) and the
one serialiser of its data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evohpo.algos import Algorithm
from evohpo.checkpoint import rng_from, rng_state


def child_seed(rng: np.random.Generator) -> int:
    """A seed for a new member's random streams, drawn from the run's."""
    return int(rng.integers(0, 2**62))


@dataclass
class Member:
    id: int
    parent_id: int | None
    algo: Algorithm
    rng: np.random.Generator          # exploration noise and batch sampling
    born: int = 0                     # generation it was created (or explored in place) in
    steps: int = 0                    # env steps its lineage has collected
    learn_acc: int = 0                # env steps not yet in a learn (runtime/clock.py)
    fitness: list[float] = field(default_factory=list)
    diverged: bool = False            # NaN/inf losses or weights: stops learning, loses selection
    diverged_why: str = ""
    team: str | None = None           # on games of several teams, the team it plays for
    rating: float = 1000.0            # its Elo rating from cross-play (teams only)

    @property
    def hp(self) -> Any:  # its algorithm's kind of hyperparameters
        return self.algo.hp


def member_meta(m: Member) -> dict[str, Any]:
    """A member as JSON-safe data, without its algorithm (its state dict travels as tensors)."""
    meta: dict[str, Any] = {"id": m.id, "parent_id": m.parent_id, "born": m.born, "steps": m.steps,
            "learn_acc": m.learn_acc, "fitness": m.fitness, "diverged": m.diverged,
            "diverged_why": m.diverged_why, "rng": rng_state(m.rng)}
    if m.team is not None:
        meta.update(team=m.team, rating=m.rating)
    return meta


def member_from(meta: dict[str, Any], algo: Algorithm) -> Member:
    """The member :func:`member_meta` described, around ``algo`` (already holding its state)."""
    return Member(id=meta["id"], parent_id=meta["parent_id"], algo=algo, rng=rng_from(meta["rng"]),
                  born=meta["born"], steps=meta["steps"], learn_acc=meta["learn_acc"],
                  fitness=list(meta.get("fitness", [])), diverged=meta["diverged"],
                  diverged_why=meta.get("diverged_why", ""), team=meta.get("team"),
                  rating=meta.get("rating", 1000.0))
