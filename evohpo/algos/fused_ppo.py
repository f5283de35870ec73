"""One PPO update for many members at once: :class:`RolloutLearner`.

On-policy members whose networks have the same shapes, and whose updates have the same shape
(the same rollout size, ``epochs`` and ``minibatches``), learn as one group: their actors,
critics and log-stds are stacked across members (and across a member's agents where shapes
agree) in a :class:`~evohpo.algos.group.Group` with :class:`PPOLayout`, kept between updates as
the off-policy learner keeps its own (:mod:`evohpo.algos.fused`), and every minibatch is one
batched product per layer, one backward pass, and Adam on the stacks.

Each member's update is the one :meth:`PPO.learn_rollout <evohpo.algos.ppo.PPO.learn_rollout>`
makes on its rollout, up to float rounding: its own GAE, advantage normalisation and value
normaliser (:meth:`PPO.prepare <evohpo.algos.ppo.PPO.prepare>`, member by member), its own
permutations drawn from its own generator epoch by epoch, its own clip, entropy coefficient and
learning rates, each optimizer's gradients clipped on their own. Members that share networks
between agents (``algo.share``), and members whose update has a shape of its own, learn alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from evohpo.algos.fused import group_key
from evohpo.algos.group import Group, Layout, Net
from evohpo.algos.onpolicy import OnPolicy, Prepared, Rollout, minibatch_size, ppo_losses
from evohpo.algos.ppo import PPO

Metrics = dict[str, float]
STATS = ("actor_loss", "critic_loss", "entropy")  # what learn_rollout returns per learner


class PPOLayout(Layout):
    """What a group stacks of a PPO learner: per learner its actor, its critic and (a continuous
    agent's) log-std, each with its own optimizer; no targets."""

    kinds = ("actor", "critic", "std")
    targets = False

    def keys(self, algo: Any, kind: str) -> list[Net]:
        return [(a, 0) for a in algo.learners if kind != "std" or a in algo.log_std]

    def tensors(self, algo: Any, kind: str, net: Net, target: bool = False) -> list[torch.Tensor]:
        a = net[0]
        if kind == "std":
            return [algo.log_std[a]]
        return list((algo.actors[a] if kind == "actor" else algo.critics[a][0]).parameters())

    def activation(self, algo: Any, kind: str, net: Net) -> str:
        a = net[0]
        return "" if kind == "std" else str(
            (algo.actors[a] if kind == "actor" else algo.critics[a][0]).activation)

    def objects(self, algo: Any, agent: str) -> list[object]:
        opts = [algo.actor_opts[agent], algo.critic_opts[agent],
                *([algo.std_opts[agent]] if agent in algo.std_opts else [])]
        return [algo.actors[agent], algo.critics[agent][0], algo.log_std.get(agent),
                *opts, *(o.state for o in opts)]


PPO_LAYOUT = PPOLayout()


def rollout_key(algo: OnPolicy, rollout: Rollout) -> tuple[object, ...] | None:
    """What members must share to learn in one group; None for a member that learns alone."""
    if type(algo) is not PPO or algo.sw.share:
        return None
    hp = algo.hp
    return (*group_key(algo), hp.epochs, hp.minibatches, rollout.done.shape)


class RolloutLearner:
    """Learns on-policy members' rollouts, members of one key together, keeping each group's
    stacks from one update to the next (a runtime holds one)."""

    def __init__(self) -> None:
        self.groups: dict[tuple[object, ...], Group] = {}
        self.formed = 0  # groups formed so far

    def learn(self, algos: Sequence[OnPolicy], rollouts: Sequence[Rollout],
              population: Sequence[object] | None = None) -> list[Metrics]:
        """Each of ``algos`` learns on its rollout; returns each one's metrics, as
        ``learn_rollout`` does. Groups holding a member not in ``population`` (default:
        ``algos``) are let go."""
        keys = [rollout_key(a, ro) for a, ro in zip(algos, rollouts, strict=True)]
        out: list[Metrics] = [{} for _ in algos]
        for key in dict.fromkeys(keys):
            members = [j for j, k in enumerate(keys) if k == key]
            if key is None or len(members) == 1:
                for j in members:
                    out[j] = algos[j].learn_rollout(rollouts[j])
                continue
            mine = [algos[j] for j in members]
            group = self.groups.get(key)
            if group is None or not group.holds(mine):
                group = self.groups[key] = Group(mine, PPO_LAYOUT)
                self.formed += 1
            preps = [algos[j].prepare(rollouts[j]) for j in members]  # type: ignore[attr-defined]
            for j, metrics in zip(members, _learn_group(group, preps), strict=True):
                out[j] = metrics
        live = {id(a) for a in (algos if population is None else population)}
        self.groups = {k: g for k, g in self.groups.items()
                       if all(id(a) in live for a in g.algos)}
        return out


def _run(group: Group, kind: str, inputs: dict[str, torch.Tensor],
         shared: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """Every learner's network of ``kind`` on its ``[M, B, in]`` input (``shared``: one input
    that all of them read); ``[M, B, out]`` per agent."""
    out: dict[str, torch.Tensor] = {}
    for sh in group.shapes[kind]:
        net, g = sh.stack(False), len(sh.keys)
        if shared is not None:
            y = net.shared(shared)
        else:
            x = torch.stack([inputs[a] for a, _ in sh.keys], dim=1)  # [M, G, B, in]
            y = net(x.reshape(-1, *x.shape[2:]))
        y = y.reshape(sh.m, g, *y.shape[1:])
        out.update({a: y[:, i] for i, (a, _) in enumerate(sh.keys)})
    return out


def _learn_group(group: Group, preps: list[Prepared]) -> list[Metrics]:
    algos: list[PPO] = group.algos
    first = algos[0]
    spec, learners, dev, hp = first.spec, first.learners, first.device, first.hp
    n, m = preps[0].n, len(algos)
    obs = {a: torch.stack([p.obs[a] for p in preps]) for a in learners}
    data = {a: {key: torch.stack([p.data[a][key] for p in preps])
                for key in preps[0].data[a] if key != "x"} for a in learners}
    # MAPPO: every learner's critic reads the joint observation, once per member
    joint = torch.stack([p.data[learners[0]]["x"] for p in preps]) if first.sw.centralised \
        else None
    dtype = data[learners[0]]["adv"].dtype
    clip, ent_coef = (torch.tensor([getattr(a.hp, f) for a in algos], dtype=dtype,
                                   device=dev)[:, None] for f in ("clip", "ent_coef"))
    ws = [w for kind in PPO_LAYOUT.kinds for sh in group.shapes[kind] for w in sh.w]
    rows, everyone = torch.arange(m, device=dev)[:, None], list(range(m))
    stats: list[torch.Tensor] = []
    for _ in range(hp.epochs):
        # each member's permutation from its own generator, epoch by epoch as learn_rollout
        perm = torch.stack([torch.randperm(n, generator=a.gen, device=dev) for a in algos])
        for idx in perm.split(minibatch_size(n, hp.minibatches), dim=1):
            mine = {a: obs[a][rows, idx] for a in learners}
            outs = _run(group, "actor", mine)
            vs = _run(group, "critic", mine, None if joint is None else joint[rows, idx])
            log_std = {a: sh.w[0].reshape(m, len(sh.keys), -1)[:, i, None]
                       for sh in group.shapes["std"] for i, (a, _) in enumerate(sh.keys)}
            losses, step = [], []
            for a in learners:
                d = {key: t[rows, idx] for key, t in data[a].items()}
                la, lc, ent = ppo_losses(spec[a], outs[a], vs[a].squeeze(-1), log_std.get(a),
                                         d, clip, ent_coef)
                losses += [la, lc]
                step.append(torch.stack([la.detach(), lc.detach(), ent]))
            grads = torch.autograd.grad(torch.stack(losses).sum(), ws)
            for kind in PPO_LAYOUT.kinds:
                count = sum(len(sh.w) for sh in group.shapes[kind])
                if count:
                    group.step(kind, grads[:count], everyone, first.sw.max_grad_norm)
                grads = grads[count:]
            stats.append(torch.stack(step))  # [learners, 3, M]
    for algo in algos:
        algo.updates += 1
        algo.actor_version += 1
    got = torch.stack(stats).tolist()  # [steps][learners][3][M], summed as learn_rollout sums
    out: list[Metrics] = []
    for j in range(m):
        sums = {f"{kind}/{a}": 0.0 for a in learners for kind in STATS}
        for s in got:
            for i, a in enumerate(learners):
                for q, kind in enumerate(STATS):
                    sums[f"{kind}/{a}"] += s[i][q][j]
        out.append({key: v / max(len(got), 1) for key, v in sums.items()})
    return out
