"""The population's members: identity, lineage, algorithm, counters and fitness history."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from evohpo.algos import Algorithm, Hyperparams, build_algo
from evohpo.config import Config, EvolutionConfig, MutationConfig
from evohpo.envs.registry import EnvSpec
from evohpo.evolution import MutationRecord, mutate, select


@dataclass
class Member:
    id: int
    parent_id: int | None
    algo: Algorithm
    rng: np.random.Generator          # exploration noise and batch sampling
    born: int = 0                     # generation it was created in
    steps: int = 0                    # env steps its lineage has collected
    learn_acc: int = 0                # env steps since it last learned
    fitness: list[float] = field(default_factory=list)
    diverged: bool = False            # NaN/inf losses or weights: stops learning, loses selection
    diverged_why: str = ""

    @property
    def hp(self) -> Hyperparams:
        return self.algo.hp


def child_seed(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 2**62))


def make_population(cfg: Config, spec: EnvSpec, rng: np.random.Generator,
                    device: torch.device) -> list[Member]:
    members = []
    for i in range(cfg.population.size):
        seed = child_seed(rng)
        algo = build_algo(cfg, spec, seed, device)
        members.append(Member(id=i, parent_id=None, algo=algo, rng=np.random.default_rng(seed)))
    return members


# ----------------------------------------------------------------------------- the one serialiser

def member_meta(m: Member) -> dict[str, Any]:
    """A member as JSON-safe data, without its algorithm (its state dict travels as tensors)."""
    return {"id": m.id, "parent_id": m.parent_id, "born": m.born, "steps": m.steps,
            "learn_acc": m.learn_acc, "fitness": m.fitness, "diverged": m.diverged,
            "diverged_why": m.diverged_why, "rng": rng_state(m.rng)}


def member_from(meta: dict[str, Any], algo: Any) -> Member:
    """The member :func:`member_meta` described, around ``algo`` (already holding its state)."""
    return Member(id=meta["id"], parent_id=meta["parent_id"], algo=algo, rng=rng_from(meta["rng"]),
                  born=meta["born"], steps=meta["steps"], learn_acc=meta["learn_acc"],
                  fitness=list(meta.get("fitness", [])), diverged=meta["diverged"],
                  diverged_why=meta.get("diverged_why", ""))


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    return dict(rng.bit_generator.state)


def rng_from(state: dict[str, Any]) -> np.random.Generator:
    bitgen = getattr(np.random, state["bit_generator"])()
    bitgen.state = state
    return np.random.Generator(bitgen)


# ----------------------------------------------------------------------------- the next generation

@dataclass
class Offspring:
    members: list[Member]
    records: list[MutationRecord]
    next_id: int


def next_generation(members: list[Member], fitness: list[float], generation: int, next_id: int,
                    ev: EvolutionConfig, mut: MutationConfig, rng: np.random.Generator) -> Offspring:
    """Tournament selection with elitism, then every member but the elite is a mutated clone.

    A diverged member is never a parent: the best healthy member takes its place.
    """
    parents = select(fitness, ev.tournament_size, ev.elitism, rng)
    best = max(range(len(fitness)), key=lambda i: (not members[i].diverged, fitness[i], -i))
    parents = [best if members[p].diverged else p for p in parents]
    new_members: list[Member] = []
    records = [MutationRecord(generation, m.id, m.parent_id, "diverged", note=m.diverged_why)
               for m in members if m.diverged]
    for slot, p in enumerate(parents):
        parent = members[p]
        if slot == 0 and ev.elitism:
            new_members.append(parent)
            records.append(MutationRecord(generation, parent.id, parent.parent_id, "elite",
                                          note=f"fitness {fitness[p]:.3f}"))
            continue
        seed = child_seed(rng)
        child = dataclasses.replace(parent, id=next_id, parent_id=parent.id,
                                    algo=parent.algo.clone(seed), rng=np.random.default_rng(seed),
                                    born=generation + 1, fitness=[])
        next_id += 1
        rec = mutate(child, mut, generation, rng)
        rec.note = (rec.note + f"; parent fitness {fitness[p]:.3f}").lstrip("; ")
        records.append(rec)
        new_members.append(child)
    return Offspring(new_members, records, next_id)
