"""The population's members: identity, lineage, algorithm, counters and fitness history."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from evohpo.algos import ALGOS, MATD3, Hyperparams, Switches
from evohpo.config import Config
from evohpo.envs.registry import EnvSpec


@dataclass
class Member:
    id: int
    parent_id: int | None
    algo: MATD3
    rng: np.random.Generator          # exploration noise and batch sampling
    born: int = 0                     # generation it was created in
    steps: int = 0                    # env steps its lineage has collected
    learn_acc: int = 0                # env steps since it last learned
    fitness: list[float] = field(default_factory=list)
    diverged: bool = False            # NaN/inf losses or weights: stops learning, loses selection
    diverged_why: str = ""

    @property
    def hp(self) -> Hyperparams:
        return self.algo.hp


def switches(cfg: Config) -> Switches:
    a = cfg.algo
    preset = ALGOS[a.name]
    return Switches(
        twin_critics=preset["twin_critics"],
        policy_delay=a.policy_delay if a.policy_delay is not None else preset["policy_delay"],
        target_noise=a.target_noise if a.target_noise is not None else preset["target_noise"],
        target_noise_clip=a.target_noise_clip, gamma=a.gamma, max_grad_norm=a.max_grad_norm,
        gumbel_temperature=a.gumbel_temperature, noise=a.noise, ou_theta=a.ou_theta, ou_dt=a.ou_dt,
    )


def initial_hyperparams(cfg: Config) -> Hyperparams:
    a = cfg.algo
    return Hyperparams(lr_actor=a.lr_actor, lr_critic=a.lr_critic, batch_size=a.batch_size,
                       learn_step=a.learn_step, tau=a.tau, expl_noise=a.expl_noise)


def child_seed(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 2**62))


def make_population(cfg: Config, spec: EnvSpec, rng: np.random.Generator,
                    device: torch.device) -> list[Member]:
    sw, hp = switches(cfg), initial_hyperparams(cfg)
    members = []
    for i in range(cfg.population.size):
        seed = child_seed(rng)
        algo = MATD3(spec, Hyperparams(**vars(hp)), sw, cfg.algo.hidden, cfg.algo.activation, seed, device)
        members.append(Member(id=i, parent_id=None, algo=algo, rng=np.random.default_rng(seed)))
    return members
