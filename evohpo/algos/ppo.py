"""IPPO and MAPPO: PPO per agent, with decentralised actors and a critic per agent.

IPPO: de Witt et al. 2020, "Is Independent Learning All You Need in the StarCraft Multi-Agent
Challenge?", https://arxiv.org/abs/2011.09533 (each critic sees its own agent's observation).
MAPPO: Yu et al. 2022, "The Surprising Effectiveness of PPO in Cooperative Multi-Agent Games",
https://arxiv.org/abs/2103.01955 (each critic sees every agent's observation).

Per agent: a clipped-surrogate actor with an entropy bonus, a critic with clipped value loss on
returns normalised by running statistics (:class:`~evohpo.algos.onpolicy.ValueNorm`), GAE over
the member's own rollout, advantages normalised per rollout, ``epochs`` passes of
``minibatches`` minibatches, gradients clipped per network. MAPPO is this class with
``centralised`` on (``switches.ON_POLICY``). The actions' distributions are
:mod:`evohpo.algos.onpolicy`'s.

With ``share``, agents of one kind hold one actor and one critic (:mod:`evohpo.algos.sharing`),
learn them in one forward pass over their rows, and share one log-std and one value normaliser.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import torch

from evohpo.algos import arch_mutations, optim, ppo_state, sharing
from evohpo.algos.actors import PerAgent
from evohpo.algos.base import Actions, OnPolicyHyperparams
from evohpo.algos.explore import Part
from evohpo.algos.networks import MLP
from evohpo.algos.onpolicy import (
    Rollout,
    ValueNorm,
    entropy,
    gae,
    log_prob,
    sample,
    surrogate,
    value_loss,
)
from evohpo.algos.sharing import bias, follow, group_forward, tie
from evohpo.algos.surgery import Edit
from evohpo.algos.switches import OnPolicySwitches
from evohpo.config import ArchSpace
from evohpo.envs.spec import EnvSpec
from evohpo.evolve.lineage import MutationRecord

INIT_LOG_STD = -0.5  # the pre-squash std a continuous policy starts with: about 0.6


class PPO(PerAgent):
    on_policy = True
    PER_AGENT = ("arch", "actors", "critics", "log_std", "actor_opts", "std_opts", "critic_opts",
                 "value_norms")

    def __init__(self, spec: EnvSpec, hp: OnPolicyHyperparams, sw: OnPolicySwitches,
                 hidden: list[int], activation: str, seed: int,
                 device: torch.device | str = "cpu", arch: dict[str, dict[str, Any]] | None = None):
        """``arch`` (as :meth:`arch` returns it) gives each agent its own shapes, not ``hidden``."""
        self.spec, self.hp, self.sw = spec, hp, sw
        self.agents = spec.agents
        self.learners: tuple[str, ...] = spec.agents  # the agents it trains
        self._groups = sharing.groups(spec, sw.share)
        self.group = {a: g for g in self._groups for a in g}  # agent -> the agents it shares with
        self.device = torch.device(device)
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(seed)
        if arch is None:
            arch = {a: {"actor": list(hidden), "critic": list(hidden), "activation": activation}
                    for a in self.agents}
        self.actor_targets: dict[str, MLP] = {}   # none: architecture mutations have none to
        self.critic_targets: dict[str, list[MLP]] = {}  # follow
        self._build_networks(arch, torch.Generator().manual_seed(seed))
        self.value_norms = {a: ValueNorm() for a in self.agents}
        for a, g in self.group.items():  # one normaliser per group: one critic learns its returns
            self.value_norms[a] = self.value_norms[g[0]]
        self.updates = 0  # rollouts learned from
        self.actor_version = 0

    # ------------------------------------------------------------------ construction helpers
    def groups(self) -> list[tuple[str, ...]]:
        """The agents that share networks (:func:`evohpo.algos.sharing.groups`), in env order."""
        return self._groups

    def leads(self, agent: str) -> bool:
        """Whether ``agent``'s networks are its own (alone, or the first of its group)."""
        return self.group[agent][0] == agent

    def leaders(self) -> list[str]:
        """The learners whose networks architecture mutations may change (the others follow)."""
        return [a for a in self.learners if self.leads(a)]

    def _own_params(self, agent: str, net: MLP) -> list[torch.Tensor]:
        """What ``agent``'s optimizer steps of ``net``: all of it, or a follower's bias."""
        return list(net.parameters()) if self.leads(agent) else [bias(net)]

    def critic_in(self, agent: str) -> int:
        spec = self.spec
        return (sum(spec[a].obs_dim for a in self.agents) if self.sw.centralised
                else spec[agent].obs_dim)

    def _build_networks(self, arch: dict[str, dict[str, Any]], init_gen: torch.Generator) -> None:
        spec = self.spec
        self.actors = {a: MLP(spec[a].obs_dim, spec[a].act_dim, arch[a]["actor"],
                              arch[a]["activation"], init_gen, out_scale=0.01).to(self.device)
                       for a in self.agents}
        self.critics = {a: [MLP(self.critic_in(a), 1, arch[a]["critic"], arch[a]["activation"],
                                init_gen, out_scale=None).to(self.device)]
                        for a in self.agents}
        self.log_std = {a: torch.full((spec[a].act_dim,), INIT_LOG_STD, device=self.device,
                                      requires_grad=True)
                        for a in self.agents if not spec[a].discrete and self.leads(a)}
        for a, g in self.group.items():
            if a != g[0]:
                tie(self.actors[a], self.actors[g[0]])
                tie(self.critics[a][0], self.critics[g[0]][0])
                if g[0] in self.log_std:
                    self.log_std[a] = self.log_std[g[0]]
        self.make_optimizers()

    def make_optimizers(self) -> None:
        dev = self.device
        self.actor_opts = {a: optim.adam(self._own_params(a, self.actors[a]), self.hp.lr_actor, dev)
                           for a in self.agents}
        self.std_opts = {a: optim.adam([p], self.hp.lr_actor, dev) for a, p in self.log_std.items()
                         if self.leads(a)}
        self.critic_opts = {a: optim.adam(self._own_params(a, self.critics[a][0]),
                                          self.hp.lr_critic, dev)
                            for a in self.agents}

    def set_hyperparams(self, **changes: Any) -> None:
        """Change hyperparameters; learning rates change in the optimizers in place."""
        self.hp = dataclasses.replace(self.hp, **changes)
        for opts, lr in ((self.actor_opts, self.hp.lr_actor), (self.std_opts, self.hp.lr_actor),
                         (self.critic_opts, self.hp.lr_critic)):
            for opt in opts.values():
                for g in opt.param_groups:
                    g["lr"] = lr

    # ------------------------------------------------------------------ acting
    def act(self, obs: dict[str, np.ndarray], rng: np.random.Generator | None,
            done: np.ndarray | None = None) -> Actions:
        """Actions sampled from the policy (``rng``), or its deterministic actions (None)."""
        outs = {a: self.policy_output(a, obs[a]) for a in self.agents}
        n = next(iter(outs.values())).shape[0]
        return sample(self.spec, outs, [Part(self, rng, slice(0, n), done)])

    def std(self, agent: str) -> np.ndarray:
        cache = self.__dict__.get("_std")
        if cache is None or cache[0] != self.actor_version:
            with torch.no_grad():
                cache = (self.actor_version, {a: torch.exp(p).float().cpu().numpy()
                                              for a, p in self.log_std.items()})
            self.__dict__["_std"] = cache
        return cache[1][agent]

    def noise(self, agent: str, n: int, dim: int, rng: np.random.Generator,
              done: np.ndarray | None) -> np.ndarray:
        """Its exploration is its policy's own sampling (:meth:`std`): no added noise."""
        return np.zeros((n, dim), np.float32)

    def learn(self, batch: Any) -> dict[str, float]:
        raise TypeError("an on-policy learner learns from its own rollouts (learn_rollout), "
                        "not from replayed batches")

    # ------------------------------------------------------------------ learning
    def _critic_inputs(self, obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Each learner's critic input: its observation, or (MAPPO) every agent's, joined once."""
        if self.sw.centralised:
            joint = torch.cat([obs[a] for a in self.agents], dim=-1)
            return {a: joint for a in self.learners}
        return {a: obs[a] for a in self.learners}

    def learning_groups(self) -> list[tuple[str, ...]]:
        """The learners by the networks they share (each alone without ``share``)."""
        groups = (tuple(a for a in g if a in self.learners) for g in self._groups)
        return [g for g in groups if g]

    def learn_rollout(self, ro: Rollout) -> dict[str, float]:
        """PPO on one rollout: GAE, then ``epochs`` passes of ``minibatches`` minibatches, every
        learner's actor and critic in one backward pass per minibatch."""
        hp, sw, dev = self.hp, self.sw, self.device
        T, k = ro.done.shape
        n = T * k

        def flat(x: np.ndarray) -> torch.Tensor:
            t = torch.as_tensor(np.asarray(x, np.float32), device=dev)
            return t.reshape(n, *t.shape[2:])

        obs = {a: flat(ro.obs[a]) for a in self.agents}
        nxt = {a: flat(ro.next_obs[a]) for a in self.agents}
        done = flat(ro.done).reshape(T, k)
        cin, cin_next = self._critic_inputs(obs), self._critic_inputs(nxt)
        groups = self.learning_groups()
        data: dict[str, dict[str, torch.Tensor]] = {}
        with torch.no_grad():
            for g in groups:
                norm = self.value_norms[g[0]]  # one per group
                for a in g:
                    critic = self.critics[a][0]
                    v_raw = critic(cin[a]).reshape(T, k)
                    v = norm.denormalize(v_raw)
                    vn = norm.denormalize(critic(cin_next[a]).reshape(T, k))
                    adv, ret = gae(flat(ro.rewards[a]).reshape(T, k), v, vn,
                                   flat(ro.terminated[a]).reshape(T, k), done, sw.gamma,
                                   hp.gae_lambda)
                    mask = flat(ro.alive[a])
                    adv = adv.reshape(n)
                    alive = mask > 0
                    if int(alive.sum()) > 1:
                        sel = adv[alive]
                        adv = (adv - sel.mean()) / (sel.std() + 1e-8)
                    act = flat(ro.actions[a])
                    out = self.actors[a](obs[a])
                    data[a] = {"adv": adv, "ret": ret.reshape(n), "v_old": v_raw.reshape(n),
                               "mask": mask, "act": act, "x": cin[a],
                               "logp_old": log_prob(self.spec[a], out, self.log_std.get(a), act)}
                # the critic learns returns normalised by every one seen so far (its group's)
                norm.update(torch.cat([data[a]["ret"][data[a]["mask"] > 0] for a in g]))
                for a in g:
                    data[a]["ret"] = norm.normalize(data[a]["ret"])
        opts: list[torch.optim.Optimizer] = []
        for a in self.learners:
            opts += [self.actor_opts[a], *([self.std_opts[a]] if a in self.std_opts else []),
                     self.critic_opts[a]]
        params = [p for opt in opts for p in opt.param_groups[0]["params"]]
        size = math.ceil(n / max(1, min(hp.minibatches, n)))
        sums = {f"{kind}/{a}": 0.0 for a in self.learners
                for kind in ("actor_loss", "critic_loss", "entropy")}
        steps = 0
        for _ in range(hp.epochs):
            perm = torch.randperm(n, generator=self.gen, device=dev)
            for idx in perm.split(size):
                losses = []
                for g in groups:
                    outs = group_forward([self.actors[a] for a in g], [obs[a][idx] for a in g])
                    vs = group_forward([self.critics[a][0] for a in g],
                                       [data[a]["x"][idx] for a in g])
                    for a, out, v in zip(g, outs, vs, strict=True):
                        la, lc, ent = self._losses(a, out, v.squeeze(-1), data[a], idx)
                        losses += [la, lc]
                        sums[f"actor_loss/{a}"] += float(la.detach())
                        sums[f"critic_loss/{a}"] += float(lc.detach())
                        sums[f"entropy/{a}"] += float(ent)
                grads = torch.autograd.grad(torch.stack(losses).sum(), params, allow_unused=True)
                optim.step(opts, grads, sw.max_grad_norm)
                steps += 1
        self.updates += 1
        self.actor_version += 1
        return {key: v / max(steps, 1) for key, v in sums.items()}

    def _losses(self, a: str, out: torch.Tensor, v: torch.Tensor, d: dict[str, torch.Tensor],
                idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Agent ``a``'s clipped-surrogate actor loss (entropy bonus included), clipped value
        loss, and mean entropy, on the rows ``idx`` (its actor's output ``out``, its critic's
        ``v``)."""
        c, s = self.hp.clip, self.spec[a]
        mask = d["mask"][idx]
        denom = mask.sum().clamp(min=1.0)
        log_std = self.log_std.get(a)
        surr = surrogate(log_prob(s, out, log_std, d["act"][idx]), d["logp_old"][idx],
                         d["adv"][idx], c)
        ent = entropy(s, out, log_std)
        actor_loss = -(mask * (surr + self.hp.ent_coef * ent)).sum() / denom
        critic_loss = (mask * value_loss(v, d["v_old"][idx], d["ret"][idx], c)).sum() / denom
        return actor_loss, critic_loss, (mask * ent).sum().detach() / denom

    # ------------------------------------------------------------------ mutation
    def mutate_architecture(self, space: ArchSpace, rng: np.random.Generator,
                            rec: MutationRecord) -> MutationRecord:
        """Add or remove a layer or nodes of one agent's actor or critic (Adam follows)."""
        return arch_mutations.mutate_architecture(self, space, rng, rec)

    def follow_edits(self, agent: str, which: str, edits: list[Edit]) -> None:
        """The agents sharing ``agent``'s edited actor or critic follow the edit
        (:func:`evohpo.algos.sharing.follow`)."""
        (edit,) = edits
        for f in self.group[agent][1:]:
            if which == "actor":
                self.actors[f], self.actor_opts[f] = follow(
                    self.actors[f], self.actor_opts[f], self.actors[agent], edit)
            else:
                net, self.critic_opts[f] = follow(
                    self.critics[f][0], self.critic_opts[f], self.critics[agent][0], edit)
                self.critics[f] = [net]

    def mutate_activation(self, space: ArchSpace, rng: np.random.Generator,
                          rec: MutationRecord) -> MutationRecord:
        """Switch one agent's actor and critic to another activation from ``space``."""
        return arch_mutations.mutate_activation(self, space, rng, rec)

    # ------------------------------------------------------------------ state
    def arch(self) -> dict[str, Any]:
        return {a: {"actor": list(self.actors[a].hidden), "critic": list(self.critics[a][0].hidden),
                    "activation": self.actors[a].activation} for a in self.agents}

    def num_params(self) -> int:
        """Parameters, each counted once (a group's shared tensors once for the group)."""
        tensors = [*(p for n in self.actors.values() for p in n.parameters()),
                   *(p for cs in self.critics.values() for c in cs for p in c.parameters()),
                   *self.log_std.values()]
        return sum(p.numel() for p in {id(p): p for p in tensors}.values())

    def state_dict(self) -> dict[str, Any]:
        return ppo_state.state_of(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load a state; networks (and optimizers) are rebuilt first if its architecture differs."""
        ppo_state.load_state(self, state)

    @classmethod
    def from_state_dict(cls, spec: EnvSpec, sw: OnPolicySwitches, state: dict[str, Any],
                        device: torch.device | str = "cpu") -> PPO:
        algo = cls(spec, OnPolicyHyperparams(**state["hp"]), sw, [], "relu", 0, device,
                   arch=state["arch"])
        algo.load_state_dict(state)
        return algo

