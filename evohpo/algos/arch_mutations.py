"""Architecture and activation mutations of a MATD3 / MADDPG learner that keep what it learned.

The network-level surgery lives in :mod:`evohpo.algos.surgery` (an
:class:`~evohpo.algos.surgery.Edit` per network); this module picks what to mutate, applies
the edit to everything that must follow it, and says what happened.

What mutates together, and why:

* **Online and target network** get the same edit, replayed on their own weights. New entries
  are identical in both (same drawn values, zero outgoing weights, identity layers), so the target
  keeps its lag: it is never reset to the online weights.
* **Twin critics** (MATD3) get the same operator at the same layer with the same step, so they
  keep identical architectures (each keeps its own weights; remove_node drops each one's own
  least-used units). The TD target takes their minimum, which should compare like with like.
* **Actor and critics of an agent mutate independently.** No shape ties them: a critic's input is
  every agent's observation and action, whatever the actor's hidden sizes. One architecture
  mutation changes one network of one agent, which keeps each change small and attributable.
* **An activation mutation changes one agent's actor and critics (and their targets) together.**
  It cannot preserve the function anyway, and it answers one question per agent ("which
  activation suits this agent's networks"), the same granularity as ``algo.activation``; one
  activation per agent is what :meth:`MATD3.arch` and checkpoints record.
* **Adam** is rebuilt over the new parameters with the same options (lr included); every
  surviving parameter keeps ``step``, ``exp_avg`` and ``exp_avg_sq`` (sliced when it shrank,
  zero-padded when it grew). Only brand-new tensors (a new identity layer, a merged layer, the
  rescaled layer after a paired identity) start with fresh moments.

Randomness comes only from the numpy Generator passed in (a fixed number of draws per call).
The learner exposes these as ``mutate_architecture`` / ``mutate_activation``; each fills in the
:class:`~evohpo.evolve.lineage.MutationRecord` it is given with what actually happened.
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np
import torch

from evohpo.algos.base import Learner
from evohpo.algos.networks import MLP
from evohpo.algos.surgery import (
    Edit,
    ParamPlan,
    add_layer,
    add_nodes,
    apply_edit,
    identity_width,
    remove_layer,
    remove_nodes,
    set_activation,
)
from evohpo.config import ArchSpace
from evohpo.evolve.lineage import MutationRecord

NETWORKS = ("actor", "critic")
OPS = ("add_node", "remove_node", "add_layer", "remove_layer")
# when the drawn operator cannot apply: same direction on the other axis first, then the opposite
FALLBACK = {"add_node": ("add_node", "add_layer", "remove_node", "remove_layer"),
            "add_layer": ("add_layer", "add_node", "remove_layer", "remove_node"),
            "remove_node": ("remove_node", "remove_layer", "add_node", "add_layer"),
            "remove_layer": ("remove_layer", "remove_node", "add_layer", "add_node")}
MOMENTS = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")
Opt = TypeVar("Opt", bound=torch.optim.Optimizer)


# ----------------------------------------------------------------------------- applying edits

def networks_of(algo: Learner, agent: str, which: str) -> tuple[list[MLP], list[MLP]]:
    """An agent's actor (or critics) and their targets (none for a learner without targets)."""
    if which == "actor":
        target = algo.actor_targets.get(agent)
        return [algo.actors[agent]], [] if target is None else [target]
    return list(algo.critics[agent]), list(algo.critic_targets.get(agent, []))


def carry_optimizer(opt: Opt, old: list[MLP], new: list[MLP], edits: list[Edit]) -> Opt:
    """The same optimizer over ``new``'s parameters, carrying the state of every surviving one."""
    if len(opt.param_groups) != 1:
        raise ValueError("carry_optimizer expects one parameter group")
    group = opt.param_groups[0]
    old_params = [p for net in old for p in net.parameters()]
    if [id(p) for p in group["params"]] != [id(p) for p in old_params]:
        raise ValueError("the optimizer does not hold exactly these networks' parameters")
    options = {k: v for k, v in group.items() if k != "params"}
    cls: Any = type(opt)
    new_opt: Opt = cls([{"params": [p for net in new for p in net.parameters()], **options}])
    for o, n, edit in zip(old, new, edits, strict=True):
        olds = list(o.parameters())
        for p, plan in zip(n.parameters(), edit.plans, strict=True):
            state = opt.state.get(olds[plan.src]) if plan.src is not None else None
            if not state:
                continue  # a brand-new tensor: Adam initialises it lazily, as any fresh one
            new_opt.state[p] = carried_state(state, plan)
    return new_opt


def carried_state(state: dict[str, Any], plan: ParamPlan) -> dict[str, Any]:
    """One parameter's Adam state for its edited successor: moments sliced or zero-padded."""
    return {k: plan.moment(v) if k in MOMENTS else
            (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in state.items()}


def apply_edits(algo: Learner, agent: str, which: str, edits: list[Edit]) -> None:
    """Replace an agent's actor (or critics) by their edited versions: targets and Adam follow."""
    online, targets = networks_of(algo, agent, which)
    new_online = [apply_edit(n, e) for n, e in zip(online, edits, strict=True)]
    new_targets = [apply_edit(t, e).requires_grad_(False)
                   for t, e in zip(targets, edits, strict=True)] if targets else []
    opts = algo.actor_opts if which == "actor" else algo.critic_opts
    opts[agent] = carry_optimizer(opts[agent], online, new_online, edits)
    if which == "actor":
        algo.actors[agent] = new_online[0]
        if new_targets:
            algo.actor_targets[agent] = new_targets[0]
    else:
        algo.critics[agent] = new_online
        if new_targets:
            algo.critic_targets[agent] = new_targets
    algo.follow_edits(agent, which, edits)


# ----------------------------------------------------------------------------- architecture

def plan_op(op: str, nets: list[MLP], space: ArchSpace, pick: int, step: int,
            gen: torch.Generator) -> tuple[list[Edit] | None, str]:
    """Edits of ``op`` for ``nets`` (an actor, or an agent's twin critics), or (None, why not).

    ``pick`` chooses the layer (the others are tried after it); ``step`` the units to move.
    """
    hidden, act = nets[0].hidden, nets[0].activation
    n_layers = len(hidden)
    layers = [(pick + i) % n_layers for i in range(n_layers)]
    if op == "add_node":
        for k in layers:
            new = min(hidden[k] + step, space.max_width)
            if new > hidden[k]:
                return [add_nodes(n, k, new - hidden[k], gen) for n in nets], ""
        return None, f"every layer at max_width {space.max_width}"
    if op == "remove_node":
        for k in layers:
            new = max(hidden[k] - step, space.min_width)
            if new < hidden[k]:
                return [remove_nodes(n, k, hidden[k] - new) for n in nets], ""
        return None, f"every layer at min_width {space.min_width}"
    if op == "add_layer":
        if n_layers >= space.max_layers:
            return None, f"at max_layers {space.max_layers}"
        if identity_width(act, hidden[0]) is None:
            return None, f"no exact identity layer for {act}"
        for k in layers:
            m = identity_width(act, hidden[k])
            if m is not None and space.min_width <= m <= space.max_width:
                return [e for e in (add_layer(n, k) for n in nets) if e is not None], ""
        return None, (f"an identity layer for {act} would leave "
                      f"[{space.min_width}, {space.max_width}] units")
    if op == "remove_layer":
        if n_layers <= space.min_layers:
            return None, f"at min_layers {space.min_layers}"
        return [remove_layer(n, layers[0]) for n in nets], ""
    raise ValueError(f"unknown architecture operator {op!r}")


def _clip_note(op: str, edit: Edit, step: int, space: ArchSpace) -> str:
    if op == "add_node" and not edit.op.endswith(f"+{step}"):
        return f" (step {step} clipped at max_width {space.max_width})"
    if op == "remove_node" and not edit.op.endswith(f"-{step}"):
        return f" (step {step} clipped at min_width {space.min_width})"
    return ""


def mutate_architecture(algo: Learner, space: ArchSpace, rng: np.random.Generator,
                        rec: MutationRecord) -> MutationRecord:
    """Add/remove a layer or nodes in one network of one agent, within ``space``.

    Draws the agent, the network, the axis (layer with probability ``layer_prob``, else nodes), the
    direction, the step and the layer. If that cannot apply (at a bound, or no exact identity
    layer for the activation), other layers, then the fallback operators, then the other networks
    are tried; the record says what was drawn and what it became.
    """
    agents = algo.leaders()  # the agents it trains, less those sharing another's networks
    i_agent = int(rng.integers(len(agents)))
    i_net = int(rng.integers(len(NETWORKS)))
    depth = bool(rng.random() < space.layer_prob)
    grow = bool(rng.random() < 0.5)
    step = int(space.node_steps[int(rng.integers(len(space.node_steps)))])
    pick = int(rng.integers(0, 2**31))
    gen = torch.Generator().manual_seed(int(rng.integers(0, 2**62)))
    drawn = ("add_" if grow else "remove_") + ("layer" if depth else "node")
    first = (agents[i_agent], NETWORKS[i_net])
    pairs = [first] + [(a, w) for a in agents for w in NETWORKS if (a, w) != first]
    why = ""
    for agent, which in pairs:
        nets, _ = networks_of(algo, agent, which)
        for op in FALLBACK[drawn]:
            edits, reason = plan_op(op, nets, space, pick, step, gen)
            why = why or reason
            if edits is None:
                continue
            before = list(nets[0].hidden)
            apply_edits(algo, agent, which, edits)
            after = list(networks_of(algo, agent, which)[0][0].hidden)
            notes = []
            if (agent, which, op) != (*first, drawn):
                notes.append(f"drew {drawn} on {first[0]}/{first[1]} ({why}); became {op}")
            if which == "critic" and len(nets) > 1:
                notes.append("both twin critics")
            return rec.outcome("architecture", f"{agent}/{which}/layer{edits[0].layer}", before,
                               after, edits[0].op + _clip_note(op, edits[0], step, space),
                               "; ".join(notes))
    return rec.outcome("none", note=f"architecture: drew {drawn} on {first[0]}/{first[1]} ({why}); "
                                    "no operator applies to any network within mutation.arch")


# ----------------------------------------------------------------------------- activation

def mutate_activation(algo: Learner, space: ArchSpace, rng: np.random.Generator,
                      rec: MutationRecord) -> MutationRecord:
    """Switch one agent's actor and critics (targets too) to another activation from ``space``.

    Weights and Adam state are kept; the function changes (no activation swap can preserve it).
    """
    agents = algo.leaders()  # the agents it trains, less those sharing another's networks
    i_agent = int(rng.integers(len(agents)))
    pick = int(rng.integers(0, 2**31))
    for agent in agents[i_agent:] + agents[:i_agent]:
        current = algo.actors[agent].activation
        choices = [a for a in dict.fromkeys(space.activations) if a != current]
        if not choices:
            continue
        new = choices[pick % len(choices)]
        for which in NETWORKS:
            nets, _ = networks_of(algo, agent, which)
            apply_edits(algo, agent, which, [set_activation(n, new) for n in nets])
        note = ("" if agent == agents[i_agent] else
                f"drew {agents[i_agent]}, which has no other activation to take")
        return rec.outcome("activation", f"{agent}/actor+critic", current, new, "set_activation",
                           note)
    return rec.outcome("none", note="activation: mutation.arch.activations offers no activation "
                                    "the agents do not already use")
