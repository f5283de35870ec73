"""Parameter sharing for on-policy learners (``algo.share``): which agents share networks, how
their networks are tied, a group's single forward pass, and how a group follows an edit.

Agents of one kind (the same name before the last ``_`` and the same spaces) hold one actor and
one critic. Each agent's networks stay :class:`MLP` objects of their own, so acting, evaluation
and export read them as any other, but they hold the first agent's (the group's leader's) tensors
except the first layer's bias: that bias is the agent's id, exactly as a one-hot id in the input
would be. The leader's optimizers step the shared tensors with every agent's gradient; each other
agent's step its bias.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

import torch
import torch.nn.functional as F

from evohpo.algos.arch_mutations import carried_state
from evohpo.algos.networks import ACTIVATIONS, MLP
from evohpo.algos.surgery import Edit, apply_edit
from evohpo.envs.spec import EnvSpec

Opt = TypeVar("Opt", bound=torch.optim.Optimizer)


def groups(spec: EnvSpec, share: bool) -> list[tuple[str, ...]]:
    """The agents that share networks: each alone, or with ``share`` the agents of one name
    prefix (``adversary`` of ``adversary_0``) and the same spaces, in env order."""
    if not share:
        return [(a,) for a in spec.agents]
    out: dict[tuple[Any, ...], list[str]] = {}
    for a in spec.agents:
        s = spec[a]
        out.setdefault((a.rsplit("_", 1)[0], s.obs_dim, s.act_dim, s.discrete, s.low, s.high),
                       []).append(a)
    return [tuple(g) for g in out.values()]


def bias(net: MLP) -> torch.Tensor:
    """The first layer's bias: what an agent of a group holds of its own."""
    return cast(torch.nn.Linear, net.layers[0]).bias


def tie(follower: MLP, leader: MLP) -> MLP:
    """``follower`` holding ``leader``'s tensors, except its own first-layer bias."""
    first = follower.layers[0]
    first.weight = leader.layers[0].weight
    for i in range(1, len(leader.layers)):
        follower.layers[i] = leader.layers[i]
    return follower


def group_forward(nets: list[MLP], xs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Each net on its input: one net alone, or a group that shares every tensor but the first
    layer's bias (:func:`tie`) in one pass over all the rows."""
    if len(nets) == 1:
        return [nets[0](xs[0])]
    lead, m = nets[0], xs[0].shape[0]
    fn = ACTIVATIONS[lead.activation]
    first = lead.layers[0]
    h = F.linear(torch.cat(xs), first.weight)  # type: ignore[arg-type]
    biases = torch.stack([bias(net) for net in nets])
    h = (h.view(len(nets), m, -1) + biases[:, None]).reshape(len(nets) * m, -1)
    for layer in lead.layers[1:]:
        h = F.linear(fn(h), layer.weight, layer.bias)  # type: ignore[arg-type]
    return list(h.view(len(nets), m, -1).unbind(0))


def follow(old: MLP, opt: Opt, leader: MLP, edit: Edit) -> tuple[MLP, Opt]:
    """A follower's network after its leader's ``edit``: the edit replayed on its own network
    (the same values, and its own first-layer bias), tied to the leader's new tensors again; and
    its optimizer over the new bias, keeping the bias's Adam moments where the edit kept it."""
    new = tie(apply_edit(old, edit), leader)
    options = {k: v for k, v in opt.param_groups[0].items() if k != "params"}
    cls: Any = type(opt)
    carried: Opt = cls([{"params": [bias(new)], **options}])
    state = opt.state.get(opt.param_groups[0]["params"][0])
    plan = edit.plans[1]  # the first layer's bias
    if state and plan.src == 1:
        carried.state[bias(new)] = carried_state(state, plan)
    return new, carried
