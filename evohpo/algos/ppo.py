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
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

import numpy as np
import torch

from evohpo.algos import arch_mutations, optim
from evohpo.algos.actors import PerAgent
from evohpo.algos.base import Actions, OnPolicyHyperparams
from evohpo.algos.explore import Part
from evohpo.algos.generators import generator_state
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
        self.updates = 0  # rollouts learned from
        self.actor_version = 0

    # ------------------------------------------------------------------ construction helpers
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
                        for a in self.agents if not spec[a].discrete}
        self.make_optimizers()

    def make_optimizers(self) -> None:
        dev = self.device
        self.actor_opts = {a: optim.adam(self.actors[a].parameters(), self.hp.lr_actor, dev)
                           for a in self.agents}
        self.std_opts = {a: optim.adam([p], self.hp.lr_actor, dev) for a, p in self.log_std.items()}
        self.critic_opts = {a: optim.adam(self.critics[a][0].parameters(), self.hp.lr_critic, dev)
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
        data: dict[str, dict[str, torch.Tensor]] = {}
        with torch.no_grad():
            for a in self.learners:
                norm = self.value_norms[a]
                critic = self.critics[a][0]
                v_raw = critic(cin[a]).reshape(T, k)
                v = norm.denormalize(v_raw)
                vn = norm.denormalize(critic(cin_next[a]).reshape(T, k))
                adv, ret = gae(flat(ro.rewards[a]).reshape(T, k), v, vn,
                               flat(ro.terminated[a]).reshape(T, k), done, sw.gamma,
                               hp.gae_lambda)
                mask = flat(ro.alive[a])
                alive = mask > 0
                ret = ret.reshape(n)
                norm.update(ret[alive])  # the critic learns returns normalised by all seen so far
                ret = norm.normalize(ret)
                adv = adv.reshape(n)
                if int(alive.sum()) > 1:
                    sel = adv[alive]
                    adv = (adv - sel.mean()) / (sel.std() + 1e-8)
                act = flat(ro.actions[a])
                out = self.actors[a](obs[a])
                data[a] = {"adv": adv, "ret": ret, "v_old": v_raw.reshape(n), "mask": mask,
                           "act": act, "x": cin[a], "logp_old": log_prob(self.spec[a], out,
                                                                         self.log_std.get(a), act)}
        opts: list[torch.optim.Optimizer] = []
        for a in self.learners:
            opts += [self.actor_opts[a], *([self.std_opts[a]] if a in self.log_std else []),
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
                for a in self.learners:
                    la, lc, ent = self._losses(a, obs, data[a], idx)
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

    def _losses(self, a: str, obs: dict[str, torch.Tensor], d: dict[str, torch.Tensor],
                idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Agent ``a``'s clipped-surrogate actor loss (entropy bonus included), clipped value
        loss, and mean entropy, on the rows ``idx``."""
        c, s = self.hp.clip, self.spec[a]
        mask = d["mask"][idx]
        denom = mask.sum().clamp(min=1.0)
        out = self.actors[a](obs[a][idx])
        log_std = self.log_std.get(a)
        surr = surrogate(log_prob(s, out, log_std, d["act"][idx]), d["logp_old"][idx],
                         d["adv"][idx], c)
        ent = entropy(s, out, log_std)
        actor_loss = -(mask * (surr + self.hp.ent_coef * ent)).sum() / denom
        v = self.critics[a][0](d["x"][idx]).squeeze(-1)
        critic_loss = (mask * value_loss(v, d["v_old"][idx], d["ret"][idx], c)).sum() / denom
        return actor_loss, critic_loss, (mask * ent).sum().detach() / denom

    # ------------------------------------------------------------------ mutation
    def mutate_architecture(self, space: ArchSpace, rng: np.random.Generator,
                            rec: MutationRecord) -> MutationRecord:
        """Add or remove a layer or nodes of one agent's actor or critic (Adam follows)."""
        return arch_mutations.mutate_architecture(self, space, rng, rec)

    def mutate_activation(self, space: ArchSpace, rng: np.random.Generator,
                          rec: MutationRecord) -> MutationRecord:
        """Switch one agent's actor and critic to another activation from ``space``."""
        return arch_mutations.mutate_activation(self, space, rng, rec)

    # ------------------------------------------------------------------ state
    def arch(self) -> dict[str, Any]:
        return {a: {"actor": list(self.actors[a].hidden), "critic": list(self.critics[a][0].hidden),
                    "activation": self.actors[a].activation} for a in self.agents}

    def num_params(self) -> int:
        return (sum(n.num_params() for n in self.actors.values())
                + sum(c.num_params() for cs in self.critics.values() for c in cs)
                + sum(p.numel() for p in self.log_std.values()))

    def state_dict(self) -> dict[str, Any]:
        return {
            "hp": dataclasses.asdict(self.hp),
            "arch": self.arch(),
            "actors": {a: n.state_dict() for a, n in self.actors.items()},
            "critics": {a: [c.state_dict() for c in cs] for a, cs in self.critics.items()},
            "log_std": {a: p.detach().clone() for a, p in self.log_std.items()},
            "actor_opts": {a: o.state_dict() for a, o in self.actor_opts.items()},
            "std_opts": {a: o.state_dict() for a, o in self.std_opts.items()},
            "critic_opts": {a: o.state_dict() for a, o in self.critic_opts.items()},
            "value_norms": {a: v.state_dict() for a, v in self.value_norms.items()},
            "updates": self.updates,
            "learners": list(self.learners),
            "gen": self.gen.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load a state; networks (and optimizers) are rebuilt first if its architecture differs."""
        self.hp = OnPolicyHyperparams(**state["hp"])
        if state["arch"] != self.arch():
            self._build_networks(state["arch"], torch.Generator().manual_seed(0))
        with torch.no_grad():
            for a in self.agents:
                self.actors[a].load_state_dict(state["actors"][a])
                self.critics[a][0].load_state_dict(state["critics"][a][0])
                if a in self.log_std:
                    self.log_std[a].copy_(torch.as_tensor(state["log_std"][a]))
        for key, opts in (("actor_opts", self.actor_opts), ("std_opts", self.std_opts),
                          ("critic_opts", self.critic_opts)):
            for a, opt in opts.items():  # copies: Adam keeps the given tensors by reference
                opt.load_state_dict(copy.deepcopy(state[key][a]))
        for a, v in state["value_norms"].items():
            self.value_norms[a].load_state_dict(v)
        self.set_hyperparams()
        self.actor_version += 1
        self.updates = int(state["updates"])
        self.learners = tuple(state.get("learners", self.agents))
        self.gen.set_state(generator_state(state["gen"], self.device))

    @classmethod
    def from_state_dict(cls, spec: EnvSpec, sw: OnPolicySwitches, state: dict[str, Any],
                        device: torch.device | str = "cpu") -> PPO:
        algo = cls(spec, OnPolicyHyperparams(**state["hp"]), sw, [], "relu", 0, device,
                   arch=state["arch"])
        algo.load_state_dict(state)
        return algo
