"""Tournament selection with elitism, and mutation operators that say what they did.

Every function takes its random generator as an argument; every mutation returns a
:class:`MutationRecord` describing what actually happened (an operator that could not apply
falls back and is recorded as what it became). Records are written to ``lineage.jsonl``.
Architecture and activation mutations are the algorithm's own (``mutate_architecture`` /
``mutate_activation``); ``mutate`` dispatches.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import torch

from evohpo.config import MutationConfig
from evohpo.lineage import MutationRecord

__all__ = ["INT_HPS", "KINDS", "MutationRecord", "choose_kind", "mutate", "mutate_hyperparameter",
           "mutate_weights", "select"]

# each kind's relative probability is the MutationConfig field of the same name
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


def mutate_hyperparameter(hp: Any, cfg: MutationConfig, rng: np.random.Generator,
                          ) -> tuple[dict[str, Any], str, Any, Any, str]:
    """Perturb one hyperparameter by a factor, within bounds.

    Returns (changes, name, before, after, op); ``changes`` is empty when every mutable
    hyperparameter is pinned at a bound in the drawn direction.
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
            return {name: new}, name, old, new, op
    return {}, "", None, None, ""


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


def mutate(member: Any, cfg: MutationConfig, generation: int, rng: np.random.Generator) -> MutationRecord:
    """Apply one mutation (drawn by the configured probabilities) to ``member`` in place."""
    kind = choose_kind(cfg, rng)
    rec = MutationRecord(generation=generation, member_id=member.id, parent_id=member.parent_id, kind=kind)
    if kind == "hyperparameters":
        changes, name, before, after, op = mutate_hyperparameter(member.algo.hp, cfg, rng)
        if changes:
            member.algo.set_hyperparams(**changes)
            rec.target, rec.before, rec.after, rec.op = name, before, after, op
        else:
            rec.kind, rec.note = "none", "hyperparameters: every mutable one is at its bound"
    elif kind == "weights":
        gen = torch.Generator(device=member.algo.device).manual_seed(int(rng.integers(0, 2**62)))
        change = mutate_weights(member.algo.actors, cfg, gen)
        member.algo.actor_version += 1
        rec.target, rec.op = "actors", f"gaussian std={cfg.weight_noise_std:g} frac={cfg.weight_fraction:g}"
        rec.after = {a: round(v, 6) for a, v in change.items()}
        rec.note = "after: L2 norm of the change per agent's actor"
    elif kind == "architecture":
        rec = member.algo.mutate_architecture(cfg.arch, rng, rec)
    elif kind == "activation":
        rec = member.algo.mutate_activation(cfg.arch, rng, rec)
    return rec
