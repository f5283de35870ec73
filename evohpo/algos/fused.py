"""One learning update for many members at once: :class:`PopulationLearner`.

Members whose networks have the same shapes (and the same agents to train) form a group; a
group's actors, critics and their targets are stacked across members (and across the agents of
a member where shapes agree) and learn with batched products, one backward pass per loss kind,
and Adam and Polyak on the stacks. The stacks stay between updates: they are the members' own
memory (:mod:`evohpo.algos.group`), formed again only when a member's networks or optimizer
state are replaced. Each member keeps its own learning rates, tau, batch size, random stream
and policy-delay phase, so its update is the one :meth:`MATD3.learn
<evohpo.algos.matd3.MATD3.learn>` makes on the same batch, up to float rounding: same losses,
same noise draws in the same order.

Members' batches differ in size: a round's rows are laid out in chunks of one width, each
chunk run on its member's networks (:mod:`evohpo.algos.chunks`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, cast

import numpy as np
import torch

from evohpo.algos.base import Algorithm
from evohpo.algos.buffer import Batch, ReplayBuffer
from evohpo.algos.chunks import Chunks, chunk_width, draw, select
from evohpo.algos.explore import target_action, train_action
from evohpo.algos.group import Group, Net, Shape
from evohpo.algos.matd3 import MATD3

Metrics = dict[str, float]


def group_key(algo: Algorithm) -> tuple[object, ...]:
    """What members must share to learn in one group."""
    shapes = tuple((a, tuple(d["actor"]), tuple(d["critic"]), d["activation"])
                   for a, d in algo.arch().items())
    return type(algo), getattr(algo, "sw", None), algo.learners, algo.device, shapes


class PopulationLearner:
    """Learns rounds of members together, keeping each group's stacks from one round to the
    next (a runtime holds one)."""

    def __init__(self) -> None:
        self.groups: dict[tuple[object, ...], Group] = {}
        self.formed = 0  # groups formed so far

    def learn(self, algos: Sequence[Algorithm], buffer: ReplayBuffer,
              rngs: Sequence[np.random.Generator],
              population: Sequence[Algorithm] | None = None,
              timed: Callable[[list[int]], AbstractContextManager[None]] | None = None,
              ) -> list[Metrics]:
        """One gradient step for each of ``algos``, on a batch of its own ``batch_size`` drawn
        from ``buffer`` with its generator in ``rngs`` (the rows :meth:`ReplayBuffer.sample`
        would give it; all in one gather). Groups are formed over ``population`` (every member
        that learns now or later; default ``algos``), so that rounds of some of them keep the
        stacks. Each group's update runs inside ``timed(its members' indices in algos)`` where
        given (a runtime's clock). Returns each member's losses, as
        :meth:`~evohpo.algos.matd3.MATD3.learn` does."""
        sizes = [a.hp.batch_size for a in algos]
        width = chunk_width(sizes)
        batch, rows = buffer.sample_each(sizes, list(rngs), width)
        chunks = Chunks.of(sizes, width, rows.device)
        everyone = list(algos) if population is None else list(population)
        # each member's key once per round: arch() builds its shapes anew on every call
        everyone_keys = [group_key(a) for a in everyone]
        key_of = {id(a): k for a, k in zip(everyone, everyone_keys, strict=True)}
        keys = [key_of[id(a)] if id(a) in key_of else group_key(a) for a in algos]
        out: list[Metrics] = [{} for _ in algos]
        for key in dict.fromkeys(keys):
            members = [j for j, k in enumerate(keys) if k == key]
            with nullcontext() if timed is None else timed(members):
                if type(algos[members[0]]) is not MATD3:  # another learner: each on its rows
                    for j in members:
                        at = chunks.rows_of(j)
                        one = Batch(*[None if d is None else
                                      {a: t.flatten(0, 1)[at] for a, t in d.items()}
                                      for d in batch])  # type: ignore[arg-type]
                        out[j] = algos[j].learn(one)
                    continue
                mine = cast(list[MATD3], [algos[j] for j in members])
                group = self.group(key, mine, everyone, everyone_keys)
                sub = ((batch, rows, chunks) if len(members) == len(algos)
                       else select(batch, rows, chunks, members))
                got = _learn_group(group, mine, *sub)
                for j, metrics in zip(members, got, strict=True):
                    out[j] = metrics
        return out

    def group(self, key: tuple[object, ...], algos: list[MATD3], everyone: list[Algorithm],
              everyone_keys: list[tuple[object, ...]]) -> Group:
        """The group of ``key``: the stacks kept since the last round, or formed anew when its
        members or what they hold changed (``everyone_keys``: each of ``everyone``'s)."""
        members = cast(list[MATD3], [a for a, k in zip(everyone, everyone_keys, strict=True)
                                     if k == key])
        members += [a for a in algos if all(a is not b for b in members)]
        group = self.groups.get(key)
        if group is None or not group.holds(members):
            group = self.groups[key] = Group(members)
            self.formed += 1
        if len(self.groups) > 1:  # groups of shapes nobody has any more
            live = {*everyone_keys, key}
            self.groups = {k: g for k, g in self.groups.items() if k in live}
        return group


def learn_together(algos: Sequence[Algorithm], buffer: ReplayBuffer,
                   rngs: Sequence[np.random.Generator]) -> list[Metrics]:
    """:meth:`PopulationLearner.learn` of a learner of its own (the stacks are formed for this
    one round)."""
    return PopulationLearner().learn(algos, buffer, rngs)


class Stacked:
    """Networks ``keys`` of one :class:`~evohpo.algos.group.Shape` of a group, run on the chunks
    of a round: chunk ``c`` on the networks of its member (``gidx``: each round member's place
    in the group)."""

    def __init__(self, shape: Shape, target: bool, chunks: Chunks, gidx: list[int],
                 keys: list[Net] | None = None):
        self.keys = keys if keys is not None else shape.keys
        self.c = len(chunks.owners)
        self.run_on = shape.stack(target)
        g = len(shape.keys)
        pos = [shape.keys.index(k) for k in self.keys]
        if not (chunks.one_each and gidx == list(range(shape.m)) and pos == list(range(g))):
            # each chunk's copy of its member's weights (their gradients sum back)
            dev = chunks.owner.device
            owner = torch.tensor(gidx, device=dev)[chunks.owner]
            idx = owner[:, None] * g + torch.tensor(pos, device=dev)
            self.run_on = self.run_on.take(idx.reshape(-1))

    def run(self, shared: torch.Tensor | None = None,
            inputs: Callable[[str, int], torch.Tensor] | None = None) -> dict[Net, torch.Tensor]:
        """Per key ``[C, B, out]``; inputs ``shared`` (``[C, B, in]``, read by all of them), or
        per key from ``inputs``."""
        c, g = self.c, len(self.keys)
        if shared is not None:
            y = self.run_on.shared(shared)
        else:
            assert inputs is not None
            x = torch.stack([inputs(agent, k) for agent, k in self.keys], dim=1)  # [C, G, B, in]
            y = self.run_on(x.reshape(c * g, *x.shape[2:]))
        y = y.contiguous().reshape(c, g, *y.shape[1:])
        return {key: y[:, i] for i, key in enumerate(self.keys)}


def _run(group: Group, kind: str, target: bool, chunks: Chunks, gidx: list[int],
         first_only: bool = False, **inputs: Any) -> dict[Net, torch.Tensor]:
    """Every network of ``kind`` (``first_only``: each agent's first critic) on the chunks."""
    out: dict[Net, torch.Tensor] = {}
    for sh in group.shapes[kind]:
        keys = [key for key in sh.keys if key[1] == 0] if first_only else sh.keys
        if keys:
            out.update(Stacked(sh, target, chunks, gidx, keys).run(**inputs))
    return out


def _step(group: Group, kind: str, losses: torch.Tensor, members: list[int],
          max_norm: float | None) -> None:
    """One backward pass of the losses into the stacks of ``kind``; each optimizer's gradients
    (a member's, for one learner, over its networks of that agent) clipped to ``max_norm`` on
    their own, then an Adam step of the rows of ``members`` (group indices)."""
    shapes = group.shapes[kind]
    grads = torch.autograd.grad(losses.sum(), [w for sh in shapes for w in sh.w])
    flat = []
    for sh in shapes:
        flat.append(sh.flat_grad(grads[:len(sh.w)]))
        grads = grads[len(sh.w):]
    if max_norm is not None:
        sq = torch.zeros(group.size * len(group.learners), device=losses.device,
                         dtype=losses.dtype)
        for sh, g in zip(shapes, flat, strict=True):
            sq.index_add_(0, sh.owner, (g * g).sum(1))
        coef = torch.clamp(max_norm / (sq.sqrt() + 1e-6), max=1.0)
        for sh, g in zip(shapes, flat, strict=True):
            g.mul_(coef[sh.owner][:, None])
    everyone = len(members) == group.size
    for sh, g in zip(shapes, flat, strict=True):
        sh.adam(g, group.lr(sh), None if everyone else group.rows(sh, members))


def _polyak(group: Group, members: list[int]) -> None:
    """The targets of ``members`` (group indices) toward their networks, each with its tau."""
    tau = torch.tensor([a.hp.tau if j in members else 0.0 for j, a in enumerate(group.algos)])
    for sh in [*group.shapes["actor"], *group.shapes["critic"]]:
        sh.polyak(tau)


def _learn_group(group: Group, algos: list[MATD3], b: Batch, rows: torch.Tensor,
                 chunks: Chunks) -> list[Metrics]:
    first = algos[0]
    gidx = [group.index[id(a)] for a in algos]
    sw, spec, agents, learners = first.sw, first.spec, first.agents, first.learners
    masks = {a: b.alive[a] * rows for a in learners}
    denoms = {a: chunks.per_member(masks[a].sum(1)).clamp(min=1.0) for a in learners}
    for algo in algos:
        algo.updates += 1
    delayed = [a.updates % sw.policy_delay == 0 for a in algos]

    # ---- critics: y_i = r_i + gamma (1 - terminated_i) min_k Q'_ik(s', a')
    with torch.no_grad():
        nxt = {a: out for (a, _), out in _run(group, "actor", True, chunks, gidx,
                                              inputs=lambda a, k: b.next_obs[a]).items()}
        noise = {a: draw(algos, chunks, spec[a].act_dim, torch.randn, 0.0)
                 for a in learners if sw.target_noise > 0}  # in agent order, as learn draws
        next_act = [target_action(spec[a], sw, nxt[a], noise.get(a)) if a in learners
                    else first._next_action(a, b) for a in agents]  # as played
        target_in = torch.cat([*(b.next_obs[a] for a in agents), *next_act], dim=2)
        q_next = _run(group, "critic", True, chunks, gidx, shared=target_in)
        y = {a: b.rewards[a] + sw.gamma * (1.0 - b.terminated[a]) * torch.stack(
            [q_next[a, k].squeeze(2) for k in range(len(first.critics[a]))]).min(0).values
            for a in learners}
    obs_all = torch.cat([b.obs[a] for a in agents], dim=2)
    act_all = [b.actions[a] for a in agents]
    critic_in = torch.cat([obs_all, *act_all], dim=2)
    q = _run(group, "critic", False, chunks, gidx, shared=critic_in)
    critic_losses = torch.stack([chunks.per_member(torch.stack([
        (masks[a] * (q[a, k].squeeze(2) - y[a]).pow(2)).sum(1)
        for k in range(len(first.critics[a]))]).sum(0)) / denoms[a]
        for a in learners], dim=1)  # [M, learners]
    _step(group, "critic", critic_losses, gidx, sw.max_grad_norm)
    metrics: list[Metrics] = [
        {f"critic_loss/{a}": v for a, v in zip(learners, vals, strict=True)}
        for vals in critic_losses.detach().tolist()]

    # ---- actors, of the members whose policy delay comes round (on the updated critics)
    act = [j for j, d in enumerate(delayed) if d]
    if act:
        sub_algos = [algos[j] for j in act]
        if len(act) < len(algos):
            keep = torch.tensor([c for c, j in enumerate(chunks.owners) if j in act],
                                device=rows.device)
            b, rows, chunks = select(b, rows, chunks, act)
            masks = {a: masks[a].index_select(0, keep) for a in learners}
            denoms = {a: denoms[a][act] for a in learners}
            obs_all = obs_all.index_select(0, keep)
            act_all = [t.index_select(0, keep) for t in act_all]
        sub_gidx = [gidx[j] for j in act]
        losses = _actor_losses(group, sub_algos, sub_gidx, b, chunks, masks, denoms, obs_all,
                               act_all)
        _step(group, "actor", losses, sub_gidx, sw.max_grad_norm)
        _polyak(group, sub_gidx)
        for j, vals in zip(act, losses.detach().tolist(), strict=True):
            algos[j].actor_version += 1
            metrics[j].update({f"actor_loss/{a}": v for a, v in zip(learners, vals, strict=True)})
    return metrics


def _actor_losses(group: Group, algos: list[MATD3], gidx: list[int], b: Batch, chunks: Chunks,
                  masks: dict[str, torch.Tensor], denoms: dict[str, torch.Tensor],
                  obs_all: torch.Tensor, act_all: list[torch.Tensor]) -> torch.Tensor:
    """``[M, learners]``: -Q_i1 of each learner's own differentiable action, the others' from
    the batch, plus the penalty on raw outputs (:meth:`MATD3.actor_loss`)."""
    first = algos[0]
    sw, spec, agents, learners = first.sw, first.spec, first.agents, first.learners
    raw = {a: out for (a, _), out in _run(group, "actor", False, chunks, gidx,
                                          inputs=lambda a, k: b.obs[a]).items()}
    # the Gumbel draws in learner order, as learn draws them
    acts = {a: train_action(spec[a], sw, raw[a], draw(
        algos, chunks, spec[a].act_dim, torch.rand, 0.5) if spec[a].discrete else None)
        for a in learners}
    joints = {}
    for a in learners:
        i = agents.index(a)
        joints[a] = torch.cat([obs_all, *act_all[:i], acts[a], *act_all[i + 1:]], dim=2)
    q = _run(group, "critic", False, chunks, gidx, first_only=True,
             inputs=lambda a, k: joints[a])
    return torch.stack([chunks.per_member(
        -(masks[a] * q[a, 0].squeeze(2)).sum(1)
        + sw.action_reg * (masks[a] * raw[a].pow(2).mean(2)).sum(1)) / denoms[a]
        for a in learners], dim=1)
