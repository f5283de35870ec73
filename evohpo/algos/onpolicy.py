"""What an on-policy learner is to the rest of the package, and the parts every one of them uses.

An on-policy member (IPPO, MAPPO) keeps no replay memory: it samples its actions from its
policy, collects a rollout of ``hp.rollout`` vector steps on its own slice of the pool
(:mod:`evohpo.runtime.rollouts`), and learns from that rollout alone. This module is the one
place that says what that takes:

* :class:`OnPolicy`: the learner's side (``on_policy = True``, a log-std per continuous agent,
  ``learn_rollout``);
* :class:`Rollout`: one member's steps, as the runtime hands them over;
* :func:`sample`: the actions of a batch of members from their actors' outputs, each drawing
  from its own generator;
* :func:`gae`, :func:`surrogate`, :func:`value_loss`, :class:`ValueNorm`, :func:`log_prob`
  and :func:`entropy`: the estimator, the losses, the normaliser and the distributions' algebra.

Continuous actions: a Gaussian over the actor's pre-squash output, squashed into the action's
Box bounds by the same sigmoid as the deterministic action (so the deterministic policy is the
squashed mean, and evaluation, export and playback read the actor as they read MATD3's). The
policy ratio is taken in the pre-squash space, where the squash's Jacobian cancels. Discrete
actions: a categorical over the logits, sampled by Gumbel-max; deterministic: the argmax.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from evohpo.algos.base import Actions, Algorithm
from evohpo.algos.explore import Part, squash
from evohpo.envs.spec import AgentSpec, EnvSpec

LOG_2PI = math.log(2.0 * math.pi)


class OnPolicy(Algorithm, Protocol):
    """An on-policy learner: what the runtime's collection asks of it beyond :class:`Algorithm`.

    A class named by an entry of ``switches.ON_POLICY`` (``"learner": "module:Class"``) is built
    as ``Class(spec, hp, sw, hidden, activation, seed, device)`` with
    :class:`~evohpo.algos.base.OnPolicyHyperparams` and the entry's
    :class:`~evohpo.algos.switches.OnPolicySwitches`, and restored by
    ``Class.from_state_dict(spec, sw, state, device)``: a new on-policy algorithm is its module
    and that entry.
    """

    def std(self, agent: str) -> np.ndarray:
        """A continuous agent's current action std in the pre-squash space, ``[act_dim]``."""
        ...

    def learn_rollout(self, rollout: Rollout) -> dict[str, float]:
        """Update on one rollout of its own (several epochs of minibatches); mean losses by name."""
        ...


def is_on_policy(algo: Any) -> bool:
    return bool(getattr(algo, "on_policy", False))


@dataclass
class Rollout:
    """One member's rollout: ``T`` vector steps of ``k`` envs, every array ``[T, k, ...]``.

    ``actions`` are what :func:`sample` stored: the pre-squash draw (continuous) or the index
    (discrete, ``[T, k, 1]``). ``terminated`` stops bootstrapping; ``done`` (the episode ended,
    terminated or truncated) cuts the advantage chain; ``next_obs`` is the real next observation,
    the final one where the episode ended (a truncated step bootstraps from it).
    """

    obs: dict[str, np.ndarray]
    actions: dict[str, np.ndarray]
    rewards: dict[str, np.ndarray]
    next_obs: dict[str, np.ndarray]
    terminated: dict[str, np.ndarray]
    alive: dict[str, np.ndarray]
    done: np.ndarray

    @property
    def steps(self) -> int:
        return int(self.done.shape[0])


def sample(spec: EnvSpec, outs: dict[str, np.ndarray], parts: list[Part]) -> Actions:
    """Env and stored actions from raw actor outputs: each exploring part draws from its own
    member's policy with its own generator (agent by agent, in ``spec`` order); a part without a
    generator acts deterministically (squashed mean, or argmax)."""
    env_act: dict[str, np.ndarray] = {}
    store: dict[str, np.ndarray] = {}
    for a in spec.agents:
        s, out = spec[a], outs[a]
        if s.discrete:
            logits = out.astype(np.float64)
            for p in parts:
                if p.rng is not None:
                    logits[p.rows] += p.rng.gumbel(size=logits[p.rows].shape)
            idx = logits.argmax(axis=1)
            env_act[a] = idx.astype(np.float32)[:, None]
            store[a] = env_act[a].copy()
            continue
        u = np.array(out, np.float32)
        for p in parts:
            if p.rng is not None:
                draw = p.rng.standard_normal(u[p.rows].shape).astype(np.float32)
                u[p.rows] += draw * p.algo.std(a)  # type: ignore[attr-defined]
        env_act[a] = squash(u, s.low, s.high)
        store[a] = u
    return env_act, store


def log_prob(s: AgentSpec, out: torch.Tensor, log_std: torch.Tensor | None,
             action: torch.Tensor) -> torch.Tensor:
    """Log-density of stored ``action`` rows under the policy with outputs ``out`` ([N])."""
    if s.discrete:
        logp = torch.log_softmax(out, dim=-1)
        return logp.gather(-1, action.long()).squeeze(-1)
    assert log_std is not None
    z = (action - out) * torch.exp(-log_std)
    return (-0.5 * z.pow(2) - log_std - 0.5 * LOG_2PI).sum(-1)


def entropy(s: AgentSpec, out: torch.Tensor, log_std: torch.Tensor | None) -> torch.Tensor:
    """The policy's entropy per row ([N]); a continuous one's in the pre-squash space."""
    if s.discrete:
        logp = torch.log_softmax(out, dim=-1)
        return -(logp.exp() * logp).sum(-1)
    assert log_std is not None
    return (log_std + 0.5 * (1.0 + LOG_2PI)).sum().expand(out.shape[0])


def gae(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor,
        terminated: torch.Tensor, done: torch.Tensor, gamma: float,
        lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimates and returns for ``[T, k]`` steps.

    delta_t = r_t + gamma (1 - terminated_t) V(next_obs_t) - V(obs_t);
    A_t = delta_t + gamma lambda (1 - done_t) A_{t+1}; returns A_t + V(obs_t).

    A truncated step (done, not terminated) bootstraps from its real final observation and ends
    the chain; the rollout's last step bootstraps from the observation the next rollout starts at.
    """
    delta = rewards + gamma * (1.0 - terminated) * next_values - values
    keep = gamma * lam * (1.0 - done)
    adv = torch.zeros_like(delta)
    last = torch.zeros_like(delta[0])
    for t in range(delta.shape[0] - 1, -1, -1):
        last = delta[t] + keep[t] * last
        adv[t] = last
    return adv, adv + values


def surrogate(logp: torch.Tensor, logp_old: torch.Tensor, adv: torch.Tensor,
              clip: float) -> torch.Tensor:
    """PPO's clipped surrogate objective per row: min(r A, clip(r, 1 - c, 1 + c) A), with
    r = exp(logp - logp_old)."""
    ratio = torch.exp(logp - logp_old)
    return torch.min(ratio * adv, ratio.clamp(1.0 - clip, 1.0 + clip) * adv)


def value_loss(v: torch.Tensor, v_old: torch.Tensor, ret: torch.Tensor,
               clip: float) -> torch.Tensor:
    """Clipped value loss per row: max((v - R)^2, (v_old + clip(v - v_old, -c, c) - R)^2)."""
    v_clip = v_old + (v - v_old).clamp(-clip, clip)
    return torch.max((v - ret).pow(2), (v_clip - ret).pow(2))


class ValueNorm:
    """Running mean and variance of the returns a critic learns (all of them so far, merged batch
    by batch as Chan et al.'s parallel algorithm does): the critic predicts normalised returns."""

    def __init__(self) -> None:
        self.mean, self.var, self.count = 0.0, 1.0, 0.0

    def update(self, x: torch.Tensor) -> None:
        n = float(x.numel())
        if n == 0:
            return
        m, v = float(x.mean()), float(x.var(unbiased=False))
        total = self.count + n
        d = m - self.mean
        self.var = (self.var * self.count + v * n + d * d * self.count * n / total) / total
        self.mean += d * n / total
        self.count = total

    def std(self) -> float:
        return math.sqrt(max(self.var, 1e-8))

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std()

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.std() + self.mean

    def state_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "var": self.var, "count": self.count}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.mean, self.var, self.count = (float(state["mean"]), float(state["var"]),
                                           float(state["count"]))
