"""The population's members: identity, lineage, algorithm, counters and fitness history."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from evohpo import space
from evohpo.algos import Algorithm, Hyperparams, build_algo
from evohpo.checkpoint import rng_from, rng_state
from evohpo.config import Config
from evohpo.envs.registry import EnvSpec
from evohpo.evolution import MutationRecord, child_seed


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


def make_population(cfg: Config, spec: EnvSpec, rng: np.random.Generator,
                    device: torch.device) -> tuple[list[Member], list[MutationRecord]]:
    """The first generation (``population.init``: the preset, or a sample of the search space)
    and a ``birth`` record per member with its starting hyperparameters and hidden sizes."""
    members, records = [], []
    for i, start in enumerate(space.starts(cfg, rng)):
        seed = child_seed(rng)
        own = dataclasses.replace(cfg, algo=dataclasses.replace(
            cfg.algo, hidden=start.hidden, **start.hyperparams)) if start.sampled else cfg
        algo = build_algo(own, spec, seed, device)
        members.append(Member(id=i, parent_id=None, algo=algo, rng=np.random.default_rng(seed)))
        records.append(MutationRecord(0, i, None, "birth", target="hyperparameters",
                                      after={**start.hyperparams, "hidden": start.hidden},
                                      op="sample" if start.sampled else "preset"))
    return members, records


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
