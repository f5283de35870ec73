"""The algorithms' names and switches: what separates MATD3 from MADDPG, and IPPO from MAPPO."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Switches:
    """What separates MATD3 from MADDPG, plus the fixed settings of the learner."""

    twin_critics: bool
    policy_delay: int
    target_noise: float
    target_noise_clip: float = 0.25
    gamma: float = 0.95
    max_grad_norm: float | None = 0.5
    gumbel_temperature: float = 1.0
    noise: str = "gaussian"  # or "ou"
    ou_theta: float = 0.15
    ou_dt: float = 0.01
    action_reg: float = 1e-3  # penalty on pre-squash actor outputs: keeps them out of saturation


# the defaults of each algorithm's switches; config keys left null take these
ALGOS: dict[str, dict[str, Any]] = {
    "maddpg": {"twin_critics": False, "policy_delay": 1, "target_noise": 0.0},
    "matd3": {"twin_critics": True, "policy_delay": 2, "target_noise": 0.1},
}


@dataclass(frozen=True)
class OnPolicySwitches:
    """What separates MAPPO from IPPO, plus the fixed settings of the on-policy learner."""

    centralised: bool            # MAPPO: each agent's critic sees every agent's observation
    gamma: float = 0.95
    max_grad_norm: float | None = 0.5
    share: bool = False          # agents of one kind share their networks (PPO.groups)


# the on-policy algorithms: the class that learns ("module:Class", built and restored as
# evohpo.algos.onpolicy.OnPolicy says) and its switches
ON_POLICY: dict[str, dict[str, Any]] = {
    "ippo": {"learner": "evohpo.algos.ppo:PPO", "centralised": False},
    "mappo": {"learner": "evohpo.algos.ppo:PPO", "centralised": True},
}


def names() -> tuple[str, ...]:
    """Every name algo.name may take."""
    return (*ALGOS, *ON_POLICY)
