"""Selection strategies: who goes on, who is copied, and what each slot of the next generation
is made of.

A strategy takes the members, their fitness and its standard error, and returns the
:class:`Offspring` with a lineage record per member. ``STRATEGIES`` maps ``evolution.strategy``
to its function: a new strategy is one function and one entry there. Every function takes its
random generator as an argument.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from evohpo.config import EvolutionConfig, MutationConfig
from evohpo.evolve import space
from evohpo.evolve.lineage import MutationRecord
from evohpo.evolve.member import Member, child_seed
from evohpo.evolve.mutations import mutate
from evohpo.evolve.names import STRATEGY_NAMES

__all__ = ["STRATEGIES", "Offspring", "Strategy", "clone", "independent", "select",
           "tournament", "truncation", "worse_beyond"]


def _key(f: float) -> tuple[int, float]:
    """Sort key: NaN (a diverged or broken member) is worse than any number, -inf included."""
    return (0, 0.0) if f != f else (1, f)


def select(fitness: list[float], tournament_size: int, elitism: bool,
           rng: np.random.Generator) -> list[int]:
    """Parent index for each slot of the next population.

    With elitism, slot 0 is the best member (it survives unchanged). Each other slot holds the
    winner of a tournament among ``tournament_size`` members drawn without replacement.
    Ties go to the lower index, so selection is deterministic given the generator.
    """
    n = len(fitness)
    if n == 0:
        raise ValueError("cannot select from an empty population")
    if not 1 <= tournament_size <= n:
        raise ValueError(f"tournament_size {tournament_size} must be in 1..{n}")
    keys = [_key(f) for f in fitness]
    parents: list[int] = []
    if elitism:
        parents.append(max(range(n), key=lambda i: (keys[i], -i)))
    while len(parents) < n:
        entrants = rng.choice(n, size=tournament_size, replace=False)
        parents.append(int(max(entrants, key=lambda i: (keys[int(i)], -int(i)))))
    return parents


# ----------------------------------------------------------------------------- strategies

@dataclass
class Offspring:
    """The next generation, slot by slot, what made each member, and the next free id."""

    members: list[Member]
    records: list[MutationRecord]
    next_id: int


def clone(parent: Member, child_id: int, generation: int, rng: np.random.Generator,
          ) -> Member:
    """A copy of ``parent`` (weights, targets, optimizer state, hyperparameters) with its own id
    and random streams, born into the next generation."""
    seed = child_seed(rng)
    return dataclasses.replace(parent, id=child_id, parent_id=parent.id,
                               algo=parent.algo.clone(seed), rng=np.random.default_rng(seed),
                               born=generation + 1, fitness=[])


def diverged_records(members: list[Member], generation: int) -> list[MutationRecord]:
    return [MutationRecord(generation, m.id, m.parent_id, "diverged", note=m.diverged_why)
            for m in members if m.diverged]


def tournament(members: list[Member], fitness: list[float], se: list[float], generation: int,
               next_id: int, ev: EvolutionConfig, mut: MutationConfig,
               rng: np.random.Generator) -> Offspring:
    """Tournament selection with elitism, then every member but the elite is a mutated clone.

    A diverged member is never a parent: the best healthy member takes its place.
    """
    parents = select(fitness, ev.tournament_size, ev.elitism, rng)
    best = max(range(len(fitness)), key=lambda i: (not members[i].diverged, fitness[i], -i))
    parents = [best if members[p].diverged else p for p in parents]
    new_members: list[Member] = []
    records = diverged_records(members, generation)
    for slot, p in enumerate(parents):
        parent = members[p]
        if slot == 0 and ev.elitism:
            new_members.append(parent)
            records.append(MutationRecord(generation, parent.id, parent.parent_id, "elite",
                                          note=f"fitness {fitness[p]:.3f}"))
            continue
        child = clone(parent, next_id, generation, rng)
        next_id += 1
        rec = mutate(child, mut, generation, rng)
        rec.note = (rec.note + f"; parent fitness {fitness[p]:.3f}").lstrip("; ")
        records.append(rec)
        new_members.append(child)
    return Offspring(new_members, records, next_id)


def truncation(members: list[Member], fitness: list[float], se: list[float], generation: int,
               next_id: int, ev: EvolutionConfig, mut: MutationConfig,
               rng: np.random.Generator) -> Offspring:
    """PBT (Jaderberg et al. 2017, https://arxiv.org/abs/1711.09846): the bottom
    ``evolution.quantile`` of the population copies a member of the top quantile (weights,
    optimizer state, hyperparameters), then explores: every mutable hyperparameter is resampled
    from the search space (``evolution.resample_probability``) or perturbed by a factor. The
    others go on unchanged.

    Noise-aware: a member is replaced only when it is worse than the one it would copy by more
    than ``evolution.min_gap`` standard errors of their difference, and only once it has trained
    for ``evolution.ready`` windows since it was born (PBT's "ready"): early fitness says little
    about where a member ends up. A diverged member is always replaced.

    With ``evolution.explore_kept``, a ready bottom member that is not replaced (within the noise
    of the member it would copy) keeps its weights and explores its own hyperparameters, and
    waits ``ready`` windows again: as PBT without the noise rule would after copying a member no
    better than itself. Without it, a population started identical (``population.init:
    preset``) rarely explores at all.
    """
    n = len(members)
    q = max(1, min(n // 2, round(ev.quantile * n)))
    order = sorted(range(n), key=lambda i: (not members[i].diverged, _key(fitness[i]), -i))
    top = [i for i in order[-q:] if not members[i].diverged]
    diverged = [i for i in order if members[i].diverged]  # always replaced, beyond the quantile
    bottom = diverged + [i for i in order[:q] if i not in diverged and i not in top]
    records = diverged_records(members, generation)
    new_members = list(members)
    replaced = set()
    for b in bottom if top else []:
        t = top[int(rng.integers(len(top)))]
        f = fitness[b]
        broken = members[b].diverged or f != f or f == -math.inf
        young = generation - members[b].born + 1 < ev.ready
        copy = broken or (not young and worse_beyond(f, se[b], fitness[t], se[t],
                                                     ev.min_gap))
        if not copy and (young or not ev.explore_kept):
            continue
        if copy:
            kept = clone(members[t], next_id, generation, rng)
            next_id += 1
            note = f"replaces member {members[b].id} (fitness {f:.3f}); parent fitness " \
                   f"{fitness[t]:.3f}"
        else:  # within the noise of its would-be parent: it keeps its weights, explores in place
            kept = dataclasses.replace(members[b], born=generation + 1)
            note = f"explores in place: fitness {f:.3f}, within the noise of member " \
                   f"{members[t].id} ({fitness[t]:.3f})"
        records.append(_explore(kept, generation, mut, ev, rng, note))
        new_members[b] = kept
        replaced.add(b)
    for i, m in enumerate(members):
        if i not in replaced and not m.diverged:
            records.append(MutationRecord(generation, m.id, m.parent_id, "elite",
                                          note=f"fitness {fitness[i]:.3f}; kept"))
    return Offspring(new_members, records, next_id)


def _explore(m: Member, generation: int, mut: MutationConfig, ev: EvolutionConfig,
             rng: np.random.Generator, note: str) -> MutationRecord:
    """PBT's explore on ``m``'s hyperparameters (in place); its lineage record."""
    hp = m.algo.hp
    changes, ops = space.explore(hp, mut.bounds, mut.factors, ev.resample_probability, rng)
    before = {k: getattr(hp, k) for k in changes}
    m.algo.set_hyperparams(**changes)
    return MutationRecord(
        generation, m.id, m.parent_id, "hyperparameters" if changes else "none",
        target=",".join(changes), before=before or None, after=changes or None,
        op=", ".join(f"{k} {v}" for k, v in ops.items()), note=note)


def worse_beyond(f: float, f_se: float, other: float, other_se: float, gap: float) -> bool:
    """Whether ``f`` is below ``other`` by more than ``gap`` standard errors of the difference."""
    if f != f or f == -math.inf:
        return True
    spread = math.sqrt(sum(x * x for x in (f_se, other_se) if x == x))
    return other - f > gap * spread


def independent(members: list[Member], fitness: list[float], se: list[float], generation: int,
                next_id: int, ev: EvolutionConfig, mut: MutationConfig,
                rng: np.random.Generator) -> Offspring:
    """No selection: every member goes on as it is (from a sampled start: random search).
    A diverged member is still replaced, by a copy of the best healthy one."""
    new_members = list(members)
    records = diverged_records(members, generation)
    healthy = [i for i, m in enumerate(members) if not m.diverged]
    for i, m in enumerate(members):
        if m.diverged and healthy:
            best = max(healthy, key=lambda j: (fitness[j], -j))
            new_members[i] = clone(members[best], next_id, generation, rng)
            next_id += 1
            records.append(MutationRecord(generation, new_members[i].id, members[best].id, "none",
                                          note=f"replaces diverged member {m.id}"))
        elif not m.diverged:
            records.append(MutationRecord(generation, m.id, m.parent_id, "elite",
                                          note=f"fitness {fitness[i]:.3f}; kept"))
    return Offspring(new_members, records, next_id)


Strategy = Callable[[list[Member], list[float], list[float], int, int, EvolutionConfig,
                     MutationConfig, np.random.Generator], Offspring]
STRATEGIES: dict[str, Strategy] = {"tournament": tournament, "truncation": truncation,
                                   "independent": independent}
assert tuple(STRATEGIES) == STRATEGY_NAMES, "evohpo.evolve.names lists the strategies' names"
