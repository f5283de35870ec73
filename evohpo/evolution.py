"""Tournament selection with elitism, and mutation operators that say what they did.

Every function takes its random generator as an argument; every mutation returns a
:class:`~evohpo.lineage.MutationRecord` describing what actually happened (an operator that
could not apply falls back and is recorded as what it became). Records are written to
``lineage.jsonl``. ``mutate`` draws a kind and dispatches through ``OPERATORS``; architecture
and activation mutations are the algorithm's own (``Algorithm.mutate_architecture`` /
``mutate_activation``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch

from evohpo.config import MutationConfig
from evohpo.lineage import MutationRecord

__all__ = ["INT_HPS", "KINDS", "OPERATORS", "HyperparamChange", "MutationRecord", "choose_kind",
           "mutate", "mutate_hyperparameter", "mutate_weights", "select"]

# each kind's relative probability is the MutationConfig field of the same name; the order
# is the order of the draw (keep it: same seed, same kinds)
KINDS = ("none", "hyperparameters", "weights", "architecture", "activation")
INT_HPS = ("batch_size", "learn_step")


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


def choose_kind(cfg: MutationConfig, rng: np.random.Generator) -> str:
    weights = np.array([getattr(cfg, k) for k in KINDS], dtype=float)
    return str(KINDS[int(rng.choice(len(KINDS), p=weights / weights.sum()))])


class HyperparamChange(NamedTuple):
    """What :func:`mutate_hyperparameter` chose; ``changes`` is empty when nothing could move."""

    changes: dict[str, Any]  # {name: after}, or {}
    name: str
    before: Any
    after: Any
    op: str                  # e.g. "*1.2", "*0.8 (clipped at bound)"


NO_CHANGE = HyperparamChange({}, "", None, None, "")


def mutate_hyperparameter(hp: Any, cfg: MutationConfig, rng: np.random.Generator,
                          ) -> HyperparamChange:
    """Perturb one hyperparameter by a factor, within bounds.

    ``changes`` is empty when every mutable hyperparameter is pinned at a bound in the drawn
    direction.
    """
    names = [f.name for f in dataclasses.fields(cfg.bounds) if getattr(cfg.bounds, f.name).mutate]
    for idx in rng.permutation(len(names)):
        name = names[int(idx)]
        b = getattr(cfg.bounds, name)
        factor = float(cfg.factors[int(rng.integers(len(cfg.factors)))])
        old = getattr(hp, name)
        new: float = min(max(old * factor, b.min), b.max)
        if name in INT_HPS:
            new = int(min(max(round(old * factor), math.ceil(b.min)), math.floor(b.max)))
            if new == old and factor != 1.0:  # small ints: move by at least one step
                new = int(min(max(old + (1 if factor > 1 else -1), math.ceil(b.min)), math.floor(b.max)))
        if name == "expl_noise" and old == 0.0 and factor > 1:
            new = min(b.max, max(b.min, 0.01))  # a multiplicative step cannot leave zero
        if new != old:
            clipped = (new == b.min or new == b.max) and new != old * factor
            op = f"*{factor:g}" + (" (clipped at bound)" if clipped else "")
            return HyperparamChange({name: new}, name, old, new, op)
    return NO_CHANGE


def mutate_weights(actors: dict[str, torch.nn.Module], cfg: MutationConfig,
                   gen: torch.Generator) -> dict[str, float]:
    """Gaussian noise on a random fraction of every actor's weights; returns the L2 change per agent."""
    change = {}
    with torch.no_grad():
        for agent, net in actors.items():
            total = 0.0
            for p in net.parameters():
                mask = torch.rand(p.shape, generator=gen, device=p.device) < cfg.weight_fraction
                scale = p.std() if p.numel() > 1 else p.abs().mean()
                noise = torch.randn(p.shape, generator=gen, device=p.device) * cfg.weight_noise_std * scale
                delta = noise * mask
                p.add_(delta)
                total += float(delta.pow(2).sum())
            change[agent] = math.sqrt(total)
    return change


# an operator mutates ``member`` in place and returns ``rec`` (generation, member and parent
# filled in) saying what it did
Operator = Callable[[Any, MutationConfig, np.random.Generator, MutationRecord], MutationRecord]


def _none(member: Any, cfg: MutationConfig, rng: np.random.Generator,
          rec: MutationRecord) -> MutationRecord:
    return rec


def _hyperparameters(member: Any, cfg: MutationConfig, rng: np.random.Generator,
                     rec: MutationRecord) -> MutationRecord:
    hp = mutate_hyperparameter(member.algo.hp, cfg, rng)
    if not hp.changes:
        return rec.outcome("none", note="hyperparameters: every mutable one is at its bound")
    member.algo.set_hyperparams(**hp.changes)
    return rec.outcome("hyperparameters", hp.name, hp.before, hp.after, hp.op)


def _weights(member: Any, cfg: MutationConfig, rng: np.random.Generator,
             rec: MutationRecord) -> MutationRecord:
    algo = member.algo
    gen = torch.Generator(device=algo.device).manual_seed(int(rng.integers(0, 2**62)))
    change = mutate_weights(algo.actors, cfg, gen)
    algo.actor_version += 1
    return rec.outcome("weights", "actors", after={a: round(v, 6) for a, v in change.items()},
                       op=f"gaussian std={cfg.weight_noise_std:g} frac={cfg.weight_fraction:g}",
                       note="after: L2 norm of the change per agent's actor")


def _architecture(member: Any, cfg: MutationConfig, rng: np.random.Generator,
                  rec: MutationRecord) -> MutationRecord:
    return member.algo.mutate_architecture(cfg.arch, rng, rec)


def _activation(member: Any, cfg: MutationConfig, rng: np.random.Generator,
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


def mutate(member: Any, cfg: MutationConfig, generation: int,
           rng: np.random.Generator) -> MutationRecord:
    """Apply one mutation (drawn by the configured probabilities) to ``member`` in place."""
    kind = choose_kind(cfg, rng)
    rec = MutationRecord(generation=generation, member_id=member.id, parent_id=member.parent_id,
                         kind=kind)
    return OPERATORS[kind](member, cfg, rng, rec)
