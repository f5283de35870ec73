"""The search space: each mutable hyperparameter's range and scale, the architecture's, and
seeded, space-filling samples of it.

A hyperparameter's range is ``mutation.bounds.<name>`` (``min``, ``max``, ``scale``: ``log`` or
``linear``); the architecture's is ``mutation.arch`` (layers and width). ``population.init:
sample`` starts the members from a Latin hypercube over all of them (every member covers a
different stratum of every axis), and PBT's explore step resamples from the same space.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from evohpo.algos.registry import initial_hyperparams
from evohpo.config import ArchSpace, Bound, Config, HyperparamSpace

INT_HPS = ("batch_size", "learn_step", "rollout", "epochs", "minibatches")
WIDTH_STEP = 8  # sampled widths are multiples of this


@dataclass(frozen=True)
class Start:
    """One member's starting point: its hyperparameters and hidden sizes."""

    hyperparams: dict[str, Any]
    hidden: list[int]
    sampled: bool  # False: the preset


def mutable(bounds: HyperparamSpace, hp: Any) -> list[str]:
    """The hyperparameters evolution may change: those of ``hp`` (a member's, of its
    algorithm's kind) whose bound says mutate, in the order of ``mutation.bounds``."""
    own = {f.name for f in dataclasses.fields(hp)}
    return [f.name for f in dataclasses.fields(bounds)
            if f.name in own and getattr(bounds, f.name).mutate]


def from_unit(b: Bound, u: float, integer: bool = False) -> float:
    """The value at ``u`` in [0, 1] along the bound's scale."""
    if b.scale == "log":
        x = math.exp(math.log(b.min) + u * (math.log(b.max) - math.log(b.min)))
    else:
        x = b.min + u * (b.max - b.min)
    if integer:
        return int(min(max(round(x), math.ceil(b.min)), math.floor(b.max)))
    return float(min(max(x, b.min), b.max))


def latin_hypercube(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` points in [0, 1)^d: each axis cut into ``n`` strata, one point in each."""
    u = np.empty((n, d))
    for j in range(d):
        u[:, j] = (rng.permutation(n) + rng.random(n)) / n
    return u


def sample_hidden(space: ArchSpace, u_depth: float, u_width: float) -> list[int]:
    """Hidden sizes at a point of the architecture axes (depth uniform, width log-uniform)."""
    depth = space.min_layers + min(int(u_depth * (space.max_layers - space.min_layers + 1)),
                                   space.max_layers - space.min_layers)
    lo, hi = math.log(space.min_width), math.log(space.max_width)
    width = math.exp(lo + u_width * (hi - lo))
    lo_w = -(-space.min_width // WIDTH_STEP) * WIDTH_STEP  # multiples of WIDTH_STEP in range
    hi_w = space.max_width // WIDTH_STEP * WIDTH_STEP
    if lo_w > hi_w:  # none: the range itself
        return [int(min(max(round(width), space.min_width), space.max_width))] * depth
    return [int(min(max(WIDTH_STEP * round(width / WIDTH_STEP), lo_w), hi_w))] * depth


def starts(cfg: Config, rng: np.random.Generator) -> list[Start]:
    """Every member's start: the preset (``population.init: preset``), or a Latin hypercube
    over the search space (``sample``; with ``population.keep_preset`` member 0 is the preset)."""
    a, p, m = cfg.algo, cfg.population, cfg.mutation
    hp0 = initial_hyperparams(cfg)
    preset = Start(dataclasses.asdict(hp0), list(a.hidden), False)
    if p.init == "preset":
        return [preset] * p.size
    names = mutable(m.bounds, hp0)
    arch = m.arch.max_layers > m.arch.min_layers or m.arch.max_width > m.arch.min_width
    u = latin_hypercube(p.size, len(names) + 2 * arch, rng)
    out = []
    for i in range(p.size):
        hp = dict(preset.hyperparams)
        for j, name in enumerate(names):
            hp[name] = from_unit(getattr(m.bounds, name), float(u[i, j]), name in INT_HPS)
        hidden = (sample_hidden(m.arch, float(u[i, -2]), float(u[i, -1])) if arch
                  else list(a.hidden))
        out.append(Start(hp, hidden, True))
    if p.keep_preset:
        out[0] = preset
    return out


def resample(name: str, bounds: HyperparamSpace, rng: np.random.Generator) -> float:
    """A fresh draw of one hyperparameter from its prior (uniform along its scale)."""
    return from_unit(getattr(bounds, name), float(rng.random()), name in INT_HPS)


def perturb(name: str, value: float, factor: float, bounds: HyperparamSpace) -> float:
    """``value * factor`` within the bounds (integers move by at least one step)."""
    b = getattr(bounds, name)
    if name in INT_HPS:
        new = int(min(max(round(value * factor), math.ceil(b.min)), math.floor(b.max)))
        if new == value and factor != 1.0:
            new = int(min(max(value + (1 if factor > 1 else -1), math.ceil(b.min)),
                          math.floor(b.max)))
        return new
    if name == "expl_noise" and value == 0.0 and factor > 1:  # a step cannot leave zero
        return min(b.max, max(b.min, 0.01))
    return float(min(max(value * factor, b.min), b.max))


def explore(hp: Any, bounds: HyperparamSpace, factors: list[float], resample_p: float,
            rng: np.random.Generator) -> tuple[dict[str, Any], dict[str, str]]:
    """PBT's explore: every mutable hyperparameter is resampled from its prior (probability
    ``resample_p``) or multiplied by one of ``factors``. Returns (changes, op per name)."""
    changes, ops = {}, {}
    for name in mutable(bounds, hp):
        old = getattr(hp, name)
        if rng.random() < resample_p:
            new, op = resample(name, bounds, rng), "resample"
        else:
            factor = float(factors[int(rng.integers(len(factors)))])
            new, op = perturb(name, old, factor, bounds), f"*{factor:g}"
        if new != old:
            changes[name], ops[name] = new, op
    return changes, ops
