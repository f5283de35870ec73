"""Actor outputs to actions: squashing, exploration noise, discrete sampling, and the actions
the learner's losses take (target and straight-through training actions).

Shared by an algorithm acting on its own (:meth:`Algorithm.act`) and the whole population acting
at once (:class:`~evohpo.algos.acting.PopulationActor`), so both give the same actions.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from evohpo.algos.base import Actions, Algorithm
from evohpo.algos.switches import Switches
from evohpo.envs.spec import AgentSpec, EnvSpec


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


def target_action(s: AgentSpec, sw: Switches, out: torch.Tensor,
                  noise: torch.Tensor | None) -> torch.Tensor:
    """A target actor's output (``[..., act]``) as the action in the critics' targets;
    ``noise``: standard normal draws for target policy smoothing, or None."""
    if noise is not None:
        noise = (noise * sw.target_noise).clamp(-sw.target_noise_clip, sw.target_noise_clip)
    if s.discrete:
        logits = out + noise if noise is not None else out
        return F.one_hot(logits.argmax(dim=-1), s.act_dim).float()
    act = squash_t(out, s.low, s.high)
    if noise is not None:
        act = (act + noise * (s.high - s.low)).clamp(s.low, s.high)
    return act


def train_action(s: AgentSpec, sw: Switches, out: torch.Tensor,
                 u: torch.Tensor | None) -> torch.Tensor:
    """An actor's output (``[..., act]``) as a differentiable action: squashed, or for a
    discrete agent a straight-through Gumbel-softmax sample from the uniform draws ``u``."""
    if not s.discrete:
        return squash_t(out, s.low, s.high)
    assert u is not None
    y = F.softmax((out - torch.log(-torch.log(u.clamp_(1e-10, 1.0 - 1e-7))))
                  / sw.gumbel_temperature, dim=-1)
    hard = F.one_hot(y.argmax(dim=-1), s.act_dim).to(y.dtype)
    return hard - y.detach() + y  # straight-through: one-hot forward, soft gradient
