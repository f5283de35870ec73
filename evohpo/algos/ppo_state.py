"""A PPO learner's state dict: what a checkpoint, a copy and a team's exchange of agents carry."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Protocol

import torch

from evohpo.algos.base import Learner, OnPolicyHyperparams
from evohpo.algos.generators import generator_state
from evohpo.algos.onpolicy import ValueNorm


class PPOState(Learner, Protocol):
    """What a PPO learner holds, as its state dict names it."""

    agents: tuple[str, ...]
    hp: OnPolicyHyperparams
    device: torch.device
    updates: int
    actor_version: int
    gen: torch.Generator
    log_std: dict[str, torch.Tensor]
    std_opts: dict[str, torch.optim.Adam]
    value_norms: dict[str, ValueNorm]

    def arch(self) -> dict[str, Any]: ...
    def set_hyperparams(self, **changes: Any) -> None: ...
    def _build_networks(self, arch: dict[str, dict[str, Any]],
                        init_gen: torch.Generator) -> None: ...


def state_of(algo: PPOState) -> dict[str, Any]:
    """What a PPO learner saves: hyperparameters, shapes, weights, optimizers, normalisers."""
    return {
        "hp": dataclasses.asdict(algo.hp),
        "arch": algo.arch(),
        "actors": {a: n.state_dict() for a, n in algo.actors.items()},
        "critics": {a: [c.state_dict() for c in cs] for a, cs in algo.critics.items()},
        "log_std": {a: p.detach().clone() for a, p in algo.log_std.items()},
        "actor_opts": {a: o.state_dict() for a, o in algo.actor_opts.items()},
        "std_opts": {a: o.state_dict() for a, o in algo.std_opts.items()},
        "critic_opts": {a: o.state_dict() for a, o in algo.critic_opts.items()},
        "value_norms": {a: v.state_dict() for a, v in algo.value_norms.items()},
        "updates": algo.updates,
        "learners": list(algo.learners),
        "gen": algo.gen.get_state(),
    }

def load_state(algo: PPOState, state: dict[str, Any]) -> None:
    """Load a state into ``algo``; networks (and optimizers) are rebuilt first if its
    architecture differs."""
    algo.hp = OnPolicyHyperparams(**state["hp"])
    if state["arch"] != algo.arch():
        algo._build_networks(state["arch"], torch.Generator().manual_seed(0))
    with torch.no_grad():
        for a in algo.agents:
            algo.actors[a].load_state_dict(state["actors"][a])
            algo.critics[a][0].load_state_dict(state["critics"][a][0])
            if a in algo.log_std:
                algo.log_std[a].copy_(torch.as_tensor(state["log_std"][a]))
    for key, opts in (("actor_opts", algo.actor_opts), ("std_opts", algo.std_opts),
                      ("critic_opts", algo.critic_opts)):
        for a, opt in opts.items():  # copies: Adam keeps the given tensors by reference
            opt.load_state_dict(copy.deepcopy(state[key][a]))
    for a, v in state["value_norms"].items():
        algo.value_norms[a].load_state_dict(v)
    algo.set_hyperparams()
    algo.actor_version += 1
    algo.updates = int(state["updates"])
    algo.learners = tuple(state.get("learners", algo.agents))
    algo.gen.set_state(generator_state(state["gen"], algo.device))
