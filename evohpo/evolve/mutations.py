"""Mutation operators that say what they did.

Every function takes its random generator as an argument; every mutation returns a
:class:`~evohpo.evolve.lineage.MutationRecord` describing what actually happened (an operator that
could not apply falls back and is recorded as what it became). Records are written to
``lineage.jsonl``. :func:`mutate` draws a kind and dispatches through ``OPERATORS``, one operator
per kind: a new kind is one function, one entry there and its probability in ``mutation``.
Architecture and activation mutations are the algorithm's own
(``Algorithm.mutate_architecture`` / ``mutate_activation``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch

from evohpo.config import MutationConfig
from evohpo.evolve import space
from evohpo.evolve.lineage import MutationRecord
from evohpo.evolve.member import Member

__all__ = ["KINDS", "OPERATORS", "HyperparamChange", "Operator", "choose_kind", "mutate",
           "mutate_hyperparameter", "mutate_weights"]

# each kind's relative probability is the MutationConfig field of the same name; the order
# is the order of the draw (keep it: same seed, same kinds)
KINDS = ("none", "hyperparameters", "weights", "architecture", "activation")


def choose_kind(cfg: MutationConfig, rng: np.random.Generator) -> str:
    weights = np.array([getattr(cfg, k) for k in KINDS], dtype=float)
    return str(KINDS[int(rng.choice(len(KINDS), p=weights / weights.sum()))])


class HyperparamChange(NamedTuple):
    """What :func:`mutate_hyperparameter` chose; ``changes`` is empty when nothing could move."""

    changes: dict[str, float]  # {name: after}, or {}
    name: str
    before: float | None
    after: float | None
    op: str                  # e.g. "*1.2", "*0.8 (clipped at bound)"


NO_CHANGE = HyperparamChange({}, "", None, None, "")


def mutate_hyperparameter(hp: Any, cfg: MutationConfig, rng: np.random.Generator,
                          ) -> HyperparamChange:
    """Perturb one hyperparameter by a factor, within bounds.

    ``changes`` is empty when every mutable hyperparameter is pinned at a bound in the drawn
    direction.
    """
    names = space.mutable(cfg.bounds, hp)
    for idx in rng.permutation(len(names)):
        name = names[int(idx)]
        b = getattr(cfg.bounds, name)
        factor = float(cfg.factors[int(rng.integers(len(cfg.factors)))])
        old = getattr(hp, name)
        new = space.perturb(name, old, factor, cfg.bounds)
        if new != old:
            clipped = (new == b.min or new == b.max) and new != old * factor
            op = f"*{factor:g}" + (" (clipped at bound)" if clipped else "")
            return HyperparamChange({name: new}, name, old, new, op)
    return NO_CHANGE


def mutate_weights(actors: dict[str, torch.nn.Module], cfg: MutationConfig,
                   gen: torch.Generator) -> dict[str, float]:
    """Gaussian noise on a random fraction of every actor's weights; returns the L2 change per
    agent. A tensor that agents share (``algo.share``) moves once, counted for the first."""
    change = {}
    seen: set[int] = set()
    with torch.no_grad():
        for agent, net in actors.items():
            total = 0.0
            for p in net.parameters():
                if id(p) in seen:
                    continue
                seen.add(id(p))
                mask = torch.rand(p.shape, generator=gen, device=p.device) < cfg.weight_fraction
                scale = p.std() if p.numel() > 1 else p.abs().mean()
                noise = (torch.randn(p.shape, generator=gen, device=p.device)
                         * cfg.weight_noise_std * scale)
                delta = noise * mask
                p.add_(delta)
                total += float(delta.pow(2).sum())
            change[agent] = math.sqrt(total)
    return change


# an operator mutates ``member`` in place and returns ``rec`` (generation, member and parent
# filled in) saying what it did
Operator = Callable[[Member, MutationConfig, np.random.Generator, MutationRecord], MutationRecord]


def _none(member: Member, cfg: MutationConfig, rng: np.random.Generator,
          rec: MutationRecord) -> MutationRecord:
    return rec


def _hyperparameters(member: Member, cfg: MutationConfig, rng: np.random.Generator,
                     rec: MutationRecord) -> MutationRecord:
    hp = mutate_hyperparameter(member.algo.hp, cfg, rng)
    if not hp.changes:
        return rec.outcome("none", note="hyperparameters: every mutable one is at its bound")
    member.algo.set_hyperparams(**hp.changes)
    return rec.outcome("hyperparameters", hp.name, hp.before, hp.after, hp.op)


def _weights(member: Member, cfg: MutationConfig, rng: np.random.Generator,
             rec: MutationRecord) -> MutationRecord:
    algo = member.algo
    gen = torch.Generator(device=algo.device).manual_seed(int(rng.integers(0, 2**62)))
    change = mutate_weights({a: algo.actors[a] for a in algo.learners}, cfg, gen)
    algo.actor_version += 1
    return rec.outcome("weights", "actors", after={a: round(v, 6) for a, v in change.items()},
                       op=f"gaussian std={cfg.weight_noise_std:g} frac={cfg.weight_fraction:g}",
                       note="after: L2 norm of the change per agent's actor")


def _architecture(member: Member, cfg: MutationConfig, rng: np.random.Generator,
                  rec: MutationRecord) -> MutationRecord:
    return member.algo.mutate_architecture(cfg.arch, rng, rec)


def _activation(member: Member, cfg: MutationConfig, rng: np.random.Generator,
                rec: MutationRecord) -> MutationRecord:
    return member.algo.mutate_activation(cfg.arch, rng, rec)


# one operator per kind of KINDS, in its order
OPERATORS: dict[str, Operator] = {
    "none": _none,
    "hyperparameters": _hyperparameters,
    "weights": _weights,
    "architecture": _architecture,
    "activation": _activation,
}


def mutate(member: Member, cfg: MutationConfig, generation: int,
           rng: np.random.Generator) -> MutationRecord:
    """Apply one mutation (drawn by the configured probabilities) to ``member`` in place."""
    kind = choose_kind(cfg, rng)
    rec = MutationRecord(generation=generation, member_id=member.id, parent_id=member.parent_id,
                         kind=kind)
    return OPERATORS[kind](member, cfg, rng, rec)
