"""The one place algorithms are named and built: from a config, or from a saved state.

``cfg.algo.name`` picks the entry; everything outside :mod:`evohpo.algos` holds the result as an
:class:`~evohpo.algos.base.Algorithm`.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from evohpo.algos.base import Algorithm, Hyperparams, OnPolicyHyperparams
from evohpo.algos.matd3 import MATD3
from evohpo.algos.switches import ALGOS, ON_POLICY, OnPolicySwitches, Switches, names
from evohpo.config import Config
from evohpo.envs.spec import EnvSpec

Device = torch.device | str


@dataclass(frozen=True)
class Entry:
    """How to build an algorithm of one name (fresh, with ``seed``) and restore one (from state)."""

    build: Callable[[Config, EnvSpec, int, Device], Algorithm]
    restore: Callable[[Config, EnvSpec, dict[str, Any], Device], Algorithm]
    hyperparams: Callable[[Config], Any]  # a member's hyperparameters at the start of a run
    on_policy: bool = False  # it learns from rollouts of its own (evohpo.algos.onpolicy)


def switches(cfg: Config) -> Switches:  # the off-policy algorithms' (matd3, maddpg)
    """The MATD3 / MADDPG switches of ``cfg.algo``: its name's defaults where a key is null."""
    a = cfg.algo
    preset = ALGOS[a.name]
    return Switches(
        twin_critics=preset["twin_critics"],
        policy_delay=a.policy_delay if a.policy_delay is not None else preset["policy_delay"],
        target_noise=a.target_noise if a.target_noise is not None else preset["target_noise"],
        target_noise_clip=a.target_noise_clip, gamma=a.gamma, max_grad_norm=a.max_grad_norm,
        gumbel_temperature=a.gumbel_temperature, noise=a.noise, ou_theta=a.ou_theta,
        ou_dt=a.ou_dt, action_reg=a.action_reg,
    )


def initial_hyperparams(cfg: Config) -> Any:
    """A member's hyperparameters at the start of a run (its algorithm's kind of them)."""
    return entry(cfg.algo.name).hyperparams(cfg)


def _matd3_hyperparams(cfg: Config) -> Hyperparams:
    a = cfg.algo
    return Hyperparams(lr_actor=a.lr_actor, lr_critic=a.lr_critic, batch_size=a.batch_size,
                       learn_step=a.learn_step, tau=a.tau, expl_noise=a.expl_noise,
                       min_updates_per_step=a.min_updates_per_step)


def _build_matd3(cfg: Config, spec: EnvSpec, seed: int, device: Device) -> Algorithm:
    return MATD3(spec, _matd3_hyperparams(cfg), switches(cfg), cfg.algo.hidden,
                 cfg.algo.activation, seed, device)


def _restore_matd3(cfg: Config, spec: EnvSpec, state: dict[str, Any],
                   device: Device) -> Algorithm:
    # a state saved before a hyperparameter was a member's own: the run's config value
    hp = {**dataclasses.asdict(_matd3_hyperparams(cfg)), **state["hp"]}
    return MATD3.from_state_dict(spec, switches(cfg), {**state, "hp": hp}, device)


def on_policy_switches(cfg: Config) -> OnPolicySwitches:
    a = cfg.algo
    own = {k: v for k, v in ON_POLICY[a.name].items() if k != "learner"}
    return OnPolicySwitches(**own, gamma=a.gamma, max_grad_norm=a.max_grad_norm, share=a.share)


def _on_policy_hyperparams(cfg: Config) -> OnPolicyHyperparams:
    a = cfg.algo
    return OnPolicyHyperparams(lr_actor=a.lr_actor, lr_critic=a.lr_critic, rollout=a.rollout,
                               epochs=a.epochs, minibatches=a.minibatches, clip=a.clip,
                               ent_coef=a.ent_coef, gae_lambda=a.gae_lambda)


def on_policy_class(name: str) -> Any:
    """The class that learns for on-policy algorithm ``name`` (its ``learner`` in ON_POLICY)."""
    module, cls = ON_POLICY[name]["learner"].split(":")
    return getattr(importlib.import_module(module), cls)


def _build_on_policy(cfg: Config, spec: EnvSpec, seed: int, device: Device) -> Algorithm:
    cls = on_policy_class(cfg.algo.name)
    algo: Algorithm = cls(spec, _on_policy_hyperparams(cfg), on_policy_switches(cfg),
                          cfg.algo.hidden, cfg.algo.activation, seed, device)
    return algo


def _restore_on_policy(cfg: Config, spec: EnvSpec, state: dict[str, Any],
                       device: Device) -> Algorithm:
    algo: Algorithm = on_policy_class(cfg.algo.name).from_state_dict(
        spec, on_policy_switches(cfg), state, device)
    return algo


_MATD3 = Entry(_build_matd3, _restore_matd3, _matd3_hyperparams)
# every on-policy name: the class its ON_POLICY entry names, with that entry's switches
_ON_POLICY = Entry(_build_on_policy, _restore_on_policy, _on_policy_hyperparams, on_policy=True)


def on_policy(cfg: Config) -> bool:
    """Whether ``cfg.algo`` learns on-policy (rollouts of its own, no replay memory)."""
    return entry(cfg.algo.name).on_policy


def algo_names() -> tuple[str, ...]:
    """The names ``algo.name`` may take."""
    return names()


def entry(name: str) -> Entry:
    """The registry's entry for algorithm ``name`` (a loaded config's ``algo.name`` is one of
    :func:`algo_names`: the config loader checks it)."""
    return _MATD3 if name in ALGOS else _ON_POLICY  # maddpg is MATD3 with its switches off


def build_algo(cfg: Config, spec: EnvSpec, seed: int, device: Device) -> Algorithm:
    """A fresh algorithm of ``cfg.algo`` for ``spec``, initialised from ``seed``."""
    return entry(cfg.algo.name).build(cfg, spec, seed, device)


def restore_algo(cfg: Config, spec: EnvSpec, state: dict[str, Any], device: Device) -> Algorithm:
    """An algorithm of ``cfg.algo`` holding ``state`` (as its ``state_dict`` gave it), networks
    of the saved shapes."""
    return entry(cfg.algo.name).restore(cfg, spec, state, device)
