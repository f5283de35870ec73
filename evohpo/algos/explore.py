"""Actor outputs to env actions: squashing, exploration noise, discrete sampling.

Shared by an algorithm acting on its own (:meth:`Algorithm.act`) and the whole population acting
at once (:class:`~evohpo.algos.acting.PopulationActor`), so both give the same actions.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from evohpo.algos.base import Actions, Algorithm
from evohpo.envs.spec import EnvSpec


class Part(NamedTuple):
    """One member's share of a batch of rows: its algorithm, generator (None: no exploration),
    its rows and which of them just finished an episode (OU noise restarts there)."""

    algo: Algorithm
    rng: np.random.Generator | None
    rows: slice
    done: np.ndarray | None


def explore(spec: EnvSpec, outs: dict[str, np.ndarray], parts: list[Part]) -> Actions:
    """Env and buffer actions from raw actor outputs (pre-squash outputs; logits if discrete).

    Continuous: squashed into the action range; members with a generator add Gaussian or OU
    noise (``expl_noise`` x range) and clip. Discrete: argmax of the logits, with Gumbel noise
    (sampling) and epsilon-random actions for members with a generator; stored one-hot.
    """
    env_act: dict[str, np.ndarray] = {}
    store: dict[str, np.ndarray] = {}
    explorers = [p for p in parts if p.rng is not None]
    noisy = [p for p in explorers if p.algo.hp.expl_noise > 0]
    for a in spec.agents:
        s, out = spec[a], outs[a]
        n = out.shape[0]
        if s.discrete:
            logits = out
            if explorers:
                logits = out.astype(np.float64)  # as the sum with float64 draws would be
                for p in explorers:
                    logits[p.rows] += _gen(p).gumbel(size=logits[p.rows].shape)
            idx = logits.argmax(axis=1)
            for p in noisy:  # epsilon-random actions
                k = idx[p.rows].shape[0]
                rand = _gen(p).random(k) < p.algo.hp.expl_noise
                idx[p.rows] = np.where(rand, _gen(p).integers(0, s.act_dim, k), idx[p.rows])
            env_act[a] = idx.astype(np.float32)[:, None]
            onehot = np.zeros((n, s.act_dim), np.float32)
            onehot[np.arange(n), idx] = 1.0
            store[a] = onehot
        else:
            act = squash(out, s.low, s.high)
            if noisy:
                noise = np.zeros_like(act)
                for p in noisy:
                    k = act[p.rows].shape[0]
                    noise[p.rows] = (p.algo.noise(a, k, s.act_dim, _gen(p), p.done)
                                     * (s.high - s.low))
                act += noise
                np.clip(act, s.low, s.high, out=act)
            env_act[a] = act
            store[a] = act
    return env_act, store


def _gen(p: Part) -> np.random.Generator:
    """An exploring part's generator."""
    if p.rng is None:
        raise ValueError("this part does not explore")
    return p.rng


def squash(x: np.ndarray, low: float, high: float) -> np.ndarray:
    with np.errstate(over="ignore"):  # exp(-x) is inf below about -88: the action is low, exactly
        return (low + (high - low) / (1.0 + np.exp(-x))).astype(np.float32)


def squash_t(x: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """:func:`squash` for tensors (differentiable)."""
    return low + (high - low) * torch.sigmoid(x)
