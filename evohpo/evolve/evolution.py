"""One generation to the next: the configured strategy (:mod:`evohpo.evolve.strategies`) picks
the parents and the operators of :mod:`evohpo.evolve.mutations` change the children; each change
comes back as a :class:`~evohpo.evolve.lineage.MutationRecord` for ``lineage.jsonl``.
"""

from __future__ import annotations

import numpy as np

from evohpo.config import EvolutionConfig, MutationConfig
from evohpo.evolve.member import Member
from evohpo.evolve.strategies import STRATEGIES, Offspring

__all__ = ["next_generation"]


def next_generation(members: list[Member], fitness: list[float], se: list[float], generation: int,
                    next_id: int, ev: EvolutionConfig, mut: MutationConfig,
                    rng: np.random.Generator) -> Offspring:
    """The next generation by ``evolution.strategy``."""
    return STRATEGIES[ev.strategy](members, fitness, se, generation, next_id, ev, mut, rng)
