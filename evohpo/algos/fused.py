"""One learning update for many members at once: :func:`learn_together`.

Members whose networks have the same shapes (and the same agents to train) form a group; a
group's actors, critics and their targets are stacked across members (and across the agents of
a member where shapes agree, :mod:`evohpo.algos.stacked`) and learn with batched products, one
backward pass per loss kind and one optimizer call per learning rate. Each member keeps its own
learning rates, tau, batch size, random stream and policy-delay phase, so its update is the one
:meth:`MATD3.learn <evohpo.algos.matd3.MATD3.learn>` makes on the same batch, up to float
rounding: same losses, same noise draws in the same order.

Members' batches differ in size: a round's rows are laid out in chunks of one width, each
chunk run on its member's networks (:mod:`evohpo.algos.chunks`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from evohpo.algos import optim
from evohpo.algos.base import Algorithm
from evohpo.algos.buffer import Batch, ReplayBuffer
from evohpo.algos.chunks import Chunks, chunk_width, draw, select
from evohpo.algos.explore import target_action, train_action
from evohpo.algos.matd3 import MATD3
from evohpo.algos.networks import MLP
from evohpo.algos.stacked import Stack, shape_key, stack

Metrics = dict[str, float]


def group_key(algo: Algorithm) -> tuple[object, ...]:
    """What members must share to learn in one group."""
    shapes = tuple((a, tuple(d["actor"]), tuple(d["critic"]), d["activation"])
                   for a, d in algo.arch().items())
    return type(algo), getattr(algo, "sw", None), algo.learners, algo.device, shapes


def learn_together(algos: Sequence[Algorithm], buffer: ReplayBuffer,
                   rngs: Sequence[np.random.Generator]) -> list[Metrics]:
    """One gradient step for each of ``algos``, on a batch of its own ``batch_size`` drawn from
    ``buffer`` with its generator in ``rngs`` (the rows :meth:`ReplayBuffer.sample` would give
    it; all in one gather). Returns each member's losses, as
    :meth:`~evohpo.algos.matd3.MATD3.learn` does."""
    sizes = [a.hp.batch_size for a in algos]
    width = chunk_width(sizes)
    batch, rows = buffer.sample_each(sizes, list(rngs), width)
    chunks = Chunks.of(sizes, width, rows.device)
    groups: dict[tuple[object, ...], list[int]] = {}
    for j, algo in enumerate(algos):
        groups.setdefault(group_key(algo), []).append(j)
    out: list[Metrics] = [{} for _ in algos]
    for members in groups.values():
        if type(algos[members[0]]) is not MATD3:  # another learner: each on its own rows
            for j in members:
                at = chunks.rows_of(j)
                one = Batch(*[None if d is None else {a: t.flatten(0, 1)[at] for a, t in d.items()}
                              for d in batch])  # type: ignore[arg-type]
                out[j] = algos[j].learn(one)
            continue
        sub = ((batch, rows, chunks) if len(members) == len(algos)
               else select(batch, rows, chunks, members))
        group = [algos[j] for j in members]
        for j, metrics in zip(members, _learn_group(group, *sub),  # type: ignore[arg-type]
                              strict=True):
            out[j] = metrics
    return out


Net = tuple[str, int]  # (agent, critic index; 0 for an actor)


class Stacked:
    """Networks ``keys`` (one shape) of every member as one stack, member-major, run on the
    chunks of a round: chunk ``c`` on its member's networks."""

    def __init__(self, algos: Sequence[MATD3], get: Callable[[MATD3, str, int], MLP],
                 keys: list[Net], leaf: bool, chunks: Chunks):
        self.m, self.keys = len(algos), keys
        self.stack: Stack = stack([get(a, agent, k) for a in algos for agent, k in keys], leaf)
        self.run_on = self.stack
        self.c = len(chunks.owners)
        if not chunks.one_each:  # each chunk's copy of its member's weights (gradients sum back)
            g = len(keys)
            idx = (chunks.owner[:, None] * g + torch.arange(g, device=chunks.owner.device))
            self.run_on = self.stack.take(idx.reshape(-1))

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

    def tensors(self) -> list[torch.Tensor]:
        return [*self.stack.weights, *self.stack.biases]


def _stacks(algos: Sequence[MATD3], keys: list[Net], get: Callable[[MATD3, str, int], MLP],
            leaf: bool, chunks: Chunks) -> list[Stacked]:
    """One :class:`Stacked` per shape among the networks ``keys`` (all members share them)."""
    by: dict[object, list[Net]] = {}
    for agent, k in keys:
        by.setdefault(shape_key(get(algos[0], agent, k)), []).append((agent, k))
    return [Stacked(algos, get, ks, leaf, chunks) for ks in by.values()]


def _run_all(stacks: list[Stacked], **inputs: Any) -> dict[Net, torch.Tensor]:
    out: dict[Net, torch.Tensor] = {}
    for st in stacks:
        out.update(st.run(**inputs))
    return out


def _step(opts: list[list[torch.optim.Optimizer]], learners: tuple[str, ...],
          stacks: list[Stacked], losses: torch.Tensor, max_norm: float | None) -> None:
    """One backward pass of every member's losses into the stacks; each optimizer's gradients
    (``opts[j][i]``: member j's for learner i, over its networks of that agent) clipped to
    ``max_norm`` on their own, then every optimizer stepped (:func:`evohpo.algos.optim.step`)."""
    leaves = [t for st in stacks for t in st.tensors()]
    grads = torch.autograd.grad(losses.sum(), leaves)
    n_l = len(learners)
    per: list[tuple[Stacked, list[torch.Tensor], torch.Tensor]] = []
    at = 0
    for st in stacks:
        gs, at = list(grads[at:at + len(st.tensors())]), at + len(st.tensors())
        owner = torch.tensor([j * n_l + learners.index(a) for j in range(st.m) for a, _ in st.keys],
                             device=losses.device)
        per.append((st, gs, owner))
    if max_norm is not None:
        sq = torch.zeros(len(opts) * n_l, device=losses.device)
        for _, gs, owner in per:
            net_sq = sum(g.pow(2).flatten(1).sum(1) for g in gs)
            sq.index_add_(0, owner, net_sq)  # type: ignore[arg-type]
        coef = torch.clamp(max_norm / (sq.sqrt() + 1e-6), max=1.0)
        for _, gs, owner in per:
            c = coef[owner]
            for g in gs:
                g.mul_(c.view(-1, *([1] * (g.dim() - 1))))
    # each network's gradients, by member and key, in its parameters' order
    by_net: dict[tuple[int, Net], list[torch.Tensor]] = {}
    for st, gs, _ in per:
        n_layers, g_count = len(st.stack.weights), len(st.keys)
        for j in range(st.m):
            for i, key in enumerate(st.keys):
                pos = j * g_count + i
                by_net[j, key] = [t for layer in range(n_layers) for t in (
                    gs[layer][pos], gs[n_layers + layer][pos].view(-1))]
    flat = []
    for j in range(len(opts)):
        for a in learners:
            k = 0
            while (j, (a, k)) in by_net:
                flat += by_net[j, (a, k)]
                k += 1
    optim.step([o for row in opts for o in row], flat, None)


def _learn_group(algos: list[MATD3], b: Batch, rows: torch.Tensor,
                 chunks: Chunks) -> list[Metrics]:
    first = algos[0]
    sw, spec, agents, learners = first.sw, first.spec, first.agents, first.learners
    masks = {a: b.alive[a] * rows for a in learners}
    denoms = {a: chunks.per_member(masks[a].sum(1)).clamp(min=1.0) for a in learners}
    for algo in algos:
        algo.updates += 1
    delayed = [a.updates % sw.policy_delay == 0 for a in algos]

    # ---- critics: y_i = r_i + gamma (1 - terminated_i) min_k Q'_ik(s', a')
    crit_keys = [(a, k) for a in learners for k in range(len(first.critics[a]))]
    with torch.no_grad():
        tgt_actors = _stacks(algos, [(a, 0) for a in learners],
                             lambda al, a, k: al.actor_targets[a], False, chunks)
        nxt = {a: out for (a, _), out in
               _run_all(tgt_actors, inputs=lambda a, k: b.next_obs[a]).items()}
        noise = {a: draw(algos, chunks, spec[a].act_dim, torch.randn, 0.0)
                 for a in learners if sw.target_noise > 0}  # in agent order, as learn draws
        next_act = [target_action(spec[a], sw, nxt[a], noise.get(a)) if a in learners
                    else first._next_action(a, b) for a in agents]  # as played
        target_in = torch.cat([*(b.next_obs[a] for a in agents), *next_act], dim=2)
        q_next = _run_all(_stacks(algos, crit_keys, lambda al, a, k: al.critic_targets[a][k],
                                  False, chunks), shared=target_in)
        y = {a: b.rewards[a] + sw.gamma * (1.0 - b.terminated[a]) * torch.stack(
            [q_next[a, k].squeeze(2) for k in range(len(first.critics[a]))]).min(0).values
            for a in learners}
    obs_all = torch.cat([b.obs[a] for a in agents], dim=2)
    act_all = [b.actions[a] for a in agents]
    critic_in = torch.cat([obs_all, *act_all], dim=2)
    critics = _stacks(algos, crit_keys, lambda al, a, k: al.critics[a][k], True, chunks)
    q = _run_all(critics, shared=critic_in)
    critic_losses = torch.stack([chunks.per_member(torch.stack([
        (masks[a] * (q[a, k].squeeze(2) - y[a]).pow(2)).sum(1)
        for k in range(len(first.critics[a]))]).sum(0)) / denoms[a]
        for a in learners], dim=1)  # [M, learners]
    _step([[al.critic_opts[a] for a in learners] for al in algos], learners, critics,
          critic_losses, sw.max_grad_norm)
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
        actors, losses = _actor_losses(sub_algos, b, chunks, masks, denoms, obs_all, act_all)
        _step([[al.actor_opts[a] for a in learners] for al in sub_algos], learners, actors,
              losses, sw.max_grad_norm)
        _polyak(sub_algos)
        for j, vals in zip(act, losses.detach().tolist(), strict=True):
            algos[j].actor_version += 1
            metrics[j].update({f"actor_loss/{a}": v for a, v in zip(learners, vals, strict=True)})
    return metrics


def _actor_losses(algos: list[MATD3], b: Batch, chunks: Chunks,
                  masks: dict[str, torch.Tensor], denoms: dict[str, torch.Tensor],
                  obs_all: torch.Tensor,
                  act_all: list[torch.Tensor]) -> tuple[list[Stacked], torch.Tensor]:
    """The actors' stacks, and ``[M, learners]``: -Q_i1 of each learner's own differentiable
    action, the others' from the batch, plus the penalty on raw outputs
    (:meth:`MATD3.actor_loss`)."""
    first = algos[0]
    sw, spec, agents, learners = first.sw, first.spec, first.agents, first.learners
    actors = _stacks(algos, [(a, 0) for a in learners], lambda al, a, k: al.actors[a], True,
                     chunks)
    raw = {a: out for (a, _), out in _run_all(actors, inputs=lambda a, k: b.obs[a]).items()}
    # the Gumbel draws in learner order, as learn draws them
    acts = {a: train_action(spec[a], sw, raw[a], draw(
        algos, chunks, spec[a].act_dim, torch.rand, 0.5) if spec[a].discrete else None)
        for a in learners}
    joints = {}
    for a in learners:
        i = agents.index(a)
        joints[a] = torch.cat([obs_all, *act_all[:i], acts[a], *act_all[i + 1:]], dim=2)
    q = _run_all(_stacks(algos, [(a, 0) for a in learners],
                         lambda al, a, k: al.critics[a][0], False, chunks),
                 inputs=lambda a, k: joints[a])
    return actors, torch.stack([chunks.per_member(
        -(masks[a] * q[a, 0].squeeze(2)).sum(1)
        + sw.action_reg * (masks[a] * raw[a].pow(2).mean(2)).sum(1)) / denoms[a]
        for a in learners], dim=1)


def _polyak(algos: list[MATD3]) -> None:
    """Every member's targets toward its networks, each with its own tau, in one call."""
    online: list[torch.Tensor] = []
    target: list[torch.Tensor] = []
    taus: list[float] = []
    for algo in algos:
        on, tg = algo._target_pairs()
        online += on
        target += tg
        taus += [algo.hp.tau] * len(on)
    with torch.no_grad():
        torch._foreach_lerp_(target, online, taus)
