"""The population's members: identity, lineage, algorithm, counters and fitness history."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from evohpo.algos import Algorithm, Hyperparams, build_algo
from evohpo.config import Config
from evohpo.envs.registry import EnvSpec


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
