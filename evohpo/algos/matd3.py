"""MATD3 and MADDPG with centralized critics and decentralized actors.

MADDPG: Lowe et al. 2017, "Multi-Agent Actor-Critic for Mixed Cooperative-Competitive
Environments", https://arxiv.org/abs/1706.02275.
MATD3: Ackermann et al. 2019, "Reducing Overestimation Bias in Multi-Agent Domains Using Double
Centralized Critics", https://arxiv.org/abs/1910.01465 (TD3's twin critics, delayed policy
updates and target policy smoothing, per agent).

MADDPG is this class with one critic, no policy delay and no smoothing (``switches.ALGOS``). Each
agent's critic sees every agent's observation and action; each actor only its own observation.
Discrete actions train through a straight-through Gumbel-softmax and are stored one-hot.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from evohpo.algos import arch_mutations, optim
from evohpo.algos.actors import PerAgent
from evohpo.algos.base import Actions, Hyperparams
from evohpo.algos.buffer import Batch
from evohpo.algos.explore import Part, explore, target_action, train_action
from evohpo.algos.matd3_state import load_state, state_of
from evohpo.algos.networks import MLP, frozen_copy, polyak_update
from evohpo.algos.switches import Switches
from evohpo.config import ArchSpace
from evohpo.envs.spec import EnvSpec
from evohpo.evolve.lineage import MutationRecord


@dataclass
class LearnInputs:
    """What every agent's losses of one update share."""

    batch: Batch
    obs_all: torch.Tensor          # [B, sum obs_dim]
    act_all: list[torch.Tensor]    # per agent [B, act_dim], from the buffer
    critic_in: torch.Tensor        # [B, sum obs_dim + sum act_dim]
    targets: dict[str, torch.Tensor]
    masks: list[torch.Tensor]      # per agent [B]: 1 where it acted (one that left teaches nothing)
    denoms: list[torch.Tensor]

    @classmethod
    def of(cls, algo: MATD3, batch: Batch) -> LearnInputs:
        agents = algo.agents
        obs_all = torch.cat([batch.obs[a] for a in agents], dim=1)
        act_all = [batch.actions[a] for a in agents]
        masks = [batch.alive[a] for a in agents]
        return cls(batch, obs_all, act_all, torch.cat([obs_all, *act_all], dim=1),
                   algo.td_targets(batch), masks, [m.sum().clamp(min=1.0) for m in masks])


class MATD3(PerAgent):
    on_policy = False
    PER_AGENT = ("arch", "actors", "actor_targets", "critics", "critic_targets", "actor_opts",
                 "critic_opts", "ou_state")

    def __init__(self, spec: EnvSpec, hp: Hyperparams, sw: Switches, hidden: list[int],
                 activation: str, seed: int, device: torch.device | str = "cpu",
                 arch: dict[str, dict[str, Any]] | None = None):
        """``arch`` (as :meth:`arch` returns it) gives each agent its own shapes, not ``hidden``."""
        self.spec, self.hp, self.sw = spec, hp, sw
        self.agents = spec.agents
        # the agents it trains; the others' next actions come from the batch (next_actions)
        self.learners: tuple[str, ...] = spec.agents
        self.device = torch.device(device)
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(seed)
        if arch is None:
            arch = {a: {"actor": list(hidden), "critic": list(hidden), "activation": activation}
                    for a in self.agents}
        self._build_networks(arch, torch.Generator().manual_seed(seed))
        self.updates = 0  # critic updates so far (drives the policy delay)
        self.actor_version = 0  # moves when the actors' weights change in place (see Algorithm)
        self.ou_state: dict[str, np.ndarray] = {}

    # ------------------------------------------------------------------ construction helpers
    def _build_networks(self, arch: dict[str, dict[str, Any]], init_gen: torch.Generator) -> None:
        """Fresh networks of the given shapes, targets equal to them, fresh optimizers."""
        spec = self.spec
        joint = sum(spec[a].obs_dim + spec[a].act_dim for a in self.agents)
        n_critics = 2 if self.sw.twin_critics else 1
        self.actors = {a: MLP(spec[a].obs_dim, spec[a].act_dim, arch[a]["actor"],
                              arch[a]["activation"], init_gen) for a in self.agents}
        self.critics = {a: [MLP(joint, 1, arch[a]["critic"], arch[a]["activation"], init_gen)
                            for _ in range(n_critics)] for a in self.agents}
        self._to_device()
        self.actor_targets = {a: frozen_copy(net) for a, net in self.actors.items()}
        self.critic_targets = {a: [frozen_copy(c) for c in cs] for a, cs in self.critics.items()}
        self.make_optimizers()

    def _to_device(self) -> None:
        for net in self.actors.values():
            net.to(self.device)
        for cs in self.critics.values():
            for c in cs:
                c.to(self.device)

    def make_optimizers(self) -> None:
        self.actor_opts = {a: optim.adam(self.actors[a].parameters(), self.hp.lr_actor, self.device)
                           for a in self.agents}
        self.critic_opts = {a: optim.adam([p for c in self.critics[a] for p in c.parameters()],
                                          self.hp.lr_critic, self.device) for a in self.agents}

    def set_hyperparams(self, **changes: Any) -> None:
        """Change hyperparameters; learning rates change in the optimizers in place (Adam state
        kept)."""
        self.hp = dataclasses.replace(self.hp, **changes)
        for opts, lr in ((self.actor_opts, self.hp.lr_actor),
                         (self.critic_opts, self.hp.lr_critic)):
            for opt in opts.values():
                for g in opt.param_groups:
                    g["lr"] = lr

    # ------------------------------------------------------------------ acting
    def act(self, obs: dict[str, np.ndarray], rng: np.random.Generator | None,
            done: np.ndarray | None = None) -> Actions:
        """Actions for a batch of envs: (for the env, for the buffer).

        With ``rng`` the actions explore (Gaussian or OU noise on continuous actions; Gumbel-max
        sampling plus epsilon-random for discrete ones); with ``rng=None`` they are the
        deterministic policy used for fitness. ``done`` marks envs whose episode just ended, so
        their OU noise restarts. :class:`~evohpo.algos.acting.PopulationActor` gives the same
        actions for a whole population at once.
        """
        outs = {a: self.policy_output(a, obs[a]) for a in self.agents}
        n = next(iter(outs.values())).shape[0]
        return explore(self.spec, outs, [Part(self, rng, slice(0, n), done)])

    def noise(self, agent: str, n: int, dim: int, rng: np.random.Generator,
              done: np.ndarray | None) -> np.ndarray:
        """Exploration noise for ``n`` rows (Gaussian, or OU with its state kept per agent)."""
        sigma = self.hp.expl_noise
        if self.sw.noise == "gaussian":
            return rng.normal(0.0, sigma, size=(n, dim)).astype(np.float32)
        x = self.ou_state.get(agent)
        if x is None or x.shape != (n, dim):
            x = np.zeros((n, dim), np.float32)
        elif done is not None and done.any():
            x[done] = 0.0
        # x <- x - theta x dt + sigma sqrt(dt) N(0, 1), in float32
        th, dt = self.sw.ou_theta, self.sw.ou_dt
        x = (x * np.float32(1.0 - th * dt)
             + np.float32(sigma * np.sqrt(dt)) * rng.standard_normal((n, dim), np.float32))
        self.ou_state[agent] = x
        return x

    # ------------------------------------------------------------------ learning
    def _policy_action(self, agent: str, obs: torch.Tensor, net: MLP, smooth: bool) -> torch.Tensor:
        """A target action for the critic's input (deterministic, optionally smoothed)."""
        out = net(obs)
        noise = None
        if smooth and self.sw.target_noise > 0:
            noise = torch.randn(out.shape, generator=self.gen, device=out.device)
        return target_action(self.spec[agent], self.sw, out, noise)

    def _train_action(self, agent: str, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A differentiable action for the actor loss, and the raw output (for regularisation)."""
        s = self.spec[agent]
        out = self.actors[agent](obs)
        u = (torch.rand(out.shape, generator=self.gen, device=out.device) if s.discrete
             else None)
        return train_action(s, self.sw, out, u), out

    def td_targets(self, batch: Batch) -> dict[str, torch.Tensor]:
        """y_i = r_i + gamma * (1 - terminated_i) * min_k Q'_ik(s', a') for each learner i; a'
        from the target actors for the agents it trains, and as played for the others
        (:meth:`_next_action`).

        Only termination stops bootstrapping: a truncated transition (mpe2's time limit) is stored
        with terminated = 0 and its real final observation, so it bootstraps as it must.
        """
        with torch.no_grad():
            next_obs_all = torch.cat([batch.next_obs[a] for a in self.agents], dim=1)
            next_act = torch.cat([self._next_action(a, batch) for a in self.agents], dim=1)
            target_in = torch.cat([next_obs_all, next_act], dim=1)
            out = {}
            for a in self.learners:
                q_next = torch.stack([t(target_in).squeeze(1)
                                      for t in self.critic_targets[a]]).min(0).values
                out[a] = batch.rewards[a] + self.sw.gamma * (1.0 - batch.terminated[a]) * q_next
            return out

    def _next_action(self, a: str, batch: Batch) -> torch.Tensor:
        """Agent ``a``'s next action in the targets: as played (``batch.next_actions``) where it
        does not train ``a``; elsewhere its target actor's."""
        if a in self.learners:
            return self._policy_action(a, batch.next_obs[a], self.actor_targets[a], smooth=True)
        if batch.next_actions is None:
            raise ValueError(f"learning agents {self.learners} of {self.agents} needs {a}'s "
                             "next actions (a replay memory that keeps them)")
        return batch.next_actions[a]

    def learn(self, batch: Batch) -> dict[str, float]:
        """One gradient step for every learner's critics, and (every policy_delay) its actor.

        Each agent's losses touch only its own networks, so the agents' critic losses go through
        one backward pass, and then their actor losses through another (which sees the updated
        critics, as stepping the agents one after the other would); each agent's gradients are
        clipped and stepped on their own.
        """
        agents = self.learners
        idx = [self.agents.index(a) for a in agents]
        inputs = LearnInputs.of(self, batch)
        self.updates += 1
        update_actor = self.updates % self.sw.policy_delay == 0
        critic_losses = [self.critic_loss(i, inputs) for i in idx]
        self._step([self.critic_opts[a] for a in agents], critic_losses)
        metrics = {f"critic_loss/{a}": loss.item()
                   for a, loss in zip(agents, critic_losses, strict=True)}
        if update_actor:
            actor_losses = [self.actor_loss(i, inputs) for i in idx]
            self._step([self.actor_opts[a] for a in agents], actor_losses)
            self.actor_version += 1
            metrics.update({f"actor_loss/{a}": loss.item()
                            for a, loss in zip(agents, actor_losses, strict=True)})
            self.update_targets()
        return metrics

    def critic_loss(self, i: int, x: LearnInputs) -> torch.Tensor:
        """Agent i's critics: masked mean squared TD error, summed over its critics."""
        a = self.agents[i]
        y, mask = x.targets[a], x.masks[i]
        return torch.stack([(mask * (c(x.critic_in).squeeze(1) - y).pow(2)).sum()
                            for c in self.critics[a]]).sum() / x.denoms[i]

    def actor_loss(self, i: int, x: LearnInputs) -> torch.Tensor:
        """Agent i's actor: -Q_i1 of its own (differentiable) action with the other agents'
        actions from the buffer, as in MADDPG's policy gradient; plus a small penalty on its raw
        outputs."""
        a = self.agents[i]
        act_i, raw = self._train_action(a, x.batch.obs[a])
        joint = torch.cat([x.obs_all, *x.act_all[:i], act_i, *x.act_all[i + 1:]], dim=1)
        q = self.critics[a][0](joint).squeeze(1)
        mask = x.masks[i]
        return ((-(mask * q).sum() + self.sw.action_reg * (mask * raw.pow(2).mean(1)).sum())
                / x.denoms[i])

    def _step(self, opts: list[torch.optim.Optimizer], losses: list[torch.Tensor]) -> None:
        """One backward pass of all losses into the optimizers' parameters only, then clip and
        step each.

        Other parameters get no gradient from these losses (the critics under an actor loss).
        """
        params = [p for opt in opts for p in opt.param_groups[0]["params"]]
        grads = torch.autograd.grad(torch.stack(losses).sum(), params, allow_unused=True)
        optim.step(opts, grads, self.sw.max_grad_norm)

    def update_targets(self) -> None:
        polyak_update(*self._target_pairs(), self.hp.tau)

    def _target_pairs(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Every online parameter and its target's, in matching order; kept while the networks are
        the same objects (weights change in place; a mutation or a load of new shapes makes new
        ones)."""
        nets: list[MLP] = []
        for a in self.learners:  # the others never change
            nets += [self.actors[a], self.actor_targets[a]]
            for c, t in zip(self.critics[a], self.critic_targets[a], strict=True):
                nets += [c, t]
        cache = self.__dict__.get("_pairs")
        if cache is not None and len(cache[0]) == len(nets) and all(
                x is y for x, y in zip(cache[0], nets, strict=True)):
            return cache[1]
        online: list[torch.Tensor] = []
        target: list[torch.Tensor] = []
        for net, tgt in zip(nets[::2], nets[1::2], strict=True):
            online += list(net.parameters())
            target += list(tgt.parameters())
        self.__dict__["_pairs"] = (nets, (online, target))
        return online, target

    # ------------------------------------------------------------------ mutation
    def mutate_architecture(self, space: ArchSpace, rng: np.random.Generator,
                            rec: MutationRecord) -> MutationRecord:
        """Add or remove a layer or nodes of one agent's actor or critics (targets and Adam
        follow), within ``space``; returns ``rec`` saying what changed."""
        return arch_mutations.mutate_architecture(self, space, rng, rec)

    def mutate_activation(self, space: ArchSpace, rng: np.random.Generator,
                          rec: MutationRecord) -> MutationRecord:
        """Switch one agent's actor and critics to another activation from ``space``."""
        return arch_mutations.mutate_activation(self, space, rng, rec)

    # ------------------------------------------------------------------ state
    def clone(self, seed: int) -> MATD3:
        """An independent copy (weights, optimizer and every other state); its own stream. Its
        tensors are its own, never views into the stacks of a group it was learning in."""
        other = super().clone(seed)
        for opt in [*other.actor_opts.values(), *other.critic_opts.values()]:
            for st in opt.state.values():
                st.update({k: v.clone() for k, v in st.items() if isinstance(v, torch.Tensor)})
        return other

    def arch(self) -> dict[str, Any]:
        """Per agent: actor and critic hidden widths, and the activation they share.

        Twin critics always share one architecture; an activation mutation changes an agent's
        actor and critics together, so one activation per agent describes it.
        """
        return {a: {"actor": list(self.actors[a].hidden), "critic": list(self.critics[a][0].hidden),
                    "activation": self.actors[a].activation} for a in self.agents}

    def num_params(self) -> int:
        return sum(n.num_params() for n in self.actors.values()) + sum(
            c.num_params() for cs in self.critics.values() for c in cs)

    def state_dict(self) -> dict[str, Any]:
        return state_of(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load a state; networks (and optimizers) are rebuilt first if its architecture differs."""
        load_state(self, state)

    @classmethod
    def from_state_dict(cls, spec: EnvSpec, sw: Switches, state: dict[str, Any],
                        device: torch.device | str = "cpu") -> MATD3:
        """A MATD3 whose networks have the saved shapes (per agent and network), holding the
        saved state."""
        algo = cls(spec, Hyperparams(**state["hp"]), sw, [], "relu", 0, device, arch=state["arch"])
        algo.load_state_dict(state)
        return algo
