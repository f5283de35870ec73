"""A MATD3's state dict: what checkpoints, clones and Ray actors carry of a member's learner."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Protocol

import numpy as np
import torch

from evohpo.algos.base import Hyperparams, Learner
from evohpo.algos.generators import generator_state


class Stateful(Learner, Protocol):
    """What a MATD3 learner holds, as its state dict names it."""

    agents: tuple[str, ...]
    hp: Hyperparams
    device: torch.device
    updates: int
    actor_version: int
    gen: torch.Generator
    ou_state: dict[str, np.ndarray]

    def arch(self) -> dict[str, Any]: ...
    def set_hyperparams(self, **changes: Any) -> None: ...
    def _build_networks(self, arch: dict[str, dict[str, Any]],
                        init_gen: torch.Generator) -> None: ...


def own(x: Any) -> Any:
    """``x`` (nested dicts and lists) with every tensor a copy of its own: a member's tensors may
    be views into its group's stacks (:mod:`evohpo.algos.group`), which a state must not carry
    (a saved view brings the whole stack along)."""
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if isinstance(x, dict):
        return {k: own(v) for k, v in x.items()}
    if isinstance(x, list):
        return [own(v) for v in x]
    return x


def state_of(algo: Stateful) -> dict[str, Any]:
    """Everything a MATD3 holds, as a state dict (weights, targets, optimizers, streams)."""
    return own({
        "hp": dataclasses.asdict(algo.hp),
        "arch": algo.arch(),
        "actors": {a: n.state_dict() for a, n in algo.actors.items()},
        "actor_targets": {a: n.state_dict() for a, n in algo.actor_targets.items()},
        "critics": {a: [c.state_dict() for c in cs] for a, cs in algo.critics.items()},
        "critic_targets": {a: [c.state_dict() for c in cs]
                           for a, cs in algo.critic_targets.items()},
        "actor_opts": {a: o.state_dict() for a, o in algo.actor_opts.items()},
        "critic_opts": {a: o.state_dict() for a, o in algo.critic_opts.items()},
        "updates": algo.updates,
        "learners": list(algo.learners),
        "gen": algo.gen.get_state(),
        "ou_state": {a: x.copy() for a, x in algo.ou_state.items()},
    })

def load_state(algo: Stateful, state: dict[str, Any]) -> None:
    """Load a state; networks (and optimizers) are rebuilt first if its architecture differs."""
    algo.hp = Hyperparams(**state["hp"])
    if "arch" in state and state["arch"] != algo.arch():
        # weights overwritten below
        algo._build_networks(state["arch"], torch.Generator().manual_seed(0))
    for a in algo.agents:
        algo.actors[a].load_state_dict(state["actors"][a])
        algo.actor_targets[a].load_state_dict(state["actor_targets"][a])
        for c, sd in zip(algo.critics[a], state["critics"][a], strict=True):
            c.load_state_dict(sd)
        for c, sd in zip(algo.critic_targets[a], state["critic_targets"][a], strict=True):
            c.load_state_dict(sd)
        # torch's Optimizer.load_state_dict keeps the given tensors (step, moments) by
        # reference: copy them, or two members loaded from one in-memory state would step
        # each other's Adam
        algo.actor_opts[a].load_state_dict(copy.deepcopy(state["actor_opts"][a]))
        algo.critic_opts[a].load_state_dict(copy.deepcopy(state["critic_opts"][a]))
    algo.set_hyperparams()  # the optimizers' lr follow hp
    algo.actor_version += 1
    algo.updates = int(state["updates"])
    algo.learners = tuple(state.get("learners", algo.agents))  # older states: all of them
    # a state saved on another device type (a GPU run evaluated on a CPU) reseeds
    algo.gen.set_state(generator_state(state["gen"], algo.device))
    algo.ou_state = {a: torch.as_tensor(x).numpy().astype(np.float32)  # arrays or tensors
                     for a, x in state["ou_state"].items()}
